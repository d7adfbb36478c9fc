-- converge: the claim keeps its plan across calls. Forward-only.
--
-- work_claim_rows was a LANGUAGE sql function. PostgreSQL 15 does not cache the plans of a
-- SQL function's statements (and cannot inline this one: it modifies data), so every claim
-- planned its select-and-update against the 16 work_queue partitions afresh. On a
-- 20,000-child composite run pg_stat_statements put the claim statement itself at 3.2 ms
-- per call and the function at 6.6 ms: half of every claim was planning.
--
-- As PL/pgSQL the statements' plans are cached per connection. A cached plan is only as good
-- as the table it was made for, and a connection's first claim can meet an empty queue (see
-- 0014): made that way, the one-statement claim joined the pick to the partitioned queue by
-- materialising the whole queue and comparing every picked row with every queued one
-- (auto_explain: 800,000 comparisons for 256 claimed rows, 100 ms). So the claim now picks
-- and locks first (into arrays), then updates by key, and runs with sequential scans, hash,
-- merge joins and materialisation off: every step is a probe by key (the pending partial
-- index, the queue's primary key per partition, resources' and kind_config's primary keys)
-- at any table size; JIT is off as well, so a disabled path's penalty cost can never make
-- PostgreSQL compile a claim (see 0014). Measured on that run: PostgreSQL CPU 6.6 -> 5.7 s,
-- claim 93 -> 77 us per row.
--
-- Same signature, same rows, same locking (FOR UPDATE SKIP LOCKED) as 0008.

CREATE OR REPLACE FUNCTION work_claim_rows(p_lo smallint, p_hi smallint, p_kind text, p_kind_version int,
                           p_limit int, p_broker text)
RETURNS TABLE (resource_id uuid, shard_id smallint, task_type text, generation bigint,
               trigger text, attempt int, lease_token uuid, claim_epoch bigint,
               provider_config jsonb, provider_bundle bytea, task_deadline_secs int,
               name text, owner_id uuid, root_id uuid, spec jsonb, status jsonb,
               r_generation bigint, synced_gen bigint, is_ready boolean, finalizers text[],
               deletion_requested_at_ms bigint, frozen_until_ms bigint, labels jsonb,
               phase text, composed_gen bigint)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET enable_material = off SET jit = off
AS $$
DECLARE
    v_ids uuid[];
    v_types text[];
    v_shards smallint[];
BEGIN
    -- Pick and lock first, then update by key: one statement joining the pick to the
    -- partitioned queue let a cached plan materialise the whole queue and compare every
    -- picked row with every queued one (measured: 800,000 comparisons for 256 claims).
    SELECT array_agg(q.resource_id), array_agg(q.task_type), array_agg(q.shard_id)
    INTO v_ids, v_types, v_shards
    FROM (SELECT q.resource_id, q.task_type, q.shard_id
          FROM work_queue q
          WHERE q.shard_id BETWEEN p_lo AND p_hi
            AND q.kind = p_kind AND q.kind_version = p_kind_version
            AND q.lease_token IS NULL
            AND q.not_before <= now()
          LIMIT p_limit
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
