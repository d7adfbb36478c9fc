-- Composition: a composer's result (children, edges, provider configs) applied to the
-- database in one transaction, fenced on the root's lease.
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction.

-- Applies a compose result in one transaction, fenced on the composing task's lease:
-- upserts new and changed children (owner/root stamped, value flows pre-substituted so an
-- identical recompose writes nothing), re-adopts orphaned ones, orphans (grace) vanished ones
-- and prunes them through the ordered teardown, replaces the root's edges (resolved through
-- the (kind, name) key) and configs, stamps composed_gen, stores the composer's status (when
-- it reported one) and schedules the children that changed. Returns 'ok', or 'stale' when
-- the lease is gone. Raises (SQLSTATE P0001) on a result that cannot be applied; the broker
-- turns that into a terminal failure.
--
-- The status is stored here, with the composed_gen stamp, because a claim cut short after
-- this write (a drain, a crash) is not composed again for this generation: the next claim's
-- rollup reads the composer's status from the row, not from the lost claim.
-- The 9-argument form (no p_status) is gone; p_status defaults to NULL so a broker of the
-- previous release still resolves its 9-argument call during a rolling upgrade.
DROP FUNCTION IF EXISTS apply_compose_result(uuid, uuid, bigint, bigint, jsonb, jsonb, jsonb, boolean, boolean);
CREATE OR REPLACE FUNCTION apply_compose_result(p_root uuid, p_lease uuid, p_epoch bigint, p_generation bigint,
                                     p_children jsonb, p_edges jsonb, p_configs jsonb,
                                     p_apply_edges boolean, p_apply_configs boolean,
                                     p_status jsonb DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SET client_min_messages = warning
AS $$
DECLARE
    v_root resources%ROWTYPE;
    v_top uuid;
    v_bad record;
    v_changed uuid[];
    v_edge jsonb;
    v_gone uuid;
    v_marked uuid[] := '{}';
BEGIN
    PERFORM 1 FROM work_queue
    WHERE resource_id = p_root AND task_type = 'reconcile' AND shard_id = shard_of(p_root)
      AND lease_token = p_lease AND claim_epoch = p_epoch
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'stale';
    END IF;
    SELECT * INTO v_root FROM resources WHERE id = p_root FOR UPDATE;
    v_top := coalesce(v_root.root_id, v_root.id);

    CREATE TEMP TABLE IF NOT EXISTS compose_children (
        kind text, kind_version int, name text, spec jsonb, labels jsonb,
        PRIMARY KEY (kind, name)
    ) ON COMMIT DELETE ROWS;
    TRUNCATE compose_children;
    INSERT INTO compose_children
    SELECT c.kind, c.kind_version, c.name, coalesce(c.spec, '{}'), coalesce(c.labels, '{}')
    FROM jsonb_to_recordset(coalesce(p_children, '[]'))
         AS c(kind text, kind_version int, name text, spec jsonb, labels jsonb);

    -- Hold off the deletion of the children's kind versions until this commits (kinds.sql);
    -- an unregistered one is named below with the child.
    PERFORM pg_advisory_xact_lock_shared(hashtext('converge.kind_version'),
                                         hashtext(d.kind || '/' || d.kind_version))
    FROM (SELECT DISTINCT c.kind, c.kind_version FROM compose_children c
          ORDER BY c.kind, c.kind_version) d;
    SELECT d.kind, d.kind_version, d.name INTO v_bad FROM compose_children d
    LEFT JOIN kind_manifest m ON m.kind = d.kind AND m.kind_version = d.kind_version
    WHERE m.kind IS NULL LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'child %/% has unregistered kind % version %', v_bad.kind, v_bad.name, v_bad.kind, v_bad.kind_version;
    END IF;
    SELECT r.kind, r.name INTO v_bad FROM compose_children d
    JOIN resources r ON r.kind = d.kind AND r.name = d.name
    WHERE r.owner_id IS DISTINCT FROM p_root LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'child %/% already exists and is not owned by %/%', v_bad.kind, v_bad.name, v_root.kind, v_root.name;
    END IF;

    -- Lock the existing children in id order (the drainers' order) before touching them.
    PERFORM 1 FROM resources WHERE owner_id = p_root ORDER BY id FOR UPDATE;

    -- Substitute value flows from upstreams' current status into the desired specs, so a
    -- recompose that changes nothing compares equal.
    IF p_apply_edges THEN
        -- Only edges whose upstream already exists with a status can substitute anything
        -- (a fresh compose has none), and each lookup hits the temp table's key.
        FOR v_edge IN SELECT e.value FROM jsonb_array_elements(coalesce(p_edges, '[]')) e
                      JOIN resources u ON u.kind = e.value->'to'->>'kind'
                                      AND u.name = e.value->'to'->>'name'
                                      AND u.status IS NOT NULL
                      WHERE jsonb_array_length(coalesce(e.value->'values', '[]')) > 0 LOOP
            UPDATE compose_children d
            SET spec = apply_value_flows(
                    d.spec,
                    (SELECT jsonb_agg(jsonb_build_object('dep_field', v->>'dependent_field',
                                                         'src_field', v->>'source_field'))
                     FROM jsonb_array_elements(v_edge->'values') v),
                    (SELECT u.status FROM resources u
                     WHERE u.kind = v_edge->'to'->>'kind' AND u.name = v_edge->'to'->>'name'))
            WHERE d.kind = v_edge->'from'->>'kind' AND d.name = v_edge->'from'->>'name';
        END LOOP;
    END IF;

    WITH fresh AS (
        SELECT uuid_v7() AS id, d.* FROM compose_children d
    ), up AS (
        INSERT INTO resources AS r (id, kind, kind_version, name, owner_id, root_id, shard_id, spec, labels)
        SELECT f.id, f.kind, f.kind_version, f.name, p_root, v_top, shard_of(f.id), f.spec, f.labels
        FROM fresh f
        ORDER BY f.kind, f.name
        ON CONFLICT (kind, name) DO UPDATE
            SET spec = EXCLUDED.spec,
                labels = EXCLUDED.labels,
                kind_version = EXCLUDED.kind_version,
                frozen_until = CASE WHEN r.frozen_until = 'infinity' THEN r.frozen_until END,
                updated_at = now()
            WHERE r.owner_id = p_root
              AND (r.spec IS DISTINCT FROM EXCLUDED.spec OR r.labels IS DISTINCT FROM EXCLUDED.labels
                   OR r.kind_version <> EXCLUDED.kind_version
                   OR (r.frozen_until IS NOT NULL AND r.frozen_until <> 'infinity'))
        RETURNING r.id
    )
    SELECT array_agg(id) INTO v_changed FROM up;

    IF p_apply_edges THEN
        CREATE TEMP TABLE IF NOT EXISTS compose_edge_ids (
            dependent_id uuid, dependency_id uuid, value_flows jsonb,
            PRIMARY KEY (dependent_id, dependency_id)
        ) ON COMMIT DELETE ROWS;
        TRUNCATE compose_edge_ids;
        INSERT INTO compose_edge_ids
        SELECT DISTINCT ON (a.id, b.id) a.id, b.id,
               coalesce((SELECT jsonb_agg(jsonb_build_object('dep_field', v->>'dependent_field',
                                                             'src_field', v->>'source_field'))
                         FROM jsonb_array_elements(coalesce(e.value->'values', '[]')) v), '[]')
        FROM jsonb_array_elements(coalesce(p_edges, '[]')) e
        JOIN resources a ON a.kind = e.value->'from'->>'kind' AND a.name = e.value->'from'->>'name'
        JOIN resources b ON b.kind = e.value->'to'->>'kind' AND b.name = e.value->'to'->>'name'
        -- Not `=`: see the top of this file.
        WHERE a.owner_id IS NOT DISTINCT FROM p_root AND b.owner_id IS NOT DISTINCT FROM p_root;
        DELETE FROM resource_deps d
        WHERE d.owner_id = p_root
          AND NOT EXISTS (SELECT 1 FROM compose_edge_ids c
                          WHERE c.dependent_id = d.dependent_id AND c.dependency_id = d.dependency_id);
        INSERT INTO resource_deps AS d (dependent_id, dependency_id, owner_id, value_flows)
        SELECT dependent_id, dependency_id, p_root, value_flows FROM compose_edge_ids
        ORDER BY dependent_id, dependency_id
        ON CONFLICT (dependent_id, dependency_id) DO UPDATE
            SET value_flows = EXCLUDED.value_flows, owner_id = EXCLUDED.owner_id
            WHERE (d.value_flows, d.owner_id) IS DISTINCT FROM (EXCLUDED.value_flows, EXCLUDED.owner_id);
    END IF;

    IF p_apply_configs THEN
        SELECT c.name INTO v_bad FROM jsonb_to_recordset(coalesce(p_configs, '[]')) AS c(name text)
        JOIN providerconfigs pc ON pc.name = c.name
        WHERE pc.owner_id IS DISTINCT FROM p_root LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'provider config % already exists and is not owned by %/%', v_bad.name, v_root.kind, v_root.name;
        END IF;
        DELETE FROM providerconfigs pc
        WHERE pc.owner_id = p_root
          AND pc.name NOT IN (SELECT c.name FROM jsonb_to_recordset(coalesce(p_configs, '[]')) AS c(name text));
        INSERT INTO providerconfigs AS pc (name, kind, kind_version, is_default, spec, owner_id)
        SELECT c.name, c.kind, c.kind_version, coalesce(c.is_default, false), coalesce(c.spec, '{}'), p_root
        FROM jsonb_to_recordset(coalesce(p_configs, '[]'))
             AS c(name text, kind text, kind_version int, is_default boolean, spec jsonb)
        ON CONFLICT (name) DO UPDATE
            SET kind = EXCLUDED.kind, kind_version = EXCLUDED.kind_version,
                is_default = EXCLUDED.is_default, spec = EXCLUDED.spec, updated_at = now()
            WHERE (pc.kind, pc.kind_version, pc.is_default, pc.spec)
                  IS DISTINCT FROM (EXCLUDED.kind, EXCLUDED.kind_version, EXCLUDED.is_default, EXCLUDED.spec);
    END IF;

    -- Vanished children: orphan for the kind's grace window, or tear down now through the
    -- ordered soft delete (finalizer kinds run their teardown; the rest go as soon as nothing
    -- hangs below them). Runs after the edges are replaced, so a desired sibling that no
    -- longer depends on a dropped child is not swept into its teardown tree. Quarantined
    -- children are left alone (a human set them aside); deleting ones are already going.
    UPDATE resources r SET frozen_until = now() + make_interval(secs => kc.orphan_grace_secs),
                           updated_at = now()
    FROM kind_config kc
    WHERE r.owner_id = p_root AND r.frozen_until IS NULL AND r.deletion_requested_at IS NULL
      AND kc.kind = r.kind AND kc.kind_version = r.kind_version AND kc.orphan_grace_secs > 0
      AND NOT EXISTS (SELECT 1 FROM compose_children d WHERE d.kind = r.kind AND d.name = r.name);
    FOR v_gone IN SELECT r.id FROM resources r
                  WHERE r.owner_id = p_root AND r.frozen_until IS NULL
                    AND r.deletion_requested_at IS NULL
                    AND NOT EXISTS (SELECT 1 FROM compose_children d
                                    WHERE d.kind = r.kind AND d.name = r.name)
                  ORDER BY r.id LOOP
        v_marked := v_marked || teardown_mark(v_gone);
    END LOOP;
    IF cardinality(v_marked) > 0 THEN
        PERFORM teardown_advance(v_marked);
    END IF;

    UPDATE resources SET composed_gen = greatest(composed_gen, p_generation),
                         status = coalesce(p_status, status)
    WHERE id = p_root;
    IF v_changed IS NOT NULL THEN
        PERFORM schedule_eligible(v_changed);
    END IF;
    RETURN 'ok';
END
$$;
