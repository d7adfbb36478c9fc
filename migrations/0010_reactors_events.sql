-- converge reactors, drift and events: reactor bindings and the LOGGED lifecycle outbox they
-- fill on real transitions (only when a binding matches), periodic resync of opted-in kinds,
-- and the resource_events log. Forward-only.

-- ---------------------------------------------------------------------------------------
-- Events: what happened to a resource, in order. Phase changes made by the drainer are
-- written in one statement per batch; every other phase change (apply, delete, quarantine,
-- orphaning) by a row trigger that stands aside while the drainer records its own.
-- ---------------------------------------------------------------------------------------

CREATE TABLE resource_events (
    id          bigserial   PRIMARY KEY,
    resource_id uuid        NOT NULL,
    kind        text        NOT NULL,
    name        text        NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    -- created | phase | deleted | operation
    type        text        NOT NULL,
    from_phase  text,
    to_phase    text,
    generation  bigint,
    message     text
);

-- Events outlive their resource (a delete is an event), so they are found by kind and name.
CREATE INDEX idx_resource_events_name ON resource_events (kind, name, id);
CREATE INDEX idx_resource_events_at ON resource_events (at);

CREATE FUNCTION resource_phase_event() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO resource_events (resource_id, kind, name, type, from_phase, to_phase, generation, message)
    VALUES (NEW.id, NEW.kind, NEW.name, 'phase', OLD.phase, NEW.phase, NEW.generation,
            CASE WHEN NEW.phase = 'Failed' OR NEW.phase = 'Deleting' THEN left(NEW.failure_message, 4096) END);
    RETURN NULL;
END
$$;

CREATE TRIGGER resource_phase_event AFTER UPDATE ON resources
    FOR EACH ROW
    WHEN (OLD.phase IS DISTINCT FROM NEW.phase
          AND coalesce(current_setting('converge.batch_events', true), '') <> 'on')
    EXECUTE FUNCTION resource_phase_event();

-- Removes events older than p_older_than, at most p_limit per call (the reaper's GC).
CREATE FUNCTION gc_resource_events(p_older_than interval, p_limit int) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    n int;
BEGIN
    DELETE FROM resource_events
    WHERE id IN (SELECT id FROM resource_events WHERE at < now() - p_older_than
                 ORDER BY at LIMIT p_limit);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- ---------------------------------------------------------------------------------------
-- Reactor bindings and the lifecycle outbox.
-- ---------------------------------------------------------------------------------------

CREATE TABLE reactor_bindings (
    name        text        PRIMARY KEY,
    watch_kind  text        NOT NULL,
    transition  text        NOT NULL
                            CHECK (transition IN ('created', 'synced', 'degraded', 'failed', 'deleted')),
    reactor     text        NOT NULL,
    label_match jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(label_match) = 'object'),
    enabled     boolean     NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (reactor <> watch_kind)
);

-- The emit gate's probe (EXISTS ... WHERE enabled AND transition = ...).
CREATE INDEX idx_reactor_bindings_transition ON reactor_bindings (transition, watch_kind) WHERE enabled;

-- One row per (transition, generation, binding): LOGGED, so a committed transition survives
-- a crash; each binding's delivery is acked (deleted) or retried on its own.
CREATE TABLE lifecycle_outbox (
    id           bigserial   PRIMARY KEY,
    shard_id     smallint    NOT NULL,
    resource_id  uuid        NOT NULL,
    transition   text        NOT NULL,
    generation   bigint      NOT NULL,
    binding_name text        NOT NULL,
    reactor_kind text        NOT NULL,
    -- The watched resource as it was at the transition (a deleted one is gone by delivery).
    resource     jsonb       NOT NULL,
    claim_token  uuid,
    claim_epoch  bigint      NOT NULL DEFAULT 1,
    broker_id    text,
    claimed_at   timestamptz,
    heartbeat_at timestamptz,
    attempts     int         NOT NULL DEFAULT 0,
    not_before   timestamptz NOT NULL DEFAULT '-infinity',
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (resource_id, transition, generation, binding_name)
);

CREATE INDEX idx_lifecycle_pending ON lifecycle_outbox (reactor_kind, shard_id, id) WHERE claim_token IS NULL;
CREATE INDEX idx_lifecycle_claimed ON lifecycle_outbox (heartbeat_at) WHERE claim_token IS NOT NULL;

-- Writes one delivery per matching enabled binding for each (transition, resource snapshot)
-- pair and wakes the reactor dispatchers. Callers gate on a cheap EXISTS first, so a fleet
-- with no bindings never gets here.
CREATE FUNCTION lifecycle_emit(p_transitions text[], p_rows jsonb[]) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    n int;
BEGIN
    INSERT INTO lifecycle_outbox (shard_id, resource_id, transition, generation, binding_name,
                                  reactor_kind, resource)
    SELECT (x.r->>'shard_id')::smallint, (x.r->>'id')::uuid, x.t, (x.r->>'generation')::bigint,
           b.name, b.reactor, x.r
    FROM unnest(p_transitions, p_rows) AS x(t, r)
    JOIN reactor_bindings b ON b.enabled AND b.transition = x.t AND b.watch_kind = x.r->>'kind'
                           AND (x.r->'labels') @> b.label_match
    ORDER BY 1, 2
    ON CONFLICT (resource_id, transition, generation, binding_name) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        -- Direct, not gated: low rate, and a gated wake could be swallowed inside a long drain.
        PERFORM pg_notify('lifecycle_ready', '');
    END IF;
    RETURN n;
END
$$;

-- The drainer's phase changes for one batch: one events INSERT, and lifecycle deliveries for
-- the synced / degraded / failed edges when a binding could match.
CREATE FUNCTION record_phase_changes(p_ids uuid[], p_old_phases text[]) RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO resource_events (resource_id, kind, name, type, from_phase, to_phase, generation, message)
    SELECT r.id, r.kind, r.name, 'phase', o.phase, r.phase, r.generation,
           CASE WHEN r.phase = 'Failed' THEN left(r.failure_message, 4096) END
    FROM unnest(p_ids, p_old_phases) AS o(id, phase)
    JOIN resources r ON r.id = o.id
    WHERE r.phase IS DISTINCT FROM o.phase
    ORDER BY r.id;
    IF EXISTS (SELECT 1 FROM reactor_bindings
               WHERE enabled AND transition IN ('synced', 'degraded', 'failed')) THEN
        PERFORM lifecycle_emit(array_agg(c.t), array_agg(c.snap))
        FROM (SELECT CASE r.phase WHEN 'Ready' THEN 'synced' WHEN 'Degraded' THEN 'degraded'
                                  ELSE 'failed' END AS t,
                     to_jsonb(r) AS snap
              FROM unnest(p_ids, p_old_phases) AS o(id, phase)
              JOIN resources r ON r.id = o.id
              WHERE r.phase IS DISTINCT FROM o.phase
                AND r.phase IN ('Ready', 'Degraded', 'Failed')) c
        HAVING count(*) > 0;
    END IF;
END
$$;

CREATE FUNCTION resources_created() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO resource_events (resource_id, kind, name, type, to_phase, generation)
    SELECT n.id, n.kind, n.name, 'created', n.phase, n.generation FROM new_rows n;
    IF EXISTS (SELECT 1 FROM reactor_bindings WHERE enabled AND transition = 'created') THEN
        PERFORM lifecycle_emit(array_agg('created'::text), array_agg(to_jsonb(n))) FROM new_rows n;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER resources_created AFTER INSERT ON resources
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION resources_created();

CREATE FUNCTION resources_deleted() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO resource_events (resource_id, kind, name, type, from_phase, generation)
    SELECT o.id, o.kind, o.name, 'deleted', o.phase, o.generation FROM old_rows o;
    IF EXISTS (SELECT 1 FROM reactor_bindings WHERE enabled AND transition = 'deleted') THEN
        PERFORM lifecycle_emit(array_agg('deleted'::text), array_agg(to_jsonb(o))) FROM old_rows o;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER resources_deleted AFTER DELETE ON resources
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION resources_deleted();

CREATE FUNCTION resource_operation_event() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO resource_events (resource_id, kind, name, type, generation, message)
    SELECT r.id, r.kind, r.name, 'operation', r.generation,
           left(format('%s %s%s', NEW.verb, NEW.state,
                       CASE WHEN NEW.error IS NOT NULL AND NEW.state <> 'succeeded'
                            THEN ': ' || NEW.error ELSE '' END), 4096)
    FROM resources r WHERE r.id = NEW.resource_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER resource_operation_event AFTER INSERT OR UPDATE OF state ON resource_operations
    FOR EACH ROW
    WHEN (NEW.state IN ('pending', 'succeeded', 'failed'))
    EXECUTE FUNCTION resource_operation_event();

-- A dispatcher's claim: up to p_limit deliveries for reactor kind p_reactor in a shard range.
CREATE FUNCTION lifecycle_claim(p_lo smallint, p_hi smallint, p_reactor text, p_limit int,
                                p_broker text)
RETURNS TABLE (id bigint, shard_id smallint, resource_id uuid, transition text,
               generation bigint, binding_name text, resource jsonb, claim_token uuid,
               claim_epoch bigint, attempts int)
LANGUAGE sql
AS $$
    WITH c AS (
        SELECT l.id FROM lifecycle_outbox l
        WHERE l.reactor_kind = p_reactor AND l.shard_id BETWEEN p_lo AND p_hi
          AND l.claim_token IS NULL AND l.not_before <= now()
        ORDER BY l.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE lifecycle_outbox l
    SET claim_token = gen_random_uuid(), claim_epoch = l.claim_epoch + 1, claimed_at = now(),
        heartbeat_at = now(), broker_id = p_broker, attempts = l.attempts + 1
    FROM c
    WHERE l.id = c.id
    RETURNING l.id, l.shard_id, l.resource_id, l.transition, l.generation, l.binding_name,
              l.resource, l.claim_token, l.claim_epoch, l.attempts
$$;

-- Delivery results, fenced on claim token and epoch: a success acks (deletes) the delivery;
-- a failure re-arms it with the retry backoff. Returns the accepted results.
CREATE FUNCTION lifecycle_complete(p_tokens uuid[], p_epochs bigint[], p_ok boolean[],
                                   p_errors text[])
RETURNS TABLE (claim_token uuid, claim_epoch bigint)
LANGUAGE plpgsql
AS $$
BEGIN
    RETURN QUERY
    WITH i AS (
        SELECT * FROM unnest(p_tokens, p_epochs, p_ok, p_errors) AS x(tok, ep, ok, err)
    ), acked AS (
        DELETE FROM lifecycle_outbox l USING i
        WHERE l.claim_token = i.tok AND l.claim_epoch = i.ep AND i.ok
        RETURNING i.tok, i.ep
    ), retried AS (
        UPDATE lifecycle_outbox l
        SET claim_token = NULL, claim_epoch = l.claim_epoch + 1, broker_id = NULL,
            claimed_at = NULL, heartbeat_at = NULL,
            not_before = now() + retry_backoff(l.attempts), last_error = left(i.err, 4096)
        FROM i
        WHERE l.claim_token = i.tok AND l.claim_epoch = i.ep AND NOT i.ok
        RETURNING i.tok, i.ep
    )
    SELECT * FROM acked UNION ALL SELECT * FROM retried;
END
$$;

-- Refreshes live claims (one statement per heartbeat frame).
CREATE FUNCTION lifecycle_heartbeat(p_tokens uuid[], p_epochs bigint[]) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    n int;
BEGIN
    UPDATE lifecycle_outbox l SET heartbeat_at = now()
    FROM unnest(p_tokens, p_epochs) AS x(tok, ep)
    WHERE l.claim_token = x.tok AND l.claim_epoch = x.ep;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Gives claims back at once (a stream ended): claimable again, epoch bumped.
CREATE FUNCTION lifecycle_release(p_tokens uuid[], p_epochs bigint[]) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    n int;
BEGIN
    UPDATE lifecycle_outbox l
    SET claim_token = NULL, claim_epoch = l.claim_epoch + 1, broker_id = NULL,
        claimed_at = NULL, heartbeat_at = NULL
    FROM unnest(p_tokens, p_epochs) AS x(tok, ep)
    WHERE l.claim_token = x.tok AND l.claim_epoch = x.ep;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Reaper: re-arms deliveries whose dispatcher stopped heartbeating (a dead broker or worker).
CREATE FUNCTION reap_stale_lifecycle(p_lo smallint, p_hi smallint, p_stale_after interval) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    n int;
BEGIN
    UPDATE lifecycle_outbox l
    SET claim_token = NULL, claim_epoch = l.claim_epoch + 1, broker_id = NULL,
        claimed_at = NULL, heartbeat_at = NULL
    WHERE l.shard_id BETWEEN p_lo AND p_hi
      AND l.claim_token IS NOT NULL
      AND l.heartbeat_at < now() - p_stale_after;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM pg_notify('lifecycle_ready', '');
    END IF;
    RETURN n;
END
$$;

-- ---------------------------------------------------------------------------------------
-- Resync: settled resources of an opted-in kind are re-pended without a generation bump
-- (trigger 'resync'), so a provider re-observes them and can flip health either way.
-- ---------------------------------------------------------------------------------------

ALTER TABLE resources ADD COLUMN observed_at timestamptz;

-- Re-pends up to p_limit settled rows of (kind, version) not observed for p_interval. With
-- p_recompose the composer runs again too (composed_gen is reset; the compose restores it).
CREATE FUNCTION requeue_for_resync(p_kind text, p_kind_version int, p_interval interval,
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

-- The drain, now recording its batch's phase changes (events and lifecycle deliveries).
CREATE OR REPLACE FUNCTION drain_outbox_batch(p_max int, p_lo smallint, p_hi smallint) RETURNS int
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
    v_advance boolean[];
    v_popped int;
    v_troubled uuid[];
    v_old_ids uuid[];
    v_old_phases text[];
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
           array_agg(health_ok ORDER BY resource_id),
           array_agg(advance ORDER BY resource_id)
    INTO v_popped, v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses, v_conds, v_health, v_advance
    FROM latest;

    IF v_ids IS NULL THEN
        RETURN coalesce(v_popped, 0);
    END IF;

    -- Lock in ascending id order, and note which rows carried a failure or ill health before
    -- this batch (only those can need a condition cleared).
    SELECT array_agg(s.id) FILTER (WHERE s.failure_gen <> 0 OR NOT s.health_ok),
           array_agg(s.id ORDER BY s.id), array_agg(s.phase ORDER BY s.id)
    INTO v_troubled, v_old_ids, v_old_phases
    FROM (SELECT r.id, r.failure_gen, r.health_ok, r.phase FROM resources r
          WHERE r.id = ANY (v_ids) ORDER BY r.id FOR UPDATE) s;

    -- This batch records its own phase changes in one statement (below); the per-row event
    -- trigger stands aside for it.
    PERFORM set_config('converge.batch_events', 'on', true);

    WITH o AS (
        SELECT * FROM unnest(v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses, v_health, v_advance)
            AS t(id, gen, ok, terminal, err, status, health, advance)
    ), n AS (
        SELECT r.id,
               CASE WHEN o.ok AND o.status IS NOT NULL THEN o.status ELSE r.status END AS status,
               CASE WHEN o.ok AND o.advance THEN greatest(r.synced_gen, o.gen) ELSE r.synced_gen END AS synced_gen,
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

    PERFORM set_config('converge.batch_events', 'off', true);
    IF v_old_ids IS NOT NULL THEN
        PERFORM record_phase_changes(v_old_ids, v_old_phases);
    END IF;

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

    -- Re-pend what is still behind (failed transiently, edited mid-flight), flow values to
    -- dependents, and re-evaluate the composites that own these rows.
    PERFORM cascade_on_ready_change(v_ids);

    RETURN v_popped;
END
$$;
