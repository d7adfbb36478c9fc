-- Events: what happened to a resource, in order. A result's phase changes are recorded in
-- the statement that makes them (apply_locked_results in drain.sql, from the drain and from
-- work_complete); every other change is recorded by the row and statement triggers here.
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction.

-- Records a phase change made outside the drainer (which records its own per batch and sets
-- converge.batch_events), with lifecycle deliveries when a binding could match.
CREATE OR REPLACE FUNCTION resource_phase_event() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO resource_events (resource_id, kind, name, type, from_phase, to_phase, generation, message)
    VALUES (NEW.id, NEW.kind, NEW.name, 'phase', OLD.phase, NEW.phase, NEW.generation,
            CASE WHEN NEW.phase = 'Failed' OR NEW.phase = 'Deleting' THEN left(NEW.failure_message, 4096) END);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS resource_phase_event ON resources;
CREATE TRIGGER resource_phase_event AFTER UPDATE ON resources
    FOR EACH ROW
    WHEN (OLD.phase IS DISTINCT FROM NEW.phase
          AND coalesce(current_setting('converge.batch_events', true), '') <> 'on')
    EXECUTE FUNCTION resource_phase_event();

-- Records the creation of a statement's new rows, with lifecycle deliveries when a binding
-- could match.
CREATE OR REPLACE FUNCTION resources_created() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO resource_events (resource_id, kind, name, type, to_phase, generation)
    SELECT n.id, n.kind, n.name, 'created', n.phase, n.generation FROM new_rows n;
    IF EXISTS (SELECT 1 FROM reactor_bindings WHERE enabled AND transition = 'created') THEN
        PERFORM lifecycle_emit(array_agg('created'::text), array_agg(to_jsonb(n))) FROM new_rows n;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS resources_created ON resources;
CREATE TRIGGER resources_created AFTER INSERT ON resources
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION resources_created();

-- Records the deletion of a statement's rows (events outlive their resource), with lifecycle
-- deliveries when a binding could match.
CREATE OR REPLACE FUNCTION resources_deleted() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO resource_events (resource_id, kind, name, type, from_phase, generation)
    SELECT o.id, o.kind, o.name, 'deleted', o.phase, o.generation FROM old_rows o;
    IF EXISTS (SELECT 1 FROM reactor_bindings WHERE enabled AND transition = 'deleted') THEN
        PERFORM lifecycle_emit(array_agg('deleted'::text), array_agg(to_jsonb(o))) FROM old_rows o;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS resources_deleted ON resources;
CREATE TRIGGER resources_deleted AFTER DELETE ON resources
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION resources_deleted();

-- Records an operation being requested, succeeding or failing.
CREATE OR REPLACE FUNCTION resource_operation_event() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO resource_events (resource_id, kind, name, type, generation, message)
    SELECT r.id, r.kind, r.name, 'operation', r.generation,
           left(format('%s %s%s', NEW.verb, NEW.state,
                       CASE WHEN NEW.error IS NOT NULL AND NEW.state <> 'succeeded'
                            THEN ': ' || NEW.error ELSE '' END), 4096)
    FROM resources r WHERE r.id = NEW.resource_id;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS resource_operation_event ON resource_operations;
CREATE TRIGGER resource_operation_event AFTER INSERT OR UPDATE OF state ON resource_operations
    FOR EACH ROW
    WHEN (NEW.state IN ('pending', 'succeeded', 'failed'))
    EXECUTE FUNCTION resource_operation_event();

-- Lifecycle deliveries for the phase changes one batch of results made (p_ids: the rows
-- whose phase it changed): the synced / degraded / failed edges, when a binding could match.
-- The events themselves are recorded in the statement that makes the changes
-- (apply_locked_results in drain.sql).
DROP FUNCTION IF EXISTS record_phase_changes(uuid[], text[]);
DROP FUNCTION IF EXISTS emit_phase_lifecycle(uuid[], text[]);
CREATE OR REPLACE FUNCTION emit_phase_lifecycle(p_ids uuid[]) RETURNS void
LANGUAGE plpgsql
SET random_page_cost = 1.1
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM reactor_bindings
               WHERE enabled AND transition IN ('synced', 'degraded', 'failed')) THEN
        PERFORM lifecycle_emit(array_agg(c.t), array_agg(c.snap))
        FROM (SELECT CASE r.phase WHEN 'Ready' THEN 'synced' WHEN 'Degraded' THEN 'degraded'
                                  ELSE 'failed' END AS t,
                     to_jsonb(r) AS snap
              FROM unnest(p_ids) AS o(id)
              JOIN resources r ON r.id = o.id
              WHERE r.phase IN ('Ready', 'Degraded', 'Failed')) c
        HAVING count(*) > 0;
    END IF;
END
$$;

-- Removes events older than p_older_than, at most p_limit per call (the reaper's GC). In no
-- particular order: the `at` index is BRIN (0010), which finds the old block ranges but
-- cannot return them sorted; every call removes old events until none is left.
--
-- A block range BRIN has not summarized yet matches any condition, so every page appended
-- since the last VACUUM would be read by each call (120 ms for 1M events with nothing old,
-- 1.6 ms once summarized). Each call first summarizes the ranges appended since the last
-- one: the new pages are read once, and the scan reads only the old ranges' pages.
CREATE OR REPLACE FUNCTION gc_resource_events(p_older_than interval, p_limit int) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    n int;
BEGIN
    PERFORM brin_summarize_new_values('idx_resource_events_at'::regclass);
    DELETE FROM resource_events
    WHERE id IN (SELECT id FROM resource_events WHERE at < now() - p_older_than
                 LIMIT p_limit);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
