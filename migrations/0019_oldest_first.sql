-- converge: the queue is served oldest first. Forward-only.
--
-- Until now a claim took whichever due rows of its kind the pending index met first: the
-- lowest partitions in its shard range, in index order. Under a sustained backlog a task in a
-- high partition could wait for as long as lower partitions had work (nothing bounded it),
-- and a composite's children progressed in lock-step with every other composite's, so every
-- root of a bulk apply finished in the same instant and all their rollups (each reading its
-- whole subtree) queued behind one another. The claim now takes due rows in not_before order
-- (an ordered merge of each partition's pending index: no sort), and not_before means "due
-- since": new work is due from the moment it is queued (now(), was '-infinity'), a retry from
-- the end of its backoff. Work queued by an operator's reconcile and a resource's next
-- operation keep '-infinity' and so go first.
--
-- Measured with 0020 (composites' results drained first), 20 roots, interleaved runs against
-- the binary before both: rollup p99 under load 76-99 ms at 20,000 children (was 124-159) and
-- 161-180 ms at 100,000 (was 378-664); 0020 without this migration left 100,000 at 670 ms,
-- the roots still finishing together. Reconciles/s within the runs' noise either way.

ALTER TABLE work_queue ALTER COLUMN not_before SET DEFAULT now();

CREATE OR REPLACE FUNCTION schedule_eligible(p_ids uuid[]) RETURNS int
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off SET jit = off
AS $$
DECLARE
    n int;
BEGIN
    INSERT INTO work_queue AS w (resource_id, shard_id, task_type, kind, kind_version,
                                 generation, trigger, attempt, not_before, provider_config,
                                 provider_bundle)
    SELECT r.id, r.shard_id, 'reconcile', r.kind, r.kind_version, r.generation,
           'specChange',
           r.failure_attempts + 1,
           CASE WHEN r.failure_gen = r.generation AND r.failure_attempts > 0
                THEN now() + retry_backoff(r.failure_attempts)
                ELSE now() END,
           pc.spec, pc.data
    FROM resources r
    LEFT JOIN providerconfigs pc ON pc.name = r.provider_config_ref
    LEFT JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version
    WHERE r.id = ANY (p_ids)
      AND r.generation - r.synced_gen > 0  -- not idx_resources_lagging (see 0011)
      AND r.deletion_requested_at IS NULL
      AND r.frozen_until IS NULL
      AND NOT (r.failure_terminal AND r.failure_gen = r.generation)
      AND NOT EXISTS (SELECT 1 FROM resource_deps d JOIN resources u ON u.id = d.dependency_id
                      WHERE d.dependent_id = r.id
                        AND (u.synced_gen < u.generation OR u.deletion_requested_at IS NOT NULL))
      AND NOT (coalesce(kc.has_rollup, false) AND r.composed_gen >= r.generation
               AND has_unsettled_descendants(r.id, r.root_id))
    ORDER BY r.id
    ON CONFLICT (resource_id, task_type, shard_id) DO UPDATE
        SET generation = EXCLUDED.generation,
            kind_version = EXCLUDED.kind_version,
            trigger = EXCLUDED.trigger,
            attempt = EXCLUDED.attempt,
            not_before = EXCLUDED.not_before,
            provider_config = EXCLUDED.provider_config,
            provider_bundle = EXCLUDED.provider_bundle,
            lease_token = NULL,
            claim_epoch = w.claim_epoch + 1,
            broker_id = NULL,
            worker_id = NULL,
            claimed_at = NULL,
            heartbeat_at = NULL,
            enqueued_at = now()
        WHERE w.generation < EXCLUDED.generation OR w.kind_version <> EXCLUDED.kind_version;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM notify_gated('work_ready');
    END IF;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION work_claim(p_lo smallint, p_hi smallint, p_kind text, p_kind_version int,
                                      p_limit int, p_broker text)
RETURNS TABLE (resource_id uuid, shard_id smallint, task_type text, generation bigint,
               trigger text, attempt int, lease_token uuid, claim_epoch bigint,
               provider_config jsonb, provider_bundle bytea, task_deadline_secs int,
               name text, owner_id uuid, root_id uuid, spec jsonb, status jsonb,
               r_generation bigint, synced_gen bigint, is_ready boolean, finalizers text[],
               deletion_requested_at_ms bigint, frozen_until_ms bigint, labels jsonb,
               phase text, composed_gen bigint)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET enable_material = off SET jit = off
AS $$
DECLARE
    v_cap int;
    v_used int;
    v_limit int := p_limit;
    v_ids uuid[];
    v_types text[];
    v_shards smallint[];
BEGIN
    SELECT kc.max_inflight INTO v_cap FROM kind_config kc
    WHERE kc.kind = p_kind AND kc.kind_version = p_kind_version;
    IF coalesce(v_cap, 0) > 0 THEN
        -- Serialises capped claims of this kind across brokers until this claim commits.
        PERFORM pg_advisory_xact_lock(hashtext('converge.kind_cap'), hashtext(p_kind || '/' || p_kind_version));
        SELECT count(*) INTO v_used FROM work_queue q
        WHERE q.kind = p_kind AND q.kind_version = p_kind_version AND q.lease_token IS NOT NULL;
        v_limit := least(p_limit, v_cap - v_used);
        IF v_limit <= 0 THEN
            RETURN;
        END IF;
    END IF;

    -- Pick and lock first, then update by key (see 0015); oldest due first.
    SELECT array_agg(q.resource_id), array_agg(q.task_type), array_agg(q.shard_id)
    INTO v_ids, v_types, v_shards
    FROM (SELECT q.resource_id, q.task_type, q.shard_id
          FROM work_queue q
          WHERE q.shard_id BETWEEN p_lo AND p_hi
            AND q.kind = p_kind AND q.kind_version = p_kind_version
            AND q.lease_token IS NULL
            AND q.not_before <= now()
          ORDER BY q.not_before
          LIMIT v_limit
          FOR UPDATE SKIP LOCKED) q;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;

    RETURN QUERY
    WITH u AS (
        UPDATE work_queue w
        SET lease_token = gen_random_uuid(),
            claim_epoch = w.claim_epoch + 1,
            claimed_at = now(),
            heartbeat_at = now(),
            broker_id = p_broker
        FROM unnest(v_ids, v_types, v_shards) AS k(id, task_type, shard_id)
        WHERE w.resource_id = k.id AND w.task_type = k.task_type AND w.shard_id = k.shard_id
        RETURNING w.resource_id, w.shard_id, w.task_type, w.generation, w.trigger, w.attempt,
                  w.lease_token, w.claim_epoch, w.provider_config, w.provider_bundle,
                  w.kind, w.kind_version
    )
    SELECT u.resource_id, u.shard_id, u.task_type, u.generation, u.trigger, u.attempt,
           u.lease_token, u.claim_epoch, u.provider_config, u.provider_bundle,
           coalesce(kc.task_deadline_secs, 0),
           r.name, r.owner_id, r.root_id, r.spec, r.status, r.generation, r.synced_gen,
           r.is_ready, r.finalizers,
           coalesce((extract(epoch FROM r.deletion_requested_at) * 1000)::bigint, 0),
           CASE WHEN r.frozen_until IS NULL THEN 0
                WHEN r.frozen_until = 'infinity' THEN 9223372036854775807
                ELSE (extract(epoch FROM r.frozen_until) * 1000)::bigint END,
           r.labels, r.phase, r.composed_gen
    FROM u
    JOIN resources r ON r.id = u.resource_id
    LEFT JOIN kind_config kc ON kc.kind = u.kind AND kc.kind_version = u.kind_version;
END
$$;
