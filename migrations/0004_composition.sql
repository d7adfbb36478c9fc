-- converge composition: dependency edges with value flows, compose results applied in one
-- transaction, the rollup gate, reactive re-pend of dependents and composite roots, and the
-- straddle recheck queue. Forward-only.

-- Which pipeline stages a kind has, derived from its manifest (the core stays kind-blind:
-- it only reads these flags).
ALTER TABLE kind_config
    ADD COLUMN has_composer boolean NOT NULL DEFAULT false,
    ADD COLUMN has_rollup   boolean NOT NULL DEFAULT false;

CREATE FUNCTION manifest_has_reaction(m jsonb, p_trigger text, p_emit text) RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(m->'reactions', '[]')) r
                   WHERE r->>'trigger' = p_trigger AND coalesce(r->'emits', '[]') ? p_emit)
$$;

UPDATE kind_config kc
SET has_composer = manifest_has_reaction(m.manifest, 'specChange', 'children'),
    has_rollup = manifest_has_reaction(m.manifest, 'childrenSettled', 'status')
FROM kind_manifest m
WHERE m.kind = kc.kind AND m.kind_version = kc.kind_version;

CREATE OR REPLACE FUNCTION kind_manifest_seed_config() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO kind_config (kind, kind_version, max_inflight, task_deadline_secs,
                             resync_interval_secs, resync_recomposes, orphan_grace_secs,
                             max_transient_attempts, finalizer_name, has_composer, has_rollup)
    VALUES (NEW.kind, NEW.kind_version,
            coalesce((NEW.manifest->>'max_inflight')::int, 0),
            coalesce((NEW.manifest->>'task_deadline_secs')::int, 0),
            coalesce((NEW.manifest->>'resync_interval_secs')::int, 0),
            coalesce((NEW.manifest->>'resync_recomposes')::boolean, false),
            coalesce((NEW.manifest->>'orphan_grace_secs')::int, 0),
            coalesce((NEW.manifest->>'max_transient_attempts')::int, 0),
            nullif(NEW.manifest->>'finalizer_name', ''),
            manifest_has_reaction(NEW.manifest, 'specChange', 'children'),
            manifest_has_reaction(NEW.manifest, 'childrenSettled', 'status'))
    ON CONFLICT (kind, kind_version) DO UPDATE
        SET finalizer_name = EXCLUDED.finalizer_name,
            has_composer = EXCLUDED.has_composer,
            has_rollup = EXCLUDED.has_rollup
        WHERE (kind_config.finalizer_name, kind_config.has_composer, kind_config.has_rollup)
              IS DISTINCT FROM (EXCLUDED.finalizer_name, EXCLUDED.has_composer, EXCLUDED.has_rollup);
    PERFORM pg_notify('kind_manifest_changed', NEW.kind || '/' || NEW.kind_version);
    RETURN NULL;
END $$;

-- Edges between children of one composite: ordering plus value flows
-- ([{"dep_field": "/vpc_id", "src_field": "/vpc_id"}], upstream status -> dependent spec).
CREATE TABLE resource_deps (
    dependent_id  uuid  NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    dependency_id uuid  NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    owner_id      uuid  NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    value_flows   jsonb NOT NULL DEFAULT '[]',
    PRIMARY KEY (dependent_id, dependency_id),
    CHECK (dependent_id <> dependency_id)
);
CREATE INDEX idx_resource_deps_dependency ON resource_deps (dependency_id);
CREATE INDEX idx_resource_deps_owner ON resource_deps (owner_id);

-- The rollup gate's probe: descendants of a root still progressing. Empty when settled.
CREATE INDEX idx_resources_root_unsettled ON resources (root_id)
    WHERE synced_gen < generation AND failure_gen <> generation
      AND frozen_until IS NULL AND deletion_requested_at IS NULL;

-- Straddle close-out: one row per (drain, root) arming; a plain serial key so two
-- concurrent drains never wait on each other's arming row.
CREATE TABLE rollup_recheck (
    id       bigserial   PRIMARY KEY,
    root_id  uuid        NOT NULL,
    shard_id smallint    NOT NULL,
    armed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idx_rollup_recheck_shard ON rollup_recheck (shard_id, id);

-- A task may finish without advancing synced_gen (a composite waiting for its children).
ALTER TABLE work_outbox ADD COLUMN advance boolean NOT NULL DEFAULT true;

-- RFC 6901 pointer -> jsonb path. A bare field name is a one-segment pointer.
CREATE FUNCTION jsonptr_path(p text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT
AS $$
    SELECT coalesce(array_agg(replace(replace(seg, '~1', '/'), '~0', '~') ORDER BY ord), '{}')
    FROM unnest(string_to_array(substr(CASE WHEN left(p, 1) = '/' THEN p ELSE '/' || p END, 2), '/'))
         WITH ORDINALITY AS s(seg, ord)
$$;

-- Applies one edge's flows: each dep_field of `spec` gets src_field of `status` (null when
-- the upstream has not reported it). Only the last path segment is created if missing.
CREATE FUNCTION apply_value_flows(p_spec jsonb, p_flows jsonb, p_status jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    f jsonb;
    v_spec jsonb := p_spec;
BEGIN
    FOR f IN SELECT value FROM jsonb_array_elements(coalesce(p_flows, '[]')) LOOP
        CONTINUE WHEN f->>'dep_field' IS NULL OR f->>'src_field' IS NULL;
        v_spec := coalesce(
            jsonb_set(v_spec, jsonptr_path(f->>'dep_field'),
                      coalesce(p_status #> jsonptr_path(f->>'src_field'), 'null'::jsonb), true),
            v_spec);
    END LOOP;
    RETURN v_spec;
END
$$;

-- A dependent's spec with every incoming edge's flows applied from its upstreams' current
-- status.
CREATE FUNCTION flowed_spec(p_dependent uuid, p_spec jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    e record;
    v_spec jsonb := p_spec;
BEGIN
    FOR e IN SELECT d.value_flows, u.status
             FROM resource_deps d JOIN resources u ON u.id = d.dependency_id
             WHERE d.dependent_id = p_dependent AND jsonb_array_length(d.value_flows) > 0
             ORDER BY d.dependency_id LOOP
        v_spec := apply_value_flows(v_spec, e.value_flows, e.status);
    END LOOP;
    RETURN v_spec;
END
$$;

-- Whether a composite still has descendants in progress. Settled means synced, failed, or
-- stuck behind a failed or set-aside (orphaned/quarantined) upstream, transitively: such a
-- row cannot progress, so it must not hold the rollup back. A top-level root looks at its
-- whole tree (root_id); a nested composite at its direct children, each of which waits on its
-- own. The common cases stay cheap: nothing behind (one probe), or nothing stuck (two
-- probes); only with a stuck row does it walk the edges.
CREATE FUNCTION has_unsettled_descendants(p_id uuid, p_root_id uuid) RETURNS boolean
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
    ELSIF NOT EXISTS (SELECT 1 FROM resources d
                      WHERE d.owner_id = p_id AND d.synced_gen < d.generation
                        AND d.failure_gen <> d.generation AND d.frozen_until IS NULL
                        AND d.deletion_requested_at IS NULL) THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM resources d
                   WHERE (d.root_id = p_id OR d.owner_id = p_id) AND d.synced_gen < d.generation
                     AND (d.failure_gen = d.generation OR d.frozen_until IS NOT NULL)) THEN
        RETURN true;
    END IF;
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

-- The gate, now with the upstream gate (every dependency synced) and the rollup gate (a
-- composite that already composed this generation waits for its descendants to settle).
CREATE OR REPLACE FUNCTION schedule_eligible(p_ids uuid[]) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    n int;
BEGIN
    INSERT INTO work_queue AS w (resource_id, shard_id, task_type, kind, kind_version,
                                 generation, trigger, attempt, not_before, provider_config,
                                 provider_bundle)
    SELECT r.id, r.shard_id, 'reconcile', r.kind, r.kind_version, r.generation,
           'specChange',
           r.failure_attempts + 1,
           CASE WHEN r.failure_gen = r.generation AND r.failure_attempts > 0
                THEN now() + retry_backoff(r.failure_attempts)
                ELSE '-infinity'::timestamptz END,
           pc.spec, pc.data
    FROM resources r
    LEFT JOIN providerconfigs pc ON pc.name = r.provider_config_ref
    LEFT JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version
    WHERE r.id = ANY (p_ids)
      AND r.generation > r.synced_gen
      AND r.deletion_requested_at IS NULL
      AND r.frozen_until IS NULL
      AND NOT (r.failure_terminal AND r.failure_gen = r.generation)
      AND NOT EXISTS (SELECT 1 FROM resource_deps d JOIN resources u ON u.id = d.dependency_id
                      WHERE d.dependent_id = r.id
                        AND (u.synced_gen < u.generation OR u.deletion_requested_at IS NOT NULL))
      AND NOT (coalesce(kc.has_rollup, false) AND r.composed_gen >= r.generation
               AND has_unsettled_descendants(r.id, r.root_id))
    ORDER BY r.id
    ON CONFLICT (resource_id, task_type, shard_id) DO UPDATE
        SET generation = EXCLUDED.generation,
            trigger = EXCLUDED.trigger,
            attempt = EXCLUDED.attempt,
            not_before = EXCLUDED.not_before,
            provider_config = EXCLUDED.provider_config,
            provider_bundle = EXCLUDED.provider_bundle,
            lease_token = NULL,
            claim_epoch = w.claim_epoch + 1,
            broker_id = NULL,
            worker_id = NULL,
            claimed_at = NULL,
            heartbeat_at = NULL,
            enqueued_at = now()
        WHERE w.generation < EXCLUDED.generation;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM notify_gated('work_ready');
    END IF;
    RETURN n;
END
$$;

-- Re-runs the rollup of composites that are already synced when their descendants changed
-- (a child failed, recovered, or was set aside): a childrenSettled task at the current
-- generation, only once every descendant has settled.
CREATE FUNCTION schedule_rollup(p_ids uuid[]) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    n int;
BEGIN
    INSERT INTO work_queue (resource_id, shard_id, task_type, kind, kind_version, generation,
                            trigger, attempt)
    SELECT r.id, r.shard_id, 'reconcile', r.kind, r.kind_version, r.generation,
           'childrenSettled', 1
    FROM resources r
    JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version AND kc.has_rollup
    WHERE r.id = ANY (p_ids)
      AND r.synced_gen >= r.generation
      AND r.composed_gen >= r.generation
      AND r.deletion_requested_at IS NULL
      AND r.frozen_until IS NULL
      AND NOT has_unsettled_descendants(r.id, r.root_id)
    ORDER BY r.id
    ON CONFLICT (resource_id, task_type, shard_id) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM notify_gated('work_ready');
    END IF;
    RETURN n;
END
$$;

-- Reactive scheduling after drained results: retries and mid-flight edits; value flows into
-- the dependents of rows that are now synced (a dependent's generation bumps only when a
-- flowed value changed) and their scheduling; the composites owning changed rows (their
-- rollup gate is re-evaluated, and each is armed in rollup_recheck for the straddle case).
CREATE OR REPLACE FUNCTION cascade_on_ready_change(p_ids uuid[]) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    n int;
    v_deps uuid[];
    v_owners uuid[];
BEGIN
    n := schedule_eligible(p_ids);

    SELECT array_agg(DISTINCT d.dependent_id) INTO v_deps
    FROM resource_deps d JOIN resources u ON u.id = d.dependency_id
    WHERE d.dependency_id = ANY (p_ids) AND u.synced_gen >= u.generation;
    IF v_deps IS NOT NULL THEN
        PERFORM 1 FROM resources WHERE id = ANY (v_deps) ORDER BY id FOR UPDATE;
        UPDATE resources r SET spec = x.fspec, updated_at = now()
        FROM (SELECT id, flowed_spec(id, spec) AS fspec FROM resources
              WHERE id = ANY (v_deps) AND frozen_until IS NULL
                AND deletion_requested_at IS NULL) x
        WHERE r.id = x.id AND r.spec IS DISTINCT FROM x.fspec;
        n := n + schedule_eligible(v_deps);
    END IF;

    SELECT array_agg(DISTINCT o) INTO v_owners
    FROM (SELECT r.owner_id AS o FROM resources r WHERE r.id = ANY (p_ids) AND r.owner_id IS NOT NULL
          UNION
          SELECT r.root_id FROM resources r WHERE r.id = ANY (p_ids) AND r.root_id IS NOT NULL) s;
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

-- Straddle close-out, run by the drainer after its own commit: re-evaluates the armed roots
-- in a fresh snapshot that sees every sibling settled, so the last concurrent drain always
-- pends the root within milliseconds.
CREATE FUNCTION drain_rollup_rechecks(p_max int, p_lo smallint, p_hi smallint) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    v_roots uuid[];
BEGIN
    WITH picked AS (
        DELETE FROM rollup_recheck q
        WHERE q.id IN (SELECT id FROM rollup_recheck
                       WHERE shard_id BETWEEN p_lo AND p_hi
                       ORDER BY id LIMIT p_max FOR UPDATE SKIP LOCKED)
        RETURNING q.root_id
    )
    SELECT array_agg(DISTINCT root_id) INTO v_roots FROM picked;
    IF v_roots IS NULL THEN
        RETURN 0;
    END IF;
    RETURN schedule_eligible(v_roots) + schedule_rollup(v_roots);
END
$$;

-- Applies a compose result in one transaction, fenced on the composing task's lease:
-- upserts new and changed children (owner/root stamped, value flows pre-substituted so an
-- identical recompose writes nothing), re-adopts orphaned ones, orphans (grace) or removes
-- vanished ones, replaces the root's edges and configs, stamps composed_gen and schedules the
-- children that changed. Returns 'ok', or 'stale' when the lease is gone. Raises (SQLSTATE
-- P0001) on a result that cannot be applied; the broker turns that into a terminal failure.
CREATE FUNCTION apply_compose_result(p_root uuid, p_lease uuid, p_epoch bigint, p_generation bigint,
                                     p_children jsonb, p_edges jsonb, p_configs jsonb,
                                     p_apply_edges boolean, p_apply_configs boolean)
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

    CREATE TEMP TABLE IF NOT EXISTS compose_desired (
        kind text, kind_version int, name text, spec jsonb, labels jsonb
    ) ON COMMIT DELETE ROWS;
    TRUNCATE compose_desired;
    INSERT INTO compose_desired
    SELECT c.kind, c.kind_version, c.name, coalesce(c.spec, '{}'), coalesce(c.labels, '{}')
    FROM jsonb_to_recordset(coalesce(p_children, '[]'))
         AS c(kind text, kind_version int, name text, spec jsonb, labels jsonb);

    SELECT d.kind, d.kind_version, d.name INTO v_bad FROM compose_desired d
    LEFT JOIN kind_manifest m ON m.kind = d.kind AND m.kind_version = d.kind_version
    WHERE m.kind IS NULL LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'child %/% has unregistered kind % version %', v_bad.kind, v_bad.name, v_bad.kind, v_bad.kind_version;
    END IF;
    SELECT r.kind, r.name INTO v_bad FROM compose_desired d
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
        FOR v_edge IN SELECT value FROM jsonb_array_elements(coalesce(p_edges, '[]'))
                      WHERE jsonb_array_length(coalesce(value->'values', '[]')) > 0 LOOP
            UPDATE compose_desired d
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
        SELECT gen_random_uuid() AS id, d.* FROM compose_desired d
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

    -- Vanished children: orphan for the kind's grace window, or remove now. Quarantined
    -- children are left alone (a human set them aside).
    UPDATE resources r SET frozen_until = now() + make_interval(secs => kc.orphan_grace_secs),
                           updated_at = now()
    FROM kind_config kc
    WHERE r.owner_id = p_root AND r.frozen_until IS NULL
      AND kc.kind = r.kind AND kc.kind_version = r.kind_version AND kc.orphan_grace_secs > 0
      AND NOT EXISTS (SELECT 1 FROM compose_desired d WHERE d.kind = r.kind AND d.name = r.name);
    DELETE FROM work_queue q USING resources r
    WHERE r.owner_id = p_root AND q.resource_id = r.id AND q.shard_id = r.shard_id
      AND r.frozen_until IS NULL
      AND NOT EXISTS (SELECT 1 FROM compose_desired d WHERE d.kind = r.kind AND d.name = r.name);
    DELETE FROM resources r
    WHERE r.owner_id = p_root AND r.frozen_until IS NULL
      AND NOT EXISTS (SELECT 1 FROM compose_desired d WHERE d.kind = r.kind AND d.name = r.name);

    IF p_apply_edges THEN
        CREATE TEMP TABLE IF NOT EXISTS compose_edges (
            dependent_id uuid, dependency_id uuid, value_flows jsonb
        ) ON COMMIT DELETE ROWS;
        TRUNCATE compose_edges;
        INSERT INTO compose_edges
        SELECT DISTINCT ON (a.id, b.id) a.id, b.id,
               coalesce((SELECT jsonb_agg(jsonb_build_object('dep_field', v->>'dependent_field',
                                                             'src_field', v->>'source_field'))
                         FROM jsonb_array_elements(coalesce(e.value->'values', '[]')) v), '[]')
        FROM jsonb_array_elements(coalesce(p_edges, '[]')) e
        JOIN resources a ON a.kind = e.value->'from'->>'kind' AND a.name = e.value->'from'->>'name'
                        AND a.owner_id = p_root
        JOIN resources b ON b.kind = e.value->'to'->>'kind' AND b.name = e.value->'to'->>'name'
                        AND b.owner_id = p_root;
        DELETE FROM resource_deps d
        WHERE d.owner_id = p_root
          AND NOT EXISTS (SELECT 1 FROM compose_edges c
                          WHERE c.dependent_id = d.dependent_id AND c.dependency_id = d.dependency_id);
        INSERT INTO resource_deps AS d (dependent_id, dependency_id, owner_id, value_flows)
        SELECT dependent_id, dependency_id, p_root, value_flows FROM compose_edges
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

    UPDATE resources SET composed_gen = greatest(composed_gen, p_generation) WHERE id = p_root;
    IF v_changed IS NOT NULL THEN
        PERFORM schedule_eligible(v_changed);
    END IF;
    RETURN 'ok';
END
$$;

-- Results now say whether they advance synced_gen.
DROP FUNCTION work_complete(uuid[], smallint[], text[], uuid[], bigint[], boolean[], boolean[],
                            text[], jsonb[], jsonb[], boolean[]);
CREATE FUNCTION work_complete(p_resource_ids uuid[], p_shard_ids smallint[], p_task_types text[],
                              p_lease_tokens uuid[], p_claim_epochs bigint[], p_ok boolean[],
                              p_terminal boolean[], p_errors text[], p_statuses jsonb[],
                              p_conditions jsonb[], p_health boolean[], p_advance boolean[])
RETURNS TABLE (resource_id uuid, task_type text, claim_epoch bigint)
LANGUAGE plpgsql
AS $$
DECLARE
    n int;
BEGIN
    RETURN QUERY
    WITH input AS (
        SELECT * FROM unnest(p_resource_ids, p_shard_ids, p_task_types, p_lease_tokens,
                             p_claim_epochs, p_ok, p_terminal, p_errors, p_statuses,
                             p_conditions, p_health, p_advance)
            AS x(resource_id, shard_id, task_type, lease_token, claim_epoch, ok, terminal,
                 error_message, status, conditions, health_ok, advance)
    ), done AS (
        DELETE FROM work_queue w
        USING input i
        WHERE w.resource_id = i.resource_id AND w.task_type = i.task_type
          AND w.shard_id = i.shard_id AND w.claim_epoch = i.claim_epoch
          AND w.lease_token = i.lease_token
        RETURNING w.resource_id, w.shard_id, w.task_type, w.generation, w.claim_epoch
    ), ins AS (
        INSERT INTO work_outbox (shard_id, resource_id, task_type, generation, ok, terminal,
                                 error_message, status, conditions, health_ok, advance)
        SELECT d.shard_id, d.resource_id, d.task_type, d.generation, i.ok, i.terminal,
               i.error_message, i.status, i.conditions, i.health_ok, i.advance
        FROM done d
        JOIN input i ON i.resource_id = d.resource_id AND i.task_type = d.task_type
                    AND i.claim_epoch = d.claim_epoch
        RETURNING 1
    )
    SELECT d.resource_id, d.task_type, d.claim_epoch FROM done d;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM notify_gated('outbox_ready');
    END IF;
END
$$;

-- The claim also returns composed_gen, so the broker knows whether to compose.
DROP FUNCTION work_claim(smallint, smallint, text, int, int, text);
CREATE FUNCTION work_claim(p_lo smallint, p_hi smallint, p_kind text, p_kind_version int,
                           p_limit int, p_broker text)
RETURNS TABLE (resource_id uuid, shard_id smallint, task_type text, generation bigint,
               trigger text, attempt int, lease_token uuid, claim_epoch bigint,
               provider_config jsonb, provider_bundle bytea, task_deadline_secs int,
               name text, owner_id uuid, root_id uuid, spec jsonb, status jsonb,
               r_generation bigint, synced_gen bigint, is_ready boolean, finalizers text[],
               deletion_requested_at_ms bigint, frozen_until_ms bigint, labels jsonb,
               phase text, composed_gen bigint)
LANGUAGE sql
AS $$
    WITH c AS (
        SELECT q.resource_id, q.task_type, q.shard_id
        FROM work_queue q
        WHERE q.shard_id BETWEEN p_lo AND p_hi
          AND q.kind = p_kind AND q.kind_version = p_kind_version
          AND q.lease_token IS NULL
          AND q.not_before <= now()
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ), u AS (
        UPDATE work_queue w
        SET lease_token = gen_random_uuid(),
            claim_epoch = w.claim_epoch + 1,
            claimed_at = now(),
            heartbeat_at = now(),
            broker_id = p_broker
        FROM c
        WHERE w.shard_id BETWEEN p_lo AND p_hi
          AND w.resource_id = c.resource_id AND w.task_type = c.task_type AND w.shard_id = c.shard_id
        RETURNING w.resource_id, w.shard_id, w.task_type, w.generation, w.trigger, w.attempt,
                  w.lease_token, w.claim_epoch, w.provider_config, w.provider_bundle,
                  w.kind, w.kind_version
    )
    SELECT u.resource_id, u.shard_id, u.task_type, u.generation, u.trigger, u.attempt,
           u.lease_token, u.claim_epoch, u.provider_config, u.provider_bundle,
           coalesce(kc.task_deadline_secs, 0),
           r.name, r.owner_id, r.root_id, r.spec, r.status, r.generation, r.synced_gen,
           r.is_ready, r.finalizers,
           coalesce((extract(epoch FROM r.deletion_requested_at) * 1000)::bigint, 0),
           CASE WHEN r.frozen_until IS NULL THEN 0
                WHEN r.frozen_until = 'infinity' THEN 9223372036854775807
                ELSE (extract(epoch FROM r.frozen_until) * 1000)::bigint END,
           r.labels, r.phase, r.composed_gen
    FROM u
    JOIN resources r ON r.id = u.resource_id
    LEFT JOIN kind_config kc ON kc.kind = u.kind AND kc.kind_version = u.kind_version
$$;

-- The drain honours `advance`: a composite waiting for its children records its status
-- without advancing synced_gen (it is re-pended when they settle).
CREATE OR REPLACE FUNCTION drain_outbox_batch(p_max int, p_lo smallint, p_hi smallint) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids uuid[];
    v_gens bigint[];
    v_ok boolean[];
    v_terminal boolean[];
    v_errs text[];
    v_statuses jsonb[];
    v_conds jsonb[];
    v_health boolean[];
    v_advance boolean[];
    v_popped int;
    v_troubled uuid[];
BEGIN
    WITH popped AS (
        DELETE FROM work_outbox o
        WHERE o.shard_id BETWEEN p_lo AND p_hi
          AND (o.id, o.shard_id) IN (
            SELECT id, shard_id FROM work_outbox
            WHERE shard_id BETWEEN p_lo AND p_hi
            ORDER BY id
            LIMIT p_max
            FOR UPDATE SKIP LOCKED)
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
    INTO v_popped, v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses, v_conds, v_health, v_advance
    FROM latest;

    IF v_ids IS NULL THEN
        RETURN coalesce(v_popped, 0);
    END IF;

    -- Lock in ascending id order, and note which rows carried a failure or ill health before
    -- this batch (only those can need a condition cleared).
    SELECT array_agg(s.id) FILTER (WHERE s.failure_gen <> 0 OR NOT s.health_ok)
    INTO v_troubled
    FROM (SELECT r.id, r.failure_gen, r.health_ok FROM resources r
          WHERE r.id = ANY (v_ids) ORDER BY r.id FOR UPDATE) s;

    WITH o AS (
        SELECT * FROM unnest(v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses, v_health, v_advance)
            AS t(id, gen, ok, terminal, err, status, health, advance)
    ), n AS (
        SELECT r.id,
               CASE WHEN o.ok AND o.status IS NOT NULL THEN o.status ELSE r.status END AS status,
               CASE WHEN o.ok AND o.advance THEN greatest(r.synced_gen, o.gen) ELSE r.synced_gen END AS synced_gen,
               CASE WHEN o.ok THEN o.health ELSE r.health_ok END AS health_ok,
               CASE WHEN o.ok THEN (CASE WHEN r.failure_gen <= o.gen THEN 0 ELSE r.failure_gen END)
                    ELSE o.gen END AS failure_gen,
               CASE WHEN o.ok THEN 0
                    WHEN o.gen = r.generation THEN r.failure_attempts + 1
                    ELSE r.failure_attempts END AS failure_attempts,
               CASE WHEN o.ok THEN false
                    ELSE o.terminal
                         OR (coalesce(kc.max_transient_attempts, 0) > 0
                             AND r.failure_attempts + 1 >= kc.max_transient_attempts) END
                   AS failure_terminal,
               CASE WHEN o.ok THEN NULL::text ELSE o.err END AS failure_message
        FROM o
        JOIN resources r ON r.id = o.id
        LEFT JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version
    )
    UPDATE resources r
    SET status = n.status, synced_gen = n.synced_gen, health_ok = n.health_ok,
        failure_gen = n.failure_gen, failure_attempts = n.failure_attempts,
        failure_terminal = n.failure_terminal, failure_message = n.failure_message,
        updated_at = now()
    FROM n
    WHERE r.id = n.id
      AND (r.status IS DISTINCT FROM n.status OR r.synced_gen <> n.synced_gen
           OR r.health_ok <> n.health_ok OR r.failure_gen <> n.failure_gen
           OR r.failure_attempts <> n.failure_attempts
           OR r.failure_terminal <> n.failure_terminal
           OR r.failure_message IS DISTINCT FROM n.failure_message);

    -- Conditions, on transition only.
    WITH o AS (
        SELECT * FROM unnest(v_ids, v_ok, v_terminal, v_errs, v_conds)
            AS t(id, ok, terminal, err, conds)
    ), reported AS (
        SELECT o.id, c->>'type' AS type, coalesce(c->>'status', 'Unknown') AS status,
               coalesce(c->>'reason', '') AS reason, coalesce(c->>'message', '') AS message
        FROM o, jsonb_array_elements(o.conds) c
        WHERE o.ok AND jsonb_typeof(o.conds) = 'array' AND coalesce(c->>'type', '') <> ''
        UNION ALL
        SELECT o.id, 'Synced', 'False',
               CASE WHEN o.terminal THEN 'TerminalError' ELSE 'ReconcileError' END,
               left(coalesce(o.err, ''), 4096)
        FROM o WHERE NOT o.ok
    )
    INSERT INTO resource_conditions AS rc (resource_id, type, status, reason, message)
    SELECT DISTINCT ON (id, type) id, type, status, reason, message
    FROM reported
    ORDER BY id, type
    ON CONFLICT (resource_id, type) DO UPDATE
        SET status = EXCLUDED.status, reason = EXCLUDED.reason, message = EXCLUDED.message,
            last_transition_at = CASE WHEN rc.status = EXCLUDED.status
                                      THEN rc.last_transition_at ELSE now() END
        WHERE (rc.status, rc.reason, rc.message)
              IS DISTINCT FROM (EXCLUDED.status, EXCLUDED.reason, EXCLUDED.message);

    -- Recovery: a clean reconcile clears stored False conditions it did not re-report.
    IF v_troubled IS NOT NULL THEN
        DELETE FROM resource_conditions rc
        USING unnest(v_ids, v_ok, v_conds) AS o(id, ok, conds)
        WHERE rc.resource_id = o.id AND o.ok AND o.id = ANY (v_troubled)
          AND rc.status = 'False'
          AND NOT (coalesce(o.conds, '[]'::jsonb) @> jsonb_build_array(jsonb_build_object('type', rc.type)));
    END IF;

    -- Re-pend what is still behind (failed transiently, edited mid-flight), flow values to
    -- dependents, and re-evaluate the composites that own these rows.
    PERFORM cascade_on_ready_change(v_ids);

    RETURN v_popped;
END
$$;

