-- converge: the claim is one function again. Forward-only.
--
-- Since 0008 work_claim checked the kind's cap and then returned `SELECT * FROM
-- work_claim_rows(...)`: one set-returning PL/pgSQL function feeding another, so every claimed
-- row (spec, status, provider config and bundle included) was materialised twice and every
-- claim paid a second function call. pg_stat_statements on 20,000-child runs: work_claim 87
-- and 137 us per claimed row, work_claim_rows inside it 74 and 121 (0.2-0.3 ms per claim of
-- about 18 rows). work_claim now runs the cap check and the claim itself (0015's pick, lease
-- update and row read, unchanged) and work_claim_rows is gone. Same signature, rows, locking
-- and settings (0015's plus 0017's one plan per connection). Measured on the same run shape
-- (absolute times move with the machine, so against the drain of the same run): the claim
-- went from 0.35-0.37 of the drain's time per row to 0.34, about 5 us per claimed row; the
-- rest of a claim is the lease update (non-HOT: the lease moves the row between the pending
-- and leased partial indexes) and reading the claimed resources.

DROP FUNCTION work_claim_rows(smallint, smallint, text, int, int, text);

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

    -- Pick and lock first, then update by key (see 0015).
    SELECT array_agg(q.resource_id), array_agg(q.task_type), array_agg(q.shard_id)
    INTO v_ids, v_types, v_shards
    FROM (SELECT q.resource_id, q.task_type, q.shard_id
          FROM work_queue q
          WHERE q.shard_id BETWEEN p_lo AND p_hi
            AND q.kind = p_kind AND q.kind_version = p_kind_version
            AND q.lease_token IS NULL
            AND q.not_before <= now()
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
