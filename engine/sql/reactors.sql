-- Reactors: the lifecycle outbox filled on real transitions when a reactor binding matches,
-- and a dispatcher's claim, heartbeat, release and completion of its deliveries.
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction.

-- Writes one delivery per matching enabled binding for each (transition, resource snapshot)
-- pair and wakes the reactor dispatchers. Callers gate on a cheap EXISTS first, so a fleet
-- with no bindings never gets here.
CREATE OR REPLACE FUNCTION lifecycle_emit(p_transitions text[], p_rows jsonb[]) RETURNS int
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

-- A dispatcher's claim: up to p_limit deliveries for reactor kind p_reactor in a shard range,
-- each with the live task deadline of the reactor's kind_config (of p_kind_version; without
-- one, the longest of its versions; 0 = none), as work_claim returns a kind's.
-- (The 5-argument form without the deadline is dropped; a caller of it still resolves here.)
DROP FUNCTION IF EXISTS lifecycle_claim(smallint, smallint, text, int, text);
CREATE OR REPLACE FUNCTION lifecycle_claim(p_lo smallint, p_hi smallint, p_reactor text, p_limit int,
                                p_broker text, p_kind_version int DEFAULT NULL)
RETURNS TABLE (id bigint, shard_id smallint, resource_id uuid, transition text,
               generation bigint, binding_name text, resource jsonb, claim_token uuid,
               claim_epoch bigint, attempts int, task_deadline_secs int)
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
              l.resource, l.claim_token, l.claim_epoch, l.attempts,
              (SELECT coalesce(max(kc.task_deadline_secs), 0) FROM kind_config kc
               WHERE kc.kind = p_reactor
                 AND (p_kind_version IS NULL OR kc.kind_version = p_kind_version))
$$;

-- Refreshes live claims (one statement per heartbeat frame).
CREATE OR REPLACE FUNCTION lifecycle_heartbeat(p_tokens uuid[], p_epochs bigint[]) RETURNS int
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
CREATE OR REPLACE FUNCTION lifecycle_release(p_tokens uuid[], p_epochs bigint[]) RETURNS int
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

-- Delivery results, fenced on claim token and epoch: a success acks (deletes) the delivery;
-- a failure re-arms it with the retry backoff and keeps its error (the binding's view shows
-- it). A failure whose error differs from the delivery's previous one is also a `delivery`
-- event of the watched resource, naming the binding, the attempt and the next retry, so a
-- reactor that cannot deliver is seen where the resource's history is read; a delivery that
-- keeps failing the same way adds no further event. Returns the accepted results.
CREATE OR REPLACE FUNCTION lifecycle_complete(p_tokens uuid[], p_epochs bigint[], p_ok boolean[],
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
    ), before AS (
        -- The failing deliveries as they were (every part of one statement sees one snapshot).
        SELECT l.id, l.last_error FROM lifecycle_outbox l JOIN i
            ON l.claim_token = i.tok AND l.claim_epoch = i.ep AND NOT i.ok
    ), retried AS (
        UPDATE lifecycle_outbox l
        SET claim_token = NULL, claim_epoch = l.claim_epoch + 1, broker_id = NULL,
            claimed_at = NULL, heartbeat_at = NULL,
            not_before = now() + retry_backoff(l.attempts), last_error = left(i.err, 4096)
        FROM i
        WHERE l.claim_token = i.tok AND l.claim_epoch = i.ep AND NOT i.ok
        RETURNING i.tok, i.ep, l.id, l.resource_id, l.resource, l.generation, l.binding_name,
                  l.transition, l.attempts, l.not_before, l.last_error
    ), noted AS (
        INSERT INTO resource_events (resource_id, kind, name, type, generation, message)
        SELECT r.resource_id, coalesce(r.resource->>'kind', ''), coalesce(r.resource->>'name', ''),
               'delivery', r.generation,
               left(format('reactor binding %s (%s) failed, attempt %s, retried at %s: %s',
                           r.binding_name, r.transition, r.attempts,
                           to_char(r.not_before AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                           r.last_error), 4096)
        FROM retried r JOIN before b ON b.id = r.id
        WHERE b.last_error IS DISTINCT FROM r.last_error
    )
    SELECT a.tok, a.ep FROM acked a UNION ALL SELECT r.tok, r.ep FROM retried r;
END
$$;

-- Reaper: re-arms deliveries whose dispatcher stopped heartbeating (a dead broker or worker).
CREATE OR REPLACE FUNCTION reap_stale_lifecycle(p_lo smallint, p_hi smallint, p_stale_after interval) RETURNS int
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
