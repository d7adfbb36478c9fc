-- The lag table: resource_lag holds exactly the resources behind their spec (synced_gen <
-- generation) with the rollup gate's flags, kept by statement triggers on resources in the
-- same transaction, so resources updates stay HOT and readers see both tables agree.
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction.

-- The gate flags of a row behind, in one place (SQL functions simple enough to be inlined).
CREATE OR REPLACE FUNCTION lag_unsettled(p_failure_gen bigint, p_generation bigint,
                              p_frozen_until timestamptz, p_deletion_requested_at timestamptz)
RETURNS boolean LANGUAGE sql IMMUTABLE
AS $$ SELECT p_failure_gen <> p_generation AND p_frozen_until IS NULL
             AND p_deletion_requested_at IS NULL $$;

-- The rollup gate's "stuck": failed at this generation, or set aside (orphaned / quarantined).
CREATE OR REPLACE FUNCTION lag_stuck(p_failure_gen bigint, p_generation bigint, p_frozen_until timestamptz)
RETURNS boolean LANGUAGE sql IMMUTABLE
AS $$ SELECT p_failure_gen = p_generation OR p_frozen_until IS NOT NULL $$;

-- New rows: a resource is created behind (generation 1, synced 0) unless written otherwise.
CREATE OR REPLACE FUNCTION resource_lag_on_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO resource_lag (shard_id, id, root_id, owner_id, unsettled, stuck)
    SELECT n.shard_id, n.id, n.root_id, n.owner_id,
           lag_unsettled(n.failure_gen, n.generation, n.frozen_until, n.deletion_requested_at),
           lag_stuck(n.failure_gen, n.generation, n.frozen_until)
    FROM lag_new n WHERE n.synced_gen < n.generation;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS resource_lag_on_insert ON resources;
CREATE TRIGGER resource_lag_on_insert AFTER INSERT ON resources
    REFERENCING NEW TABLE AS lag_new FOR EACH STATEMENT EXECUTE FUNCTION resource_lag_on_insert();

-- Updated rows: caught up -> out; behind -> in, with its flags (written only when they moved,
-- so a status update of a row still behind writes nothing here).
CREATE OR REPLACE FUNCTION resource_lag_on_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM resource_lag l USING lag_new n
    WHERE l.shard_id = n.shard_id AND l.id = n.id AND n.synced_gen >= n.generation;
    INSERT INTO resource_lag AS l (shard_id, id, root_id, owner_id, unsettled, stuck)
    SELECT n.shard_id, n.id, n.root_id, n.owner_id,
           lag_unsettled(n.failure_gen, n.generation, n.frozen_until, n.deletion_requested_at),
           lag_stuck(n.failure_gen, n.generation, n.frozen_until)
    FROM lag_new n WHERE n.synced_gen < n.generation
    ORDER BY n.shard_id, n.id
    ON CONFLICT (shard_id, id) DO UPDATE
        SET root_id = EXCLUDED.root_id, owner_id = EXCLUDED.owner_id,
            unsettled = EXCLUDED.unsettled, stuck = EXCLUDED.stuck
        WHERE (l.root_id, l.owner_id, l.unsettled, l.stuck)
              IS DISTINCT FROM (EXCLUDED.root_id, EXCLUDED.owner_id, EXCLUDED.unsettled, EXCLUDED.stuck);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS resource_lag_on_update ON resources;
CREATE TRIGGER resource_lag_on_update AFTER UPDATE ON resources
    REFERENCING NEW TABLE AS lag_new FOR EACH STATEMENT EXECUTE FUNCTION resource_lag_on_update();

-- Deleted rows leave the lag table.
CREATE OR REPLACE FUNCTION resource_lag_on_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM resource_lag l USING lag_old o WHERE l.shard_id = o.shard_id AND l.id = o.id;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS resource_lag_on_delete ON resources;
CREATE TRIGGER resource_lag_on_delete AFTER DELETE ON resources
    REFERENCING OLD TABLE AS lag_old FOR EACH STATEMENT EXECUTE FUNCTION resource_lag_on_delete();
