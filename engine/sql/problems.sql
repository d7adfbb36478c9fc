-- Problems first: the ranks of the phases that need a person, and the `resource_problems`
-- side table (migration 0008) that lets a list walk them first (`?sort=problems`).
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction,
-- and the table brought in line with the ranks defined here.

-- The list position of a phase that is a problem (lower first); NULL for every other phase.
-- Failed covers a terminal failure and one being retried alike. A plain SQL function: the
-- planner inlines it into the triggers' WHEN clauses and the lists' predicates.
CREATE OR REPLACE FUNCTION resource_problem_rank(p_phase text) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE p_phase
        WHEN 'Failed'      THEN 0
        WHEN 'Quarantined' THEN 1
        WHEN 'Degraded'    THEN 2
        WHEN 'Orphaned'    THEN 3
    END::smallint
$$;

-- Keeps one row's entry: in the table while its phase is a problem, at that phase's rank.
-- Called only for the rows whose rank moved (the WHEN clauses below).
CREATE OR REPLACE FUNCTION resource_problems_track() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_OP <> 'DELETE' AND resource_problem_rank(NEW.phase) IS NOT NULL THEN
        INSERT INTO resource_problems (id, rank, created_at)
        VALUES (NEW.id, resource_problem_rank(NEW.phase), NEW.created_at)
        ON CONFLICT (id) DO UPDATE SET rank = EXCLUDED.rank;
    ELSE
        DELETE FROM resource_problems WHERE id = OLD.id;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS resource_problems_on_update ON resources;
CREATE TRIGGER resource_problems_on_update AFTER UPDATE ON resources
    FOR EACH ROW
    WHEN (resource_problem_rank(OLD.phase) IS DISTINCT FROM resource_problem_rank(NEW.phase))
    EXECUTE FUNCTION resource_problems_track();

DROP TRIGGER IF EXISTS resource_problems_on_insert ON resources;
CREATE TRIGGER resource_problems_on_insert AFTER INSERT ON resources
    FOR EACH ROW WHEN (resource_problem_rank(NEW.phase) IS NOT NULL)
    EXECUTE FUNCTION resource_problems_track();

DROP TRIGGER IF EXISTS resource_problems_on_delete ON resources;
CREATE TRIGGER resource_problems_on_delete AFTER DELETE ON resources
    FOR EACH ROW WHEN (resource_problem_rank(OLD.phase) IS NOT NULL)
    EXECUTE FUNCTION resource_problems_track();

-- Brings the table in line with the ranks above: on the first apply it fills it, after a
-- change of the ranks it re-ranks. CREATE TRIGGER holds a lock on `resources` that keeps
-- writers out until this transaction commits, so nothing slips between the scan and the
-- triggers. One scan of `resources`, only when this file changes.
DELETE FROM resource_problems p
WHERE NOT EXISTS (SELECT 1 FROM resources r
                  WHERE r.id = p.id AND resource_problem_rank(r.phase) = p.rank);
INSERT INTO resource_problems (id, rank, created_at)
SELECT id, resource_problem_rank(phase), created_at FROM resources
WHERE resource_problem_rank(phase) IS NOT NULL
ON CONFLICT (id) DO NOTHING;
