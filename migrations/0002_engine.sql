-- converge engine: scheduling, completion, drain and sweeps as plpgsql, so a reconcile cascade
-- is a transaction commit rather than a controller wake-up. Forward-only.
--
-- Conventions every function here keeps:
-- - shard scoping is always `shard_id BETWEEN lo AND hi` (partition pruning), never = ANY();
-- - resource rows are locked in ascending id order (no deadlocks between drainers);
-- - claim_epoch bumps in the same statement that makes a queue row claimable, and every
--   result write is fenced on it;
-- - wake-ups are coalesced hints; a missed one costs latency, never correctness.

-- Retry backoff for a transient failure: base * 2^(attempts-1), capped. The base and cap come
-- from the session settings converge.retry_base_ms / converge.retry_max_ms (set by the
-- converge process on every connection), defaulting to 2 s and 5 min.
CREATE FUNCTION retry_backoff(p_attempts int) RETURNS interval
LANGUAGE sql STABLE
AS $$
    SELECT make_interval(secs => least(
        coalesce(nullif(current_setting('converge.retry_base_ms', true), '')::bigint, 2000)
            * power(2, greatest(least(p_attempts, 30) - 1, 0)),
        coalesce(nullif(current_setting('converge.retry_max_ms', true), '')::bigint, 300000)
    ) / 1000.0)
$$;

-- The wake gate: at most one pg_notify per channel per 50 ms window across all backends.
-- Layer 1 is an unlocked read (almost every caller stops there); layer 2 a non-blocking
-- advisory lock picks one winner; layer 3 the winner stamps the window and notifies.
-- Listeners poll once more one window after each wake, so a suppressed notify is covered.
CREATE FUNCTION notify_gated(p_channel text) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_last timestamptz;
BEGIN
    SELECT last_at INTO v_last FROM wake_state WHERE channel = p_channel;
    IF v_last IS NOT NULL AND v_last > clock_timestamp() - interval '50 milliseconds' THEN
        RETURN;
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtext('converge.notify_gated'), hashtext(p_channel)) THEN
        RETURN;
    END IF;
    UPDATE wake_state SET last_at = clock_timestamp() WHERE channel = p_channel;
    PERFORM pg_notify(p_channel, '');
END
$$;

-- The gate. Enqueues a reconcile task for each given resource that needs one: spec ahead of
-- synced_gen, not being deleted, not frozen (orphaned/quarantined), not terminally failed for
-- its live spec. A resource that is failed transiently waits out its backoff (not_before).
-- Idempotent: an existing row for the same generation is left alone; an older generation's
-- row is re-pointed, which releases any claim on it (epoch bump fences the stale result).
CREATE FUNCTION schedule_eligible(p_ids uuid[]) RETURNS int
LANGUAGE plpgsql
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
                ELSE '-infinity'::timestamptz END,
           pc.spec, pc.data
    FROM resources r
    LEFT JOIN providerconfigs pc ON pc.name = r.provider_config_ref
    WHERE r.id = ANY (p_ids)
      AND r.generation > r.synced_gen
      AND r.deletion_requested_at IS NULL
      AND r.frozen_until IS NULL
      AND NOT (r.failure_terminal AND r.failure_gen = r.generation)
    ORDER BY r.id
    ON CONFLICT (resource_id, task_type, shard_id) DO UPDATE
        SET generation = EXCLUDED.generation,
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
        WHERE w.generation < EXCLUDED.generation;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM notify_gated('work_ready');
    END IF;
    RETURN n;
END
$$;

-- Creates or updates a resource by (kind, name) and schedules it, in one round trip.
-- Returns the id, 'created' | 'configured' | 'unchanged', and the generation.
CREATE FUNCTION resource_apply(p_kind text, p_kind_version int, p_name text, p_spec jsonb,
                               p_labels jsonb, p_provider_config_ref text)
RETURNS TABLE (id uuid, result text, generation bigint)
LANGUAGE plpgsql
AS $$
DECLARE
    v_new uuid := gen_random_uuid();
    v_id uuid;
    v_inserted boolean;
    v_gen bigint;
BEGIN
    INSERT INTO resources AS r (id, kind, kind_version, name, shard_id, spec, labels, provider_config_ref)
    VALUES (v_new, p_kind, p_kind_version, p_name, shard_of(v_new), p_spec, p_labels, p_provider_config_ref)
    ON CONFLICT (kind, name) DO UPDATE
        SET spec = EXCLUDED.spec,
            labels = EXCLUDED.labels,
            kind_version = EXCLUDED.kind_version,
            provider_config_ref = EXCLUDED.provider_config_ref,
            updated_at = now()
        WHERE r.spec IS DISTINCT FROM EXCLUDED.spec
           OR r.labels IS DISTINCT FROM EXCLUDED.labels
           OR r.kind_version IS DISTINCT FROM EXCLUDED.kind_version
           OR r.provider_config_ref IS DISTINCT FROM EXCLUDED.provider_config_ref
    RETURNING r.id, r.id = v_new, r.generation INTO v_id, v_inserted, v_gen;

    IF v_id IS NULL THEN
        SELECT r.id, r.generation INTO v_id, v_gen
        FROM resources r WHERE r.kind = p_kind AND r.name = p_name;
        RETURN QUERY SELECT v_id, 'unchanged'::text, v_gen;
        RETURN;
    END IF;
    PERFORM schedule_eligible(ARRAY[v_id]);
    RETURN QUERY SELECT v_id, CASE WHEN v_inserted THEN 'created' ELSE 'configured' END, v_gen;
END
$$;

-- Claims up to p_limit unleased tasks of one (kind, version) in a shard range, stamping a
-- fresh lease and bumping claim_epoch, and returns everything the broker needs to build the
-- StageTasks (resource row, deadline from the live kind_config) in one round trip.
CREATE FUNCTION work_claim(p_lo smallint, p_hi smallint, p_kind text, p_kind_version int,
                           p_limit int, p_broker text)
RETURNS TABLE (resource_id uuid, shard_id smallint, task_type text, generation bigint,
               trigger text, attempt int, lease_token uuid, claim_epoch bigint,
               provider_config jsonb, provider_bundle bytea, task_deadline_secs int,
               name text, owner_id uuid, root_id uuid, spec jsonb, status jsonb,
               r_generation bigint, synced_gen bigint, is_ready boolean, finalizers text[],
               deletion_requested_at_ms bigint, frozen_until_ms bigint, labels jsonb,
               phase text)
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
           r.labels, r.phase
    FROM u
    JOIN resources r ON r.id = u.resource_id
    LEFT JOIN kind_config kc ON kc.kind = u.kind AND kc.kind_version = u.kind_version
$$;

-- Records a batch of task results, fenced: a result lands in work_outbox (and its queue row
-- is removed) only if the queue row still carries that lease and claim_epoch. Returns the
-- accepted results; anything missing from the output was stale and changed nothing.
CREATE FUNCTION work_complete(p_resource_ids uuid[], p_shard_ids smallint[], p_task_types text[],
                              p_lease_tokens uuid[], p_claim_epochs bigint[], p_ok boolean[],
                              p_terminal boolean[], p_errors text[], p_statuses jsonb[],
                              p_conditions jsonb[], p_health boolean[])
RETURNS TABLE (resource_id uuid, task_type text, claim_epoch bigint)
LANGUAGE plpgsql
AS $$
DECLARE
    n int;
BEGIN
    RETURN QUERY
    WITH input AS (
        SELECT * FROM unnest(p_resource_ids, p_shard_ids, p_task_types, p_lease_tokens,
                             p_claim_epochs, p_ok, p_terminal, p_errors, p_statuses,
                             p_conditions, p_health)
            AS x(resource_id, shard_id, task_type, lease_token, claim_epoch, ok, terminal,
                 error_message, status, conditions, health_ok)
    ), done AS (
        DELETE FROM work_queue w
        USING input i
        WHERE w.resource_id = i.resource_id AND w.task_type = i.task_type
          AND w.shard_id = i.shard_id AND w.claim_epoch = i.claim_epoch
          AND w.lease_token = i.lease_token
        RETURNING w.resource_id, w.shard_id, w.task_type, w.generation, w.claim_epoch
    ), ins AS (
        INSERT INTO work_outbox (shard_id, resource_id, task_type, generation, ok, terminal,
                                 error_message, status, conditions, health_ok)
        SELECT d.shard_id, d.resource_id, d.task_type, d.generation, i.ok, i.terminal,
               i.error_message, i.status, i.conditions, i.health_ok
        FROM done d
        JOIN input i ON i.resource_id = d.resource_id AND i.task_type = d.task_type
                    AND i.claim_epoch = d.claim_epoch
        RETURNING 1
    )
    SELECT d.resource_id, d.task_type, d.claim_epoch FROM done d;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM notify_gated('outbox_ready');
    END IF;
END
$$;

-- Refreshes the heartbeat of the attested leases only (one statement per heartbeat frame).
CREATE FUNCTION work_heartbeat(p_resource_ids uuid[], p_shard_ids smallint[], p_task_types text[],
                               p_claim_epochs bigint[])
RETURNS int
LANGUAGE sql
AS $$
    WITH input AS (
        SELECT * FROM unnest(p_resource_ids, p_shard_ids, p_task_types, p_claim_epochs)
            AS x(resource_id, shard_id, task_type, claim_epoch)
    ), upd AS (
        UPDATE work_queue w SET heartbeat_at = now()
        FROM input i
        WHERE w.resource_id = i.resource_id AND w.task_type = i.task_type
          AND w.shard_id = i.shard_id AND w.claim_epoch = i.claim_epoch
          AND w.lease_token IS NOT NULL
        RETURNING 1
    )
    SELECT count(*)::int FROM upd
$$;

-- Releases leases at once (a stream ended, a broker is stopping): the rows become claimable
-- with a bumped epoch, so whatever the old holder sends later is refused.
CREATE FUNCTION work_release(p_resource_ids uuid[], p_shard_ids smallint[], p_task_types text[],
                             p_claim_epochs bigint[])
RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    n int;
BEGIN
    WITH input AS (
        SELECT * FROM unnest(p_resource_ids, p_shard_ids, p_task_types, p_claim_epochs)
            AS x(resource_id, shard_id, task_type, claim_epoch)
    )
    UPDATE work_queue w
    SET lease_token = NULL, claim_epoch = w.claim_epoch + 1, broker_id = NULL,
        worker_id = NULL, claimed_at = NULL, heartbeat_at = NULL
    FROM input i
    WHERE w.resource_id = i.resource_id AND w.task_type = i.task_type
      AND w.shard_id = i.shard_id AND w.claim_epoch = i.claim_epoch
      AND w.lease_token IS NOT NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        -- Direct, not gated: rare, and another broker should see the work within ms.
        PERFORM pg_notify('work_ready', '');
    END IF;
    RETURN n;
END
$$;

-- Reactive scheduling after drained results change resources (the leaf part): re-pends rows
-- that are still behind their spec (edited mid-flight) or failed transiently (their backoff
-- rides not_before). Later migrations extend it to dependents and rollup roots.
CREATE FUNCTION cascade_on_ready_change(p_ids uuid[]) RETURNS int
LANGUAGE plpgsql
AS $$
BEGIN
    RETURN schedule_eligible(p_ids);
END
$$;

-- The drainer's workhorse. Pops up to p_max outbox rows in a shard range, coalesces them per
-- resource (latest wins), and applies them in one UPDATE with a no-op gate: status,
-- synced_gen, health_ok, failure_gen/attempts/terminal. Conditions are written only on
-- transition (reported conditions that differ, a failure, or a recovery clearing a stored
-- False), so a healthy fleet that reports nothing writes no condition rows.
CREATE FUNCTION drain_outbox_batch(p_max int, p_lo smallint, p_hi smallint) RETURNS int
LANGUAGE plpgsql
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
    v_popped int;
    v_troubled uuid[];
    v_resched uuid[];
BEGIN
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
           array_agg(health_ok ORDER BY resource_id)
    INTO v_popped, v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses, v_conds, v_health
    FROM latest;

    IF v_ids IS NULL THEN
        RETURN coalesce(v_popped, 0);
    END IF;

    -- Lock in ascending id order, and note which rows carried a failure or ill health before
    -- this batch (only those can need a condition cleared).
    SELECT array_agg(s.id) FILTER (WHERE s.failure_gen <> 0 OR NOT s.health_ok)
    INTO v_troubled
    FROM (SELECT r.id, r.failure_gen, r.health_ok FROM resources r
          WHERE r.id = ANY (v_ids) ORDER BY r.id FOR UPDATE) s;

    WITH o AS (
        SELECT * FROM unnest(v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses, v_health)
            AS t(id, gen, ok, terminal, err, status, health)
    ), n AS (
        SELECT r.id,
               CASE WHEN o.ok AND o.status IS NOT NULL THEN o.status ELSE r.status END AS status,
               CASE WHEN o.ok THEN greatest(r.synced_gen, o.gen) ELSE r.synced_gen END AS synced_gen,
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

    -- Re-pend what is still behind: failed transiently (with backoff) or edited mid-flight.
    SELECT array_agg(r.id) INTO v_resched
    FROM resources r
    WHERE r.id = ANY (v_ids) AND r.generation > r.synced_gen;
    IF v_resched IS NOT NULL THEN
        PERFORM cascade_on_ready_change(v_resched);
    END IF;

    RETURN v_popped;
END
$$;

-- Reaper: frees leases whose worker stopped attesting (dead or hung worker). The epoch bump
-- fences whatever the old holder sends later.
CREATE FUNCTION reap_stale_work(p_lo smallint, p_hi smallint, p_stale_after interval) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    n int;
BEGIN
    UPDATE work_queue w
    SET lease_token = NULL, claim_epoch = w.claim_epoch + 1, broker_id = NULL,
        worker_id = NULL, claimed_at = NULL, heartbeat_at = NULL
    WHERE w.shard_id BETWEEN p_lo AND p_hi
      AND w.lease_token IS NOT NULL
      AND w.heartbeat_at < now() - p_stale_after;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM pg_notify('work_ready', '');
    END IF;
    RETURN n;
END
$$;

-- Reaper backstop: re-enqueues resources behind their spec that have neither a queued task
-- nor an undrained result (lost to a crash, or missed by the cascade), once they have been
-- quiet for p_retry_after. Terminally failed rows stay put until their spec changes.
CREATE FUNCTION requeue_failed_and_pending(p_lo smallint, p_hi smallint, p_retry_after interval,
                                           p_limit int)
RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids uuid[];
BEGIN
    SELECT array_agg(r.id) INTO v_ids
    FROM (
        SELECT r.id FROM resources r
        WHERE r.shard_id BETWEEN p_lo AND p_hi
          AND r.synced_gen < r.generation
          AND r.deletion_requested_at IS NULL
          AND r.frozen_until IS NULL
          AND NOT (r.failure_terminal AND r.failure_gen = r.generation)
          AND r.updated_at < now() - p_retry_after
          AND NOT EXISTS (SELECT 1 FROM work_queue q
                          WHERE q.resource_id = r.id AND q.shard_id = r.shard_id
                            AND q.shard_id BETWEEN p_lo AND p_hi)
          AND NOT EXISTS (SELECT 1 FROM work_outbox o
                          WHERE o.resource_id = r.id AND o.shard_id = r.shard_id
                            AND o.shard_id BETWEEN p_lo AND p_hi)
        LIMIT p_limit
    ) r;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    RETURN schedule_eligible(v_ids);
END
$$;

-- Abandoned-work GC: drops queue rows nobody claimed for p_older_than (their kind lost its
-- workers). The resource stays behind its spec, so requeue_failed_and_pending re-enqueues it
-- if a worker for the kind ever returns.
CREATE FUNCTION delete_unclaimed_work(p_lo smallint, p_hi smallint, p_older_than interval)
RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    n int;
BEGIN
    DELETE FROM work_queue w
    WHERE w.shard_id BETWEEN p_lo AND p_hi
      AND w.lease_token IS NULL
      AND w.enqueued_at < now() - p_older_than;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
