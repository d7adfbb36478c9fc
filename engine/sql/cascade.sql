-- The cascade: when a resource turns Ready or stops being Ready, its dependents and owners
-- are re-pended (value flows, the rollup gate's probe of unsettled descendants).
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction.

-- Whether a composite still has descendants in progress. Settled means synced, failed, or
-- stuck behind a failed or set-aside (orphaned/quarantined) upstream, transitively: such a
-- row cannot progress, so it must not hold the rollup back. A top-level root looks at its
-- whole tree (resource_lag by root_id); a nested composite at its direct children by owner
-- (idx_resources_owner_created), each of which waits on its own. The common cases stay cheap:
-- nothing behind (one probe), or nothing stuck (two probes); only with a stuck row does it
-- walk the edges.
CREATE OR REPLACE FUNCTION has_unsettled_descendants(p_id uuid, p_root_id uuid) RETURNS boolean
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off
AS $$
BEGIN
    IF p_root_id IS NULL THEN
        IF NOT EXISTS (SELECT 1 FROM resource_lag l WHERE l.root_id = p_id AND l.unsettled) THEN
            RETURN false;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM resource_lag l WHERE l.root_id = p_id AND l.stuck) THEN
            RETURN true;
        END IF;
    ELSE
        IF NOT EXISTS (SELECT 1 FROM resources d
                       WHERE d.owner_id = p_id AND d.synced_gen < d.generation
                         AND lag_unsettled(d.failure_gen, d.generation, d.frozen_until,
                                           d.deletion_requested_at)) THEN
            RETURN false;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM resource_lag l WHERE l.owner_id = p_id AND l.stuck) THEN
            RETURN true;
        END IF;
    END IF;
    -- Something is stuck: walk the edges from it; only rows not downstream of it count.
    RETURN EXISTS (
        WITH RECURSIVE stuck(id) AS (
            SELECT l.id FROM resource_lag l
            WHERE (l.root_id = p_id OR l.owner_id = p_id) AND l.stuck
            UNION
            SELECT e.dependent_id FROM resource_deps e JOIN stuck s ON e.dependency_id = s.id
        )
        SELECT 1 FROM resource_lag l
        WHERE (CASE WHEN p_root_id IS NULL THEN l.root_id = p_id ELSE l.owner_id = p_id END)
          AND l.unsettled
          AND l.id NOT IN (SELECT id FROM stuck));
END
$$;

-- Setting a child aside (or taking it back) changes what its composite's rollup sees:
-- re-evaluate the owners at once, like any other descendant transition.
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

-- Reactive scheduling after applied results: retries and mid-flight edits among the rows
-- still behind (p_behind: the rows of p_ids not synced after the batch; a synced row is never
-- eligible, so it is not probed); value flows into the dependents of rows that are now
-- synced (flowed_specs once per batch; a dependent's generation bumps only when a flowed
-- value changed) and their scheduling; the composites owning the batch's rows (p_owners,
-- read under the caller's lock, the drain's or work_complete's: their rollup gate is
-- re-evaluated, and each is armed in rollup_recheck for the straddle case). Joins by key
-- whatever the tables' size (the settings below).
DROP FUNCTION IF EXISTS cascade_on_ready_change(uuid[]);
CREATE OR REPLACE FUNCTION cascade_on_ready_change(p_ids uuid[], p_behind uuid[], p_owners uuid[])
RETURNS int
LANGUAGE plpgsql
SET random_page_cost = 1.1 SET enable_hashjoin = off SET enable_mergejoin = off
SET enable_seqscan = off SET jit = off
AS $$
DECLARE
    n int := 0;
    v_deps uuid[];
    v_owners uuid[];
BEGIN
    IF cardinality(p_behind) > 0 THEN
        n := schedule_eligible(p_behind);
    END IF;

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

    SELECT array_agg(DISTINCT o) INTO v_owners FROM unnest(p_owners) AS o WHERE o IS NOT NULL;
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
