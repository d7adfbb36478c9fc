-- The warm-up of a new connection: engine_warm_up() runs the hot path once on a resource of
-- its own (an apply, a claim, a completion that applies its plain result, a drain's pick and
-- apply) and takes all of it back, so the backend has planned those statements before it
-- serves anything (the converge process calls it from its pool's after_connect:
-- engine/src/db/mod.rs, `warm_up`).
--
-- Why: a backend plans each statement of an engine function the first time it runs it, and
-- the claim's and the drain's span the queue's 16 partitions. Cold, the first claim on a
-- connection took 10-13 ms against 0.8-1.3 warm, and the pool hands its connections out in
-- turn, so an idle system's first dozens of applies each met a cold one.
--
-- Nothing it does outlives it: the work runs in a block whose own exception rolls it back
-- (the plans stay, they belong to the backend), its kind and resource names are its
-- backend's own, it claims only its own kind, and the drain's picks run over an empty shard
-- range (never another's results). converge.warm_up keeps notify_gated from taking its
-- advisory lock or wake_state row meanwhile (a wake-up suppressed by a rolled-back winner
-- would be lost); the kind's NOTIFY is dropped with the rollback.
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE.

CREATE OR REPLACE FUNCTION engine_warm_up() RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_kind text := 'converge-warm-up-' || pg_backend_pid();
    v_id uuid;
    v_shard smallint;
    v_token uuid;
    v_epoch bigint;
BEGIN
    BEGIN
        PERFORM set_config('converge.warm_up', 'on', true);
        INSERT INTO kind_manifest (kind, kind_version, manifest)
        VALUES (v_kind, 1, jsonb_build_object('kind', v_kind, 'kind_version', 1, 'reactions',
                jsonb_build_array(jsonb_build_object('name', 'work', 'trigger', 'specChange',
                                                     'emits', jsonb_build_array('status')))));
        SELECT a.id INTO v_id
        FROM resource_apply_batch(ARRAY[v_kind], ARRAY[1], ARRAY['warm-up'], ARRAY['{}'::jsonb],
                                  ARRAY['{}'::jsonb], ARRAY[NULL::text]) a;
        SELECT c.shard_id, c.lease_token, c.claim_epoch INTO v_shard, v_token, v_epoch
        FROM work_claim(0::smallint, 255::smallint, v_kind, 1, 1, 'warm-up') c;
        PERFORM work_complete(ARRAY[v_id], ARRAY[v_shard], ARRAY['reconcile'], ARRAY[v_token],
                              ARRAY[v_epoch], ARRAY[true], ARRAY[false], ARRAY[NULL::text],
                              ARRAY['{}'::jsonb], ARRAY['[]'::jsonb], ARRAY[true], ARRAY[true]);
        -- lo > hi: the picks of both lanes, over no shard.
        PERFORM drain_outbox_batch(1, 1::smallint, 0::smallint, false);
        PERFORM drain_outbox_batch(1, 1::smallint, 0::smallint, true);
        PERFORM apply_results(ARRAY[v_id], ARRAY[1::bigint], ARRAY[true], ARRAY[false],
                              ARRAY[NULL::text], ARRAY['{}'::jsonb], ARRAY['[]'::jsonb],
                              ARRAY[true], ARRAY[true]);
        RAISE EXCEPTION USING ERRCODE = 'CVWUP', MESSAGE = 'warm-up done, rolled back';
    EXCEPTION WHEN SQLSTATE 'CVWUP' THEN
        NULL;
    END;
END
$$;
