-- converge: composites' results are drained ahead of the bulk. Forward-only.
--
-- A drain batch applies up to DRAIN_BATCH (1,000) results in one transaction, 70-250 ms
-- under load on 2 cores. A root's rollup result queued behind one or two such batches: in a
-- 20-root, 20,000-child run the rollups themselves finished 15-50 ms after the last child,
-- yet the roots turned Ready 80-200 ms after it (results written at 0.019-0.053 s, drained
-- at 0.080 s and 0.204 s). Results of composites (kinds with a rollup reaction) are few, one
-- per composite reconcile, and each is what a user waits on, so they go to an express lane:
-- work_complete marks them, and a dedicated express drainer applies only those rows, in
-- their own small transactions, while the bulk drainers go on.
--
-- The lane is the kind's, decided here for every result whichever broker path produced it,
-- and a bulk pass never takes an express row: a resource's results are then applied by one
-- drainer at a time, in outbox order, as before (a lane shared by two drainers could apply an
-- older result after a newer one and put back its status).
--
-- outbox_pop and drain_outbox_batch take the lane (default: the bulk); all keep 0017's
-- settings.

ALTER TABLE work_outbox ADD COLUMN express boolean NOT NULL DEFAULT false;
CREATE INDEX idx_work_outbox_express ON work_outbox (id) WHERE express;

DROP FUNCTION drain_outbox_batch(int, smallint, smallint);
DROP FUNCTION outbox_pop(int, smallint, smallint);

-- As in 0011, with the lane of each result.
CREATE OR REPLACE FUNCTION work_complete(p_resource_ids uuid[], p_shard_ids smallint[], p_task_types text[],
                              p_lease_tokens uuid[], p_claim_epochs bigint[], p_ok boolean[],
                              p_terminal boolean[], p_errors text[], p_statuses jsonb[],
                              p_conditions jsonb[], p_health boolean[], p_advance boolean[])
RETURNS TABLE (resource_id uuid, task_type text, claim_epoch bigint)
LANGUAGE plpgsql
-- Every join here is a batch of keys against work_queue's primary key (see 0011).
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
AS $$
DECLARE
    n int;
BEGIN
    RETURN QUERY
    WITH input AS (
        SELECT * FROM unnest(p_resource_ids, p_shard_ids, p_task_types, p_lease_tokens,
                             p_claim_epochs, p_ok, p_terminal, p_errors, p_statuses,
                             p_conditions, p_health, p_advance)
            AS x(resource_id, shard_id, task_type, lease_token, claim_epoch, ok, terminal,
                 error_message, status, conditions, health_ok, advance)
    ), done AS (
        DELETE FROM work_queue w
        USING input i
        WHERE w.resource_id = i.resource_id AND w.task_type = i.task_type
          AND w.shard_id = i.shard_id AND w.claim_epoch = i.claim_epoch
          -- Not `=`: that implies `lease_token IS NOT NULL`, which lets the planner pick
          -- the leased partial index (see above).
          AND i.lease_token IS NOT NULL AND w.lease_token IS NOT DISTINCT FROM i.lease_token
        RETURNING w.resource_id, w.shard_id, w.task_type, w.generation, w.claim_epoch,
                  i.ok, i.terminal, i.error_message, i.status, i.conditions, i.health_ok,
                  i.advance, w.kind
    ), ins AS (
        INSERT INTO work_outbox (shard_id, resource_id, task_type, generation, ok, terminal,
                                 error_message, status, conditions, health_ok, advance, express)
        SELECT d.shard_id, d.resource_id, d.task_type, d.generation, d.ok, d.terminal,
               d.error_message, d.status, d.conditions, d.health_ok, d.advance,
               EXISTS (SELECT 1 FROM kind_config kc WHERE kc.kind = d.kind AND kc.has_rollup)
        FROM done d
        RETURNING 1
    )
    SELECT d.resource_id, d.task_type, d.claim_epoch FROM done d;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM notify_gated('outbox_ready');
    END IF;
END
$$;

-- As in 0016, with the express lane.
CREATE FUNCTION outbox_pop(p_max int, p_lo smallint, p_hi smallint, p_express boolean)
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
    -- Two statements, so each keeps its own plan (the express one walks the partial index).
    IF p_express THEN
        SELECT array_agg(q.id), array_agg(q.shard_id) INTO v_ids, v_shards
        FROM (SELECT o.id, o.shard_id FROM work_outbox o
              WHERE o.shard_id BETWEEN p_lo AND p_hi AND o.express
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

-- As in 0012, popping from the lane asked for.
CREATE FUNCTION drain_outbox_batch(p_max int, p_lo smallint, p_hi smallint,
                                   p_express boolean DEFAULT false) RETURNS int
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
    v_troubled uuid[];
    v_old_ids uuid[];
    v_old_phases text[];
BEGIN
    SELECT * INTO v_popped, v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses, v_conds, v_health, v_advance
    FROM outbox_pop(p_max, p_lo, p_hi, p_express);

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
