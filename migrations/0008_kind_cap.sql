-- The per-kind global concurrency cap (kind_config.max_inflight), enforced exactly at the
-- claim: for a capped kind the claim takes a transaction-scoped advisory lock on the kind,
-- counts its live leases (a partial index keeps that proportional to the cap) and claims at
-- most the remaining budget. Uncapped kinds pay one primary-key probe per claim statement.
-- No counters, so nothing drifts and nothing needs a recount; the cap is live-editable
-- through kind_config. Forward-only.

CREATE INDEX idx_work_queue_leased_kind ON work_queue (kind, kind_version) WHERE lease_token IS NOT NULL;

-- The claim itself (unchanged from 0004): FOR UPDATE SKIP LOCKED within a shard range,
-- fresh lease, epoch bump, and the resource row in one round trip.
CREATE FUNCTION work_claim_rows(p_lo smallint, p_hi smallint, p_kind text, p_kind_version int,
                           p_limit int, p_broker text)
RETURNS TABLE (resource_id uuid, shard_id smallint, task_type text, generation bigint,
               trigger text, attempt int, lease_token uuid, claim_epoch bigint,
               provider_config jsonb, provider_bundle bytea, task_deadline_secs int,
               name text, owner_id uuid, root_id uuid, spec jsonb, status jsonb,
               r_generation bigint, synced_gen bigint, is_ready boolean, finalizers text[],
               deletion_requested_at_ms bigint, frozen_until_ms bigint, labels jsonb,
               phase text, composed_gen bigint)
LANGUAGE sql
AS $$
    WITH c AS (
        SELECT q.resource_id, q.task_type, q.shard_id
        FROM work_queue q
        WHERE q.shard_id BETWEEN p_lo AND p_hi
          AND q.kind = p_kind AND q.kind_version = p_kind_version
          AND q.lease_token IS NULL
          AND q.not_before <= now()
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ), u AS (
        UPDATE work_queue w
        SET lease_token = gen_random_uuid(),
            claim_epoch = w.claim_epoch + 1,
            claimed_at = now(),
            heartbeat_at = now(),
            broker_id = p_broker
        FROM c
        WHERE w.shard_id BETWEEN p_lo AND p_hi
          AND w.resource_id = c.resource_id AND w.task_type = c.task_type AND w.shard_id = c.shard_id
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
    LEFT JOIN kind_config kc ON kc.kind = u.kind AND kc.kind_version = u.kind_version
$$;

DROP FUNCTION work_claim(smallint, smallint, text, int, int, text);
CREATE FUNCTION work_claim(p_lo smallint, p_hi smallint, p_kind text, p_kind_version int,
                           p_limit int, p_broker text)
RETURNS TABLE (resource_id uuid, shard_id smallint, task_type text, generation bigint,
               trigger text, attempt int, lease_token uuid, claim_epoch bigint,
               provider_config jsonb, provider_bundle bytea, task_deadline_secs int,
               name text, owner_id uuid, root_id uuid, spec jsonb, status jsonb,
               r_generation bigint, synced_gen bigint, is_ready boolean, finalizers text[],
               deletion_requested_at_ms bigint, frozen_until_ms bigint, labels jsonb,
               phase text, composed_gen bigint)
LANGUAGE plpgsql
AS $$
DECLARE
    v_cap int;
    v_used int;
    v_limit int := p_limit;
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
    RETURN QUERY SELECT * FROM work_claim_rows(p_lo, p_hi, p_kind, p_kind_version, v_limit, p_broker);
END
$$;
