-- Dynamic sharding: which shards each live member works, computed from `cluster_members`
-- alone (no leader, no lock, nothing stored), and the notice that tells every process to
-- re-read it.
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE; the trigger is dropped and re-created in the same
-- transaction.

-- The (kind, kind_version) pairs a member's worker list (`cluster_members.workers`, written
-- by its broker) has a ready, non-draining worker for, as a sorted, duplicate-free array of
-- [kind, kind_version]: what the member's broker can run now.
CREATE OR REPLACE FUNCTION member_claim_pairs(p_workers jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE
AS $$
    SELECT coalesce(jsonb_agg(p ORDER BY p->>0, (p->>1)::int), '[]'::jsonb)
    FROM (SELECT DISTINCT jsonb_build_array(k->>'kind', (k->>'kind_version')::int) AS p
          FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_workers) = 'array'
                                         THEN p_workers ELSE '[]'::jsonb END) w,
               jsonb_array_elements(CASE WHEN jsonb_typeof(w->'kinds') = 'array'
                                         THEN w->'kinds' ELSE '[]'::jsonb END) k
          WHERE coalesce((k->>'ready')::boolean, false)
            AND NOT coalesce((w->>'draining')::boolean, false)
            AND k ? 'kind' AND k ? 'kind_version') x
$$;

-- The tiling of the shards [0, 256) among the members live within p_liveness (stamped that
-- recently and not released), one row per (member, duty, pair): the members of a duty are
-- ranked by member_id and rank r of n gets [256*r/n, 256*(r+1)/n - 1], contiguous and
-- inclusive, every shard exactly once (with more than 256 members the extra ones get none).
--
--   duty 'control': members of role control or all. Their drainers, express drainer and
--                   reaper work their range.
--   duty 'broker':  members of role broker or all: the range shown for a broker in the
--                   cluster view (its share were every pair served everywhere).
--   duty 'claim':   per (kind, kind_version), the brokers (role broker or all) with a ready
--                   worker for it (member_claim_pairs). A broker claims a pair's tasks only in
--                   its range of that pair, so the brokers that can run a pair divide its
--                   shards between them, and the shards of a pair only one broker can run are
--                   all that broker's: a worker connected to any broker is served from every
--                   shard, with no relay between brokers.
--
-- A ROLE=all process is one member of every duty its role includes.
CREATE OR REPLACE FUNCTION cluster_tiling(p_liveness interval)
RETURNS TABLE (member_id text, duty text, kind text, kind_version int, lo smallint, hi smallint)
LANGUAGE sql STABLE
AS $$
    WITH live AS (
        SELECT m.member_id, m.role, m.workers FROM cluster_members m
        WHERE m.heartbeat_at >= now() - p_liveness AND m.released_at IS NULL
    ), duties AS (
        SELECT l.member_id, 'control' AS duty, NULL::text AS kind, NULL::int AS kind_version
        FROM live l WHERE l.role IN ('control', 'all')
        UNION ALL
        SELECT l.member_id, 'broker', NULL, NULL
        FROM live l WHERE l.role IN ('broker', 'all')
        UNION ALL
        SELECT l.member_id, 'claim', p->>0, (p->>1)::int
        FROM live l, jsonb_array_elements(member_claim_pairs(l.workers)) p
        WHERE l.role IN ('broker', 'all')
    ), ranked AS (
        SELECT d.member_id, d.duty, d.kind, d.kind_version,
               row_number() OVER w - 1 AS r,
               count(*) OVER (PARTITION BY d.duty, d.kind, d.kind_version) AS n
        FROM duties d
        WINDOW w AS (PARTITION BY d.duty, d.kind, d.kind_version ORDER BY d.member_id)
    )
    SELECT r.member_id, r.duty, r.kind, r.kind_version,
           (256 * r.r / r.n)::smallint, (256 * (r.r + 1) / r.n - 1)::smallint
    FROM ranked r
    WHERE 256 * (r.r + 1) / r.n - 1 >= 256 * r.r / r.n
    ORDER BY 2, 3, 4, 5
$$;

-- A join, a graceful leave, a member released as dead or back, or a change of the pairs a
-- broker can run: every process re-reads its ranges now. A heartbeat, or a worker list whose
-- in-flight counts moved, changes none of these and notifies nobody. A crash notifies nobody
-- either: each process's failsafe re-read (every second) sees the member leave the liveness
-- window.
CREATE OR REPLACE FUNCTION cluster_members_changed() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_OP = 'UPDATE'
       AND OLD.released_at IS NOT DISTINCT FROM NEW.released_at
       AND member_claim_pairs(OLD.workers) = member_claim_pairs(NEW.workers) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('cluster_changed', '');
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS cluster_members_changed ON cluster_members;
CREATE TRIGGER cluster_members_changed AFTER INSERT OR DELETE OR UPDATE OF workers, released_at
    ON cluster_members
    FOR EACH ROW EXECUTE FUNCTION cluster_members_changed();
