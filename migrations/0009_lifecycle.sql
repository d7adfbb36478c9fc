-- converge lifecycle: ordered soft delete with finalizers (mark the teardown tree, tear it
-- down dependents-before-dependencies, strip finalizers on a successful teardown task),
-- operations (verbs run as operate tasks), spec history with rollback, and flipping a
-- resource to another kind version in place. Forward-only.

-- ---------------------------------------------------------------------------------------
-- Soft delete.
-- ---------------------------------------------------------------------------------------

-- The teardown tree of p_id: the node, everything it owns (transitively) and everything
-- that depends on any of those through edges (transitively). UNION deduplicates, so a cycle
-- in the edges ends the walk instead of looping.
CREATE FUNCTION teardown_tree(p_id uuid) RETURNS TABLE (id uuid)
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
-- refused because its queue row is gone — and their open operations fail. Enqueues no
-- teardown and removes no row: teardown_advance does, once a node is unblocked. Returns the
-- ids newly marked.
CREATE FUNCTION teardown_mark(p_id uuid) RETURNS uuid[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids uuid[];
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
    DELETE FROM work_queue q WHERE q.resource_id = ANY (v_ids) AND q.task_type <> 'delete';
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
CREATE FUNCTION teardown_advance(p_ids uuid[]) RETURNS int
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

-- The level-triggered teardown engine for a shard range: every marked row that is unblocked
-- and not already waiting on its delete task is advanced. Run by the drainer on every wake
-- (a teardown result, a mark) and by the reaper as a backstop; the partial index
-- idx_resources_deleting keeps it free when nothing is being deleted.
CREATE FUNCTION sweep_deletable(p_lo smallint, p_hi smallint, p_limit int) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids uuid[];
BEGIN
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

-- DELETE of a resource: marks its teardown tree and advances it at once, so leaves start
-- (or go) immediately. Returns how many rows were newly marked, or NULL for an unknown id.
CREATE FUNCTION resource_request_deletion(p_id uuid) RETURNS int
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
CREATE FUNCTION teardown_complete(p_resource_ids uuid[], p_shard_ids smallint[],
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

-- ---------------------------------------------------------------------------------------
-- Operations: a verb with an input, run by the kind's operation reaction as an operate task.
-- One operate queue row per resource serves its open operations oldest first.
-- ---------------------------------------------------------------------------------------

CREATE TABLE resource_operations (
    uid          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    resource_id  uuid        NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    verb         text        NOT NULL,
    input        jsonb,
    state        text        NOT NULL DEFAULT 'pending'
                             CHECK (state IN ('pending', 'running', 'succeeded', 'failed')),
    output       jsonb,
    error        text,
    attempts     int         NOT NULL DEFAULT 0,
    requested_by text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);

CREATE INDEX idx_resource_operations_resource ON resource_operations (resource_id, created_at, uid);
CREATE INDEX idx_resource_operations_open ON resource_operations (resource_id, created_at, uid)
    WHERE state IN ('pending', 'running');

-- Records an operation and makes sure an operate task is queued for the resource. Returns
-- the operation's uid, or NULL for an unknown or deleting resource.
CREATE FUNCTION operation_request(p_id uuid, p_verb text, p_input jsonb, p_by text) RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE
    v_r resources%ROWTYPE;
    v_uid uuid;
BEGIN
    SELECT * INTO v_r FROM resources WHERE id = p_id;
    IF NOT FOUND OR v_r.deletion_requested_at IS NOT NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO resource_operations (resource_id, verb, input, requested_by)
    VALUES (p_id, p_verb, p_input, coalesce(p_by, ''))
    RETURNING uid INTO v_uid;
    INSERT INTO work_queue (resource_id, shard_id, task_type, kind, kind_version, generation,
                            trigger, attempt)
    VALUES (p_id, v_r.shard_id, 'operate', v_r.kind, v_r.kind_version, v_r.generation,
            'operation', 1)
    ON CONFLICT (resource_id, task_type, shard_id) DO NOTHING;
    PERFORM notify_gated('work_ready');
    RETURN v_uid;
END
$$;

-- Called by the broker holding a fresh operate claim: the oldest open operation of the
-- resource becomes running (a running one whose previous claim was lost is picked again:
-- operations are at-least-once, like every task). No row: nothing left to run.
CREATE FUNCTION operation_start(p_id uuid)
RETURNS TABLE (uid uuid, verb text, input jsonb, attempts int, requested_by text)
LANGUAGE sql
AS $$
    UPDATE resource_operations o
    SET state = 'running', attempts = o.attempts + 1, updated_at = now()
    WHERE o.uid = (SELECT x.uid FROM resource_operations x
                   WHERE x.resource_id = p_id AND x.state IN ('pending', 'running')
                   ORDER BY x.created_at, x.uid
                   LIMIT 1
                   FOR UPDATE)
    RETURNING o.uid, o.verb, o.input, o.attempts, o.requested_by
$$;

-- Records operate results, fenced on lease and epoch. The running operation succeeds with
-- its output, fails (terminal, or out of transient attempts: kind_config.max_transient_attempts,
-- 0 = unbounded), or goes back to pending with the retry backoff. The queue row stays while
-- operations remain open (re-armed with a bumped epoch) and goes when none do.
CREATE FUNCTION operation_complete(p_resource_ids uuid[], p_shard_ids smallint[],
                                   p_lease_tokens uuid[], p_claim_epochs bigint[],
                                   p_ok boolean[], p_terminal boolean[], p_errors text[],
                                   p_outputs jsonb[])
RETURNS TABLE (resource_id uuid, claim_epoch bigint)
LANGUAGE plpgsql
AS $$
DECLARE
    i int;
    v_op resource_operations%ROWTYPE;
    v_max int;
    v_retry_in interval;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_resource_ids), 0) LOOP
        PERFORM 1 FROM work_queue q
        WHERE q.shard_id = p_shard_ids[i] AND q.resource_id = p_resource_ids[i]
          AND q.task_type = 'operate' AND q.lease_token = p_lease_tokens[i]
          AND q.claim_epoch = p_claim_epochs[i]
        FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        v_retry_in := NULL;
        SELECT * INTO v_op FROM resource_operations o
        WHERE o.resource_id = p_resource_ids[i] AND o.state = 'running'
        ORDER BY o.created_at, o.uid LIMIT 1
        FOR UPDATE;
        IF FOUND THEN
            SELECT coalesce(kc.max_transient_attempts, 0) INTO v_max
            FROM resources r
            LEFT JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version
            WHERE r.id = p_resource_ids[i];
            IF p_ok[i] THEN
                UPDATE resource_operations
                SET state = 'succeeded', output = p_outputs[i], error = NULL,
                    updated_at = now(), finished_at = now()
                WHERE uid = v_op.uid;
            ELSIF p_terminal[i] OR (coalesce(v_max, 0) > 0 AND v_op.attempts >= v_max) THEN
                UPDATE resource_operations
                SET state = 'failed', error = left(coalesce(p_errors[i], ''), 4096),
                    updated_at = now(), finished_at = now()
                WHERE uid = v_op.uid;
            ELSE
                UPDATE resource_operations
                SET state = 'pending', error = left(coalesce(p_errors[i], ''), 4096),
                    updated_at = now()
                WHERE uid = v_op.uid;
                v_retry_in := retry_backoff(v_op.attempts);
            END IF;
        END IF;
        IF v_retry_in IS NOT NULL
           OR EXISTS (SELECT 1 FROM resource_operations o
                      WHERE o.resource_id = p_resource_ids[i] AND o.state IN ('pending', 'running')) THEN
            UPDATE work_queue q
            SET lease_token = NULL, claim_epoch = q.claim_epoch + 1,
                attempt = CASE WHEN v_retry_in IS NULL THEN 1 ELSE q.attempt + 1 END,
                not_before = CASE WHEN v_retry_in IS NULL THEN '-infinity'::timestamptz
                                  ELSE now() + v_retry_in END,
                broker_id = NULL, worker_id = NULL, claimed_at = NULL, heartbeat_at = NULL
            WHERE q.shard_id = p_shard_ids[i] AND q.resource_id = p_resource_ids[i]
              AND q.task_type = 'operate';
            PERFORM notify_gated('work_ready');
        ELSE
            DELETE FROM work_queue q
            WHERE q.shard_id = p_shard_ids[i] AND q.resource_id = p_resource_ids[i]
              AND q.task_type = 'operate';
        END IF;
        resource_id := p_resource_ids[i];
        claim_epoch := p_claim_epochs[i];
        RETURN NEXT;
    END LOOP;
END
$$;

-- ---------------------------------------------------------------------------------------
-- Spec history of roots (composed children are derived from their root's spec), kept to
-- the last converge.spec_history_keep generations (session setting, default 50).
-- ---------------------------------------------------------------------------------------

CREATE TABLE spec_versions (
    resource_id uuid        NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    generation  bigint      NOT NULL,
    spec        jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (resource_id, generation)
);

CREATE FUNCTION spec_versions_record() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_keep int := coalesce(nullif(current_setting('converge.spec_history_keep', true), '')::int, 50);
BEGIN
    INSERT INTO spec_versions (resource_id, generation, spec)
    VALUES (NEW.id, NEW.generation, NEW.spec)
    ON CONFLICT (resource_id, generation) DO UPDATE SET spec = EXCLUDED.spec, created_at = now();
    IF TG_OP = 'UPDATE' AND NEW.generation > v_keep THEN
        DELETE FROM spec_versions
        WHERE resource_id = NEW.id AND generation <= NEW.generation - v_keep;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER spec_versions_on_insert AFTER INSERT ON resources
    FOR EACH ROW WHEN (NEW.owner_id IS NULL)
    EXECUTE FUNCTION spec_versions_record();
CREATE TRIGGER spec_versions_on_update AFTER UPDATE OF spec ON resources
    FOR EACH ROW WHEN (NEW.owner_id IS NULL AND OLD.spec IS DISTINCT FROM NEW.spec)
    EXECUTE FUNCTION spec_versions_record();

-- Roots that existed before history was kept start with their current spec.
INSERT INTO spec_versions (resource_id, generation, spec)
SELECT id, generation, spec FROM resources WHERE owner_id IS NULL
ON CONFLICT DO NOTHING;

-- Re-applies the spec recorded for p_generation as a new generation (a rollback is a spec
-- change like any other: it bumps the generation and reconciles). Returns the resulting
-- generation and whether the spec changed; no row when that generation is not recorded.
CREATE FUNCTION resource_rollback(p_id uuid, p_generation bigint)
RETURNS TABLE (generation bigint, changed boolean)
LANGUAGE plpgsql
AS $$
DECLARE
    v_spec jsonb;
    v_gen bigint;
BEGIN
    SELECT s.spec INTO v_spec FROM spec_versions s
    WHERE s.resource_id = p_id AND s.generation = p_generation;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE resources r SET spec = v_spec, updated_at = now()
    WHERE r.id = p_id AND r.spec IS DISTINCT FROM v_spec AND r.deletion_requested_at IS NULL
    RETURNING r.generation INTO v_gen;
    IF v_gen IS NOT NULL THEN
        PERFORM schedule_eligible(ARRAY[p_id]);
        RETURN QUERY SELECT v_gen, true;
        RETURN;
    END IF;
    RETURN QUERY SELECT r.generation, false FROM resources r WHERE r.id = p_id;
END
$$;

-- ---------------------------------------------------------------------------------------
-- Kind versions: a resource flipped to another version keeps its id and reconciles again
-- under the new version's handler (a version change is a new generation).
-- ---------------------------------------------------------------------------------------

CREATE TRIGGER resources_bump_generation_on_version BEFORE UPDATE OF kind_version ON resources
    FOR EACH ROW WHEN (OLD.kind_version IS DISTINCT FROM NEW.kind_version)
    EXECUTE FUNCTION resources_bump_generation();

-- The gate again, now re-pointing a queued row to the resource's current kind version too.
CREATE OR REPLACE FUNCTION schedule_eligible(p_ids uuid[]) RETURNS int
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
    LEFT JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version
    WHERE r.id = ANY (p_ids)
      AND r.generation > r.synced_gen
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

-- The compose apply, with the prune moved after the edge replacement and going through the
-- ordered teardown.
CREATE OR REPLACE FUNCTION apply_compose_result(p_root uuid, p_lease uuid, p_epoch bigint, p_generation bigint,
                                     p_children jsonb, p_edges jsonb, p_configs jsonb,
                                     p_apply_edges boolean, p_apply_configs boolean)
RETURNS text
LANGUAGE plpgsql
SET client_min_messages = warning
AS $$
DECLARE
    v_root resources%ROWTYPE;
    v_top uuid;
    v_bad record;
    v_changed uuid[];
    v_edge jsonb;
    v_gone uuid;
    v_marked uuid[] := '{}';
BEGIN
    PERFORM 1 FROM work_queue
    WHERE resource_id = p_root AND task_type = 'reconcile' AND shard_id = shard_of(p_root)
      AND lease_token = p_lease AND claim_epoch = p_epoch
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'stale';
    END IF;
    SELECT * INTO v_root FROM resources WHERE id = p_root FOR UPDATE;
    v_top := coalesce(v_root.root_id, v_root.id);

    CREATE TEMP TABLE IF NOT EXISTS compose_children (
        kind text, kind_version int, name text, spec jsonb, labels jsonb,
        PRIMARY KEY (kind, name)
    ) ON COMMIT DELETE ROWS;
    TRUNCATE compose_children;
    INSERT INTO compose_children
    SELECT c.kind, c.kind_version, c.name, coalesce(c.spec, '{}'), coalesce(c.labels, '{}')
    FROM jsonb_to_recordset(coalesce(p_children, '[]'))
         AS c(kind text, kind_version int, name text, spec jsonb, labels jsonb);

    SELECT d.kind, d.kind_version, d.name INTO v_bad FROM compose_children d
    LEFT JOIN kind_manifest m ON m.kind = d.kind AND m.kind_version = d.kind_version
    WHERE m.kind IS NULL LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'child %/% has unregistered kind % version %', v_bad.kind, v_bad.name, v_bad.kind, v_bad.kind_version;
    END IF;
    SELECT r.kind, r.name INTO v_bad FROM compose_children d
    JOIN resources r ON r.kind = d.kind AND r.name = d.name
    WHERE r.owner_id IS DISTINCT FROM p_root LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'child %/% already exists and is not owned by %/%', v_bad.kind, v_bad.name, v_root.kind, v_root.name;
    END IF;

    -- Lock the existing children in id order (the drainers' order) before touching them.
    PERFORM 1 FROM resources WHERE owner_id = p_root ORDER BY id FOR UPDATE;

    -- Substitute value flows from upstreams' current status into the desired specs, so a
    -- recompose that changes nothing compares equal.
    IF p_apply_edges THEN
        -- Only edges whose upstream already exists with a status can substitute anything
        -- (a fresh compose has none), and each lookup hits the temp table's key.
        FOR v_edge IN SELECT e.value FROM jsonb_array_elements(coalesce(p_edges, '[]')) e
                      JOIN resources u ON u.kind = e.value->'to'->>'kind'
                                      AND u.name = e.value->'to'->>'name'
                                      AND u.status IS NOT NULL
                      WHERE jsonb_array_length(coalesce(e.value->'values', '[]')) > 0 LOOP
            UPDATE compose_children d
            SET spec = apply_value_flows(
                    d.spec,
                    (SELECT jsonb_agg(jsonb_build_object('dep_field', v->>'dependent_field',
                                                         'src_field', v->>'source_field'))
                     FROM jsonb_array_elements(v_edge->'values') v),
                    (SELECT u.status FROM resources u
                     WHERE u.kind = v_edge->'to'->>'kind' AND u.name = v_edge->'to'->>'name'))
            WHERE d.kind = v_edge->'from'->>'kind' AND d.name = v_edge->'from'->>'name';
        END LOOP;
    END IF;

    WITH fresh AS (
        SELECT gen_random_uuid() AS id, d.* FROM compose_children d
    ), up AS (
        INSERT INTO resources AS r (id, kind, kind_version, name, owner_id, root_id, shard_id, spec, labels)
        SELECT f.id, f.kind, f.kind_version, f.name, p_root, v_top, shard_of(f.id), f.spec, f.labels
        FROM fresh f
        ORDER BY f.kind, f.name
        ON CONFLICT (kind, name) DO UPDATE
            SET spec = EXCLUDED.spec,
                labels = EXCLUDED.labels,
                kind_version = EXCLUDED.kind_version,
                frozen_until = CASE WHEN r.frozen_until = 'infinity' THEN r.frozen_until END,
                updated_at = now()
            WHERE r.owner_id = p_root
              AND (r.spec IS DISTINCT FROM EXCLUDED.spec OR r.labels IS DISTINCT FROM EXCLUDED.labels
                   OR r.kind_version <> EXCLUDED.kind_version
                   OR (r.frozen_until IS NOT NULL AND r.frozen_until <> 'infinity'))
        RETURNING r.id
    )
    SELECT array_agg(id) INTO v_changed FROM up;

    IF p_apply_edges THEN
        CREATE TEMP TABLE IF NOT EXISTS compose_edges (
            dependent_id uuid, dependency_id uuid, value_flows jsonb
        ) ON COMMIT DELETE ROWS;
        TRUNCATE compose_edges;
        INSERT INTO compose_edges
        SELECT DISTINCT ON (a.id, b.id) a.id, b.id,
               coalesce((SELECT jsonb_agg(jsonb_build_object('dep_field', v->>'dependent_field',
                                                             'src_field', v->>'source_field'))
                         FROM jsonb_array_elements(coalesce(e.value->'values', '[]')) v), '[]')
        FROM jsonb_array_elements(coalesce(p_edges, '[]')) e
        JOIN resources a ON a.kind = e.value->'from'->>'kind' AND a.name = e.value->'from'->>'name'
                        AND a.owner_id = p_root
        JOIN resources b ON b.kind = e.value->'to'->>'kind' AND b.name = e.value->'to'->>'name'
                        AND b.owner_id = p_root;
        DELETE FROM resource_deps d
        WHERE d.owner_id = p_root
          AND NOT EXISTS (SELECT 1 FROM compose_edges c
                          WHERE c.dependent_id = d.dependent_id AND c.dependency_id = d.dependency_id);
        INSERT INTO resource_deps AS d (dependent_id, dependency_id, owner_id, value_flows)
        SELECT dependent_id, dependency_id, p_root, value_flows FROM compose_edges
        ORDER BY dependent_id, dependency_id
        ON CONFLICT (dependent_id, dependency_id) DO UPDATE
            SET value_flows = EXCLUDED.value_flows, owner_id = EXCLUDED.owner_id
            WHERE (d.value_flows, d.owner_id) IS DISTINCT FROM (EXCLUDED.value_flows, EXCLUDED.owner_id);
    END IF;

    IF p_apply_configs THEN
        SELECT c.name INTO v_bad FROM jsonb_to_recordset(coalesce(p_configs, '[]')) AS c(name text)
        JOIN providerconfigs pc ON pc.name = c.name
        WHERE pc.owner_id IS DISTINCT FROM p_root LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'provider config % already exists and is not owned by %/%', v_bad.name, v_root.kind, v_root.name;
        END IF;
        DELETE FROM providerconfigs pc
        WHERE pc.owner_id = p_root
          AND pc.name NOT IN (SELECT c.name FROM jsonb_to_recordset(coalesce(p_configs, '[]')) AS c(name text));
        INSERT INTO providerconfigs AS pc (name, kind, kind_version, is_default, spec, owner_id)
        SELECT c.name, c.kind, c.kind_version, coalesce(c.is_default, false), coalesce(c.spec, '{}'), p_root
        FROM jsonb_to_recordset(coalesce(p_configs, '[]'))
             AS c(name text, kind text, kind_version int, is_default boolean, spec jsonb)
        ON CONFLICT (name) DO UPDATE
            SET kind = EXCLUDED.kind, kind_version = EXCLUDED.kind_version,
                is_default = EXCLUDED.is_default, spec = EXCLUDED.spec, updated_at = now()
            WHERE (pc.kind, pc.kind_version, pc.is_default, pc.spec)
                  IS DISTINCT FROM (EXCLUDED.kind, EXCLUDED.kind_version, EXCLUDED.is_default, EXCLUDED.spec);
    END IF;

    -- Vanished children: orphan for the kind's grace window, or tear down now through the
    -- ordered soft delete (finalizer kinds run their teardown; the rest go as soon as nothing
    -- hangs below them). Runs after the edges are replaced, so a desired sibling that no
    -- longer depends on a dropped child is not swept into its teardown tree. Quarantined
    -- children are left alone (a human set them aside); deleting ones are already going.
    UPDATE resources r SET frozen_until = now() + make_interval(secs => kc.orphan_grace_secs),
                           updated_at = now()
    FROM kind_config kc
    WHERE r.owner_id = p_root AND r.frozen_until IS NULL AND r.deletion_requested_at IS NULL
      AND kc.kind = r.kind AND kc.kind_version = r.kind_version AND kc.orphan_grace_secs > 0
      AND NOT EXISTS (SELECT 1 FROM compose_children d WHERE d.kind = r.kind AND d.name = r.name);
    FOR v_gone IN SELECT r.id FROM resources r
                  WHERE r.owner_id = p_root AND r.frozen_until IS NULL
                    AND r.deletion_requested_at IS NULL
                    AND NOT EXISTS (SELECT 1 FROM compose_children d
                                    WHERE d.kind = r.kind AND d.name = r.name)
                  ORDER BY r.id LOOP
        v_marked := v_marked || teardown_mark(v_gone);
    END LOOP;
    IF cardinality(v_marked) > 0 THEN
        PERFORM teardown_advance(v_marked);
    END IF;

    UPDATE resources SET composed_gen = greatest(composed_gen, p_generation) WHERE id = p_root;
    IF v_changed IS NOT NULL THEN
        PERFORM schedule_eligible(v_changed);
    END IF;
    RETURN 'ok';
END
$$;

