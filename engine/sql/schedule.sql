-- Scheduling: which resources get a queue row, and when (the gates of the composite
-- pipeline), and the re-run of a settled composite's rollup when its descendants change.
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction.

-- The gate. Enqueues a reconcile task for each given resource that needs one: spec ahead of
-- synced_gen, not being deleted, not frozen (orphaned/quarantined), not terminally failed for
-- its live spec, every dependency synced (the upstream gate), and for a composite that
-- already composed this generation, every descendant settled (the rollup gate). A resource
-- failed transiently waits out its backoff (not_before). Idempotent: an existing row for the
-- same generation is left alone; an older generation's or kind version's row is re-pointed,
-- which releases any claim on it (the epoch bump fences the stale result). Every statement
-- is a key lookup, so sequential scans are off and the plan is generic.
CREATE OR REPLACE FUNCTION schedule_eligible(p_ids uuid[]) RETURNS int
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off SET jit = off
AS $$
DECLARE
    n int;
BEGIN
    -- No copy of the provider config: work_claim reads the one the resource names when the
    -- task is claimed.
    INSERT INTO work_queue AS w (resource_id, shard_id, task_type, kind, kind_version,
                                 generation, trigger, attempt, not_before)
    SELECT r.id, r.shard_id, 'reconcile', r.kind, r.kind_version, r.generation,
           'specChange',
           r.failure_attempts + 1,
           CASE WHEN r.failure_gen = r.generation AND r.failure_attempts > 0
                THEN now() + retry_backoff(r.failure_attempts)
                ELSE now() END
    FROM resources r
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

-- Re-runs the rollup of composites that are already synced when their descendants changed
-- (a child failed, recovered, or was set aside): a childrenSettled task at the current
-- generation, only once every descendant has settled.
CREATE OR REPLACE FUNCTION schedule_rollup(p_ids uuid[]) RETURNS int
LANGUAGE plpgsql
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    n int;
BEGIN
    INSERT INTO work_queue (resource_id, shard_id, task_type, kind, kind_version, generation,
                            trigger, attempt)
    SELECT r.id, r.shard_id, 'reconcile', r.kind, r.kind_version, r.generation,
           'childrenSettled', 1
    FROM resources r
    JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version AND kc.has_rollup
    WHERE r.id = ANY (p_ids)
      AND r.synced_gen >= r.generation
      AND r.composed_gen >= r.generation
      AND r.deletion_requested_at IS NULL
      AND r.frozen_until IS NULL
      AND NOT has_unsettled_descendants(r.id, r.root_id)
    ORDER BY r.id
    ON CONFLICT (resource_id, task_type, shard_id) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM notify_gated('work_ready');
    END IF;
    RETURN n;
END
$$;
