-- Teardown: ordered soft deletion. A delete marks the teardown tree, tears it down
-- dependents before dependencies, runs finalizers as delete tasks and sweeps the rows that
-- are done; orphans whose grace expired go the same way.
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction.

-- The teardown tree of p_id: the node, everything it owns (transitively) and everything
-- that depends on any of those through edges (transitively). UNION deduplicates, so a cycle
-- in the edges ends the walk instead of looping.
CREATE OR REPLACE FUNCTION teardown_tree(p_id uuid) RETURNS TABLE (id uuid)
LANGUAGE sql STABLE
AS $$
    WITH RECURSIVE tree(id) AS (
        SELECT p_id
        UNION
        SELECT n.id FROM tree t
        CROSS JOIN LATERAL (
            SELECT r.id FROM resources r WHERE r.owner_id = t.id
            UNION ALL
            SELECT d.dependent_id FROM resource_deps d WHERE d.dependency_id = t.id
        ) n
    )
    SELECT tree.id FROM tree
$$;

-- Marks the teardown tree of p_id for deletion: deletion_requested_at stamped (phase
-- Deleting at once, is_ready false) and finalizers seeded from each node's kind. Rows
-- already being deleted keep their state (a stripped finalizer is never re-seeded). Pending
-- and running reconcile and operate work of the marked rows is dropped — a late result is
-- refused because its queue row is gone, and the brokers running it are told (reason
-- `deleted`, notify_lease_revoked) — and their open operations fail. Enqueues no
-- teardown and removes no row: teardown_advance does, once a node is unblocked. Returns the
-- ids newly marked.
CREATE OR REPLACE FUNCTION teardown_mark(p_id uuid) RETURNS uuid[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids uuid[];
    v_revoked uuid[];
BEGIN
    SELECT array_agg(s.id ORDER BY s.id) INTO v_ids
    FROM (SELECT r.id FROM resources r
          WHERE r.id IN (SELECT t.id FROM teardown_tree(p_id) t)
            AND r.deletion_requested_at IS NULL
          ORDER BY r.id
          FOR UPDATE) s;
    IF v_ids IS NULL THEN
        RETURN '{}';
    END IF;
    UPDATE resources r
    SET deletion_requested_at = now(),
        finalizers = CASE WHEN s.finalizer_name IS NULL THEN '{}'::text[]
                          ELSE ARRAY[s.finalizer_name] END,
        failure_attempts = 0,
        failure_message = NULL,
        updated_at = now()
    FROM (SELECT x.id, kc.finalizer_name FROM resources x
          LEFT JOIN kind_config kc ON kc.kind = x.kind AND kc.kind_version = x.kind_version
          WHERE x.id = ANY (v_ids)) s
    WHERE r.id = s.id;
    WITH dropped AS (
        DELETE FROM work_queue q WHERE q.resource_id = ANY (v_ids) AND q.task_type <> 'delete'
        RETURNING q.lease_token
    )
    SELECT array_agg(d.lease_token) FILTER (WHERE d.lease_token IS NOT NULL) INTO v_revoked
    FROM dropped d;
    PERFORM notify_lease_revoked('deleted', v_revoked);
    UPDATE resource_operations o
    SET state = 'failed', error = 'the resource is being deleted', updated_at = now(),
        finished_at = now()
    WHERE o.resource_id = ANY (v_ids) AND o.state IN ('pending', 'running');
    PERFORM notify_gated('outbox_ready');
    RETURN v_ids;
END
$$;

-- Advances the teardown of the given marked rows and, transitively, of the rows above them.
-- A marked row is unblocked once nothing it owns and nothing that depends on it remains.
-- An unblocked row with a finalizer gets its delete task (once: the queue key is unique);
-- one without is removed, which may unblock its owner and its dependencies, examined next.
-- Rows another transaction holds are skipped (it, or the next sweep, advances them). Owners
-- that are not being deleted themselves (a composer prune) re-evaluate their rollup.
-- Returns how many rows progressed (delete tasks queued plus rows removed).
CREATE OR REPLACE FUNCTION teardown_advance(p_ids uuid[]) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    v_next uuid[] := p_ids;
    v_tasks uuid[];
    v_gone uuid[];
    v_owners uuid[];
    v_queued int;
    n int := 0;
BEGIN
    WHILE v_next IS NOT NULL AND cardinality(v_next) > 0 LOOP
        SELECT array_agg(f.id ORDER BY f.id) FILTER (WHERE cardinality(f.finalizers) > 0),
               array_agg(f.id ORDER BY f.id) FILTER (WHERE cardinality(f.finalizers) = 0)
        INTO v_tasks, v_gone
        FROM (SELECT r.id, r.finalizers FROM resources r
              WHERE r.id = ANY (v_next)
                AND r.deletion_requested_at IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM resources c WHERE c.owner_id = r.id)
                AND NOT EXISTS (SELECT 1 FROM resource_deps d WHERE d.dependency_id = r.id)
              ORDER BY r.id
              FOR UPDATE SKIP LOCKED) f;

        IF v_tasks IS NOT NULL THEN
            INSERT INTO work_queue (resource_id, shard_id, task_type, kind, kind_version,
                                    generation, trigger, attempt)
            SELECT r.id, r.shard_id, 'delete', r.kind, r.kind_version, r.generation,
                   'deleteRequested', 1
            FROM resources r WHERE r.id = ANY (v_tasks)
            ORDER BY r.id
            ON CONFLICT (resource_id, task_type, shard_id) DO NOTHING;
            GET DIAGNOSTICS v_queued = ROW_COUNT;
            IF v_queued > 0 THEN
                n := n + v_queued;
                PERFORM notify_gated('work_ready');
            END IF;
        END IF;

        EXIT WHEN v_gone IS NULL;

        SELECT array_agg(DISTINCT p.id) INTO v_next
        FROM (SELECT r.owner_id AS id FROM resources r
              WHERE r.id = ANY (v_gone) AND r.owner_id IS NOT NULL
              UNION
              SELECT d.dependency_id FROM resource_deps d WHERE d.dependent_id = ANY (v_gone)) p
        WHERE NOT p.id = ANY (v_gone);
        SELECT array_agg(r.id) INTO v_owners
        FROM resources r
        WHERE r.id = ANY (v_next) AND r.deletion_requested_at IS NULL;

        -- Queue and outbox first, so nothing writes back for a row that no longer exists.
        DELETE FROM work_outbox o WHERE o.resource_id = ANY (v_gone);
        DELETE FROM work_queue q WHERE q.resource_id = ANY (v_gone);
        DELETE FROM resources r WHERE r.id = ANY (v_gone);
        n := n + cardinality(v_gone);

        IF v_owners IS NOT NULL THEN
            PERFORM schedule_eligible(v_owners);
            PERFORM schedule_rollup(v_owners);
        END IF;
    END LOOP;
    RETURN n;
END
$$;

-- DELETE of a resource: marks its teardown tree and advances it at once, so leaves start
-- (or go) immediately. Returns how many rows were newly marked, or NULL for an unknown id.
CREATE OR REPLACE FUNCTION resource_request_deletion(p_id uuid) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids uuid[];
BEGIN
    PERFORM 1 FROM resources WHERE id = p_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    v_ids := teardown_mark(p_id);
    IF cardinality(v_ids) > 0 THEN
        PERFORM teardown_advance(v_ids);
    END IF;
    RETURN cardinality(v_ids);
END
$$;

-- Records teardown results, fenced on lease and epoch like work_complete. A success strips
-- the finalizer (the next sweep removes the row once it is unblocked, which it is: its
-- teardown only ran because it was); a failure keeps the row Deleting with the message and
-- puts its delete task back with the retry backoff (a stuck teardown stays visible and keeps
-- blocking everything above it). Returns the accepted results.
CREATE OR REPLACE FUNCTION teardown_complete(p_resource_ids uuid[], p_shard_ids smallint[],
                                  p_lease_tokens uuid[], p_claim_epochs bigint[],
                                  p_ok boolean[], p_errors text[])
RETURNS TABLE (resource_id uuid, claim_epoch bigint)
LANGUAGE plpgsql
AS $$
DECLARE
    v_done uuid[];
    v_done_ep bigint[];
    v_failed uuid[];
    v_failed_ep bigint[];
    v_failed_err text[];
BEGIN
    WITH i AS (
        SELECT * FROM unnest(p_resource_ids, p_shard_ids, p_lease_tokens, p_claim_epochs, p_ok, p_errors)
            AS x(id, shard_id, lease_token, claim_epoch, ok, err)
    ), done AS (
        DELETE FROM work_queue q USING i
        WHERE q.shard_id = i.shard_id AND q.resource_id = i.id AND q.task_type = 'delete'
          AND q.lease_token = i.lease_token AND q.claim_epoch = i.claim_epoch AND i.ok
        RETURNING q.resource_id, i.claim_epoch
    )
    SELECT array_agg(done.resource_id ORDER BY done.resource_id),
           array_agg(done.claim_epoch ORDER BY done.resource_id)
    INTO v_done, v_done_ep FROM done;

    WITH i AS (
        SELECT * FROM unnest(p_resource_ids, p_shard_ids, p_lease_tokens, p_claim_epochs, p_ok, p_errors)
            AS x(id, shard_id, lease_token, claim_epoch, ok, err)
    ), retry AS (
        UPDATE work_queue q
        SET lease_token = NULL, claim_epoch = q.claim_epoch + 1, attempt = q.attempt + 1,
            not_before = now() + retry_backoff(q.attempt), broker_id = NULL, worker_id = NULL,
            claimed_at = NULL, heartbeat_at = NULL
        FROM i
        WHERE q.shard_id = i.shard_id AND q.resource_id = i.id AND q.task_type = 'delete'
          AND q.lease_token = i.lease_token AND q.claim_epoch = i.claim_epoch AND NOT i.ok
        RETURNING q.resource_id, i.claim_epoch, i.err
    )
    SELECT array_agg(retry.resource_id ORDER BY retry.resource_id),
           array_agg(retry.claim_epoch ORDER BY retry.resource_id),
           array_agg(retry.err ORDER BY retry.resource_id)
    INTO v_failed, v_failed_ep, v_failed_err FROM retry;

    PERFORM 1 FROM resources r
    WHERE r.id = ANY (coalesce(v_done, '{}') || coalesce(v_failed, '{}'))
    ORDER BY r.id FOR UPDATE;
    IF v_done IS NOT NULL THEN
        UPDATE resources r
        SET finalizers = '{}', failure_attempts = 0, failure_message = NULL, updated_at = now()
        WHERE r.id = ANY (v_done);
        PERFORM notify_gated('outbox_ready');
        RETURN QUERY SELECT * FROM unnest(v_done, v_done_ep);
    END IF;
    IF v_failed IS NOT NULL THEN
        UPDATE resources r
        SET failure_attempts = r.failure_attempts + 1,
            failure_message = left('teardown failed: ' || coalesce(f.err, ''), 4096),
            updated_at = now()
        FROM unnest(v_failed, v_failed_err) AS f(id, err)
        WHERE r.id = f.id;
        RETURN QUERY SELECT * FROM unnest(v_failed, v_failed_ep);
    END IF;
END
$$;

-- The level-triggered teardown engine for a shard range: every marked row that is unblocked
-- and not already waiting on its delete task is advanced. Run by the drainer after every
-- drain pass and by the reaper as a backstop. It almost always finds nothing, so it first
-- asks the (empty) partial index of deleting rows whether there is anything to sweep before
-- probing the sixteen queue partitions.
CREATE OR REPLACE FUNCTION sweep_deletable(p_lo smallint, p_hi smallint, p_limit int) RETURNS int
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off
AS $$
DECLARE
    v_ids uuid[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM resources r
                   WHERE r.shard_id BETWEEN p_lo AND p_hi
                     AND r.deletion_requested_at IS NOT NULL) THEN
        RETURN 0;
    END IF;
    SELECT array_agg(s.id) INTO v_ids
    FROM (SELECT r.id FROM resources r
          WHERE r.shard_id BETWEEN p_lo AND p_hi
            AND r.deletion_requested_at IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM resources c WHERE c.owner_id = r.id)
            AND NOT EXISTS (SELECT 1 FROM resource_deps d WHERE d.dependency_id = r.id)
            AND (cardinality(r.finalizers) = 0
                 OR NOT EXISTS (SELECT 1 FROM work_queue q
                                WHERE q.shard_id = r.shard_id AND q.resource_id = r.id
                                  AND q.task_type = 'delete'))
          ORDER BY r.id
          LIMIT p_limit) s;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    RETURN teardown_advance(v_ids);
END
$$;

-- Orphan-grace expiry now goes through the same teardown as a delete.
CREATE OR REPLACE FUNCTION sweep_expired_orphans(p_lo smallint, p_hi smallint, p_limit int) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    v_id uuid;
    v_marked uuid[] := '{}';
    n int := 0;
BEGIN
    FOR v_id IN SELECT r.id FROM resources r
                WHERE r.frozen_until < now() AND r.deletion_requested_at IS NULL
                  AND r.shard_id BETWEEN p_lo AND p_hi
                ORDER BY r.id
                LIMIT p_limit
                FOR UPDATE SKIP LOCKED LOOP
        v_marked := v_marked || teardown_mark(v_id);
        n := n + 1;
    END LOOP;
    IF n > 0 THEN
        PERFORM teardown_advance(v_marked);
    END IF;
    RETURN n;
END
$$;
