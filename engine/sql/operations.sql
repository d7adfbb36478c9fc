-- Operations: a verb with an input, run by the kind's operation reaction as an operate
-- task; one operate queue row per resource serves its open operations oldest first.
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction.

-- Records an operation and makes sure an operate task is queued for the resource. Returns
-- the operation's uid, or NULL for an unknown or deleting resource.
CREATE OR REPLACE FUNCTION operation_request(p_id uuid, p_verb text, p_input jsonb, p_by text) RETURNS uuid
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
CREATE OR REPLACE FUNCTION operation_start(p_id uuid)
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
CREATE OR REPLACE FUNCTION operation_complete(p_resource_ids uuid[], p_shard_ids smallint[],
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
