-- The drain: results popped from the outbox (bulk and express lanes) are applied to resources
-- in batches, then the cascade runs; and the straddle rechecks of rollups are closed out.
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction.

-- Pops up to p_max outbox rows of one lane (bulk or express) in a shard range, oldest
-- first, as one array per column (the latest result per resource): picking first, then
-- deleting by key. A bulk pass never takes an express row, so a resource's results are
-- applied by one drainer at a time, in outbox order.
CREATE OR REPLACE FUNCTION outbox_pop(p_max int, p_lo smallint, p_hi smallint, p_express boolean)
RETURNS TABLE (popped int, ids uuid[], gens bigint[], oks boolean[], terminals boolean[],
               errs text[], statuses jsonb[], conds jsonb[], health boolean[], advances boolean[])
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET enable_material = off SET jit = off
AS $$
DECLARE
    v_ids bigint[];
    v_shards smallint[];
BEGIN
    -- Two statements, so each keeps its own plan.
    IF p_express THEN
        -- The express one must walk the partial index idx_work_outbox_express whatever the
        -- statistics say. Written as `shard_id BETWEEN`, the range is an index condition the
        -- primary key (id, shard_id) can take too, and a generic plan made before the outbox
        -- was first analyzed (every backend of a new database) takes it: each express pass
        -- then read the whole bulk backlog to find no express row (measured: 1,183 buffers
        -- and 15 ms a pass behind a 4-broker run's backlog, half a core). `+ 0` leaves the
        -- range a filter only, so the partial index is always the cheaper ordered path; the
        -- lane holds composites' results only, so the filter costs nothing.
        SELECT array_agg(q.id), array_agg(q.shard_id) INTO v_ids, v_shards
        FROM (SELECT o.id, o.shard_id FROM work_outbox o
              WHERE (o.shard_id + 0) BETWEEN p_lo AND p_hi AND o.express
              ORDER BY o.id
              LIMIT p_max
              FOR UPDATE SKIP LOCKED) q;
    ELSE
        SELECT array_agg(q.id), array_agg(q.shard_id) INTO v_ids, v_shards
        FROM (SELECT o.id, o.shard_id FROM work_outbox o
              WHERE o.shard_id BETWEEN p_lo AND p_hi AND NOT o.express
              ORDER BY o.id
              LIMIT p_max
              FOR UPDATE SKIP LOCKED) q;
    END IF;
    IF v_ids IS NULL THEN
        popped := 0;
        RETURN NEXT;
        RETURN;
    END IF;

    RETURN QUERY
    WITH popped AS (
        DELETE FROM work_outbox o
        USING unnest(v_ids, v_shards) AS k(id, shard_id)
        WHERE o.id = k.id AND o.shard_id = k.shard_id
        RETURNING o.*
    ), latest AS (
        SELECT DISTINCT ON (resource_id) * FROM popped
        WHERE task_type = 'reconcile'
        ORDER BY resource_id, id DESC
    )
    SELECT (SELECT count(*) FROM popped)::int,
           array_agg(resource_id ORDER BY resource_id),
           array_agg(generation ORDER BY resource_id),
           array_agg(ok ORDER BY resource_id),
           array_agg(terminal ORDER BY resource_id),
           array_agg(error_message ORDER BY resource_id),
           array_agg(status ORDER BY resource_id),
           array_agg(conditions ORDER BY resource_id),
           array_agg(health_ok ORDER BY resource_id),
           array_agg(advance ORDER BY resource_id)
    FROM latest;
END
$$;

-- The drainer's workhorse. Pops up to p_max outbox rows of one lane in a shard range
-- (outbox_pop), coalesced per resource (latest wins), and applies them (apply_results).
-- Returns how many rows it popped and, for the resources it brought to synced, their kinds
-- and how long each had been behind (for converge_reconcile_duration_seconds).
DROP FUNCTION IF EXISTS drain_outbox_batch(int, smallint, smallint, boolean);
CREATE OR REPLACE FUNCTION drain_outbox_batch(p_max int, p_lo smallint, p_hi smallint,
                                   p_express boolean DEFAULT false)
RETURNS TABLE (popped int, synced_kinds text[], synced_secs double precision[])
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
AS $$
DECLARE
    v_ids uuid[];
    v_gens bigint[];
    v_ok boolean[];
    v_terminal boolean[];
    v_errs text[];
    v_statuses jsonb[];
    v_conds jsonb[];
    v_health boolean[];
    v_advance boolean[];
    v_popped int;
BEGIN
    SELECT * INTO v_popped, v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses, v_conds, v_health, v_advance
    FROM outbox_pop(p_max, p_lo, p_hi, p_express);

    popped := coalesce(v_popped, 0);
    IF v_ids IS NOT NULL THEN
        SELECT a.synced_kinds, a.synced_secs INTO synced_kinds, synced_secs
        FROM apply_results(v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses, v_conds,
                           v_health, v_advance) a;
    END IF;
    RETURN NEXT;
END
$$;

-- Applies reconcile results to resources (one per resource, in ascending id order): the
-- drain's entry, for the rows it popped. It locks the rows and reads what the apply needs,
-- then applies them (apply_locked_results). A plain result skips the outbox and is applied
-- by work_complete (queue.sql), which takes its own locks first.
DROP FUNCTION IF EXISTS apply_results(uuid[], bigint[], boolean[], boolean[], text[], jsonb[],
                                      jsonb[], boolean[], boolean[]);
CREATE OR REPLACE FUNCTION apply_results(p_ids uuid[], p_gens bigint[], p_ok boolean[],
                                         p_terminal boolean[], p_errs text[],
                                         p_statuses jsonb[], p_conds jsonb[],
                                         p_health boolean[], p_advance boolean[])
RETURNS TABLE (synced_kinds text[], synced_secs double precision[])
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
AS $$
DECLARE
    v_troubled uuid[];
    v_old_phases text[];
    v_owners uuid[];
BEGIN
    -- Lock in ascending id order (p_ids is sorted); a row deleted since the pop has NULLs.
    -- The owners go as they are (NULLs and repeats included): the cascade drops both.
    SELECT array_agg(b.id) FILTER (WHERE x.failure_gen <> 0 OR NOT x.health_ok),
           array_agg(x.phase ORDER BY b.ord),
           array_agg(x.owner_id) || array_agg(x.root_id)
    INTO v_troubled, v_old_phases, v_owners
    FROM unnest(p_ids) WITH ORDINALITY AS b(id, ord)
    LEFT JOIN LATERAL (SELECT r.failure_gen, r.health_ok, r.phase, r.owner_id, r.root_id
                       FROM resources r WHERE r.id = b.id FOR UPDATE) x ON true;

    RETURN QUERY
    SELECT * FROM apply_locked_results(p_ids, p_gens, p_ok, p_terminal, p_errs, p_statuses,
                                       p_conds, p_health, p_advance, v_old_phases,
                                       v_troubled, v_owners);
END
$$;

-- Applies reconcile results to rows the caller has locked (in ascending id order, p_ids
-- sorted), given what it read under the lock: each row's phase before (p_old_phases, aligned
-- with p_ids), the rows that carried a failure or ill health (p_troubled: only those can need
-- a condition cleared) and the composites that own the batch (p_owners, for the cascade).
-- Callers: apply_results (the drain) and work_complete (a plain result, applied where it is
-- fenced). Every join is a primary-key probe (hash and merge joins off) whatever the tables'
-- size. Two statements carry a batch:
--
-- 1. One statement that updates the rows and records their phase changes. The UPDATE has a
--    no-op gate and sets status, synced_gen (unless a composite waits for its children:
--    `advance`), health_ok, failure_gen/attempts/terminal; the events INSERT reads what the
--    UPDATE returned, so a change costs no second probe of `resources`; the per-row event
--    trigger stands aside (converge.batch_events). It also names the rows still behind
--    afterwards: only those can be re-pended.
-- 2. Conditions, written only on transition (a failure sets Synced and Ready to False with
--    its reason).
--
-- Then the cascade, told which rows are still behind and which composites own the batch,
-- so a leaf that synced and has no owner costs it no probe of `resources`.
--
-- Returns the kinds of the rows this call brought to synced and how long each had been
-- behind: its resource_lag row's behind_since (set when the row fell behind: an apply, a
-- compose, a flowed value) to now. The lag row is read by key in the statement that
-- updates the row, just before the lag trigger deletes it, so the figure costs one probe
-- of a page that trigger touches anyway.
CREATE OR REPLACE FUNCTION apply_locked_results(p_ids uuid[], p_gens bigint[], p_ok boolean[],
                                                p_terminal boolean[], p_errs text[],
                                                p_statuses jsonb[], p_conds jsonb[],
                                                p_health boolean[], p_advance boolean[],
                                                p_old_phases text[], p_troubled uuid[],
                                                p_owners uuid[])
RETURNS TABLE (synced_kinds text[], synced_secs double precision[])
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
AS $$
DECLARE
    v_changed uuid[];
    v_behind uuid[];
BEGIN
    -- 1. Update, record the phase changes, name what is still behind.
    PERFORM set_config('converge.batch_events', 'on', true);
    WITH o AS (
        SELECT * FROM unnest(p_ids, p_gens, p_ok, p_terminal, p_errs, p_statuses, p_health,
                             p_advance, p_old_phases)
            AS t(id, gen, ok, terminal, err, status, health, advance, old_phase)
    ), n AS MATERIALIZED (
        SELECT r.id, o.old_phase, r.generation,
               CASE WHEN o.ok AND o.status IS NOT NULL THEN o.status ELSE r.status END AS status,
               CASE WHEN o.ok AND o.advance THEN greatest(r.synced_gen, o.gen) ELSE r.synced_gen END AS synced_gen,
               CASE WHEN o.ok THEN o.health ELSE r.health_ok END AS health_ok,
               CASE WHEN o.ok THEN (CASE WHEN r.failure_gen <= o.gen THEN 0 ELSE r.failure_gen END)
                    ELSE o.gen END AS failure_gen,
               CASE WHEN o.ok THEN 0
                    WHEN o.gen = r.generation THEN r.failure_attempts + 1
                    ELSE r.failure_attempts END AS failure_attempts,
               CASE WHEN o.ok THEN false
                    ELSE o.terminal
                         OR (coalesce(kc.max_transient_attempts, 0) > 0
                             AND r.failure_attempts + 1 >= kc.max_transient_attempts) END
                   AS failure_terminal,
               CASE WHEN o.ok THEN NULL::text ELSE o.err END AS failure_message,
               l.behind_since
        FROM o
        JOIN resources r ON r.id = o.id
        LEFT JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version
        LEFT JOIN resource_lag l ON l.shard_id = r.shard_id AND l.id = r.id
    ), u AS (
        UPDATE resources r
        SET status = n.status, synced_gen = n.synced_gen, health_ok = n.health_ok,
            failure_gen = n.failure_gen, failure_attempts = n.failure_attempts,
            failure_terminal = n.failure_terminal, failure_message = n.failure_message,
            updated_at = now()
        FROM n
        WHERE r.id = n.id
          AND (r.status IS DISTINCT FROM n.status OR r.synced_gen <> n.synced_gen
               OR r.health_ok <> n.health_ok OR r.failure_gen <> n.failure_gen
               OR r.failure_attempts <> n.failure_attempts
               OR r.failure_terminal <> n.failure_terminal
               OR r.failure_message IS DISTINCT FROM n.failure_message)
        RETURNING r.id, r.kind, r.name, r.phase, n.old_phase, r.generation, r.failure_message,
                  r.synced_gen >= r.generation AS synced, n.behind_since
    ), ev AS (
        INSERT INTO resource_events (resource_id, kind, name, type, from_phase, to_phase,
                                     generation, message)
        SELECT u.id, u.kind, u.name, 'phase', u.old_phase, u.phase, u.generation,
               CASE WHEN u.phase = 'Failed' THEN left(u.failure_message, 4096) END
        FROM u WHERE u.phase IS DISTINCT FROM u.old_phase
        ORDER BY u.id
    )
    -- Synced now, behind before (a lag row): the reconcile duration.
    SELECT array_agg(u.kind) FILTER (WHERE u.synced AND u.behind_since IS NOT NULL),
           array_agg(extract(epoch FROM clock_timestamp() - u.behind_since)::double precision)
               FILTER (WHERE u.synced AND u.behind_since IS NOT NULL),
           array_agg(u.id ORDER BY u.id) FILTER (WHERE u.phase IS DISTINCT FROM u.old_phase),
           (SELECT array_agg(n.id ORDER BY n.id) FROM n WHERE n.synced_gen < n.generation)
    INTO synced_kinds, synced_secs, v_changed, v_behind
    FROM u;
    PERFORM set_config('converge.batch_events', 'off', true);
    IF v_changed IS NOT NULL THEN
        PERFORM emit_phase_lifecycle(v_changed);
    END IF;

    -- 2. Conditions, on transition only.
    WITH o AS (
        SELECT * FROM unnest(p_ids, p_ok, p_terminal, p_errs, p_conds)
            AS t(id, ok, terminal, err, conds)
    ), reported AS (
        SELECT o.id, c->>'type' AS type, coalesce(c->>'status', 'Unknown') AS status,
               coalesce(c->>'reason', '') AS reason, coalesce(c->>'message', '') AS message
        FROM o, jsonb_array_elements(o.conds) c
        WHERE o.ok AND jsonb_typeof(o.conds) = 'array' AND coalesce(c->>'type', '') <> ''
        UNION ALL
        -- A failure is also not Ready, whatever an earlier success reported: a Failed row
        -- must never keep showing Ready=True. The next clean reconcile clears both (below)
        -- unless its worker reports them again.
        SELECT o.id, t.type, 'False',
               CASE WHEN o.terminal THEN 'TerminalError' ELSE 'ReconcileError' END,
               left(coalesce(o.err, ''), 4096)
        FROM o, (VALUES ('Synced'), ('Ready')) AS t(type) WHERE NOT o.ok
    )
    INSERT INTO resource_conditions AS rc (resource_id, type, status, reason, message)
    SELECT DISTINCT ON (id, type) id, type, status, reason, message
    FROM reported
    ORDER BY id, type
    ON CONFLICT (resource_id, type) DO UPDATE
        SET status = EXCLUDED.status, reason = EXCLUDED.reason, message = EXCLUDED.message,
            last_transition_at = CASE WHEN rc.status = EXCLUDED.status
                                      THEN rc.last_transition_at ELSE now() END
        WHERE (rc.status, rc.reason, rc.message)
              IS DISTINCT FROM (EXCLUDED.status, EXCLUDED.reason, EXCLUDED.message);

    -- Recovery: a clean reconcile clears stored False conditions it did not re-report.
    IF p_troubled IS NOT NULL THEN
        DELETE FROM resource_conditions rc
        USING unnest(p_ids, p_ok, p_conds) AS o(id, ok, conds)
        WHERE rc.resource_id = o.id AND o.ok AND o.id = ANY (p_troubled)
          AND rc.status = 'False'
          AND NOT (coalesce(o.conds, '[]'::jsonb) @> jsonb_build_array(jsonb_build_object('type', rc.type)));
    END IF;

    -- Re-pend what is still behind (failed transiently, edited mid-flight), flow values to
    -- dependents, and re-evaluate the composites that own these rows.
    PERFORM cascade_on_ready_change(p_ids, v_behind, p_owners);
    RETURN NEXT;
END
$$;

-- Straddle close-out, run by the drainer after its own commit: re-evaluates the armed roots
-- in a fresh snapshot that sees every sibling settled, so the last concurrent drain always
-- pends the root within milliseconds. A recheck is kept while its root's run is leased,
-- found by a probe of the queue's key (the settings keep the planner from hashing the whole
-- leased queue instead).
CREATE OR REPLACE FUNCTION drain_rollup_rechecks(p_max int, p_lo smallint, p_hi smallint) RETURNS int
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_material = off
AS $$
DECLARE
    v_ids bigint[];
    v_roots uuid[];
    n int;
BEGIN
    SELECT array_agg(p.id), array_agg(DISTINCT p.root_id) INTO v_ids, v_roots
    FROM (SELECT q.id, q.root_id FROM rollup_recheck q
          WHERE q.shard_id BETWEEN p_lo AND p_hi
          ORDER BY q.id LIMIT p_max FOR UPDATE SKIP LOCKED) p;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    n := schedule_eligible(v_roots) + schedule_rollup(v_roots);
    -- Done with, unless the root's run is in flight (see above).
    DELETE FROM rollup_recheck q
    WHERE q.id = ANY (v_ids)
      AND NOT EXISTS (SELECT 1 FROM work_queue w
                      WHERE w.resource_id = q.root_id AND w.shard_id = q.shard_id
                        AND w.task_type = 'reconcile' AND w.lease_token IS NOT NULL);
    RETURN n;
END
$$;
