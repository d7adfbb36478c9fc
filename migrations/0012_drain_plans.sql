-- converge drain plans: keep the drainer's batch statements on primary keys, flow values
-- with one query per batch, and write fewer index entries per resource row. Forward-only.
--
-- Measured on a 60,000-child composite (converge-bench --bom-children 60000): the drainer is
-- the one serial stage, busy in every sample, and its cost per batch grew with the table.
--
-- 1. Plans. A batch joins at most p_max (1,000) ids against `resources`; the planner chose
--    hash joins over a sequential scan of the whole table for the result apply, the
--    phase-event insert, the owners lookup and the value-flow update once the table passed
--    ~50,000 rows (O(table) per batch, so O(n^2) per run). A batch is bounded and the table
--    is not, so the drain functions run with hash and merge joins off (every join probes by
--    key), and the cascade and event functions, whose statements filter by `id = ANY(...)`,
--    also cost random reads as cached ones (random_page_cost 1.1); work_complete got the
--    same treatment in 0011. Popping the outbox is its own function with the default
--    settings: with joins off, its `IN (...)` semi-join became a nested loop comparing every
--    outbox row with every picked one (420-490 ms per pop in the benchmark, against 15 ms
--    as scan-and-sort plus hash semi-join).
--
-- 2. Value flows. The flow update evaluated flowed_spec() twice per dependent (in the join
--    filter and again in the SET list) and ran one query per dependent inside it. flowed_specs()
--    reads every incoming edge of a batch in one ordered query and folds the flows per
--    dependent; apply_value_flows walks the flow array by index instead of through a query,
--    and jsonptr_path splits a pointer without the set-returning detour unless it holds an
--    escape (~0, ~1). Results are identical (same functions, same order of edges).
--
-- 3. Indexes. idx_resources_owner (owner_id) duplicates the leading column of
--    idx_resources_owner_created (owner_id, created_at, id). The labels GIN index held an
--    entry for every unlabelled row (all composed children in the benchmark): it now covers
--    labelled rows only, and the list filter says `labels <> '{}'` when it filters by label,
--    which is implied by any non-empty containment test.

-- ---------------------------------------------------------------------------------------
-- Pointers and flows
-- ---------------------------------------------------------------------------------------

-- The original pointer parser, kept for pointers with escapes.
CREATE FUNCTION jsonptr_path_escaped(p text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT
AS $$
    SELECT coalesce(array_agg(replace(replace(seg, '~1', '/'), '~0', '~') ORDER BY ord), '{}')
    FROM unnest(string_to_array(substr(CASE WHEN left(p, 1) = '/' THEN p ELSE '/' || p END, 2), '/'))
         WITH ORDINALITY AS s(seg, ord)
$$;

-- RFC 6901 pointer -> jsonb path; a bare field name is a one-segment pointer. Without '~'
-- there is nothing to unescape, and the split is one expression.
CREATE OR REPLACE FUNCTION jsonptr_path(p text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT
AS $$
    SELECT CASE WHEN strpos(p, '~') = 0
                THEN coalesce(string_to_array(substr(CASE WHEN left(p, 1) = '/' THEN p ELSE '/' || p END, 2), '/'), '{}')
                ELSE jsonptr_path_escaped(p) END
$$;

-- One edge's flows: each dep_field of `spec` gets src_field of `status` (null when the
-- upstream has not reported it). Only the last path segment is created if missing.
CREATE OR REPLACE FUNCTION apply_value_flows(p_spec jsonb, p_flows jsonb, p_status jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    f jsonb;
    v_spec jsonb := p_spec;
BEGIN
    IF p_flows IS NULL OR jsonb_typeof(p_flows) <> 'array' THEN
        RETURN v_spec;
    END IF;
    FOR i IN 0 .. jsonb_array_length(p_flows) - 1 LOOP
        f := p_flows -> i;
        CONTINUE WHEN f->>'dep_field' IS NULL OR f->>'src_field' IS NULL;
        v_spec := coalesce(
            jsonb_set(v_spec, jsonptr_path(f->>'dep_field'),
                      coalesce(p_status #> jsonptr_path(f->>'src_field'), 'null'::jsonb), true),
            v_spec);
    END LOOP;
    RETURN v_spec;
END
$$;

-- The flowed spec of every live dependent in p_ids that has an incoming edge with flows:
-- flowed_spec() for a whole batch in one query (edges applied in dependency id order).
CREATE FUNCTION flowed_specs(p_ids uuid[])
RETURNS TABLE (id uuid, spec jsonb, fspec jsonb)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    e record;
BEGIN
    FOR e IN SELECT r.id AS rid, r.spec AS rspec, d.value_flows, u.status
             FROM resources r
             JOIN resource_deps d ON d.dependent_id = r.id
             JOIN resources u ON u.id = d.dependency_id
             WHERE r.id = ANY (p_ids) AND r.frozen_until IS NULL
               AND r.deletion_requested_at IS NULL
               AND jsonb_array_length(d.value_flows) > 0
             ORDER BY r.id, d.dependency_id LOOP
        IF id IS DISTINCT FROM e.rid THEN
            IF id IS NOT NULL THEN
                RETURN NEXT;
            END IF;
            id := e.rid;
            spec := e.rspec;
            fspec := e.rspec;
        END IF;
        fspec := apply_value_flows(fspec, e.value_flows, e.status);
    END LOOP;
    IF id IS NOT NULL THEN
        RETURN NEXT;
    END IF;
END
$$;

-- Reactive scheduling after drained results (as in 0004), with the flows of a batch computed
-- once by flowed_specs and the owners read in one pass.
CREATE OR REPLACE FUNCTION cascade_on_ready_change(p_ids uuid[]) RETURNS int
LANGUAGE plpgsql
SET random_page_cost = 1.1 SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
DECLARE
    n int;
    v_deps uuid[];
    v_owners uuid[];
BEGIN
    n := schedule_eligible(p_ids);

    SELECT array_agg(DISTINCT d.dependent_id) INTO v_deps
    FROM resource_deps d JOIN resources u ON u.id = d.dependency_id
    WHERE d.dependency_id = ANY (p_ids) AND u.synced_gen >= u.generation;
    IF v_deps IS NOT NULL THEN
        PERFORM 1 FROM resources WHERE id = ANY (v_deps) ORDER BY id FOR UPDATE;
        UPDATE resources r SET spec = x.fspec, updated_at = now()
        FROM flowed_specs(v_deps) x
        WHERE r.id = x.id AND x.spec IS DISTINCT FROM x.fspec;
        n := n + schedule_eligible(v_deps);
    END IF;

    SELECT array_agg(DISTINCT o.id) INTO v_owners
    FROM resources r, LATERAL (VALUES (r.owner_id), (r.root_id)) AS o(id)
    WHERE r.id = ANY (p_ids) AND o.id IS NOT NULL;
    IF v_owners IS NOT NULL THEN
        n := n + schedule_eligible(v_owners) + schedule_rollup(v_owners);
        INSERT INTO rollup_recheck (root_id, shard_id)
        SELECT r.id, r.shard_id FROM resources r
        JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version AND kc.has_rollup
        WHERE r.id = ANY (v_owners);
    END IF;
    RETURN n;
END
$$;

-- ---------------------------------------------------------------------------------------
-- Key-probe plans for the batch statements
-- ---------------------------------------------------------------------------------------

-- Pops up to p_max outbox rows of a shard range, oldest first, as one array per column (the
-- latest result per resource). Its own function so that it keeps the default planner
-- settings (see 1. above): the outbox is small and churning, picking is a scan-and-sort and
-- the delete a hash semi-join on the picked keys.
CREATE FUNCTION outbox_pop(p_max int, p_lo smallint, p_hi smallint)
RETURNS TABLE (popped int, ids uuid[], gens bigint[], oks boolean[], terminals boolean[],
               errs text[], statuses jsonb[], conds jsonb[], health boolean[], advances boolean[])
LANGUAGE plpgsql
SET enable_hashjoin = on SET enable_mergejoin = on
AS $$
BEGIN
    RETURN QUERY
    WITH popped AS (
        DELETE FROM work_outbox o
        WHERE o.shard_id BETWEEN p_lo AND p_hi
          AND (o.id, o.shard_id) IN (
            SELECT id, shard_id FROM work_outbox
            WHERE shard_id BETWEEN p_lo AND p_hi
            ORDER BY id
            LIMIT p_max
            FOR UPDATE SKIP LOCKED)
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

-- The drain of 0010 with joins by key (hash and merge joins off): results are applied, locked
-- and recorded by primary-key probes whatever the table's size.
CREATE OR REPLACE FUNCTION drain_outbox_batch(p_max int, p_lo smallint, p_hi smallint) RETURNS int
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off
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
    v_troubled uuid[];
    v_old_ids uuid[];
    v_old_phases text[];
BEGIN
    SELECT * INTO v_popped, v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses, v_conds, v_health, v_advance
    FROM outbox_pop(p_max, p_lo, p_hi);

    IF v_ids IS NULL THEN
        RETURN coalesce(v_popped, 0);
    END IF;

    -- Lock in ascending id order, and note which rows carried a failure or ill health before
    -- this batch (only those can need a condition cleared).
    SELECT array_agg(s.id) FILTER (WHERE s.failure_gen <> 0 OR NOT s.health_ok),
           array_agg(s.id ORDER BY s.id), array_agg(s.phase ORDER BY s.id)
    INTO v_troubled, v_old_ids, v_old_phases
    FROM (SELECT r.id, r.failure_gen, r.health_ok, r.phase
          FROM unnest(v_ids) AS b(id) JOIN resources r ON r.id = b.id
          ORDER BY r.id FOR UPDATE OF r) s;

    -- This batch records its own phase changes in one statement (below); the per-row event
    -- trigger stands aside for it.
    PERFORM set_config('converge.batch_events', 'on', true);

    WITH o AS (
        SELECT * FROM unnest(v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses, v_health, v_advance)
            AS t(id, gen, ok, terminal, err, status, health, advance)
    ), n AS (
        SELECT r.id,
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
               CASE WHEN o.ok THEN NULL::text ELSE o.err END AS failure_message
        FROM o
        JOIN resources r ON r.id = o.id
        LEFT JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version
    )
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
           OR r.failure_message IS DISTINCT FROM n.failure_message);

    PERFORM set_config('converge.batch_events', 'off', true);
    IF v_old_ids IS NOT NULL THEN
        PERFORM record_phase_changes(v_old_ids, v_old_phases);
    END IF;

    -- Conditions, on transition only.
    WITH o AS (
        SELECT * FROM unnest(v_ids, v_ok, v_terminal, v_errs, v_conds)
            AS t(id, ok, terminal, err, conds)
    ), reported AS (
        SELECT o.id, c->>'type' AS type, coalesce(c->>'status', 'Unknown') AS status,
               coalesce(c->>'reason', '') AS reason, coalesce(c->>'message', '') AS message
        FROM o, jsonb_array_elements(o.conds) c
        WHERE o.ok AND jsonb_typeof(o.conds) = 'array' AND coalesce(c->>'type', '') <> ''
        UNION ALL
        SELECT o.id, 'Synced', 'False',
               CASE WHEN o.terminal THEN 'TerminalError' ELSE 'ReconcileError' END,
               left(coalesce(o.err, ''), 4096)
        FROM o WHERE NOT o.ok
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
    IF v_troubled IS NOT NULL THEN
        DELETE FROM resource_conditions rc
        USING unnest(v_ids, v_ok, v_conds) AS o(id, ok, conds)
        WHERE rc.resource_id = o.id AND o.ok AND o.id = ANY (v_troubled)
          AND rc.status = 'False'
          AND NOT (coalesce(o.conds, '[]'::jsonb) @> jsonb_build_array(jsonb_build_object('type', rc.type)));
    END IF;

    -- Re-pend what is still behind (failed transiently, edited mid-flight), flow values to
    -- dependents, and re-evaluate the composites that own these rows.
    PERFORM cascade_on_ready_change(v_ids);

    RETURN v_popped;
END
$$;

ALTER FUNCTION record_phase_changes(uuid[], text[])
    SET random_page_cost = 1.1 SET enable_hashjoin = off SET enable_mergejoin = off;

-- ---------------------------------------------------------------------------------------
-- Fewer index entries per row
-- ---------------------------------------------------------------------------------------

DROP INDEX idx_resources_owner;
DROP INDEX idx_resources_labels;
CREATE INDEX idx_resources_labels ON resources USING gin (labels jsonb_path_ops)
    WHERE labels <> '{}'::jsonb;
