-- converge scheduling plans: keep id-targeted statements on the primary key. Forward-only.
-- Both problems below grew with the backlog, so a 100,000-resource preload ran at a fraction
-- of the rate of a 10,000 one.
--
-- schedule_eligible(ids) filtered with `r.generation > r.synced_gen AND
-- r.deletion_requested_at IS NULL`, which is exactly idx_resources_lagging's predicate. In its
-- generic plan PostgreSQL then ANDed a scan of that whole partial index with the primary-key
-- lookup, so every apply read one index entry per lagging resource: with 100,000 preloaded
-- resources each apply scanned 100,000 entries and applies/s fell as the backlog grew. The
-- lag test is now spelled `r.generation - r.synced_gen > 0`, which no partial index
-- predicate matches, so the plan is the primary-key lookup alone.
--
-- Its INSERT was also planned afresh on every call (about 2 ms against 16 work_queue
-- partitions, more than the insert itself): a one-element array makes every custom plan look
-- cheaper than the generic one, so the plan cache never switched. The function now runs
-- with plan_cache_mode = force_generic_plan, planning once per connection.

CREATE OR REPLACE FUNCTION schedule_eligible(p_ids uuid[]) RETURNS int
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
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
    LEFT JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version
    WHERE r.id = ANY (p_ids)
      AND r.generation - r.synced_gen > 0  -- not idx_resources_lagging (see above)
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


-- work_complete deleted the finished tasks through a join that PostgreSQL planned as a scan
-- of idx_work_queue_leased_kind per key (its `lease_token = x` implies the index predicate,
-- and the index looks small) or as a hash/merge join over whole partitions. The leased index
-- keeps every dead leased version until vacuum, so each result batch read more of it as the
-- run went on: 250 ms per 500-row batch into a 100,000-task backlog. The finished rows are
-- now found by primary key, one nested-loop probe each, and the outbox rows are built from
-- the DELETE's RETURNING instead of a second join.
CREATE OR REPLACE FUNCTION work_complete(p_resource_ids uuid[], p_shard_ids smallint[], p_task_types text[],
                              p_lease_tokens uuid[], p_claim_epochs bigint[], p_ok boolean[],
                              p_terminal boolean[], p_errors text[], p_statuses jsonb[],
                              p_conditions jsonb[], p_health boolean[], p_advance boolean[])
RETURNS TABLE (resource_id uuid, task_type text, claim_epoch bigint)
LANGUAGE plpgsql
-- Every join here is a batch of keys against work_queue's primary key (see above).
SET enable_hashjoin = off
SET enable_mergejoin = off
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
                  i.advance
    ), ins AS (
        INSERT INTO work_outbox (shard_id, resource_id, task_type, generation, ok, terminal,
                                 error_message, status, conditions, health_ok, advance)
        SELECT d.shard_id, d.resource_id, d.task_type, d.generation, d.ok, d.terminal,
               d.error_message, d.status, d.conditions, d.health_ok, d.advance
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

