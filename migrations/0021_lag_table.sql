-- converge: the rows behind their spec live in a narrow table of their own, so that updating
-- a resource is a HOT update. Forward-only.
--
-- Five partial indexes of `resources` (lagging, failed, root_unsettled, root_stuck,
-- owner_stuck) named `generation`, `synced_gen` and `failure_gen` in their predicates. A
-- column named by any index, predicate included, makes every update that changes it a
-- non-HOT update: a new entry in every index of the table (primary key, (kind, name),
-- created, root, owner, ...). Syncing a row changes synced_gen and a value flow changes
-- generation, so every reconcile of every child paid that, about 1.7 times. On a copy of a
-- 20,000-child bench database, 4,000 rows: a sync 100-145 ms with those indexes, 45-75 ms
-- without them (this table kept by the trigger below included); a value flow 137-236 ms
-- against 70-92 ms. 83% of the updates were HOT without them, none with them. In a whole
-- 20,000-child bench run: 35 of 33,360 updates of resources were HOT before, 19,105 after.
-- (A fillfactor of 70 made 26,810 HOT, but spread each composite's subtree over more pages:
-- rollup p50 under load at 100,000 children went from 120-160 ms to 190-215 ms. The table
-- keeps its 85.)
--
-- resource_lag holds exactly the rows with synced_gen < generation (their root, owner and
-- shard, and whether they are unsettled or stuck in the rollup gate's sense), written by
-- statement triggers in the same transaction as the change, so every reader sees the two
-- tables agree. Its indexes are what the partial indexes were: the rollup gate's probes
-- (has_unsettled_descendants) and the reaper's catch-up (requeue_failed_and_pending) read it.
-- idx_resources_failed had no reader left and goes.
--
-- Also: resource_deps.owner_id loses its foreign key. It cost a lookup and a row lock of the
-- composite per edge and guarded nothing: an edge's owner is its dependent's owner, so a
-- deleted owner's edges go with its children (resources.owner_id and resource_deps.
-- dependent_id both cascade).

-- Keyed by (shard_id, id): the reaper reads a shard range by the key's prefix, and every
-- other reader and writer knows a row's shard.
CREATE TABLE resource_lag (
    shard_id smallint NOT NULL,
    id uuid NOT NULL,
    root_id uuid,
    owner_id uuid,
    -- Still progressing: not failed at this generation, not set aside, not being deleted.
    unsettled boolean NOT NULL,
    -- Failed at this generation, or set aside (orphaned / quarantined).
    stuck boolean NOT NULL,
    -- When it fell behind (kept while its flags move). Every engine write that puts a row
    -- behind also sets its updated_at, which is therefore never earlier, so the reaper skips
    -- the rows behind for less than its retry window here, without reading resources (a row
    -- put behind some other way would only be taken one retry window later).
    behind_since timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (shard_id, id)
);
CREATE INDEX idx_resource_lag_root_unsettled ON resource_lag (root_id) WHERE unsettled;
CREATE INDEX idx_resource_lag_root_stuck ON resource_lag (root_id) WHERE stuck;
CREATE INDEX idx_resource_lag_owner_stuck ON resource_lag (owner_id) WHERE stuck;

-- The gate flags of a row behind, in one place (SQL functions simple enough to be inlined).
CREATE FUNCTION lag_unsettled(p_failure_gen bigint, p_generation bigint,
                              p_frozen_until timestamptz, p_deletion_requested_at timestamptz)
RETURNS boolean LANGUAGE sql IMMUTABLE
AS $$ SELECT p_failure_gen <> p_generation AND p_frozen_until IS NULL
             AND p_deletion_requested_at IS NULL $$;
CREATE FUNCTION lag_stuck(p_failure_gen bigint, p_generation bigint, p_frozen_until timestamptz)
RETURNS boolean LANGUAGE sql IMMUTABLE
AS $$ SELECT p_failure_gen = p_generation OR p_frozen_until IS NOT NULL $$;

-- The rows behind today.
INSERT INTO resource_lag (shard_id, id, root_id, owner_id, unsettled, stuck, behind_since)
SELECT r.shard_id, r.id, r.root_id, r.owner_id,
       lag_unsettled(r.failure_gen, r.generation, r.frozen_until, r.deletion_requested_at),
       lag_stuck(r.failure_gen, r.generation, r.frozen_until),
       r.updated_at
FROM resources r WHERE r.synced_gen < r.generation;

-- New rows: a resource is created behind (generation 1, synced 0) unless written otherwise.
CREATE FUNCTION resource_lag_on_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO resource_lag (shard_id, id, root_id, owner_id, unsettled, stuck)
    SELECT n.shard_id, n.id, n.root_id, n.owner_id,
           lag_unsettled(n.failure_gen, n.generation, n.frozen_until, n.deletion_requested_at),
           lag_stuck(n.failure_gen, n.generation, n.frozen_until)
    FROM lag_new n WHERE n.synced_gen < n.generation;
    RETURN NULL;
END
$$;

-- Updated rows: caught up -> out; behind -> in, with its flags (written only when they moved,
-- so a status update of a row still behind writes nothing here).
CREATE FUNCTION resource_lag_on_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM resource_lag l USING lag_new n
    WHERE l.shard_id = n.shard_id AND l.id = n.id AND n.synced_gen >= n.generation;
    INSERT INTO resource_lag AS l (shard_id, id, root_id, owner_id, unsettled, stuck)
    SELECT n.shard_id, n.id, n.root_id, n.owner_id,
           lag_unsettled(n.failure_gen, n.generation, n.frozen_until, n.deletion_requested_at),
           lag_stuck(n.failure_gen, n.generation, n.frozen_until)
    FROM lag_new n WHERE n.synced_gen < n.generation
    ORDER BY n.shard_id, n.id
    ON CONFLICT (shard_id, id) DO UPDATE
        SET root_id = EXCLUDED.root_id, owner_id = EXCLUDED.owner_id,
            unsettled = EXCLUDED.unsettled, stuck = EXCLUDED.stuck
        WHERE (l.root_id, l.owner_id, l.unsettled, l.stuck)
              IS DISTINCT FROM (EXCLUDED.root_id, EXCLUDED.owner_id, EXCLUDED.unsettled, EXCLUDED.stuck);
    RETURN NULL;
END
$$;

CREATE FUNCTION resource_lag_on_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM resource_lag l USING lag_old o WHERE l.shard_id = o.shard_id AND l.id = o.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER resource_lag_on_insert AFTER INSERT ON resources
    REFERENCING NEW TABLE AS lag_new FOR EACH STATEMENT EXECUTE FUNCTION resource_lag_on_insert();
CREATE TRIGGER resource_lag_on_update AFTER UPDATE ON resources
    REFERENCING NEW TABLE AS lag_new FOR EACH STATEMENT EXECUTE FUNCTION resource_lag_on_update();
CREATE TRIGGER resource_lag_on_delete AFTER DELETE ON resources
    REFERENCING OLD TABLE AS lag_old FOR EACH STATEMENT EXECUTE FUNCTION resource_lag_on_delete();

DROP INDEX idx_resources_lagging;
DROP INDEX idx_resources_failed;
DROP INDEX idx_resources_root_unsettled;
DROP INDEX idx_resources_root_stuck;
DROP INDEX idx_resources_owner_stuck;

ALTER TABLE resource_deps DROP CONSTRAINT resource_deps_owner_id_fkey;

-- As in 0007, probing resource_lag instead of the partial indexes. A nested composite's
-- unsettled probe reads its direct children by owner (idx_resources_owner_created), as
-- before: there was never a partial index for it.
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

-- As in 0002/0017, the candidates read from resource_lag (the rows behind) of the shards.
-- During a bulk apply nearly every row behind is recent: the behind_since pre-filter drops
-- them in the narrow table (at 100,000 children the old scan, a probe of resources per row
-- behind, took 240-560 ms a tick while skipping them all).
CREATE OR REPLACE FUNCTION requeue_failed_and_pending(p_lo smallint, p_hi smallint,
                                                      p_retry_after interval, p_limit int)
RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids uuid[];
BEGIN
    SELECT array_agg(r.id) INTO v_ids
    FROM (
        SELECT r.id FROM resource_lag l
        JOIN resources r ON r.id = l.id
        WHERE l.shard_id BETWEEN p_lo AND p_hi
          AND l.behind_since < now() - p_retry_after
          AND r.synced_gen < r.generation
          AND r.deletion_requested_at IS NULL
          AND r.frozen_until IS NULL
          AND NOT (r.failure_terminal AND r.failure_gen = r.generation)
          AND r.updated_at < now() - p_retry_after
          AND NOT EXISTS (SELECT 1 FROM work_queue q
                          WHERE q.resource_id = r.id AND q.shard_id = r.shard_id
                            AND q.shard_id BETWEEN p_lo AND p_hi)
          AND NOT EXISTS (SELECT 1 FROM work_outbox o
                          WHERE o.resource_id = r.id AND o.shard_id = r.shard_id
                            AND o.shard_id BETWEEN p_lo AND p_hi)
        LIMIT p_limit
    ) r;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    RETURN schedule_eligible(v_ids);
END
$$;
