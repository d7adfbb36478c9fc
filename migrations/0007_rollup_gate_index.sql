-- The rollup gate's "is anything stuck?" probe must not scan: a partial index over rows that
-- are behind and failed or set aside (empty on a healthy fleet), and one probe per branch
-- (top-level root by root_id, nested composite by owner_id). Forward-only.

CREATE INDEX idx_resources_root_stuck ON resources (root_id)
    WHERE synced_gen < generation AND (failure_gen = generation OR frozen_until IS NOT NULL);
CREATE INDEX idx_resources_owner_stuck ON resources (owner_id)
    WHERE synced_gen < generation AND (failure_gen = generation OR frozen_until IS NOT NULL);

CREATE OR REPLACE FUNCTION has_unsettled_descendants(p_id uuid, p_root_id uuid) RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF p_root_id IS NULL THEN
        IF NOT EXISTS (SELECT 1 FROM resources d
                       WHERE d.root_id = p_id AND d.synced_gen < d.generation
                         AND d.failure_gen <> d.generation AND d.frozen_until IS NULL
                         AND d.deletion_requested_at IS NULL) THEN
            RETURN false;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM resources d
                       WHERE d.root_id = p_id AND d.synced_gen < d.generation
                         AND (d.failure_gen = d.generation OR d.frozen_until IS NOT NULL)) THEN
            RETURN true;
        END IF;
    ELSE
        IF NOT EXISTS (SELECT 1 FROM resources d
                       WHERE d.owner_id = p_id AND d.synced_gen < d.generation
                         AND d.failure_gen <> d.generation AND d.frozen_until IS NULL
                         AND d.deletion_requested_at IS NULL) THEN
            RETURN false;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM resources d
                       WHERE d.owner_id = p_id AND d.synced_gen < d.generation
                         AND (d.failure_gen = d.generation OR d.frozen_until IS NOT NULL)) THEN
            RETURN true;
        END IF;
    END IF;
    -- Something is stuck: walk the edges from it; only rows not downstream of it count.
    RETURN EXISTS (
        WITH RECURSIVE stuck(id) AS (
            SELECT d.id FROM resources d
            WHERE (d.root_id = p_id OR d.owner_id = p_id) AND d.synced_gen < d.generation
              AND (d.failure_gen = d.generation OR d.frozen_until IS NOT NULL)
            UNION
            SELECT e.dependent_id FROM resource_deps e JOIN stuck s ON e.dependency_id = s.id
        )
        SELECT 1 FROM resources d
        WHERE (CASE WHEN p_root_id IS NULL THEN d.root_id = p_id ELSE d.owner_id = p_id END)
          AND d.synced_gen < d.generation AND d.failure_gen <> d.generation
          AND d.frozen_until IS NULL AND d.deletion_requested_at IS NULL
          AND d.id NOT IN (SELECT id FROM stuck));
END
$$;
