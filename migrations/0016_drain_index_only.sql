-- converge: the drain, the cascade, the rollup gate and the teardown sweep probe by key,
-- whatever the table's size was when their plans were made. Forward-only.
--
-- 0014 did this for schedule_eligible. The same trap holds for every plpgsql function a
-- pooled connection first runs on a nearly empty database: after five calls PL/pgSQL keeps
-- a generic plan, made for the table as it was then, until something invalidates it
-- (autovacuum's next ANALYZE, a minute or more later). auto_explain on a 10,000-child
-- composite run showed the drain's cascade scanning all of `resources` in three statements
-- of every batch: the value-flow read in flowed_specs (18 ms per batch at 10,000 rows), the
-- lock of the dependents about to receive flowed values (5 ms) and the owners lookup
-- (3 ms); each grows with the table. Every statement in these functions reads a bounded
-- set of rows by key, so sequential scans are off for them (nested calls inherit the
-- setting) and JIT with them (see 0014: a disabled path's penalty cost must never make
-- PostgreSQL compile a statement).
--
-- outbox_pop, which 0012 left on default settings so that its delete could hash the picked
-- keys, met the same trap: a connection that cached its plan while the outbox held a few rows
-- kept a nested loop comparing every outbox row with every picked one, and once results
-- queued up each pop took 0.5-0.9 s (auto_explain, 100,000 children; it came and went from
-- run to run with the moment the plan was made). Like the claim in 0015 it now picks and
-- locks into arrays, then deletes by key: both steps walk the outbox's primary key, at any
-- size.
--
-- One statement of the cascade needed more than settings: finding the dependents of a batch
-- filtered `resource_deps` by `dependency_id = ANY (ids)`, which the planner answered with a
-- whole-index scan comparing every edge with every id of the batch (auto_explain at 100,000
-- children: 50 ms per batch, 4.6 s per run). It now joins the batch's ids to the edges, one
-- probe of idx_resource_deps_dependency per id.

ALTER FUNCTION drain_outbox_batch(int, smallint, smallint) SET enable_seqscan = off SET jit = off;
ALTER FUNCTION schedule_rollup(uuid[]) SET enable_seqscan = off SET jit = off;
ALTER FUNCTION has_unsettled_descendants(uuid, uuid) SET enable_seqscan = off SET jit = off;
ALTER FUNCTION sweep_deletable(smallint, smallint, int) SET enable_seqscan = off SET jit = off;

-- As in 0012, except the dependents lookup (see above) and the settings.
CREATE OR REPLACE FUNCTION cascade_on_ready_change(p_ids uuid[]) RETURNS int
LANGUAGE plpgsql
SET random_page_cost = 1.1 SET enable_hashjoin = off SET enable_mergejoin = off
SET enable_seqscan = off SET jit = off
AS $$
DECLARE
    n int;
    v_deps uuid[];
    v_owners uuid[];
BEGIN
    n := schedule_eligible(p_ids);

    SELECT array_agg(DISTINCT d.dependent_id) INTO v_deps
    FROM unnest(p_ids) AS b(id)
    JOIN resource_deps d ON d.dependency_id = b.id
    JOIN resources u ON u.id = d.dependency_id
    WHERE u.synced_gen >= u.generation;
    IF v_deps IS NOT NULL THEN
        PERFORM 1 FROM resources WHERE id = ANY (v_deps) ORDER BY id FOR UPDATE;
        UPDATE resources r SET spec = x.fspec, updated_at = now()
        FROM flowed_specs(v_deps) x
        WHERE r.id = x.id AND x.spec IS DISTINCT FROM x.fspec;
        n := n + schedule_eligible(v_deps);
    END IF;

    SELECT array_agg(DISTINCT o.id) INTO v_owners
    FROM resources r, LATERAL (VALUES (r.owner_id), (r.root_id)) AS o(id)
    WHERE r.id = ANY (p_ids) AND o.id IS NOT NULL;
    IF v_owners IS NOT NULL THEN
        n := n + schedule_eligible(v_owners) + schedule_rollup(v_owners);
        INSERT INTO rollup_recheck (root_id, shard_id)
        SELECT r.id, r.shard_id FROM resources r
        JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version AND kc.has_rollup
        WHERE r.id = ANY (v_owners);
    END IF;
    RETURN n;
END
$$;

-- As in 0012 (same rows, same order), picking first and deleting by key (see above).
CREATE OR REPLACE FUNCTION outbox_pop(p_max int, p_lo smallint, p_hi smallint)
RETURNS TABLE (popped int, ids uuid[], gens bigint[], oks boolean[], terminals boolean[],
               errs text[], statuses jsonb[], conds jsonb[], health boolean[], advances boolean[])
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET enable_material = off SET jit = off
AS $$
DECLARE
    v_ids bigint[];
    v_shards smallint[];
BEGIN
    SELECT array_agg(q.id), array_agg(q.shard_id) INTO v_ids, v_shards
    FROM (SELECT o.id, o.shard_id FROM work_outbox o
          WHERE o.shard_id BETWEEN p_lo AND p_hi
          ORDER BY o.id
          LIMIT p_max
          FOR UPDATE SKIP LOCKED) q;
    IF v_ids IS NULL THEN
        popped := 0;
        RETURN NEXT;
        RETURN;
    END IF;

    RETURN QUERY
    WITH popped AS (
        DELETE FROM work_outbox o
        USING unnest(v_ids, v_shards) AS k(id, shard_id)
        WHERE o.id = k.id AND o.shard_id = k.shard_id
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
    FROM latest;
END
$$;

-- ---------------------------------------------------------------------------------------
-- A descendant changing under a rollup in flight
-- ---------------------------------------------------------------------------------------
--
-- A composite's run reads its subtree once. When a descendant changes after that read and
-- before the run's result lands, re-pending the composite finds its queue row leased and
-- does nothing (schedule_rollup's ON CONFLICT DO NOTHING, schedule_eligible's gen-gate), so
-- the composite kept a rollup of the old subtree: quarantining a failed child while the
-- root's rollup ran left the root Degraded (seen as a flaky e2e test). The drain's cascade
-- arms every such root in rollup_recheck, but drain_rollup_rechecks consumed the recheck
-- even when the root was still in flight. Now a recheck stays while its root's run is
-- leased and is evaluated again on the drainer's next pass, after that run's result: the
-- composite is re-pended against the subtree as it is then. Setting a child aside or taking
-- it back (cascade_to_owners) arms the owners the same way when their run is in flight.
--
-- Most rechecks are armed by the very drain that pends the composite, which is claimed
-- milliseconds later: kept while that run is in flight, each would run every rollup twice
-- (measured: every root of a 100,000-child run rolled up again after it was Ready). So the
-- broker's read of a composite's subtree deletes, in the same statement, the rechecks of
-- that composite it can see: their changes were committed before the read's snapshot, so
-- the read sees them. Only a recheck committed after the read is left to re-pend the root.

CREATE INDEX idx_rollup_recheck_root ON rollup_recheck (root_id);

CREATE OR REPLACE FUNCTION drain_rollup_rechecks(p_max int, p_lo smallint, p_hi smallint) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids bigint[];
    v_roots uuid[];
    n int;
BEGIN
    SELECT array_agg(p.id), array_agg(DISTINCT p.root_id) INTO v_ids, v_roots
    FROM (SELECT q.id, q.root_id FROM rollup_recheck q
          WHERE q.shard_id BETWEEN p_lo AND p_hi
          ORDER BY q.id LIMIT p_max FOR UPDATE SKIP LOCKED) p;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    n := schedule_eligible(v_roots) + schedule_rollup(v_roots);
    -- Done with, unless the root's run is in flight (see above).
    DELETE FROM rollup_recheck q
    WHERE q.id = ANY (v_ids)
      AND NOT EXISTS (SELECT 1 FROM work_queue w
                      WHERE w.resource_id = q.root_id AND w.shard_id = q.shard_id
                        AND w.task_type = 'reconcile' AND w.lease_token IS NOT NULL);
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION cascade_to_owners(p_id uuid) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_owners uuid[];
BEGIN
    SELECT array_remove(ARRAY[owner_id, root_id], NULL) INTO v_owners FROM resources WHERE id = p_id;
    IF v_owners IS NOT NULL AND cardinality(v_owners) > 0 THEN
        PERFORM schedule_eligible(v_owners);
        PERFORM schedule_rollup(v_owners);
        INSERT INTO rollup_recheck (root_id, shard_id)
        SELECT r.id, r.shard_id FROM resources r
        JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version AND kc.has_rollup
        WHERE r.id = ANY (v_owners)
          AND EXISTS (SELECT 1 FROM work_queue w
                      WHERE w.resource_id = r.id AND w.shard_id = r.shard_id
                        AND w.task_type = 'reconcile' AND w.lease_token IS NOT NULL);
    END IF;
END
$$;
