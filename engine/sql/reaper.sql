-- The reaper's sweeps: stale leases freed, rows behind their spec re-queued, settled rows of
-- resync kinds re-pended, and queue rows nobody claimed dropped.
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction.

-- Reaper: frees leases whose worker stopped attesting (dead or hung worker). The epoch bump
-- fences whatever the old holder sends later.
CREATE OR REPLACE FUNCTION reap_stale_work(p_lo smallint, p_hi smallint, p_stale_after interval) RETURNS int
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
-- quiet for p_retry_after. Terminally failed rows stay put until their spec changes. The
-- candidates are read from resource_lag of the shards; during a bulk apply nearly every row
-- behind is recent, and the behind_since pre-filter drops them in the narrow table.
CREATE OR REPLACE FUNCTION requeue_failed_and_pending(p_lo smallint, p_hi smallint,
                                                      p_retry_after interval, p_limit int)
RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids uuid[];
BEGIN
    SELECT array_agg(r.id) INTO v_ids
    FROM (
        SELECT r.id FROM resource_lag l
        JOIN resources r ON r.id = l.id
        WHERE l.shard_id BETWEEN p_lo AND p_hi
          AND l.behind_since < now() - p_retry_after
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

-- Re-pends up to p_limit settled rows of (kind, version) not observed for p_interval. With
-- p_recompose the composer runs again too (composed_gen is reset; the compose restores it).
CREATE OR REPLACE FUNCTION requeue_for_resync(p_kind text, p_kind_version int, p_interval interval,
                                   p_recompose boolean, p_limit int) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids uuid[];
    n int;
BEGIN
    SELECT array_agg(s.id ORDER BY s.id) INTO v_ids
    FROM (SELECT r.id FROM resources r
          WHERE r.kind = p_kind AND r.kind_version = p_kind_version
            AND r.synced_gen >= r.generation
            AND r.failure_gen <> r.generation
            AND r.frozen_until IS NULL
            AND r.deletion_requested_at IS NULL
            AND coalesce(r.observed_at, r.updated_at) < now() - p_interval
          ORDER BY r.id
          LIMIT p_limit
          FOR UPDATE SKIP LOCKED) s;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    UPDATE resources r
    SET observed_at = now(),
        composed_gen = CASE WHEN p_recompose THEN 0 ELSE r.composed_gen END
    WHERE r.id = ANY (v_ids);
    INSERT INTO work_queue (resource_id, shard_id, task_type, kind, kind_version, generation,
                            trigger, attempt)
    SELECT r.id, r.shard_id, 'reconcile', r.kind, r.kind_version, r.generation, 'resync', 1
    FROM resources r WHERE r.id = ANY (v_ids)
    ORDER BY r.id
    ON CONFLICT (resource_id, task_type, shard_id) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM notify_gated('work_ready');
    END IF;
    RETURN n;
END
$$;

-- Abandoned-work GC: drops queue rows nobody claimed for p_older_than (their kind lost its
-- workers). The resource stays behind its spec, so requeue_failed_and_pending re-enqueues it
-- if a worker for the kind ever returns.
CREATE OR REPLACE FUNCTION delete_unclaimed_work(p_lo smallint, p_hi smallint, p_older_than interval)
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
