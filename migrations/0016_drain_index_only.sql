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
-- outbox_pop is the exception it was in 0012: the outbox is small and churning, and popping
-- it is a scan-and-sort, so it keeps sequential scans even when the drain calls it.
--
-- One statement of the cascade needed more than settings: finding the dependents of a batch
-- filtered `resource_deps` by `dependency_id = ANY (ids)`, which the planner answered with a
-- whole-index scan comparing every edge with every id of the batch (auto_explain at 100,000
-- children: 50 ms per batch, 4.6 s per run). It now joins the batch's ids to the edges, one
-- probe of idx_resource_deps_dependency per id.

ALTER FUNCTION drain_outbox_batch(int, smallint, smallint) SET enable_seqscan = off SET jit = off;
ALTER FUNCTION outbox_pop(int, smallint, smallint) SET enable_seqscan = on;
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
