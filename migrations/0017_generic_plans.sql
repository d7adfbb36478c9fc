-- converge: the engine's hot functions plan each statement once per connection, not once per
-- call. Forward-only.
--
-- A CPU profile of PostgreSQL through a 20,000-child composite run (perf, 2 cores) put 21% of
-- all samples under the planner; pg_stat_statements with track_planning counted 15,900 plans
-- in the run. PL/pgSQL caches a plan per statement, but in the default plan_cache_mode it keeps
-- re-planning for the call's parameter values whenever that custom plan looks cheaper than the
-- generic one, and with a shard range, a kind and arrays of ids as parameters it almost always
-- does: the teardown sweep planned 361 of its 380 calls (2.3 ms of planning for a 0.02 ms
-- statement), the claim's pick 219 of 1,184, its lease update 177 of 261, the outbox pop 206
-- of 271, the drain's reads and writes one plan per batch. Every one of these statements
-- reads or writes a bounded set of rows by key, so one plan serves all calls: they now use
-- force_generic_plan (schedule_eligible has since 0014).
--
-- A generic plan is made on a connection's first call, possibly while the tables are nearly
-- empty, and kept until something invalidates it: the 0014/0016 trap. So every function
-- given a generic plan here also runs with sequential scans and JIT off (most already did),
-- which keeps its statements on their keys whatever the table's size was at that moment.
-- Nested calls inherit the settings (the drain's cascade, flow, gate and event statements, and
-- the foreign-key checks its writes fire).
--
-- A generic plan of a statement over the partitioned queue or outbox prunes partitions when it
-- runs, not when it is made, so it locks all sixteen where a custom plan for one broker's
-- shard range locked only its own; those locks are shared and cheap next to planning sixteen
-- partitions on every call.
--
-- Measured (interleaved runs, 20,000 children): plans in the run 15,900 -> 11,100; CPU of
-- the whole run (converge, PostgreSQL, workers) 16.0-17.4 s -> 14.4-15.7 s; with the recheck
-- and sweep changes below, machine CPU per reconcile 472-554 us -> 433-497 us. Most re-plans left
-- are invalidations, not choices: a fresh database creates a temp schema for each connection's
-- first compose (its scratch tables), and creating a schema resets every cached plan of every
-- connection; that happens once per connection slot in a database's life.
--
-- Left on the default: the compose apply, whose statements join a temp table of the
-- composer's children (one plan per compose is cheap next to writing a thousand rows), and the
-- API's and reaper's statements, whose optional filters want plans for the values at hand.

ALTER FUNCTION work_claim(smallint, smallint, text, int, int, text)
    SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off;
ALTER FUNCTION work_claim_rows(smallint, smallint, text, int, int, text)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION work_complete(uuid[], smallint[], text[], uuid[], bigint[], boolean[], boolean[],
                             text[], jsonb[], jsonb[], boolean[], boolean[])
    SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off;
ALTER FUNCTION outbox_pop(int, smallint, smallint)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION drain_outbox_batch(int, smallint, smallint)
    SET plan_cache_mode = force_generic_plan;

-- The recheck's clean-up keeps a recheck while its root's run is leased: a probe of the
-- queue's key per recheck. Left to choose, the planner hashed (or materialised) every leased
-- queue row of all sixteen partitions instead, dead index entries included: 7.7 ms per pass
-- at the end of a 20,000-child run, against 0.2 ms probing by key.
ALTER FUNCTION drain_rollup_rechecks(int, smallint, smallint)
    SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off SET enable_material = off;

-- The teardown sweep runs after every drain pass and almost always finds nothing, yet each
-- run of its statement started a probe of all sixteen queue partitions (0.5 ms, one plan or
-- not: 13 us per reconciled child in a 20,000-child run). It now first asks the empty
-- partial index of deleting rows whether there is anything to sweep; otherwise as in 0009
-- (a replaced function takes the settings its definition states: 0016's, and one plan).
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

ALTER FUNCTION has_unsettled_descendants(uuid, uuid)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION schedule_rollup(uuid[])
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION notify_gated(text)
    SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off;
