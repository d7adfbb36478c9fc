-- The work queue: the wake gate, the retry backoff, and a broker's claim, heartbeat,
-- release and completion of tasks (fenced on lease token and claim epoch; results go to the
-- outbox for the drainer), and the notice that tells brokers a running task's lease was taken
-- away (so they cancel it).
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction.

-- The wake gate: at most one pg_notify per channel per 50 ms window across all backends.
-- Layer 1 is an unlocked read (almost every caller stops there); layer 2 a non-blocking
-- advisory lock picks one winner; layer 3 the winner stamps the window and notifies.
-- Listeners poll once more one window after each wake, so a suppressed notify is covered.
-- A connection's warm-up (warmup.sql) notifies nobody and takes nothing here.
CREATE OR REPLACE FUNCTION notify_gated(p_channel text) RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_last timestamptz;
BEGIN
    IF current_setting('converge.warm_up', true) = 'on' THEN
        RETURN;
    END IF;
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

-- Retry backoff for a transient failure: base * 2^(attempts-1), capped. The base and cap come
-- from the session settings converge.retry_base_ms / converge.retry_max_ms (set by the
-- converge process on every connection), defaulting to 2 s and 5 min.
CREATE OR REPLACE FUNCTION retry_backoff(p_attempts int) RETURNS interval
LANGUAGE sql STABLE
AS $$
    SELECT make_interval(secs => least(
        coalesce(nullif(current_setting('converge.retry_base_ms', true), '')::bigint, 2000)
            * power(2, greatest(least(p_attempts, 30) - 1, 0)),
        coalesce(nullif(current_setting('converge.retry_max_ms', true), '')::bigint, 300000)
    ) / 1000.0)
$$;

-- Claims up to p_limit unleased tasks of one (kind, version) in a shard range, oldest due
-- first, stamping a fresh lease and bumping claim_epoch, and returns everything the broker
-- needs to build the StageTasks (resource row, deadline from the live kind_config) in one
-- round trip. The provider config override is the one the resource names now
-- (provider_config_ref), read here for every task type: a resync, rollup, teardown or
-- operation carries it as a spec change does, and a config changed since the task was
-- queued goes out in its new form (the queue's provider_config/provider_bundle columns are
-- no longer written: a column drop needs a migration, left for the next schema change). A
-- capped kind
-- (kind_config.max_inflight) takes a transaction-scoped advisory lock on the kind, counts
-- its live leases and claims at most the remaining budget.
--
-- default_config_rev names the kind's default provider config as this claim saw it (the
-- default row's xmin, 0 when there is none; the same in every row of one claim). The broker
-- compares it with the default it last pushed and pushes the newer one before the tasks
-- (stream rule 2), so a default written before the work was queued is always the one the
-- task is merged with, however late the providerconfig_changed NOTIFY is handled. It is read
-- in the statement that returns the rows, whose snapshot is no older than the pick's.
--
-- p_ahead: how many of the p_limit rows the broker asks for beyond its workers' free slots
-- (it holds those until slots free: broker/src/ahead.rs). A capped kind gets none of them:
-- its budget counts leases, and a task waiting in one broker would hold a slot of it that a
-- worker elsewhere could use.
DROP FUNCTION IF EXISTS work_claim(smallint, smallint, text, int, int, text);
DROP FUNCTION IF EXISTS work_claim(smallint, smallint, text, int, int, text, int);
CREATE FUNCTION work_claim(p_lo smallint, p_hi smallint, p_kind text, p_kind_version int,
                                      p_limit int, p_broker text, p_ahead int DEFAULT 0)
RETURNS TABLE (resource_id uuid, shard_id smallint, task_type text, generation bigint,
               trigger text, attempt int, lease_token uuid, claim_epoch bigint,
               provider_config jsonb, provider_bundle bytea, task_deadline_secs int,
               name text, owner_id uuid, root_id uuid, spec jsonb, status jsonb,
               r_generation bigint, synced_gen bigint, is_ready boolean, finalizers text[],
               deletion_requested_at_ms bigint, frozen_until_ms bigint, labels jsonb,
               phase text, composed_gen bigint, default_config_rev bigint)
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
        v_limit := p_limit - greatest(coalesce(p_ahead, 0), 0);
        IF v_limit <= 0 THEN
            RETURN;
        END IF;
        -- Serialises capped claims of this kind across brokers until this claim commits.
        PERFORM pg_advisory_xact_lock(hashtext('converge.kind_cap'), hashtext(p_kind || '/' || p_kind_version));
        SELECT count(*) INTO v_used FROM work_queue q
        WHERE q.kind = p_kind AND q.kind_version = p_kind_version AND q.lease_token IS NOT NULL;
        v_limit := least(v_limit, v_cap - v_used);
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
                  w.lease_token, w.claim_epoch, w.kind, w.kind_version
    )
    SELECT u.resource_id, u.shard_id, u.task_type, u.generation, u.trigger, u.attempt,
           u.lease_token, u.claim_epoch, pc.spec, pc.data,
           coalesce(kc.task_deadline_secs, 0),
           r.name, r.owner_id, r.root_id, r.spec, r.status, r.generation, r.synced_gen,
           r.is_ready, r.finalizers,
           coalesce((extract(epoch FROM r.deletion_requested_at) * 1000)::bigint, 0),
           CASE WHEN r.frozen_until IS NULL THEN 0
                WHEN r.frozen_until = 'infinity' THEN 9223372036854775807
                ELSE (extract(epoch FROM r.frozen_until) * 1000)::bigint END,
           r.labels, r.phase, r.composed_gen,
           -- Parameters only: one probe of idx_providerconfigs_default per claim.
           coalesce((SELECT d.xmin::text::bigint FROM providerconfigs d
                     WHERE d.kind = p_kind AND d.kind_version = p_kind_version
                       AND d.is_default), 0)
    FROM u
    JOIN resources r ON r.id = u.resource_id
    LEFT JOIN providerconfigs pc ON pc.name = r.provider_config_ref
    LEFT JOIN kind_config kc ON kc.kind = u.kind AND kc.kind_version = u.kind_version;
END
$$;

-- Refreshes the heartbeat of the attested leases only (one statement per heartbeat frame).
CREATE OR REPLACE FUNCTION work_heartbeat(p_resource_ids uuid[], p_shard_ids smallint[], p_task_types text[],
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
CREATE OR REPLACE FUNCTION work_release(p_resource_ids uuid[], p_shard_ids smallint[], p_task_types text[],
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

-- Records a batch of reconcile results, fenced: a result counts only if its queue row still
-- carries that lease and claim_epoch (the row is then removed); anything else was stale and
-- changes nothing. The arrays come sorted by resource id (the broker sorts its batch).
--
-- A plain result (a kind without a rollup: a leaf, or a composite whose rollup is not
-- declared) is applied to its resource here, in the transaction that fences it
-- (apply_locked_results, drain.sql): no outbox row to write and pop, no second transaction.
-- Any other result (a kind with a rollup: the express lane; a resource gone since its claim)
-- goes to work_outbox for the drainer as before. A resource's results therefore take one
-- path for as long as its kind's has_rollup holds, so they are applied in order.
--
-- Lock order: the plain results' resources first, in id order, and their queue rows after,
-- the order an apply takes them (the row, then the gate's upsert of its queue row). Taking
-- the queue row first would deadlock with an apply of the same resource.
--
-- Returns one row: the accepted results (ids and epochs, aligned), how many went to the
-- outbox, whether a plain result's resource has an owner (its composites were re-pended
-- and armed for the straddle close-out, which the caller runs after its commit, as a
-- drainer does after its own: drain_rollup_rechecks), and the kinds and
-- seconds-behind of the resources this call brought to synced (for
-- converge_reconcile_duration_seconds). Every join is a batch of keys against a primary key.
DROP FUNCTION IF EXISTS work_complete(uuid[], smallint[], text[], uuid[], bigint[], boolean[],
                                      boolean[], text[], jsonb[], jsonb[], boolean[], boolean[]);
CREATE FUNCTION work_complete(p_resource_ids uuid[], p_shard_ids smallint[], p_task_types text[],
                              p_lease_tokens uuid[], p_claim_epochs bigint[], p_ok boolean[],
                              p_terminal boolean[], p_errors text[], p_statuses jsonb[],
                              p_conditions jsonb[], p_health boolean[], p_advance boolean[])
RETURNS TABLE (accepted_ids uuid[], accepted_epochs bigint[], outboxed int, owned boolean,
               synced_kinds text[], synced_secs double precision[])
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
AS $$
DECLARE
    v_plain boolean[];
    v_phases text[];
    v_troubled boolean[];
    v_owner uuid[];
    v_root uuid[];
    v_ids uuid[];
    v_gens bigint[];
    v_ok boolean[];
    v_terminal boolean[];
    v_errs text[];
    v_statuses jsonb[];
    v_conds jsonb[];
    v_health boolean[];
    v_advance boolean[];
    v_old_phases text[];
    v_troubled_ids uuid[];
    v_owners uuid[];
BEGIN
    -- 1. Lock the resources of the plain results, in the batch's (id) order; each row's
    -- phase before, trouble and owners, aligned with the batch (NULL: not applied here).
    SELECT array_agg(x.plain ORDER BY b.ord), array_agg(x.phase ORDER BY b.ord),
           array_agg(x.troubled ORDER BY b.ord), array_agg(x.owner_id ORDER BY b.ord),
           array_agg(x.root_id ORDER BY b.ord)
    INTO v_plain, v_phases, v_troubled, v_owner, v_root
    FROM unnest(p_resource_ids, p_task_types) WITH ORDINALITY AS b(id, task_type, ord)
    LEFT JOIN LATERAL (
        SELECT true AS plain, r.phase, r.failure_gen <> 0 OR NOT r.health_ok AS troubled,
               r.owner_id, r.root_id
        FROM resources r
        WHERE r.id = b.id AND b.task_type = 'reconcile'
          AND NOT EXISTS (SELECT 1 FROM kind_config kc WHERE kc.kind = r.kind AND kc.has_rollup)
        FOR UPDATE OF r) x ON true;

    -- 2. Fence: remove the queue rows that still carry the lease; the results that are not
    -- plain go to the outbox, the plain ones are gathered (in id order) to apply.
    WITH input AS (
        SELECT * FROM unnest(p_resource_ids, p_shard_ids, p_task_types, p_lease_tokens,
                             p_claim_epochs, p_ok, p_terminal, p_errors, p_statuses,
                             p_conditions, p_health, p_advance, v_plain, v_phases,
                             v_troubled, v_owner, v_root)
            AS x(resource_id, shard_id, task_type, lease_token, claim_epoch, ok, terminal,
                 error_message, status, conditions, health_ok, advance, plain, phase,
                 troubled, owner_id, root_id)
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
                  i.advance, w.kind, i.phase, i.troubled, i.owner_id, i.root_id,
                  -- Locked above: a plain result whose resource is there.
                  coalesce(i.plain, false) AS plain
    ), ins AS (
        INSERT INTO work_outbox (shard_id, resource_id, task_type, generation, ok, terminal,
                                 error_message, status, conditions, health_ok, advance, express)
        SELECT d.shard_id, d.resource_id, d.task_type, d.generation, d.ok, d.terminal,
               d.error_message, d.status, d.conditions, d.health_ok, d.advance,
               EXISTS (SELECT 1 FROM kind_config kc WHERE kc.kind = d.kind AND kc.has_rollup)
        FROM done d WHERE NOT d.plain
        RETURNING 1
    )
    SELECT array_agg(d.resource_id), array_agg(d.claim_epoch),
           (SELECT count(*) FROM ins)::int,
           array_agg(d.resource_id ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.generation ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.ok ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.terminal ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.error_message ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.status ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.conditions ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.health_ok ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.advance ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.phase ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.resource_id) FILTER (WHERE d.plain AND d.troubled),
           -- As they are (NULLs and repeats): the cascade drops both.
           array_agg(d.owner_id) FILTER (WHERE d.plain) || array_agg(d.root_id) FILTER (WHERE d.plain)
    INTO accepted_ids, accepted_epochs, outboxed, v_ids, v_gens, v_ok, v_terminal, v_errs,
         v_statuses, v_conds, v_health, v_advance, v_old_phases, v_troubled_ids, v_owners
    FROM done d;

    owned := false;
    IF v_ids IS NOT NULL THEN
        -- 3. Apply the plain results where they were fenced.
        SELECT a.synced_kinds, a.synced_secs INTO synced_kinds, synced_secs
        FROM apply_locked_results(v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses,
                                  v_conds, v_health, v_advance, v_old_phases,
                                  v_troubled_ids, v_owners) a;
        owned := EXISTS (SELECT 1 FROM unnest(v_owners) o WHERE o IS NOT NULL);
    END IF;
    -- The drainers: results to apply.
    IF outboxed > 0 THEN
        PERFORM notify_gated('outbox_ready');
    END IF;
    RETURN NEXT;
END
$$;

-- Tells the brokers that running tasks lost their lease to the engine, and why: one NOTIFY on
-- `lease_revoked` per 200 lease tokens, payload `<reason> <token> <token> ...` (under the
-- 8000-byte NOTIFY limit). A broker holding one of the leases sends the worker CancelTask with
-- that reason (deleted, quarantined, superseded); the task's result would be refused anyway,
-- since its queue row is gone or carries a newer epoch. Delivered at commit, so a rolled-back
-- change cancels nothing. A missed NOTIFY costs the worker its slot until the task ends, never
-- correctness (the broker also re-checks its leases after each LISTEN reconnect).
CREATE OR REPLACE FUNCTION notify_lease_revoked(p_reason text, p_tokens uuid[]) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    i int := 1;
    n int := coalesce(cardinality(p_tokens), 0);
BEGIN
    WHILE i <= n LOOP
        PERFORM pg_notify('lease_revoked',
                          p_reason || ' ' || array_to_string(p_tokens[i:i + 199], ' '));
        i := i + 200;
    END LOOP;
END
$$;

-- The gate re-pointed a leased queue row at a newer generation (or kind version) of its
-- resource, which released the claim (schedule_eligible bumps the epoch): the running task is
-- superseded. Only the gate's upsert sets `generation` or `kind_version` of a queue row, so
-- this trigger is not even considered for a claim, heartbeat, release or completion.
CREATE OR REPLACE FUNCTION work_queue_superseded() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM notify_lease_revoked('superseded', ARRAY[OLD.lease_token]);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS work_queue_superseded ON work_queue;
CREATE TRIGGER work_queue_superseded AFTER UPDATE OF generation, kind_version ON work_queue
    FOR EACH ROW WHEN (OLD.lease_token IS NOT NULL AND NEW.lease_token IS NULL)
    EXECUTE FUNCTION work_queue_superseded();
