--
-- PostgreSQL database dump
--

--
-- Name: apply_compose_result(uuid, uuid, bigint, bigint, jsonb, jsonb, jsonb, boolean, boolean, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.apply_compose_result(p_root uuid, p_lease uuid, p_epoch bigint, p_generation bigint, p_children jsonb, p_edges jsonb, p_configs jsonb, p_apply_edges boolean, p_apply_configs boolean, p_status jsonb DEFAULT NULL::jsonb) RETURNS text
    LANGUAGE plpgsql
    SET client_min_messages TO 'warning'
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

--
-- Name: apply_locked_results(uuid[], bigint[], boolean[], boolean[], text[], jsonb[], jsonb[], boolean[], boolean[], text[], uuid[], uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.apply_locked_results(p_ids uuid[], p_gens bigint[], p_ok boolean[], p_terminal boolean[], p_errs text[], p_statuses jsonb[], p_conds jsonb[], p_health boolean[], p_advance boolean[], p_old_phases text[], p_troubled uuid[], p_owners uuid[]) RETURNS TABLE(synced_kinds text[], synced_secs double precision[])
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_changed uuid[];
    v_behind uuid[];
BEGIN
    -- 1. Update, record the phase changes, name what is still behind.
    PERFORM set_config('converge.batch_events', 'on', true);
    WITH o AS (
        SELECT * FROM unnest(p_ids, p_gens, p_ok, p_terminal, p_errs, p_statuses, p_health,
                             p_advance, p_old_phases)
            AS t(id, gen, ok, terminal, err, status, health, advance, old_phase)
    ), n AS MATERIALIZED (
        SELECT r.id, o.old_phase, r.generation,
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
               CASE WHEN o.ok THEN NULL::text ELSE o.err END AS failure_message,
               l.behind_since
        FROM o
        JOIN resources r ON r.id = o.id
        LEFT JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version
        LEFT JOIN resource_lag l ON l.shard_id = r.shard_id AND l.id = r.id
    ), u AS (
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
               OR r.failure_message IS DISTINCT FROM n.failure_message)
        RETURNING r.id, r.kind, r.name, r.phase, n.old_phase, r.generation, r.failure_message,
                  r.synced_gen >= r.generation AS synced, n.behind_since
    ), ev AS (
        INSERT INTO resource_events (resource_id, kind, name, type, from_phase, to_phase,
                                     generation, message)
        SELECT u.id, u.kind, u.name, 'phase', u.old_phase, u.phase, u.generation,
               CASE WHEN u.phase = 'Failed' THEN left(u.failure_message, 4096) END
        FROM u WHERE u.phase IS DISTINCT FROM u.old_phase
        ORDER BY u.id
    )
    -- Synced now, behind before (a lag row): the reconcile duration.
    SELECT array_agg(u.kind) FILTER (WHERE u.synced AND u.behind_since IS NOT NULL),
           array_agg(extract(epoch FROM clock_timestamp() - u.behind_since)::double precision)
               FILTER (WHERE u.synced AND u.behind_since IS NOT NULL),
           array_agg(u.id ORDER BY u.id) FILTER (WHERE u.phase IS DISTINCT FROM u.old_phase),
           (SELECT array_agg(n.id ORDER BY n.id) FROM n WHERE n.synced_gen < n.generation)
    INTO synced_kinds, synced_secs, v_changed, v_behind
    FROM u;
    PERFORM set_config('converge.batch_events', 'off', true);
    IF v_changed IS NOT NULL THEN
        PERFORM emit_phase_lifecycle(v_changed);
    END IF;

    -- 2. Conditions, on transition only.
    WITH o AS (
        SELECT * FROM unnest(p_ids, p_ok, p_terminal, p_errs, p_conds)
            AS t(id, ok, terminal, err, conds)
    ), reported AS (
        SELECT o.id, c->>'type' AS type, coalesce(c->>'status', 'Unknown') AS status,
               coalesce(c->>'reason', '') AS reason, coalesce(c->>'message', '') AS message
        FROM o, jsonb_array_elements(o.conds) c
        WHERE o.ok AND jsonb_typeof(o.conds) = 'array' AND coalesce(c->>'type', '') <> ''
        UNION ALL
        -- A failure is also not Ready, whatever an earlier success reported: a Failed row
        -- must never keep showing Ready=True. The next clean reconcile clears both (below)
        -- unless its worker reports them again.
        SELECT o.id, t.type, 'False',
               CASE WHEN o.terminal THEN 'TerminalError' ELSE 'ReconcileError' END,
               left(coalesce(o.err, ''), 4096)
        FROM o, (VALUES ('Synced'), ('Ready')) AS t(type) WHERE NOT o.ok
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
    IF p_troubled IS NOT NULL THEN
        DELETE FROM resource_conditions rc
        USING unnest(p_ids, p_ok, p_conds) AS o(id, ok, conds)
        WHERE rc.resource_id = o.id AND o.ok AND o.id = ANY (p_troubled)
          AND rc.status = 'False'
          AND NOT (coalesce(o.conds, '[]'::jsonb) @> jsonb_build_array(jsonb_build_object('type', rc.type)));
    END IF;

    -- Re-pend what is still behind (failed transiently, edited mid-flight), flow values to
    -- dependents, and re-evaluate the composites that own these rows.
    PERFORM cascade_on_ready_change(p_ids, v_behind, p_owners);
    RETURN NEXT;
END
$$;

--
-- Name: apply_results(uuid[], bigint[], boolean[], boolean[], text[], jsonb[], jsonb[], boolean[], boolean[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.apply_results(p_ids uuid[], p_gens bigint[], p_ok boolean[], p_terminal boolean[], p_errs text[], p_statuses jsonb[], p_conds jsonb[], p_health boolean[], p_advance boolean[]) RETURNS TABLE(synced_kinds text[], synced_secs double precision[])
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_troubled uuid[];
    v_old_phases text[];
    v_owners uuid[];
BEGIN
    -- Lock in ascending id order (p_ids is sorted); a row deleted since the pop has NULLs.
    -- The owners go as they are (NULLs and repeats included): the cascade drops both.
    SELECT array_agg(b.id) FILTER (WHERE x.failure_gen <> 0 OR NOT x.health_ok),
           array_agg(x.phase ORDER BY b.ord),
           array_agg(x.owner_id) || array_agg(x.root_id)
    INTO v_troubled, v_old_phases, v_owners
    FROM unnest(p_ids) WITH ORDINALITY AS b(id, ord)
    LEFT JOIN LATERAL (SELECT r.failure_gen, r.health_ok, r.phase, r.owner_id, r.root_id
                       FROM resources r WHERE r.id = b.id FOR UPDATE) x ON true;

    RETURN QUERY
    SELECT * FROM apply_locked_results(p_ids, p_gens, p_ok, p_terminal, p_errs, p_statuses,
                                       p_conds, p_health, p_advance, v_old_phases,
                                       v_troubled, v_owners);
END
$$;

--
-- Name: apply_value_flows(jsonb, jsonb, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.apply_value_flows(p_spec jsonb, p_flows jsonb, p_status jsonb) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    f jsonb;
    v_spec jsonb := p_spec;
BEGIN
    IF p_flows IS NULL OR jsonb_typeof(p_flows) <> 'array' THEN
        RETURN v_spec;
    END IF;
    FOR i IN 0 .. jsonb_array_length(p_flows) - 1 LOOP
        f := p_flows -> i;
        CONTINUE WHEN f->>'dep_field' IS NULL OR f->>'src_field' IS NULL;
        v_spec := coalesce(
            jsonb_set(v_spec, jsonptr_path(f->>'dep_field'),
                      coalesce(p_status #> jsonptr_path(f->>'src_field'), 'null'::jsonb), true),
            v_spec);
    END LOOP;
    RETURN v_spec;
END
$$;

--
-- Name: cascade_on_ready_change(uuid[], uuid[], uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.cascade_on_ready_change(p_ids uuid[], p_behind uuid[], p_owners uuid[]) RETURNS integer
    LANGUAGE plpgsql
    SET random_page_cost TO '1.1'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
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

--
-- Name: cascade_to_owners(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.cascade_to_owners(p_id uuid) RETURNS void
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

--
-- Name: cluster_members_changed(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.cluster_members_changed() RETURNS trigger
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

--
-- Name: cluster_tiling(interval); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.cluster_tiling(p_liveness interval) RETURNS TABLE(member_id text, duty text, kind text, kind_version integer, lo smallint, hi smallint)
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

--
-- Name: delete_unclaimed_work(smallint, smallint, interval); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.delete_unclaimed_work(p_lo smallint, p_hi smallint, p_older_than interval) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    n int;
BEGIN
    DELETE FROM work_queue w
    WHERE w.shard_id BETWEEN p_lo AND p_hi
      AND w.lease_token IS NULL
      AND w.enqueued_at < now() - p_older_than;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

--
-- Name: drain_outbox_batch(integer, smallint, smallint, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.drain_outbox_batch(p_max integer, p_lo smallint, p_hi smallint, p_express boolean DEFAULT false) RETURNS TABLE(popped integer, synced_kinds text[], synced_secs double precision[])
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
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
BEGIN
    SELECT * INTO v_popped, v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses, v_conds, v_health, v_advance
    FROM outbox_pop(p_max, p_lo, p_hi, p_express);

    popped := coalesce(v_popped, 0);
    IF v_ids IS NOT NULL THEN
        SELECT a.synced_kinds, a.synced_secs INTO synced_kinds, synced_secs
        FROM apply_results(v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses, v_conds,
                           v_health, v_advance) a;
    END IF;
    RETURN NEXT;
END
$$;

--
-- Name: drain_rollup_rechecks(integer, smallint, smallint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.drain_rollup_rechecks(p_max integer, p_lo smallint, p_hi smallint) RETURNS integer
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET enable_material TO 'off'
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

--
-- Name: emit_phase_lifecycle(uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.emit_phase_lifecycle(p_ids uuid[]) RETURNS void
    LANGUAGE plpgsql
    SET random_page_cost TO '1.1'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM reactor_bindings
               WHERE enabled AND transition IN ('synced', 'degraded', 'failed')) THEN
        PERFORM lifecycle_emit(array_agg(c.t), array_agg(c.snap))
        FROM (SELECT CASE r.phase WHEN 'Ready' THEN 'synced' WHEN 'Degraded' THEN 'degraded'
                                  ELSE 'failed' END AS t,
                     to_jsonb(r) AS snap
              FROM unnest(p_ids) AS o(id)
              JOIN resources r ON r.id = o.id
              WHERE r.phase IN ('Ready', 'Degraded', 'Failed')) c
        HAVING count(*) > 0;
    END IF;
END
$$;

--
-- Name: engine_warm_up(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.engine_warm_up() RETURNS void
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

--
-- Name: flowed_specs(uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.flowed_specs(p_ids uuid[]) RETURNS TABLE(id uuid, spec jsonb, fspec jsonb)
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    e record;
BEGIN
    FOR e IN SELECT r.id AS rid, r.spec AS rspec, d.value_flows, u.status
             FROM resources r
             JOIN resource_deps d ON d.dependent_id = r.id
             JOIN resources u ON u.id = d.dependency_id
             WHERE r.id = ANY (p_ids) AND r.frozen_until IS NULL
               AND r.deletion_requested_at IS NULL
               AND jsonb_array_length(d.value_flows) > 0
             ORDER BY r.id, d.dependency_id LOOP
        IF id IS DISTINCT FROM e.rid THEN
            IF id IS NOT NULL THEN
                RETURN NEXT;
            END IF;
            id := e.rid;
            spec := e.rspec;
            fspec := e.rspec;
        END IF;
        fspec := apply_value_flows(fspec, e.value_flows, e.status);
    END LOOP;
    IF id IS NOT NULL THEN
        RETURN NEXT;
    END IF;
END
$$;

--
-- Name: gc_resource_events(interval, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.gc_resource_events(p_older_than interval, p_limit integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    n int;
BEGIN
    PERFORM brin_summarize_new_values('idx_resource_events_at'::regclass);
    DELETE FROM resource_events
    WHERE id IN (SELECT id FROM resource_events WHERE at < now() - p_older_than
                 LIMIT p_limit);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

--
-- Name: has_unsettled_descendants(uuid, uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.has_unsettled_descendants(p_id uuid, p_root_id uuid) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
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

--
-- Name: jsonptr_path(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jsonptr_path(p text) RETURNS text[]
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT CASE WHEN strpos(p, '~') = 0
                THEN coalesce(string_to_array(substr(CASE WHEN left(p, 1) = '/' THEN p ELSE '/' || p END, 2), '/'), '{}')
                ELSE jsonptr_path_escaped(p) END
$$;

--
-- Name: jsonptr_path_escaped(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.jsonptr_path_escaped(p text) RETURNS text[]
    LANGUAGE sql IMMUTABLE STRICT
    AS $$
    SELECT coalesce(array_agg(replace(replace(seg, '~1', '/'), '~0', '~') ORDER BY ord), '{}')
    FROM unnest(string_to_array(substr(CASE WHEN left(p, 1) = '/' THEN p ELSE '/' || p END, 2), '/'))
         WITH ORDINALITY AS s(seg, ord)
$$;

--
-- Name: kind_manifest_seed_config(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.kind_manifest_seed_config() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: kind_manifest_stamp(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.kind_manifest_stamp() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.manifest_version := ('x' || substr(md5(NEW.manifest::text), 1, 15))::bit(60)::bigint;
    NEW.updated_at := now();
    RETURN NEW;
END $$;

--
-- Name: kind_version_delete(text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.kind_version_delete(p_kind text, p_kind_version integer) RETURNS TABLE(registered boolean, resource_count bigint, binding_count bigint)
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('converge.kind_version'),
                                  hashtext(p_kind || '/' || p_kind_version));
    PERFORM 1 FROM kind_manifest m
    WHERE m.kind = p_kind AND m.kind_version = p_kind_version
    FOR UPDATE;
    registered := FOUND;
    resource_count := 0;
    binding_count := 0;
    IF registered THEN
        SELECT count(*) INTO resource_count FROM resources r
        WHERE r.kind = p_kind AND r.kind_version = p_kind_version;
        IF NOT EXISTS (SELECT 1 FROM kind_manifest m
                       WHERE m.kind = p_kind AND m.kind_version <> p_kind_version) THEN
            SELECT count(*) INTO binding_count FROM reactor_bindings b
            WHERE b.watch_kind = p_kind OR b.reactor = p_kind;
        END IF;
        IF resource_count = 0 AND binding_count = 0 THEN
            DELETE FROM providerconfigs pc
            WHERE pc.kind = p_kind AND pc.kind_version = p_kind_version;
            DELETE FROM kind_config kc
            WHERE kc.kind = p_kind AND kc.kind_version = p_kind_version;
            DELETE FROM kind_manifest m
            WHERE m.kind = p_kind AND m.kind_version = p_kind_version;
            -- The notice the insert/update trigger sends, for the caches to drop the version.
            PERFORM pg_notify('kind_manifest_changed', p_kind || '/' || p_kind_version);
        END IF;
    END IF;
    RETURN NEXT;
END $$;

--
-- Name: kind_version_guard(text[], integer[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.kind_version_guard(p_kinds text[], p_kind_versions integer[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_bad record;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtext('converge.kind_version'), hashtext(d.k || '/' || d.v))
    FROM (SELECT DISTINCT t.k, t.v FROM unnest(p_kinds, p_kind_versions) AS t(k, v)
          ORDER BY t.k, t.v) d;
    -- A statement after the lock: it sees a deletion that committed while this waited.
    SELECT d.k, d.v INTO v_bad
    FROM (SELECT DISTINCT t.k, t.v FROM unnest(p_kinds, p_kind_versions) AS t(k, v)) d
    WHERE NOT EXISTS (SELECT 1 FROM kind_manifest m WHERE m.kind = d.k AND m.kind_version = d.v)
    ORDER BY d.k, d.v
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'kind % version % is not registered', v_bad.k, v_bad.v
            USING ERRCODE = 'foreign_key_violation';
    END IF;
END $$;

--
-- Name: lag_stuck(bigint, bigint, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.lag_stuck(p_failure_gen bigint, p_generation bigint, p_frozen_until timestamp with time zone) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT p_failure_gen = p_generation OR p_frozen_until IS NOT NULL $$;

--
-- Name: lag_unsettled(bigint, bigint, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.lag_unsettled(p_failure_gen bigint, p_generation bigint, p_frozen_until timestamp with time zone, p_deletion_requested_at timestamp with time zone) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT p_failure_gen <> p_generation AND p_frozen_until IS NULL
             AND p_deletion_requested_at IS NULL $$;

--
-- Name: lifecycle_claim(smallint, smallint, text, integer, text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.lifecycle_claim(p_lo smallint, p_hi smallint, p_reactor text, p_limit integer, p_broker text, p_kind_version integer DEFAULT NULL::integer) RETURNS TABLE(id bigint, shard_id smallint, resource_id uuid, transition text, generation bigint, binding_name text, resource jsonb, claim_token uuid, claim_epoch bigint, attempts integer, task_deadline_secs integer)
    LANGUAGE sql
    AS $$
    WITH c AS (
        SELECT l.id FROM lifecycle_outbox l
        WHERE l.reactor_kind = p_reactor AND l.shard_id BETWEEN p_lo AND p_hi
          AND l.claim_token IS NULL AND l.not_before <= now()
        ORDER BY l.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE lifecycle_outbox l
    SET claim_token = gen_random_uuid(), claim_epoch = l.claim_epoch + 1, claimed_at = now(),
        heartbeat_at = now(), broker_id = p_broker, attempts = l.attempts + 1
    FROM c
    WHERE l.id = c.id
    RETURNING l.id, l.shard_id, l.resource_id, l.transition, l.generation, l.binding_name,
              l.resource, l.claim_token, l.claim_epoch, l.attempts,
              (SELECT coalesce(max(kc.task_deadline_secs), 0) FROM kind_config kc
               WHERE kc.kind = p_reactor
                 AND (p_kind_version IS NULL OR kc.kind_version = p_kind_version))
$$;

--
-- Name: lifecycle_complete(uuid[], bigint[], boolean[], text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.lifecycle_complete(p_tokens uuid[], p_epochs bigint[], p_ok boolean[], p_errors text[]) RETURNS TABLE(claim_token uuid, claim_epoch bigint)
    LANGUAGE plpgsql
    AS $$
BEGIN
    RETURN QUERY
    WITH i AS (
        SELECT * FROM unnest(p_tokens, p_epochs, p_ok, p_errors) AS x(tok, ep, ok, err)
    ), acked AS (
        DELETE FROM lifecycle_outbox l USING i
        WHERE l.claim_token = i.tok AND l.claim_epoch = i.ep AND i.ok
        RETURNING i.tok, i.ep
    ), before AS (
        -- The failing deliveries as they were (every part of one statement sees one snapshot).
        SELECT l.id, l.last_error FROM lifecycle_outbox l JOIN i
            ON l.claim_token = i.tok AND l.claim_epoch = i.ep AND NOT i.ok
    ), retried AS (
        UPDATE lifecycle_outbox l
        SET claim_token = NULL, claim_epoch = l.claim_epoch + 1, broker_id = NULL,
            claimed_at = NULL, heartbeat_at = NULL,
            not_before = now() + retry_backoff(l.attempts), last_error = left(i.err, 4096)
        FROM i
        WHERE l.claim_token = i.tok AND l.claim_epoch = i.ep AND NOT i.ok
        RETURNING i.tok, i.ep, l.id, l.resource_id, l.resource, l.generation, l.binding_name,
                  l.transition, l.attempts, l.not_before, l.last_error
    ), noted AS (
        INSERT INTO resource_events (resource_id, kind, name, type, generation, message)
        SELECT r.resource_id, coalesce(r.resource->>'kind', ''), coalesce(r.resource->>'name', ''),
               'delivery', r.generation,
               left(format('reactor binding %s (%s) failed, attempt %s, retried at %s: %s',
                           r.binding_name, r.transition, r.attempts,
                           to_char(r.not_before AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                           r.last_error), 4096)
        FROM retried r JOIN before b ON b.id = r.id
        WHERE b.last_error IS DISTINCT FROM r.last_error
    )
    SELECT a.tok, a.ep FROM acked a UNION ALL SELECT r.tok, r.ep FROM retried r;
END
$$;

--
-- Name: lifecycle_emit(text[], jsonb[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.lifecycle_emit(p_transitions text[], p_rows jsonb[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    n int;
BEGIN
    INSERT INTO lifecycle_outbox (shard_id, resource_id, transition, generation, binding_name,
                                  reactor_kind, resource)
    SELECT (x.r->>'shard_id')::smallint, (x.r->>'id')::uuid, x.t, (x.r->>'generation')::bigint,
           b.name, b.reactor, x.r
    FROM unnest(p_transitions, p_rows) AS x(t, r)
    JOIN reactor_bindings b ON b.enabled AND b.transition = x.t AND b.watch_kind = x.r->>'kind'
                           AND (x.r->'labels') @> b.label_match
    ORDER BY 1, 2
    ON CONFLICT (resource_id, transition, generation, binding_name) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        -- Direct, not gated: low rate, and a gated wake could be swallowed inside a long drain.
        PERFORM pg_notify('lifecycle_ready', '');
    END IF;
    RETURN n;
END
$$;

--
-- Name: lifecycle_heartbeat(uuid[], bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.lifecycle_heartbeat(p_tokens uuid[], p_epochs bigint[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    n int;
BEGIN
    UPDATE lifecycle_outbox l SET heartbeat_at = now()
    FROM unnest(p_tokens, p_epochs) AS x(tok, ep)
    WHERE l.claim_token = x.tok AND l.claim_epoch = x.ep;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

--
-- Name: lifecycle_release(uuid[], bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.lifecycle_release(p_tokens uuid[], p_epochs bigint[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    n int;
BEGIN
    UPDATE lifecycle_outbox l
    SET claim_token = NULL, claim_epoch = l.claim_epoch + 1, broker_id = NULL,
        claimed_at = NULL, heartbeat_at = NULL
    FROM unnest(p_tokens, p_epochs) AS x(tok, ep)
    WHERE l.claim_token = x.tok AND l.claim_epoch = x.ep;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

--
-- Name: manifest_has_reaction(jsonb, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.manifest_has_reaction(m jsonb, p_trigger text, p_emit text) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(m->'reactions', '[]')) r
                   WHERE r->>'trigger' = p_trigger AND coalesce(r->'emits', '[]') ? p_emit)
$$;

--
-- Name: member_claim_pairs(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.member_claim_pairs(p_workers jsonb) RETURNS jsonb
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

--
-- Name: notify_gated(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.notify_gated(p_channel text) RETURNS void
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_last timestamptz;
BEGIN
    IF current_setting('converge.warm_up', true) = 'on' THEN
        RETURN;
    END IF;
    SELECT last_at INTO v_last FROM wake_state WHERE channel = p_channel;
    IF v_last IS NOT NULL AND v_last > clock_timestamp() - interval '50 milliseconds' THEN
        RETURN;
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtext('converge.notify_gated'), hashtext(p_channel)) THEN
        RETURN;
    END IF;
    UPDATE wake_state SET last_at = clock_timestamp() WHERE channel = p_channel;
    PERFORM pg_notify(p_channel, '');
END
$$;

--
-- Name: notify_lease_revoked(text, uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.notify_lease_revoked(p_reason text, p_tokens uuid[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    i int := 1;
    n int := coalesce(cardinality(p_tokens), 0);
BEGIN
    WHILE i <= n LOOP
        PERFORM pg_notify('lease_revoked',
                          p_reason || ' ' || array_to_string(p_tokens[i:i + 199], ' '));
        i := i + 200;
    END LOOP;
END
$$;

--
-- Name: operation_complete(uuid[], smallint[], uuid[], bigint[], boolean[], boolean[], text[], jsonb[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.operation_complete(p_resource_ids uuid[], p_shard_ids smallint[], p_lease_tokens uuid[], p_claim_epochs bigint[], p_ok boolean[], p_terminal boolean[], p_errors text[], p_outputs jsonb[]) RETURNS TABLE(resource_id uuid, claim_epoch bigint)
    LANGUAGE plpgsql
    AS $$
DECLARE
    i int;
    v_op resource_operations%ROWTYPE;
    v_max int;
    v_retry_in interval;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_resource_ids), 0) LOOP
        PERFORM 1 FROM work_queue q
        WHERE q.shard_id = p_shard_ids[i] AND q.resource_id = p_resource_ids[i]
          AND q.task_type = 'operate' AND q.lease_token = p_lease_tokens[i]
          AND q.claim_epoch = p_claim_epochs[i]
        FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        v_retry_in := NULL;
        SELECT * INTO v_op FROM resource_operations o
        WHERE o.resource_id = p_resource_ids[i] AND o.state = 'running'
        ORDER BY o.created_at, o.uid LIMIT 1
        FOR UPDATE;
        IF FOUND THEN
            SELECT coalesce(kc.max_transient_attempts, 0) INTO v_max
            FROM resources r
            LEFT JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version
            WHERE r.id = p_resource_ids[i];
            IF p_ok[i] THEN
                UPDATE resource_operations
                SET state = 'succeeded', output = p_outputs[i], error = NULL,
                    updated_at = now(), finished_at = now()
                WHERE uid = v_op.uid;
            ELSIF p_terminal[i] OR (coalesce(v_max, 0) > 0 AND v_op.attempts >= v_max) THEN
                UPDATE resource_operations
                SET state = 'failed', error = left(coalesce(p_errors[i], ''), 4096),
                    updated_at = now(), finished_at = now()
                WHERE uid = v_op.uid;
            ELSE
                UPDATE resource_operations
                SET state = 'pending', error = left(coalesce(p_errors[i], ''), 4096),
                    updated_at = now()
                WHERE uid = v_op.uid;
                v_retry_in := retry_backoff(v_op.attempts);
            END IF;
        END IF;
        IF v_retry_in IS NOT NULL
           OR EXISTS (SELECT 1 FROM resource_operations o
                      WHERE o.resource_id = p_resource_ids[i] AND o.state IN ('pending', 'running')) THEN
            UPDATE work_queue q
            SET lease_token = NULL, claim_epoch = q.claim_epoch + 1,
                attempt = CASE WHEN v_retry_in IS NULL THEN 1 ELSE q.attempt + 1 END,
                not_before = CASE WHEN v_retry_in IS NULL THEN '-infinity'::timestamptz
                                  ELSE now() + v_retry_in END,
                broker_id = NULL, worker_id = NULL, claimed_at = NULL, heartbeat_at = NULL
            WHERE q.shard_id = p_shard_ids[i] AND q.resource_id = p_resource_ids[i]
              AND q.task_type = 'operate';
            PERFORM notify_gated('work_ready');
        ELSE
            DELETE FROM work_queue q
            WHERE q.shard_id = p_shard_ids[i] AND q.resource_id = p_resource_ids[i]
              AND q.task_type = 'operate';
        END IF;
        resource_id := p_resource_ids[i];
        claim_epoch := p_claim_epochs[i];
        RETURN NEXT;
    END LOOP;
END
$$;

--
-- Name: operation_request(uuid, text, jsonb, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.operation_request(p_id uuid, p_verb text, p_input jsonb, p_by text) RETURNS uuid
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_r resources%ROWTYPE;
    v_uid uuid;
BEGIN
    SELECT * INTO v_r FROM resources WHERE id = p_id;
    IF NOT FOUND OR v_r.deletion_requested_at IS NOT NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO resource_operations (resource_id, verb, input, requested_by)
    VALUES (p_id, p_verb, p_input, coalesce(p_by, ''))
    RETURNING uid INTO v_uid;
    INSERT INTO work_queue (resource_id, shard_id, task_type, kind, kind_version, generation,
                            trigger, attempt)
    VALUES (p_id, v_r.shard_id, 'operate', v_r.kind, v_r.kind_version, v_r.generation,
            'operation', 1)
    ON CONFLICT (resource_id, task_type, shard_id) DO NOTHING;
    PERFORM notify_gated('work_ready');
    RETURN v_uid;
END
$$;

--
-- Name: operation_start(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.operation_start(p_id uuid) RETURNS TABLE(uid uuid, verb text, input jsonb, attempts integer, requested_by text)
    LANGUAGE sql
    AS $$
    UPDATE resource_operations o
    SET state = 'running', attempts = o.attempts + 1, updated_at = now()
    WHERE o.uid = (SELECT x.uid FROM resource_operations x
                   WHERE x.resource_id = p_id AND x.state IN ('pending', 'running')
                   ORDER BY x.created_at, x.uid
                   LIMIT 1
                   FOR UPDATE)
    RETURNING o.uid, o.verb, o.input, o.attempts, o.requested_by
$$;

--
-- Name: outbox_pop(integer, smallint, smallint, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.outbox_pop(p_max integer, p_lo smallint, p_hi smallint, p_express boolean) RETURNS TABLE(popped integer, ids uuid[], gens bigint[], oks boolean[], terminals boolean[], errs text[], statuses jsonb[], conds jsonb[], health boolean[], advances boolean[])
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET enable_material TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_ids bigint[];
    v_shards smallint[];
BEGIN
    -- Two statements, so each keeps its own plan.
    IF p_express THEN
        -- The express one must walk the partial index idx_work_outbox_express whatever the
        -- statistics say. Written as `shard_id BETWEEN`, the range is an index condition the
        -- primary key (id, shard_id) can take too, and a generic plan made before the outbox
        -- was first analyzed (every backend of a new database) takes it: each express pass
        -- then read the whole bulk backlog to find no express row (measured: 1,183 buffers
        -- and 15 ms a pass behind a 4-broker run's backlog, half a core). `+ 0` leaves the
        -- range a filter only, so the partial index is always the cheaper ordered path; the
        -- lane holds composites' results only, so the filter costs nothing.
        SELECT array_agg(q.id), array_agg(q.shard_id) INTO v_ids, v_shards
        FROM (SELECT o.id, o.shard_id FROM work_outbox o
              WHERE (o.shard_id + 0) BETWEEN p_lo AND p_hi AND o.express
              ORDER BY o.id
              LIMIT p_max
              FOR UPDATE SKIP LOCKED) q;
    ELSE
        SELECT array_agg(q.id), array_agg(q.shard_id) INTO v_ids, v_shards
        FROM (SELECT o.id, o.shard_id FROM work_outbox o
              WHERE o.shard_id BETWEEN p_lo AND p_hi AND NOT o.express
              ORDER BY o.id
              LIMIT p_max
              FOR UPDATE SKIP LOCKED) q;
    END IF;
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

--
-- Name: providerconfigs_notify(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.providerconfigs_notify() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM pg_notify('providerconfig_changed', OLD.kind || '/' || OLD.kind_version);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM pg_notify('providerconfig_changed', NEW.kind || '/' || NEW.kind_version);
    END IF;
    RETURN NULL;
END $$;

--
-- Name: reap_stale_lifecycle(smallint, smallint, interval); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reap_stale_lifecycle(p_lo smallint, p_hi smallint, p_stale_after interval) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    n int;
BEGIN
    UPDATE lifecycle_outbox l
    SET claim_token = NULL, claim_epoch = l.claim_epoch + 1, broker_id = NULL,
        claimed_at = NULL, heartbeat_at = NULL
    WHERE l.shard_id BETWEEN p_lo AND p_hi
      AND l.claim_token IS NOT NULL
      AND l.heartbeat_at < now() - p_stale_after;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM pg_notify('lifecycle_ready', '');
    END IF;
    RETURN n;
END
$$;

--
-- Name: reap_stale_work(smallint, smallint, interval); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reap_stale_work(p_lo smallint, p_hi smallint, p_stale_after interval) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    n int;
BEGIN
    UPDATE work_queue w
    SET lease_token = NULL, claim_epoch = w.claim_epoch + 1, broker_id = NULL,
        worker_id = NULL, claimed_at = NULL, heartbeat_at = NULL
    WHERE w.shard_id BETWEEN p_lo AND p_hi
      AND w.lease_token IS NOT NULL
      AND w.heartbeat_at < now() - p_stale_after;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM pg_notify('work_ready', '');
    END IF;
    RETURN n;
END
$$;

--
-- Name: requeue_failed_and_pending(smallint, smallint, interval, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.requeue_failed_and_pending(p_lo smallint, p_hi smallint, p_retry_after interval, p_limit integer) RETURNS integer
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

--
-- Name: requeue_for_resync(text, integer, interval, boolean, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.requeue_for_resync(p_kind text, p_kind_version integer, p_interval interval, p_recompose boolean, p_limit integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_ids uuid[];
    n int;
BEGIN
    SELECT array_agg(s.id ORDER BY s.id) INTO v_ids
    FROM (SELECT r.id FROM resources r
          WHERE r.kind = p_kind AND r.kind_version = p_kind_version
            AND r.synced_gen >= r.generation
            AND r.failure_gen <> r.generation
            AND r.frozen_until IS NULL
            AND r.deletion_requested_at IS NULL
            AND coalesce(r.observed_at, r.updated_at) < now() - p_interval
          ORDER BY r.id
          LIMIT p_limit
          FOR UPDATE SKIP LOCKED) s;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    UPDATE resources r
    SET observed_at = now(),
        composed_gen = CASE WHEN p_recompose THEN 0 ELSE r.composed_gen END
    WHERE r.id = ANY (v_ids);
    INSERT INTO work_queue (resource_id, shard_id, task_type, kind, kind_version, generation,
                            trigger, attempt)
    SELECT r.id, r.shard_id, 'reconcile', r.kind, r.kind_version, r.generation, 'resync', 1
    FROM resources r WHERE r.id = ANY (v_ids)
    ORDER BY r.id
    ON CONFLICT (resource_id, task_type, shard_id) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM notify_gated('work_ready');
    END IF;
    RETURN n;
END
$$;

--
-- Name: resource_apply(text, integer, text, jsonb, jsonb, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_apply(p_kind text, p_kind_version integer, p_name text, p_spec jsonb, p_labels jsonb, p_provider_config_ref text) RETURNS TABLE(id uuid, result text, generation bigint)
    LANGUAGE sql
    AS $$
    SELECT b.id, b.result, b.generation
    FROM resource_apply_batch(ARRAY[p_kind], ARRAY[p_kind_version], ARRAY[p_name],
                              ARRAY[p_spec], ARRAY[p_labels], ARRAY[p_provider_config_ref]) b
$$;

--
-- Name: resource_apply_batch(text[], integer[], text[], jsonb[], jsonb[], text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_apply_batch(p_kinds text[], p_kind_versions integer[], p_names text[], p_specs jsonb[], p_labels jsonb[], p_provider_config_refs text[]) RETURNS TABLE(ord bigint, id uuid, result text, generation bigint)
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_ord bigint[];
    v_id uuid[];
    v_result text[];
    v_gen bigint[];
    v_changed uuid[];
BEGIN
    -- Only registered kind versions, and none deleted under this write (kinds.sql).
    PERFORM kind_version_guard(p_kinds, p_kind_versions);
    -- One row cannot be locked out of order: a single apply skips the extra probe.
    IF cardinality(p_names) > 1 THEN
        PERFORM 1 FROM resources r
        JOIN unnest(p_kinds, p_names) AS t(kind, name) ON t.kind = r.kind AND t.name = r.name
        ORDER BY r.id
        FOR UPDATE OF r;
    END IF;

    -- The LEFT JOIN on resources reads the snapshot from before the upsert: exactly the
    -- rows the upsert left alone (unchanged) are read there.
    WITH input AS MATERIALIZED (
        SELECT t.ord, uuid_v7() AS new_id, t.kind, t.kind_version, t.name, t.spec,
               t.labels, t.pcr
        FROM unnest(p_kinds, p_kind_versions, p_names, p_specs, p_labels,
                    p_provider_config_refs)
             WITH ORDINALITY AS t(kind, kind_version, name, spec, labels, pcr, ord)
    ), up AS (
        INSERT INTO resources AS r (id, kind, kind_version, name, shard_id, spec, labels,
                                    provider_config_ref)
        SELECT i.new_id, i.kind, i.kind_version, i.name, shard_of(i.new_id), i.spec, i.labels,
               i.pcr
        FROM input i
        ORDER BY i.kind, i.name
        ON CONFLICT (kind, name) DO UPDATE
            SET spec = EXCLUDED.spec,
                labels = EXCLUDED.labels,
                kind_version = EXCLUDED.kind_version,
                provider_config_ref = EXCLUDED.provider_config_ref,
                updated_at = now()
            WHERE r.spec IS DISTINCT FROM EXCLUDED.spec
               OR r.labels IS DISTINCT FROM EXCLUDED.labels
               OR r.kind_version IS DISTINCT FROM EXCLUDED.kind_version
               OR r.provider_config_ref IS DISTINCT FROM EXCLUDED.provider_config_ref
        RETURNING r.id, r.kind, r.name, r.generation
    )
    SELECT array_agg(i.ord ORDER BY i.ord),
           array_agg(coalesce(up.id, old.id) ORDER BY i.ord),
           array_agg(CASE WHEN up.id IS NULL THEN 'unchanged'
                          WHEN up.id = i.new_id THEN 'created'
                          ELSE 'configured' END ORDER BY i.ord),
           array_agg(coalesce(up.generation, old.generation) ORDER BY i.ord),
           array_agg(up.id ORDER BY up.id) FILTER (WHERE up.id IS NOT NULL)
    INTO v_ord, v_id, v_result, v_gen, v_changed
    FROM input i
    LEFT JOIN up ON up.kind = i.kind AND up.name = i.name
    LEFT JOIN resources old ON up.id IS NULL AND old.kind = i.kind AND old.name = i.name;

    IF v_changed IS NOT NULL THEN
        PERFORM schedule_eligible(v_changed);
    END IF;
    RETURN QUERY SELECT * FROM unnest(v_ord, v_id, v_result, v_gen);
END
$$;

--
-- Name: resource_delete_now(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_delete_now(p_id uuid) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_ids uuid[];
    v_revoked uuid[];
BEGIN
    PERFORM 1 FROM resources WHERE id = p_id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- Both the root_id set and the owner chain, so no queue row can outlive its resource
    -- even if a row's root_id were stale.
    WITH RECURSIVE sub(id) AS (
        SELECT p_id
        UNION
        SELECT r.id FROM resources r JOIN sub s ON r.owner_id = s.id
    )
    SELECT array_agg(d.id ORDER BY d.id) INTO v_ids
    FROM (SELECT sub.id FROM sub
          UNION
          SELECT r.id FROM resources r WHERE r.root_id = p_id) d;

    DELETE FROM work_outbox o WHERE o.resource_id = ANY (v_ids);
    WITH dropped AS (
        DELETE FROM work_queue w WHERE w.resource_id = ANY (v_ids) RETURNING w.lease_token
    )
    SELECT array_agg(d.lease_token) FILTER (WHERE d.lease_token IS NOT NULL) INTO v_revoked
    FROM dropped d;
    DELETE FROM work_outbox o WHERE o.resource_id = ANY (v_ids);
    DELETE FROM resources WHERE id = p_id;
    -- The running tasks' brokers cancel them (reason `deleted`).
    PERFORM notify_lease_revoked('deleted', v_revoked);
    RETURN FOUND;
END
$$;

--
-- Name: resource_descendant_ids(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_descendant_ids(p_id uuid) RETURNS TABLE(id uuid)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM resources r WHERE r.id = p_id AND r.owner_id IS NULL) THEN
        RETURN QUERY SELECT r.id FROM resources r WHERE r.root_id = p_id AND r.id <> p_id;
    ELSE
        RETURN QUERY
        WITH RECURSIVE sub(id) AS (
            SELECT r.id FROM resources r WHERE r.owner_id = p_id
            UNION
            SELECT r.id FROM resources r JOIN sub s ON r.owner_id = s.id
        )
        SELECT sub.id FROM sub;
    END IF;
END
$$;

--
-- Name: resource_lag_on_delete(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_lag_on_delete() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM resource_lag l USING lag_old o WHERE l.shard_id = o.shard_id AND l.id = o.id;
    RETURN NULL;
END
$$;

--
-- Name: resource_lag_on_insert(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_lag_on_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO resource_lag (shard_id, id, root_id, owner_id, unsettled, stuck)
    SELECT n.shard_id, n.id, n.root_id, n.owner_id,
           lag_unsettled(n.failure_gen, n.generation, n.frozen_until, n.deletion_requested_at),
           lag_stuck(n.failure_gen, n.generation, n.frozen_until)
    FROM lag_new n WHERE n.synced_gen < n.generation;
    RETURN NULL;
END
$$;

--
-- Name: resource_lag_on_update(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_lag_on_update() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: resource_operation_event(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_operation_event() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO resource_events (resource_id, kind, name, type, generation, message)
    SELECT r.id, r.kind, r.name, 'operation', r.generation,
           left(format('%s %s%s', NEW.verb, NEW.state,
                       CASE WHEN NEW.error IS NOT NULL AND NEW.state <> 'succeeded'
                            THEN ': ' || NEW.error ELSE '' END), 4096)
    FROM resources r WHERE r.id = NEW.resource_id;
    RETURN NULL;
END
$$;

--
-- Name: resource_phase_event(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_phase_event() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO resource_events (resource_id, kind, name, type, from_phase, to_phase, generation, message)
    VALUES (NEW.id, NEW.kind, NEW.name, 'phase', OLD.phase, NEW.phase, NEW.generation,
            CASE WHEN NEW.phase = 'Failed' OR NEW.phase = 'Deleting' THEN left(NEW.failure_message, 4096) END);
    RETURN NULL;
END
$$;

--
-- Name: resource_problem_rank(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_problem_rank(p_phase text) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE p_phase
        WHEN 'Failed'      THEN 0
        WHEN 'Quarantined' THEN 1
        WHEN 'Degraded'    THEN 2
        WHEN 'Orphaned'    THEN 3
    END::smallint
$$;

--
-- Name: resource_problems_track(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_problems_track() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP <> 'DELETE' AND resource_problem_rank(NEW.phase) IS NOT NULL THEN
        INSERT INTO resource_problems (id, rank, created_at)
        VALUES (NEW.id, resource_problem_rank(NEW.phase), NEW.created_at)
        ON CONFLICT (id) DO UPDATE SET rank = EXCLUDED.rank;
    ELSE
        DELETE FROM resource_problems WHERE id = OLD.id;
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: resource_quarantine(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_quarantine(p_id uuid) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_shard smallint;
    v_revoked uuid;
BEGIN
    UPDATE resources SET frozen_until = 'infinity', updated_at = now()
    WHERE id = p_id
    RETURNING shard_id INTO v_shard;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM work_queue w
    WHERE w.resource_id = p_id AND w.shard_id = v_shard AND w.task_type = 'reconcile'
    RETURNING w.lease_token INTO v_revoked;
    IF v_revoked IS NOT NULL THEN
        PERFORM notify_lease_revoked('quarantined', ARRAY[v_revoked]);
    END IF;
    PERFORM cascade_to_owners(p_id);
    RETURN true;
END
$$;

--
-- Name: resource_reconcile_now(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_reconcile_now(p_id uuid) RETURNS text
    LANGUAGE plpgsql
    AS $$
DECLARE
    r resources%ROWTYPE;
    n int;
BEGIN
    -- The row lock orders this against a drainer finishing the same resource.
    SELECT * INTO r FROM resources WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF r.deletion_requested_at IS NOT NULL THEN
        RETURN 'deleting';
    END IF;
    IF r.frozen_until IS NOT NULL THEN
        RETURN 'frozen';
    END IF;
    -- No copy of the provider config: work_claim reads the resource's at claim.
    INSERT INTO work_queue AS w (resource_id, shard_id, task_type, kind, kind_version,
                                 generation, trigger, attempt, not_before)
    VALUES (r.id, r.shard_id, 'reconcile', r.kind, r.kind_version, r.generation, 'manual',
            r.failure_attempts + 1, '-infinity'::timestamptz)
    ON CONFLICT (resource_id, task_type, shard_id) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN
        -- Already queued. An unleased row waiting out a backoff becomes due now; making a
        -- row claimable earlier needs no epoch bump (no lease exists to fence).
        UPDATE work_queue w SET not_before = '-infinity'
        WHERE w.resource_id = r.id AND w.shard_id = r.shard_id AND w.task_type = 'reconcile'
          AND w.lease_token IS NULL AND w.not_before > now();
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n = 0 THEN
            RETURN 'already_queued';
        END IF;
    END IF;
    PERFORM pg_notify('work_ready', '');
    RETURN 'queued';
END
$$;

--
-- Name: resource_request_deletion(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_request_deletion(p_id uuid) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_ids uuid[];
BEGIN
    PERFORM 1 FROM resources WHERE id = p_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    v_ids := teardown_mark(p_id);
    IF cardinality(v_ids) > 0 THEN
        PERFORM teardown_advance(v_ids);
    END IF;
    RETURN cardinality(v_ids);
END
$$;

--
-- Name: resource_rollback(uuid, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_rollback(p_id uuid, p_generation bigint) RETURNS TABLE(generation bigint, changed boolean)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_spec jsonb;
    v_gen bigint;
BEGIN
    SELECT s.spec INTO v_spec FROM spec_versions s
    WHERE s.resource_id = p_id AND s.generation = p_generation;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE resources r SET spec = v_spec, updated_at = now()
    WHERE r.id = p_id AND r.spec IS DISTINCT FROM v_spec AND r.deletion_requested_at IS NULL
    RETURNING r.generation INTO v_gen;
    IF v_gen IS NOT NULL THEN
        PERFORM schedule_eligible(ARRAY[p_id]);
        RETURN QUERY SELECT v_gen, true;
        RETURN;
    END IF;
    RETURN QUERY SELECT r.generation, false FROM resources r WHERE r.id = p_id;
END
$$;

--
-- Name: resource_unquarantine(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resource_unquarantine(p_id uuid) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM 1 FROM resources WHERE id = p_id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE resources SET frozen_until = NULL, updated_at = now()
    WHERE id = p_id AND frozen_until = 'infinity';
    IF FOUND THEN
        PERFORM schedule_eligible(ARRAY[p_id]);
        PERFORM cascade_to_owners(p_id);
    END IF;
    RETURN true;
END
$$;

--
-- Name: resources_bump_generation(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resources_bump_generation() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.generation := OLD.generation + 1;
    NEW.failure_attempts := 0;
    NEW.failure_terminal := false;
    NEW.updated_at := now();
    RETURN NEW;
END $$;

--
-- Name: resources_created(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resources_created() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO resource_events (resource_id, kind, name, type, to_phase, generation)
    SELECT n.id, n.kind, n.name, 'created', n.phase, n.generation FROM new_rows n;
    IF EXISTS (SELECT 1 FROM reactor_bindings WHERE enabled AND transition = 'created') THEN
        PERFORM lifecycle_emit(array_agg('created'::text), array_agg(to_jsonb(n))) FROM new_rows n;
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: resources_deleted(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resources_deleted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO resource_events (resource_id, kind, name, type, from_phase, generation)
    SELECT o.id, o.kind, o.name, 'deleted', o.phase, o.generation FROM old_rows o;
    IF EXISTS (SELECT 1 FROM reactor_bindings WHERE enabled AND transition = 'deleted') THEN
        PERFORM lifecycle_emit(array_agg('deleted'::text), array_agg(to_jsonb(o))) FROM old_rows o;
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: retry_backoff(integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.retry_backoff(p_attempts integer) RETURNS interval
    LANGUAGE sql STABLE
    AS $$
    SELECT make_interval(secs => least(
        coalesce(nullif(current_setting('converge.retry_base_ms', true), '')::bigint, 2000)
            * power(2, greatest(least(p_attempts, 30) - 1, 0)),
        coalesce(nullif(current_setting('converge.retry_max_ms', true), '')::bigint, 300000)
    ) / 1000.0)
$$;

--
-- Name: schedule_eligible(uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.schedule_eligible(p_ids uuid[]) RETURNS integer
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    n int;
BEGIN
    -- No copy of the provider config: work_claim reads the one the resource names when the
    -- task is claimed.
    INSERT INTO work_queue AS w (resource_id, shard_id, task_type, kind, kind_version,
                                 generation, trigger, attempt, not_before)
    SELECT r.id, r.shard_id, 'reconcile', r.kind, r.kind_version, r.generation,
           'specChange',
           r.failure_attempts + 1,
           CASE WHEN r.failure_gen = r.generation AND r.failure_attempts > 0
                THEN now() + retry_backoff(r.failure_attempts)
                ELSE now() END
    FROM resources r
    LEFT JOIN kind_config kc ON kc.kind = r.kind AND kc.kind_version = r.kind_version
    WHERE r.id = ANY (p_ids)
      AND r.generation - r.synced_gen > 0  -- not idx_resources_lagging (see 0011)
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
            kind_version = EXCLUDED.kind_version,
            trigger = EXCLUDED.trigger,
            attempt = EXCLUDED.attempt,
            not_before = EXCLUDED.not_before,
            lease_token = NULL,
            claim_epoch = w.claim_epoch + 1,
            broker_id = NULL,
            worker_id = NULL,
            claimed_at = NULL,
            heartbeat_at = NULL,
            enqueued_at = now()
        WHERE w.generation < EXCLUDED.generation OR w.kind_version <> EXCLUDED.kind_version;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM notify_gated('work_ready');
    END IF;
    RETURN n;
END
$$;

--
-- Name: schedule_rollup(uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.schedule_rollup(p_ids uuid[]) RETURNS integer
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
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

--
-- Name: shard_of(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.shard_of(p_id uuid) RETURNS smallint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT get_byte(uuid_send(p_id), 15)::smallint $$;

--
-- Name: spec_versions_forget_deleted(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.spec_versions_forget_deleted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM spec_versions s USING spec_old o WHERE s.resource_id = o.id;
    RETURN NULL;
END
$$;

--
-- Name: spec_versions_record(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.spec_versions_record() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_keep int := coalesce(nullif(current_setting('converge.spec_history_keep', true), '')::int, 50);
BEGIN
    INSERT INTO spec_versions (resource_id, generation, spec)
    VALUES (NEW.id, NEW.generation, NEW.spec)
    ON CONFLICT (resource_id, generation) DO UPDATE SET spec = EXCLUDED.spec, created_at = now();
    IF NEW.generation > v_keep THEN
        DELETE FROM spec_versions
        WHERE resource_id = NEW.id AND generation <= NEW.generation - v_keep;
    END IF;
    RETURN NULL;
END
$$;

--
-- Name: spec_versions_record_created(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.spec_versions_record_created() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO spec_versions (resource_id, generation, spec)
    SELECT n.id, n.generation, n.spec FROM spec_new n WHERE n.owner_id IS NULL
    ON CONFLICT (resource_id, generation) DO UPDATE SET spec = EXCLUDED.spec, created_at = now();
    RETURN NULL;
END
$$;

--
-- Name: sweep_deletable(smallint, smallint, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sweep_deletable(p_lo smallint, p_hi smallint, p_limit integer) RETURNS integer
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
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

--
-- Name: sweep_expired_orphans(smallint, smallint, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sweep_expired_orphans(p_lo smallint, p_hi smallint, p_limit integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_id uuid;
    v_marked uuid[] := '{}';
    n int := 0;
BEGIN
    FOR v_id IN SELECT r.id FROM resources r
                WHERE r.frozen_until < now() AND r.deletion_requested_at IS NULL
                  AND r.shard_id BETWEEN p_lo AND p_hi
                ORDER BY r.id
                LIMIT p_limit
                FOR UPDATE SKIP LOCKED LOOP
        v_marked := v_marked || teardown_mark(v_id);
        n := n + 1;
    END LOOP;
    IF n > 0 THEN
        PERFORM teardown_advance(v_marked);
    END IF;
    RETURN n;
END
$$;

--
-- Name: teardown_advance(uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.teardown_advance(p_ids uuid[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_next uuid[] := p_ids;
    v_tasks uuid[];
    v_gone uuid[];
    v_owners uuid[];
    v_queued int;
    n int := 0;
BEGIN
    WHILE v_next IS NOT NULL AND cardinality(v_next) > 0 LOOP
        SELECT array_agg(f.id ORDER BY f.id) FILTER (WHERE cardinality(f.finalizers) > 0),
               array_agg(f.id ORDER BY f.id) FILTER (WHERE cardinality(f.finalizers) = 0)
        INTO v_tasks, v_gone
        FROM (SELECT r.id, r.finalizers FROM resources r
              WHERE r.id = ANY (v_next)
                AND r.deletion_requested_at IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM resources c WHERE c.owner_id = r.id)
                AND NOT EXISTS (SELECT 1 FROM resource_deps d WHERE d.dependency_id = r.id)
              ORDER BY r.id
              FOR UPDATE SKIP LOCKED) f;

        IF v_tasks IS NOT NULL THEN
            INSERT INTO work_queue (resource_id, shard_id, task_type, kind, kind_version,
                                    generation, trigger, attempt)
            SELECT r.id, r.shard_id, 'delete', r.kind, r.kind_version, r.generation,
                   'deleteRequested', 1
            FROM resources r WHERE r.id = ANY (v_tasks)
            ORDER BY r.id
            ON CONFLICT (resource_id, task_type, shard_id) DO NOTHING;
            GET DIAGNOSTICS v_queued = ROW_COUNT;
            IF v_queued > 0 THEN
                n := n + v_queued;
                PERFORM notify_gated('work_ready');
            END IF;
        END IF;

        EXIT WHEN v_gone IS NULL;

        SELECT array_agg(DISTINCT p.id) INTO v_next
        FROM (SELECT r.owner_id AS id FROM resources r
              WHERE r.id = ANY (v_gone) AND r.owner_id IS NOT NULL
              UNION
              SELECT d.dependency_id FROM resource_deps d WHERE d.dependent_id = ANY (v_gone)) p
        WHERE NOT p.id = ANY (v_gone);
        SELECT array_agg(r.id) INTO v_owners
        FROM resources r
        WHERE r.id = ANY (v_next) AND r.deletion_requested_at IS NULL;

        -- Queue and outbox first, so nothing writes back for a row that no longer exists.
        DELETE FROM work_outbox o WHERE o.resource_id = ANY (v_gone);
        DELETE FROM work_queue q WHERE q.resource_id = ANY (v_gone);
        DELETE FROM resources r WHERE r.id = ANY (v_gone);
        n := n + cardinality(v_gone);

        IF v_owners IS NOT NULL THEN
            PERFORM schedule_eligible(v_owners);
            PERFORM schedule_rollup(v_owners);
        END IF;
    END LOOP;
    RETURN n;
END
$$;

--
-- Name: teardown_complete(uuid[], smallint[], uuid[], bigint[], boolean[], text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.teardown_complete(p_resource_ids uuid[], p_shard_ids smallint[], p_lease_tokens uuid[], p_claim_epochs bigint[], p_ok boolean[], p_errors text[]) RETURNS TABLE(resource_id uuid, claim_epoch bigint)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_done uuid[];
    v_done_ep bigint[];
    v_failed uuid[];
    v_failed_ep bigint[];
    v_failed_err text[];
BEGIN
    WITH i AS (
        SELECT * FROM unnest(p_resource_ids, p_shard_ids, p_lease_tokens, p_claim_epochs, p_ok, p_errors)
            AS x(id, shard_id, lease_token, claim_epoch, ok, err)
    ), done AS (
        DELETE FROM work_queue q USING i
        WHERE q.shard_id = i.shard_id AND q.resource_id = i.id AND q.task_type = 'delete'
          AND q.lease_token = i.lease_token AND q.claim_epoch = i.claim_epoch AND i.ok
        RETURNING q.resource_id, i.claim_epoch
    )
    SELECT array_agg(done.resource_id ORDER BY done.resource_id),
           array_agg(done.claim_epoch ORDER BY done.resource_id)
    INTO v_done, v_done_ep FROM done;

    WITH i AS (
        SELECT * FROM unnest(p_resource_ids, p_shard_ids, p_lease_tokens, p_claim_epochs, p_ok, p_errors)
            AS x(id, shard_id, lease_token, claim_epoch, ok, err)
    ), retry AS (
        UPDATE work_queue q
        SET lease_token = NULL, claim_epoch = q.claim_epoch + 1, attempt = q.attempt + 1,
            not_before = now() + retry_backoff(q.attempt), broker_id = NULL, worker_id = NULL,
            claimed_at = NULL, heartbeat_at = NULL
        FROM i
        WHERE q.shard_id = i.shard_id AND q.resource_id = i.id AND q.task_type = 'delete'
          AND q.lease_token = i.lease_token AND q.claim_epoch = i.claim_epoch AND NOT i.ok
        RETURNING q.resource_id, i.claim_epoch, i.err
    )
    SELECT array_agg(retry.resource_id ORDER BY retry.resource_id),
           array_agg(retry.claim_epoch ORDER BY retry.resource_id),
           array_agg(retry.err ORDER BY retry.resource_id)
    INTO v_failed, v_failed_ep, v_failed_err FROM retry;

    PERFORM 1 FROM resources r
    WHERE r.id = ANY (coalesce(v_done, '{}') || coalesce(v_failed, '{}'))
    ORDER BY r.id FOR UPDATE;
    IF v_done IS NOT NULL THEN
        UPDATE resources r
        SET finalizers = '{}', failure_attempts = 0, failure_message = NULL, updated_at = now()
        WHERE r.id = ANY (v_done);
        PERFORM notify_gated('outbox_ready');
        RETURN QUERY SELECT * FROM unnest(v_done, v_done_ep);
    END IF;
    IF v_failed IS NOT NULL THEN
        UPDATE resources r
        SET failure_attempts = r.failure_attempts + 1,
            failure_message = left('teardown failed: ' || coalesce(f.err, ''), 4096),
            updated_at = now()
        FROM unnest(v_failed, v_failed_err) AS f(id, err)
        WHERE r.id = f.id;
        RETURN QUERY SELECT * FROM unnest(v_failed, v_failed_ep);
    END IF;
END
$$;

--
-- Name: teardown_mark(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.teardown_mark(p_id uuid) RETURNS uuid[]
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_ids uuid[];
    v_revoked uuid[];
BEGIN
    SELECT array_agg(s.id ORDER BY s.id) INTO v_ids
    FROM (SELECT r.id FROM resources r
          WHERE r.id IN (SELECT t.id FROM teardown_tree(p_id) t)
            AND r.deletion_requested_at IS NULL
          ORDER BY r.id
          FOR UPDATE) s;
    IF v_ids IS NULL THEN
        RETURN '{}';
    END IF;
    UPDATE resources r
    SET deletion_requested_at = now(),
        finalizers = CASE WHEN s.finalizer_name IS NULL THEN '{}'::text[]
                          ELSE ARRAY[s.finalizer_name] END,
        failure_attempts = 0,
        failure_message = NULL,
        updated_at = now()
    FROM (SELECT x.id, kc.finalizer_name FROM resources x
          LEFT JOIN kind_config kc ON kc.kind = x.kind AND kc.kind_version = x.kind_version
          WHERE x.id = ANY (v_ids)) s
    WHERE r.id = s.id;
    WITH dropped AS (
        DELETE FROM work_queue q WHERE q.resource_id = ANY (v_ids) AND q.task_type <> 'delete'
        RETURNING q.lease_token
    )
    SELECT array_agg(d.lease_token) FILTER (WHERE d.lease_token IS NOT NULL) INTO v_revoked
    FROM dropped d;
    PERFORM notify_lease_revoked('deleted', v_revoked);
    UPDATE resource_operations o
    SET state = 'failed', error = 'the resource is being deleted', updated_at = now(),
        finished_at = now()
    WHERE o.resource_id = ANY (v_ids) AND o.state IN ('pending', 'running');
    PERFORM notify_gated('outbox_ready');
    RETURN v_ids;
END
$$;

--
-- Name: teardown_tree(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.teardown_tree(p_id uuid) RETURNS TABLE(id uuid)
    LANGUAGE sql STABLE
    AS $$
    WITH RECURSIVE tree(id) AS (
        SELECT p_id
        UNION
        SELECT n.id FROM tree t
        CROSS JOIN LATERAL (
            SELECT r.id FROM resources r WHERE r.owner_id = t.id
            UNION ALL
            SELECT d.dependent_id FROM resource_deps d WHERE d.dependency_id = t.id
        ) n
    )
    SELECT tree.id FROM tree
$$;

--
-- Name: uuid_v7(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.uuid_v7() RETURNS uuid
    LANGUAGE sql PARALLEL SAFE
    AS $$
    SELECT encode(set_bit(set_bit(
               overlay(uuid_send(gen_random_uuid())
                       PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp())
                                                        * 1000)::bigint) FROM 3)
                       FROM 1 FOR 6),
               52, 1), 53, 1), 'hex')::uuid
$$;

--
-- Name: validate_kind_manifest(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.validate_kind_manifest(m jsonb) RETURNS text[]
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
DECLARE
    errs text[] := '{}';
    r jsonb;
    i int := 0;
    trig text;
    emits jsonb;
    composers int := 0;
    rollups int := 0;
    reactors int := 0;
    names text[] := '{}';
BEGIN
    IF jsonb_typeof(m) IS DISTINCT FROM 'object' THEN
        RETURN ARRAY['manifest must be a JSON object'];
    END IF;
    IF coalesce(m->>'kind', '') !~ '^[a-z][a-z0-9._-]{0,252}$' THEN
        errs := errs || 'kind must be lowercase letters, digits, ''-'', ''.'' or ''_'', starting with a letter';
    END IF;
    IF jsonb_typeof(m->'reactions') IS DISTINCT FROM 'array' OR jsonb_array_length(m->'reactions') = 0 THEN
        RETURN errs || 'reactions must declare at least one reaction'::text;
    END IF;
    FOR r IN SELECT value FROM jsonb_array_elements(m->'reactions') LOOP
        trig := r->>'trigger';
        emits := coalesce(r->'emits', '[]'::jsonb);
        IF coalesce(r->>'name', '') = '' THEN
            errs := errs || format('reactions[%s]: name must not be empty', i);
        ELSIF (r->>'name') = ANY(names) THEN
            errs := errs || format('reactions[%s]: duplicate reaction name', i);
        ELSE
            names := names || (r->>'name');
        END IF;
        IF trig = 'specChange' THEN
            IF emits ? 'children' THEN
                composers := composers + 1;
                IF NOT (emits ? 'status' OR emits ? 'conditions') THEN
                    errs := errs || format('reactions[%s]: a specChange reaction that emits children must also emit status or conditions', i);
                END IF;
                IF emits ? 'sideEffect' THEN
                    errs := errs || format('reactions[%s]: a specChange reaction that emits children may not emit sideEffect', i);
                END IF;
            END IF;
        ELSIF trig = 'childrenSettled' THEN
            IF emits ? 'status' THEN rollups := rollups + 1; END IF;
        ELSIF trig = 'deleteRequested' THEN
            IF coalesce(r->>'finalizer', '') = '' AND coalesce(m->>'finalizer_name', '') = '' THEN
                errs := errs || format('reactions[%s]: a deleteRequested reaction requires a finalizer', i);
            END IF;
        ELSIF trig = 'operation' THEN
            IF coalesce(r->>'verb', '') = '' THEN
                errs := errs || format('reactions[%s]: an operation reaction requires a verb', i);
            END IF;
        ELSIF trig = 'reactor' THEN
            reactors := reactors + 1;
            IF emits <> '["sideEffect"]'::jsonb THEN
                errs := errs || format('reactions[%s]: a reactor reaction must emit sideEffect and nothing else', i);
            END IF;
        ELSE
            errs := errs || format('reactions[%s]: unknown trigger %s', i, coalesce(trig, 'null'));
        END IF;
        i := i + 1;
    END LOOP;
    IF composers > 1 THEN errs := errs || 'at most one specChange reaction may emit children (one composer)'::text; END IF;
    IF rollups > 1 THEN errs := errs || 'at most one childrenSettled reaction may emit status (one rollup)'::text; END IF;
    IF reactors > 1 THEN errs := errs || 'at most one reactor reaction per kind'::text; END IF;
    RETURN errs;
END
$_$;

--
-- Name: work_claim(smallint, smallint, text, integer, integer, text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.work_claim(p_lo smallint, p_hi smallint, p_kind text, p_kind_version integer, p_limit integer, p_broker text, p_ahead integer DEFAULT 0) RETURNS TABLE(resource_id uuid, shard_id smallint, task_type text, generation bigint, trigger text, attempt integer, lease_token uuid, claim_epoch bigint, provider_config jsonb, provider_bundle bytea, task_deadline_secs integer, name text, owner_id uuid, root_id uuid, spec jsonb, status jsonb, r_generation bigint, synced_gen bigint, is_ready boolean, finalizers text[], deletion_requested_at_ms bigint, frozen_until_ms bigint, labels jsonb, phase text, composed_gen bigint, default_config_rev bigint)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET enable_material TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_cap int;
    v_used int;
    v_limit int := p_limit;
    v_ids uuid[];
    v_types text[];
    v_shards smallint[];
BEGIN
    SELECT kc.max_inflight INTO v_cap FROM kind_config kc
    WHERE kc.kind = p_kind AND kc.kind_version = p_kind_version;
    IF coalesce(v_cap, 0) > 0 THEN
        v_limit := p_limit - greatest(coalesce(p_ahead, 0), 0);
        IF v_limit <= 0 THEN
            RETURN;
        END IF;
        -- Serialises capped claims of this kind across brokers until this claim commits.
        PERFORM pg_advisory_xact_lock(hashtext('converge.kind_cap'), hashtext(p_kind || '/' || p_kind_version));
        SELECT count(*) INTO v_used FROM work_queue q
        WHERE q.kind = p_kind AND q.kind_version = p_kind_version AND q.lease_token IS NOT NULL;
        v_limit := least(v_limit, v_cap - v_used);
        IF v_limit <= 0 THEN
            RETURN;
        END IF;
    END IF;

    -- Pick and lock first, then update by key (see 0015); oldest due first.
    SELECT array_agg(q.resource_id), array_agg(q.task_type), array_agg(q.shard_id)
    INTO v_ids, v_types, v_shards
    FROM (SELECT q.resource_id, q.task_type, q.shard_id
          FROM work_queue q
          WHERE q.shard_id BETWEEN p_lo AND p_hi
            AND q.kind = p_kind AND q.kind_version = p_kind_version
            AND q.lease_token IS NULL
            AND q.not_before <= now()
          ORDER BY q.not_before
          LIMIT v_limit
          FOR UPDATE SKIP LOCKED) q;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;

    RETURN QUERY
    WITH u AS (
        UPDATE work_queue w
        SET lease_token = gen_random_uuid(),
            claim_epoch = w.claim_epoch + 1,
            claimed_at = now(),
            heartbeat_at = now(),
            broker_id = p_broker
        FROM unnest(v_ids, v_types, v_shards) AS k(id, task_type, shard_id)
        WHERE w.resource_id = k.id AND w.task_type = k.task_type AND w.shard_id = k.shard_id
        RETURNING w.resource_id, w.shard_id, w.task_type, w.generation, w.trigger, w.attempt,
                  w.lease_token, w.claim_epoch, w.kind, w.kind_version
    )
    SELECT u.resource_id, u.shard_id, u.task_type, u.generation, u.trigger, u.attempt,
           u.lease_token, u.claim_epoch, pc.spec, pc.data,
           coalesce(kc.task_deadline_secs, 0),
           r.name, r.owner_id, r.root_id, r.spec, r.status, r.generation, r.synced_gen,
           r.is_ready, r.finalizers,
           coalesce((extract(epoch FROM r.deletion_requested_at) * 1000)::bigint, 0),
           CASE WHEN r.frozen_until IS NULL THEN 0
                WHEN r.frozen_until = 'infinity' THEN 9223372036854775807
                ELSE (extract(epoch FROM r.frozen_until) * 1000)::bigint END,
           r.labels, r.phase, r.composed_gen,
           -- Parameters only: one probe of idx_providerconfigs_default per claim.
           coalesce((SELECT d.xmin::text::bigint FROM providerconfigs d
                     WHERE d.kind = p_kind AND d.kind_version = p_kind_version
                       AND d.is_default), 0)
    FROM u
    JOIN resources r ON r.id = u.resource_id
    LEFT JOIN providerconfigs pc ON pc.name = r.provider_config_ref
    LEFT JOIN kind_config kc ON kc.kind = u.kind AND kc.kind_version = u.kind_version;
END
$$;

--
-- Name: work_complete(uuid[], smallint[], text[], uuid[], bigint[], boolean[], boolean[], text[], jsonb[], jsonb[], boolean[], boolean[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.work_complete(p_resource_ids uuid[], p_shard_ids smallint[], p_task_types text[], p_lease_tokens uuid[], p_claim_epochs bigint[], p_ok boolean[], p_terminal boolean[], p_errors text[], p_statuses jsonb[], p_conditions jsonb[], p_health boolean[], p_advance boolean[]) RETURNS TABLE(accepted_ids uuid[], accepted_epochs bigint[], outboxed integer, owned boolean, synced_kinds text[], synced_secs double precision[])
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_plain boolean[];
    v_phases text[];
    v_troubled boolean[];
    v_owner uuid[];
    v_root uuid[];
    v_ids uuid[];
    v_gens bigint[];
    v_ok boolean[];
    v_terminal boolean[];
    v_errs text[];
    v_statuses jsonb[];
    v_conds jsonb[];
    v_health boolean[];
    v_advance boolean[];
    v_old_phases text[];
    v_troubled_ids uuid[];
    v_owners uuid[];
BEGIN
    -- 1. Lock the resources of the plain results, in the batch's (id) order; each row's
    -- phase before, trouble and owners, aligned with the batch (NULL: not applied here).
    SELECT array_agg(x.plain ORDER BY b.ord), array_agg(x.phase ORDER BY b.ord),
           array_agg(x.troubled ORDER BY b.ord), array_agg(x.owner_id ORDER BY b.ord),
           array_agg(x.root_id ORDER BY b.ord)
    INTO v_plain, v_phases, v_troubled, v_owner, v_root
    FROM unnest(p_resource_ids, p_task_types) WITH ORDINALITY AS b(id, task_type, ord)
    LEFT JOIN LATERAL (
        SELECT true AS plain, r.phase, r.failure_gen <> 0 OR NOT r.health_ok AS troubled,
               r.owner_id, r.root_id
        FROM resources r
        WHERE r.id = b.id AND b.task_type = 'reconcile'
          AND NOT EXISTS (SELECT 1 FROM kind_config kc WHERE kc.kind = r.kind AND kc.has_rollup)
        FOR UPDATE OF r) x ON true;

    -- 2. Fence: remove the queue rows that still carry the lease; the results that are not
    -- plain go to the outbox, the plain ones are gathered (in id order) to apply.
    WITH input AS (
        SELECT * FROM unnest(p_resource_ids, p_shard_ids, p_task_types, p_lease_tokens,
                             p_claim_epochs, p_ok, p_terminal, p_errors, p_statuses,
                             p_conditions, p_health, p_advance, v_plain, v_phases,
                             v_troubled, v_owner, v_root)
            AS x(resource_id, shard_id, task_type, lease_token, claim_epoch, ok, terminal,
                 error_message, status, conditions, health_ok, advance, plain, phase,
                 troubled, owner_id, root_id)
    ), done AS (
        DELETE FROM work_queue w
        USING input i
        WHERE w.resource_id = i.resource_id AND w.task_type = i.task_type
          AND w.shard_id = i.shard_id AND w.claim_epoch = i.claim_epoch
          -- Not `=`: that implies `lease_token IS NOT NULL`, which lets the planner pick
          -- the leased partial index (see above).
          AND i.lease_token IS NOT NULL AND w.lease_token IS NOT DISTINCT FROM i.lease_token
        RETURNING w.resource_id, w.shard_id, w.task_type, w.generation, w.claim_epoch,
                  i.ok, i.terminal, i.error_message, i.status, i.conditions, i.health_ok,
                  i.advance, w.kind, i.phase, i.troubled, i.owner_id, i.root_id,
                  -- Locked above: a plain result whose resource is there.
                  coalesce(i.plain, false) AS plain
    ), ins AS (
        INSERT INTO work_outbox (shard_id, resource_id, task_type, generation, ok, terminal,
                                 error_message, status, conditions, health_ok, advance, express)
        SELECT d.shard_id, d.resource_id, d.task_type, d.generation, d.ok, d.terminal,
               d.error_message, d.status, d.conditions, d.health_ok, d.advance,
               EXISTS (SELECT 1 FROM kind_config kc WHERE kc.kind = d.kind AND kc.has_rollup)
        FROM done d WHERE NOT d.plain
        RETURNING 1
    )
    SELECT array_agg(d.resource_id), array_agg(d.claim_epoch),
           (SELECT count(*) FROM ins)::int,
           array_agg(d.resource_id ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.generation ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.ok ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.terminal ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.error_message ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.status ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.conditions ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.health_ok ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.advance ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.phase ORDER BY d.resource_id) FILTER (WHERE d.plain),
           array_agg(d.resource_id) FILTER (WHERE d.plain AND d.troubled),
           -- As they are (NULLs and repeats): the cascade drops both.
           array_agg(d.owner_id) FILTER (WHERE d.plain) || array_agg(d.root_id) FILTER (WHERE d.plain)
    INTO accepted_ids, accepted_epochs, outboxed, v_ids, v_gens, v_ok, v_terminal, v_errs,
         v_statuses, v_conds, v_health, v_advance, v_old_phases, v_troubled_ids, v_owners
    FROM done d;

    owned := false;
    IF v_ids IS NOT NULL THEN
        -- 3. Apply the plain results where they were fenced.
        SELECT a.synced_kinds, a.synced_secs INTO synced_kinds, synced_secs
        FROM apply_locked_results(v_ids, v_gens, v_ok, v_terminal, v_errs, v_statuses,
                                  v_conds, v_health, v_advance, v_old_phases,
                                  v_troubled_ids, v_owners) a;
        owned := EXISTS (SELECT 1 FROM unnest(v_owners) o WHERE o IS NOT NULL);
    END IF;
    -- The drainers: results to apply.
    IF outboxed > 0 THEN
        PERFORM notify_gated('outbox_ready');
    END IF;
    RETURN NEXT;
END
$$;

--
-- Name: work_heartbeat(uuid[], smallint[], text[], bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.work_heartbeat(p_resource_ids uuid[], p_shard_ids smallint[], p_task_types text[], p_claim_epochs bigint[]) RETURNS integer
    LANGUAGE sql
    AS $$
    WITH input AS (
        SELECT * FROM unnest(p_resource_ids, p_shard_ids, p_task_types, p_claim_epochs)
            AS x(resource_id, shard_id, task_type, claim_epoch)
    ), upd AS (
        UPDATE work_queue w SET heartbeat_at = now()
        FROM input i
        WHERE w.resource_id = i.resource_id AND w.task_type = i.task_type
          AND w.shard_id = i.shard_id AND w.claim_epoch = i.claim_epoch
          AND w.lease_token IS NOT NULL
        RETURNING 1
    )
    SELECT count(*)::int FROM upd
$$;

--
-- Name: work_queue_superseded(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.work_queue_superseded() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM notify_lease_revoked('superseded', ARRAY[OLD.lease_token]);
    RETURN NULL;
END
$$;

--
-- Name: work_release(uuid[], smallint[], text[], bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.work_release(p_resource_ids uuid[], p_shard_ids smallint[], p_task_types text[], p_claim_epochs bigint[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    n int;
BEGIN
    WITH input AS (
        SELECT * FROM unnest(p_resource_ids, p_shard_ids, p_task_types, p_claim_epochs)
            AS x(resource_id, shard_id, task_type, claim_epoch)
    )
    UPDATE work_queue w
    SET lease_token = NULL, claim_epoch = w.claim_epoch + 1, broker_id = NULL,
        worker_id = NULL, claimed_at = NULL, heartbeat_at = NULL
    FROM input i
    WHERE w.resource_id = i.resource_id AND w.task_type = i.task_type
      AND w.shard_id = i.shard_id AND w.claim_epoch = i.claim_epoch
      AND w.lease_token IS NOT NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        -- Direct, not gated: rare, and another broker should see the work within ms.
        PERFORM pg_notify('work_ready', '');
    END IF;
    RETURN n;
END
$$;

--
-- Name: api_tokens; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.api_tokens (
    id bigint NOT NULL,
    name text NOT NULL,
    token_sha256 bytea NOT NULL,
    role text NOT NULL,
    kinds text[] DEFAULT '{}'::text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    created_by text,
    expires_at timestamp with time zone,
    last_used_at timestamp with time zone,
    CONSTRAINT api_tokens_check CHECK (((role = 'worker'::text) = (cardinality(kinds) > 0))),
    CONSTRAINT api_tokens_name_check CHECK (((char_length(name) >= 1) AND (char_length(name) <= 128))),
    CONSTRAINT api_tokens_role_check CHECK ((role = ANY (ARRAY['viewer'::text, 'operator'::text, 'admin'::text, 'worker'::text]))),
    CONSTRAINT api_tokens_token_sha256_check CHECK ((octet_length(token_sha256) = 32))
);

--
-- Name: api_tokens_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.api_tokens ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.api_tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: broker_liveness; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.broker_liveness (
    broker_id text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    heartbeat_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: cluster_members; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.cluster_members (
    member_id text NOT NULL,
    role text NOT NULL,
    version text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    addresses jsonb DEFAULT '{}'::jsonb NOT NULL,
    started_at timestamp with time zone NOT NULL,
    heartbeat_at timestamp with time zone DEFAULT now() NOT NULL,
    workers jsonb DEFAULT '[]'::jsonb NOT NULL,
    workers_at timestamp with time zone,
    released_at timestamp with time zone,
    CONSTRAINT cluster_members_role_check CHECK ((role = ANY (ARRAY['all'::text, 'control'::text, 'broker'::text])))
);

--
-- Name: engine_sql; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.engine_sql (
    file text NOT NULL,
    sha256 text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: kind_config; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.kind_config (
    kind text NOT NULL,
    kind_version integer NOT NULL,
    max_inflight integer DEFAULT 0 NOT NULL,
    task_deadline_secs integer DEFAULT 0 NOT NULL,
    resync_interval_secs integer DEFAULT 0 NOT NULL,
    resync_recomposes boolean DEFAULT false NOT NULL,
    orphan_grace_secs integer DEFAULT 0 NOT NULL,
    max_transient_attempts integer DEFAULT 0 NOT NULL,
    finalizer_name text,
    retired boolean DEFAULT false NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    has_composer boolean DEFAULT false NOT NULL,
    has_rollup boolean DEFAULT false NOT NULL,
    CONSTRAINT kind_config_max_inflight_check CHECK ((max_inflight >= 0)),
    CONSTRAINT kind_config_max_transient_attempts_check CHECK ((max_transient_attempts >= 0)),
    CONSTRAINT kind_config_orphan_grace_secs_check CHECK ((orphan_grace_secs >= 0)),
    CONSTRAINT kind_config_resync_interval_secs_check CHECK ((resync_interval_secs >= 0)),
    CONSTRAINT kind_config_task_deadline_secs_check CHECK ((task_deadline_secs >= 0))
);

--
-- Name: kind_manifest; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.kind_manifest (
    kind text NOT NULL,
    kind_version integer NOT NULL,
    manifest jsonb NOT NULL,
    manifest_version bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT kind_manifest_kind_version_check CHECK (((kind_version >= 1) AND (kind_version <= 32767))),
    CONSTRAINT kind_manifest_manifest_check CHECK ((cardinality(public.validate_kind_manifest(manifest)) = 0))
);

--
-- Name: lifecycle_outbox; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.lifecycle_outbox (
    id bigint NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    transition text NOT NULL,
    generation bigint NOT NULL,
    binding_name text NOT NULL,
    reactor_kind text NOT NULL,
    resource jsonb NOT NULL,
    claim_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    not_before timestamp with time zone DEFAULT '-infinity'::timestamp with time zone NOT NULL,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: lifecycle_outbox_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.lifecycle_outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: lifecycle_outbox_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.lifecycle_outbox_id_seq OWNED BY public.lifecycle_outbox.id;

--
-- Name: plan_requests; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.plan_requests (
    id uuid NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    name text NOT NULL,
    resource_id uuid,
    spec jsonb NOT NULL,
    labels jsonb DEFAULT '{}'::jsonb NOT NULL,
    provider_config_ref text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    deadline timestamp with time zone NOT NULL,
    claimed_by text,
    claimed_at timestamp with time zone,
    answered_at timestamp with time zone,
    result jsonb,
    error text,
    not_run boolean DEFAULT false NOT NULL,
    CONSTRAINT plan_requests_check CHECK (((answered_at IS NULL) OR ((result IS NULL) <> (error IS NULL)))),
    CONSTRAINT plan_requests_kind_version_check CHECK (((kind_version >= 1) AND (kind_version <= 32767)))
);

--
-- Name: providerconfigs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.providerconfigs (
    name text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    is_default boolean DEFAULT false NOT NULL,
    spec jsonb DEFAULT '{}'::jsonb NOT NULL,
    data bytea,
    owner_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT providerconfigs_kind_version_check CHECK (((kind_version >= 1) AND (kind_version <= 32767)))
);
ALTER TABLE ONLY public.providerconfigs ALTER COLUMN data SET COMPRESSION lz4;

--
-- Name: reactor_bindings; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.reactor_bindings (
    name text NOT NULL,
    watch_kind text NOT NULL,
    transition text NOT NULL,
    reactor text NOT NULL,
    label_match jsonb DEFAULT '{}'::jsonb NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT reactor_bindings_check CHECK ((reactor <> watch_kind)),
    CONSTRAINT reactor_bindings_label_match_check CHECK ((jsonb_typeof(label_match) = 'object'::text)),
    CONSTRAINT reactor_bindings_transition_check CHECK ((transition = ANY (ARRAY['created'::text, 'synced'::text, 'degraded'::text, 'failed'::text, 'deleted'::text])))
);

--
-- Name: resource_conditions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.resource_conditions (
    resource_id uuid NOT NULL,
    type text NOT NULL,
    status text NOT NULL,
    reason text DEFAULT ''::text NOT NULL,
    message text DEFAULT ''::text NOT NULL,
    last_transition_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT resource_conditions_status_check CHECK ((status = ANY (ARRAY['True'::text, 'False'::text, 'Unknown'::text])))
);

--
-- Name: resource_deps; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.resource_deps (
    dependent_id uuid NOT NULL,
    dependency_id uuid NOT NULL,
    owner_id uuid NOT NULL,
    value_flows jsonb DEFAULT '[]'::jsonb NOT NULL,
    CONSTRAINT resource_deps_check CHECK ((dependent_id <> dependency_id))
);

--
-- Name: resource_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.resource_events (
    id bigint NOT NULL,
    resource_id uuid NOT NULL,
    kind text NOT NULL,
    name text NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    type text NOT NULL,
    from_phase text,
    to_phase text,
    generation bigint,
    message text,
    actor text DEFAULT NULLIF(current_setting('converge.actor'::text, true), ''::text)
);

--
-- Name: resource_events_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.resource_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: resource_events_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.resource_events_id_seq OWNED BY public.resource_events.id;

--
-- Name: resource_lag; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.resource_lag (
    shard_id smallint NOT NULL,
    id uuid NOT NULL,
    root_id uuid,
    owner_id uuid,
    unsettled boolean NOT NULL,
    stuck boolean NOT NULL,
    behind_since timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: resource_operations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.resource_operations (
    uid uuid DEFAULT gen_random_uuid() NOT NULL,
    resource_id uuid NOT NULL,
    verb text NOT NULL,
    input jsonb,
    state text DEFAULT 'pending'::text NOT NULL,
    output jsonb,
    error text,
    attempts integer DEFAULT 0 NOT NULL,
    requested_by text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT resource_operations_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'running'::text, 'succeeded'::text, 'failed'::text])))
);

--
-- Name: resource_problems; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.resource_problems (
    id uuid NOT NULL,
    rank smallint NOT NULL,
    created_at timestamp with time zone NOT NULL
);

--
-- Name: resources; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.resources (
    id uuid NOT NULL,
    kind text NOT NULL,
    kind_version integer DEFAULT 1 NOT NULL,
    name text NOT NULL,
    owner_id uuid,
    root_id uuid,
    shard_id smallint NOT NULL,
    spec jsonb DEFAULT '{}'::jsonb NOT NULL,
    status jsonb,
    labels jsonb DEFAULT '{}'::jsonb NOT NULL,
    generation bigint DEFAULT 1 NOT NULL,
    synced_gen bigint DEFAULT 0 NOT NULL,
    composed_gen bigint DEFAULT 0 NOT NULL,
    health_ok boolean DEFAULT true NOT NULL,
    failure_gen bigint DEFAULT 0 NOT NULL,
    failure_terminal boolean DEFAULT false NOT NULL,
    failure_attempts integer DEFAULT 0 NOT NULL,
    failure_message text,
    frozen_until timestamp with time zone,
    deletion_requested_at timestamp with time zone,
    finalizers text[] DEFAULT '{}'::text[] NOT NULL,
    provider_config_ref text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    is_ready boolean GENERATED ALWAYS AS (((synced_gen >= generation) AND health_ok AND (deletion_requested_at IS NULL))) STORED,
    phase text GENERATED ALWAYS AS (
CASE
    WHEN (deletion_requested_at IS NOT NULL) THEN 'Deleting'::text
    WHEN (frozen_until = 'infinity'::timestamp with time zone) THEN 'Quarantined'::text
    WHEN (failure_gen = generation) THEN 'Failed'::text
    WHEN (frozen_until IS NOT NULL) THEN 'Orphaned'::text
    WHEN ((synced_gen >= generation) AND (NOT health_ok)) THEN 'Degraded'::text
    WHEN (synced_gen >= generation) THEN 'Ready'::text
    ELSE 'Reconciling'::text
END) STORED,
    observed_at timestamp with time zone,
    CONSTRAINT resources_kind_version_check CHECK (((kind_version >= 1) AND (kind_version <= 32767))),
    CONSTRAINT resources_labels_object CHECK ((jsonb_typeof(labels) = 'object'::text)),
    CONSTRAINT resources_shard CHECK ((shard_id = public.shard_of(id))),
    CONSTRAINT resources_shard_id_check CHECK (((shard_id >= 0) AND (shard_id <= 255)))
)
WITH (fillfactor='50');

--
-- Name: rollup_recheck; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.rollup_recheck (
    id bigint NOT NULL,
    root_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    armed_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: rollup_recheck_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.rollup_recheck_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: rollup_recheck_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.rollup_recheck_id_seq OWNED BY public.rollup_recheck.id;

--
-- Name: spec_versions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.spec_versions (
    resource_id uuid NOT NULL,
    generation bigint NOT NULL,
    spec jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: wake_state; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.wake_state (
    channel text NOT NULL,
    last_at timestamp with time zone DEFAULT '-infinity'::timestamp with time zone NOT NULL
);

--
-- Name: work_outbox; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox (
    id bigint NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
)
PARTITION BY RANGE (shard_id);

--
-- Name: work_outbox_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE UNLOGGED SEQUENCE public.work_outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: work_outbox_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.work_outbox_id_seq OWNED BY public.work_outbox.id;

--
-- Name: work_outbox_p0; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p0 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p1; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p1 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p10; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p10 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p11; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p11 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p12; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p12 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p13; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p13 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p14; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p14 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p15; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p15 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p2; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p2 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p3; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p3 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p4; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p4 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p5; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p5 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p6; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p6 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p7; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p7 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p8; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p8 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_outbox_p9; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_outbox_p9 (
    id bigint DEFAULT nextval('public.work_outbox_id_seq'::regclass) NOT NULL,
    shard_id smallint NOT NULL,
    resource_id uuid NOT NULL,
    task_type text NOT NULL,
    generation bigint NOT NULL,
    ok boolean NOT NULL,
    terminal boolean DEFAULT false NOT NULL,
    error_message text,
    status jsonb,
    conditions jsonb,
    health_ok boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    advance boolean DEFAULT true NOT NULL,
    express boolean DEFAULT false NOT NULL
);

--
-- Name: work_queue; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
)
PARTITION BY RANGE (shard_id);

--
-- Name: work_queue_p0; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p0 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p1; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p1 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p10; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p10 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p11; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p11 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p12; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p12 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p13; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p13 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p14; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p14 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p15; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p15 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p2; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p2 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p3; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p3 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p4; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p4 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p5; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p5 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p6; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p6 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p7; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p7 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p8; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p8 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_queue_p9; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.work_queue_p9 (
    resource_id uuid NOT NULL,
    shard_id smallint NOT NULL,
    task_type text NOT NULL,
    kind text NOT NULL,
    kind_version integer NOT NULL,
    generation bigint NOT NULL,
    trigger text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    lease_token uuid,
    claim_epoch bigint DEFAULT 1 NOT NULL,
    broker_id text,
    worker_id text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    provider_config jsonb,
    provider_bundle bytea,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT work_queue_task_type_check CHECK ((task_type = ANY (ARRAY['reconcile'::text, 'delete'::text, 'operate'::text])))
);

--
-- Name: work_outbox_p0; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p0 FOR VALUES FROM ('0') TO ('16');

--
-- Name: work_outbox_p1; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p1 FOR VALUES FROM ('16') TO ('32');

--
-- Name: work_outbox_p10; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p10 FOR VALUES FROM ('160') TO ('176');

--
-- Name: work_outbox_p11; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p11 FOR VALUES FROM ('176') TO ('192');

--
-- Name: work_outbox_p12; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p12 FOR VALUES FROM ('192') TO ('208');

--
-- Name: work_outbox_p13; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p13 FOR VALUES FROM ('208') TO ('224');

--
-- Name: work_outbox_p14; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p14 FOR VALUES FROM ('224') TO ('240');

--
-- Name: work_outbox_p15; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p15 FOR VALUES FROM ('240') TO ('256');

--
-- Name: work_outbox_p2; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p2 FOR VALUES FROM ('32') TO ('48');

--
-- Name: work_outbox_p3; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p3 FOR VALUES FROM ('48') TO ('64');

--
-- Name: work_outbox_p4; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p4 FOR VALUES FROM ('64') TO ('80');

--
-- Name: work_outbox_p5; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p5 FOR VALUES FROM ('80') TO ('96');

--
-- Name: work_outbox_p6; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p6 FOR VALUES FROM ('96') TO ('112');

--
-- Name: work_outbox_p7; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p7 FOR VALUES FROM ('112') TO ('128');

--
-- Name: work_outbox_p8; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p8 FOR VALUES FROM ('128') TO ('144');

--
-- Name: work_outbox_p9; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ATTACH PARTITION public.work_outbox_p9 FOR VALUES FROM ('144') TO ('160');

--
-- Name: work_queue_p0; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p0 FOR VALUES FROM ('0') TO ('16');

--
-- Name: work_queue_p1; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p1 FOR VALUES FROM ('16') TO ('32');

--
-- Name: work_queue_p10; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p10 FOR VALUES FROM ('160') TO ('176');

--
-- Name: work_queue_p11; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p11 FOR VALUES FROM ('176') TO ('192');

--
-- Name: work_queue_p12; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p12 FOR VALUES FROM ('192') TO ('208');

--
-- Name: work_queue_p13; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p13 FOR VALUES FROM ('208') TO ('224');

--
-- Name: work_queue_p14; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p14 FOR VALUES FROM ('224') TO ('240');

--
-- Name: work_queue_p15; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p15 FOR VALUES FROM ('240') TO ('256');

--
-- Name: work_queue_p2; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p2 FOR VALUES FROM ('32') TO ('48');

--
-- Name: work_queue_p3; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p3 FOR VALUES FROM ('48') TO ('64');

--
-- Name: work_queue_p4; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p4 FOR VALUES FROM ('64') TO ('80');

--
-- Name: work_queue_p5; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p5 FOR VALUES FROM ('80') TO ('96');

--
-- Name: work_queue_p6; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p6 FOR VALUES FROM ('96') TO ('112');

--
-- Name: work_queue_p7; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p7 FOR VALUES FROM ('112') TO ('128');

--
-- Name: work_queue_p8; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p8 FOR VALUES FROM ('128') TO ('144');

--
-- Name: work_queue_p9; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue ATTACH PARTITION public.work_queue_p9 FOR VALUES FROM ('144') TO ('160');

--
-- Name: lifecycle_outbox id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.lifecycle_outbox ALTER COLUMN id SET DEFAULT nextval('public.lifecycle_outbox_id_seq'::regclass);

--
-- Name: resource_events id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resource_events ALTER COLUMN id SET DEFAULT nextval('public.resource_events_id_seq'::regclass);

--
-- Name: rollup_recheck id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.rollup_recheck ALTER COLUMN id SET DEFAULT nextval('public.rollup_recheck_id_seq'::regclass);

--
-- Name: work_outbox id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox ALTER COLUMN id SET DEFAULT nextval('public.work_outbox_id_seq'::regclass);

--
-- Name: api_tokens api_tokens_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_name_key UNIQUE (name);

--
-- Name: api_tokens api_tokens_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (id);

--
-- Name: api_tokens api_tokens_token_sha256_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_token_sha256_key UNIQUE (token_sha256);

--
-- Name: broker_liveness broker_liveness_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.broker_liveness
    ADD CONSTRAINT broker_liveness_pkey PRIMARY KEY (broker_id);

--
-- Name: cluster_members cluster_members_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.cluster_members
    ADD CONSTRAINT cluster_members_pkey PRIMARY KEY (member_id);

--
-- Name: engine_sql engine_sql_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.engine_sql
    ADD CONSTRAINT engine_sql_pkey PRIMARY KEY (file);

--
-- Name: kind_config kind_config_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.kind_config
    ADD CONSTRAINT kind_config_pkey PRIMARY KEY (kind, kind_version);

--
-- Name: kind_manifest kind_manifest_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.kind_manifest
    ADD CONSTRAINT kind_manifest_pkey PRIMARY KEY (kind, kind_version);

--
-- Name: lifecycle_outbox lifecycle_outbox_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.lifecycle_outbox
    ADD CONSTRAINT lifecycle_outbox_pkey PRIMARY KEY (id);

--
-- Name: lifecycle_outbox lifecycle_outbox_resource_id_transition_generation_binding__key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.lifecycle_outbox
    ADD CONSTRAINT lifecycle_outbox_resource_id_transition_generation_binding__key UNIQUE (resource_id, transition, generation, binding_name);

--
-- Name: plan_requests plan_requests_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.plan_requests
    ADD CONSTRAINT plan_requests_pkey PRIMARY KEY (id);

--
-- Name: providerconfigs providerconfigs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.providerconfigs
    ADD CONSTRAINT providerconfigs_pkey PRIMARY KEY (name);

--
-- Name: reactor_bindings reactor_bindings_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.reactor_bindings
    ADD CONSTRAINT reactor_bindings_pkey PRIMARY KEY (name);

--
-- Name: resource_conditions resource_conditions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resource_conditions
    ADD CONSTRAINT resource_conditions_pkey PRIMARY KEY (resource_id, type);

--
-- Name: resource_deps resource_deps_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resource_deps
    ADD CONSTRAINT resource_deps_pkey PRIMARY KEY (dependent_id, dependency_id);

--
-- Name: resource_events resource_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resource_events
    ADD CONSTRAINT resource_events_pkey PRIMARY KEY (id);

--
-- Name: resource_lag resource_lag_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resource_lag
    ADD CONSTRAINT resource_lag_pkey PRIMARY KEY (shard_id, id);

--
-- Name: resource_operations resource_operations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resource_operations
    ADD CONSTRAINT resource_operations_pkey PRIMARY KEY (uid);

--
-- Name: resource_problems resource_problems_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resource_problems
    ADD CONSTRAINT resource_problems_pkey PRIMARY KEY (id);

--
-- Name: resources resources_kind_name; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resources
    ADD CONSTRAINT resources_kind_name UNIQUE (kind, name);

--
-- Name: resources resources_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resources
    ADD CONSTRAINT resources_pkey PRIMARY KEY (id);

--
-- Name: rollup_recheck rollup_recheck_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.rollup_recheck
    ADD CONSTRAINT rollup_recheck_pkey PRIMARY KEY (id);

--
-- Name: spec_versions spec_versions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.spec_versions
    ADD CONSTRAINT spec_versions_pkey PRIMARY KEY (resource_id, generation);

--
-- Name: wake_state wake_state_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.wake_state
    ADD CONSTRAINT wake_state_pkey PRIMARY KEY (channel);

--
-- Name: work_outbox work_outbox_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox
    ADD CONSTRAINT work_outbox_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p0 work_outbox_p0_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p0
    ADD CONSTRAINT work_outbox_p0_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p10 work_outbox_p10_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p10
    ADD CONSTRAINT work_outbox_p10_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p11 work_outbox_p11_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p11
    ADD CONSTRAINT work_outbox_p11_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p12 work_outbox_p12_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p12
    ADD CONSTRAINT work_outbox_p12_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p13 work_outbox_p13_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p13
    ADD CONSTRAINT work_outbox_p13_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p14 work_outbox_p14_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p14
    ADD CONSTRAINT work_outbox_p14_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p15 work_outbox_p15_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p15
    ADD CONSTRAINT work_outbox_p15_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p1 work_outbox_p1_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p1
    ADD CONSTRAINT work_outbox_p1_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p2 work_outbox_p2_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p2
    ADD CONSTRAINT work_outbox_p2_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p3 work_outbox_p3_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p3
    ADD CONSTRAINT work_outbox_p3_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p4 work_outbox_p4_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p4
    ADD CONSTRAINT work_outbox_p4_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p5 work_outbox_p5_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p5
    ADD CONSTRAINT work_outbox_p5_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p6 work_outbox_p6_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p6
    ADD CONSTRAINT work_outbox_p6_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p7 work_outbox_p7_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p7
    ADD CONSTRAINT work_outbox_p7_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p8 work_outbox_p8_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p8
    ADD CONSTRAINT work_outbox_p8_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_outbox_p9 work_outbox_p9_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_outbox_p9
    ADD CONSTRAINT work_outbox_p9_pkey PRIMARY KEY (id, shard_id);

--
-- Name: work_queue work_queue_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue
    ADD CONSTRAINT work_queue_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p0 work_queue_p0_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p0
    ADD CONSTRAINT work_queue_p0_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p10 work_queue_p10_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p10
    ADD CONSTRAINT work_queue_p10_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p11 work_queue_p11_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p11
    ADD CONSTRAINT work_queue_p11_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p12 work_queue_p12_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p12
    ADD CONSTRAINT work_queue_p12_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p13 work_queue_p13_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p13
    ADD CONSTRAINT work_queue_p13_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p14 work_queue_p14_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p14
    ADD CONSTRAINT work_queue_p14_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p15 work_queue_p15_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p15
    ADD CONSTRAINT work_queue_p15_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p1 work_queue_p1_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p1
    ADD CONSTRAINT work_queue_p1_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p2 work_queue_p2_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p2
    ADD CONSTRAINT work_queue_p2_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p3 work_queue_p3_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p3
    ADD CONSTRAINT work_queue_p3_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p4 work_queue_p4_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p4
    ADD CONSTRAINT work_queue_p4_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p5 work_queue_p5_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p5
    ADD CONSTRAINT work_queue_p5_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p6 work_queue_p6_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p6
    ADD CONSTRAINT work_queue_p6_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p7 work_queue_p7_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p7
    ADD CONSTRAINT work_queue_p7_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p8 work_queue_p8_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p8
    ADD CONSTRAINT work_queue_p8_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: work_queue_p9 work_queue_p9_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_queue_p9
    ADD CONSTRAINT work_queue_p9_pkey PRIMARY KEY (resource_id, task_type, shard_id);

--
-- Name: idx_lifecycle_claimed; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_lifecycle_claimed ON public.lifecycle_outbox USING btree (heartbeat_at) WHERE (claim_token IS NOT NULL);

--
-- Name: idx_lifecycle_pending; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_lifecycle_pending ON public.lifecycle_outbox USING btree (reactor_kind, shard_id, id) WHERE (claim_token IS NULL);

--
-- Name: idx_providerconfigs_default; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX idx_providerconfigs_default ON public.providerconfigs USING btree (kind, kind_version) WHERE is_default;

--
-- Name: idx_reactor_bindings_transition; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_reactor_bindings_transition ON public.reactor_bindings USING btree (transition, watch_kind) WHERE enabled;

--
-- Name: idx_resource_deps_dependency; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resource_deps_dependency ON public.resource_deps USING btree (dependency_id);

--
-- Name: idx_resource_deps_owner; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resource_deps_owner ON public.resource_deps USING btree (owner_id);

--
-- Name: idx_resource_events_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resource_events_at ON public.resource_events USING brin (at);

--
-- Name: idx_resource_events_name; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resource_events_name ON public.resource_events USING btree (kind, name, id);

--
-- Name: idx_resource_lag_owner_stuck; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resource_lag_owner_stuck ON public.resource_lag USING btree (owner_id) WHERE stuck;

--
-- Name: idx_resource_lag_root_stuck; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resource_lag_root_stuck ON public.resource_lag USING btree (root_id) WHERE stuck;

--
-- Name: idx_resource_lag_root_unsettled; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resource_lag_root_unsettled ON public.resource_lag USING btree (root_id) WHERE unsettled;

--
-- Name: idx_resource_operations_open; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resource_operations_open ON public.resource_operations USING btree (resource_id, created_at, uid) WHERE (state = ANY (ARRAY['pending'::text, 'running'::text]));

--
-- Name: idx_resource_operations_resource; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resource_operations_resource ON public.resource_operations USING btree (resource_id, created_at, uid);

--
-- Name: idx_resources_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resources_created ON public.resources USING btree (created_at, id);

--
-- Name: idx_resources_deleting; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resources_deleting ON public.resources USING btree (shard_id) WHERE (deletion_requested_at IS NOT NULL);

--
-- Name: idx_resources_frozen_sweep; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resources_frozen_sweep ON public.resources USING btree (frozen_until) WHERE (frozen_until IS NOT NULL);

--
-- Name: idx_resources_labels; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resources_labels ON public.resources USING gin (labels jsonb_path_ops) WHERE (labels <> '{}'::jsonb);

--
-- Name: idx_resources_owner_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resources_owner_created ON public.resources USING btree (owner_id, created_at, id) WHERE (owner_id IS NOT NULL);

--
-- Name: idx_resources_root_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resources_root_id ON public.resources USING btree (root_id, id) WHERE (root_id IS NOT NULL);

--
-- Name: idx_resources_roots_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_resources_roots_created ON public.resources USING btree (created_at, id) WHERE (owner_id IS NULL);

--
-- Name: idx_rollup_recheck_root; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_rollup_recheck_root ON public.rollup_recheck USING btree (root_id);

--
-- Name: idx_rollup_recheck_shard; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_rollup_recheck_shard ON public.rollup_recheck USING btree (shard_id, id);

--
-- Name: idx_work_outbox_express; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_work_outbox_express ON ONLY public.work_outbox USING btree (id) WHERE express;

--
-- Name: idx_work_queue_leased; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_work_queue_leased ON ONLY public.work_queue USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: idx_work_queue_leased_kind; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_work_queue_leased_kind ON ONLY public.work_queue USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: idx_work_queue_pending; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idx_work_queue_pending ON ONLY public.work_queue USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: plan_requests_unclaimed; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX plan_requests_unclaimed ON public.plan_requests USING btree (kind, kind_version, created_at) WHERE (claimed_by IS NULL);

--
-- Name: resource_problems_order; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX resource_problems_order ON public.resource_problems USING btree (rank, created_at, id);

--
-- Name: work_outbox_p0_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p0_id_idx ON public.work_outbox_p0 USING btree (id) WHERE express;

--
-- Name: work_outbox_p10_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p10_id_idx ON public.work_outbox_p10 USING btree (id) WHERE express;

--
-- Name: work_outbox_p11_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p11_id_idx ON public.work_outbox_p11 USING btree (id) WHERE express;

--
-- Name: work_outbox_p12_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p12_id_idx ON public.work_outbox_p12 USING btree (id) WHERE express;

--
-- Name: work_outbox_p13_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p13_id_idx ON public.work_outbox_p13 USING btree (id) WHERE express;

--
-- Name: work_outbox_p14_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p14_id_idx ON public.work_outbox_p14 USING btree (id) WHERE express;

--
-- Name: work_outbox_p15_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p15_id_idx ON public.work_outbox_p15 USING btree (id) WHERE express;

--
-- Name: work_outbox_p1_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p1_id_idx ON public.work_outbox_p1 USING btree (id) WHERE express;

--
-- Name: work_outbox_p2_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p2_id_idx ON public.work_outbox_p2 USING btree (id) WHERE express;

--
-- Name: work_outbox_p3_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p3_id_idx ON public.work_outbox_p3 USING btree (id) WHERE express;

--
-- Name: work_outbox_p4_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p4_id_idx ON public.work_outbox_p4 USING btree (id) WHERE express;

--
-- Name: work_outbox_p5_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p5_id_idx ON public.work_outbox_p5 USING btree (id) WHERE express;

--
-- Name: work_outbox_p6_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p6_id_idx ON public.work_outbox_p6 USING btree (id) WHERE express;

--
-- Name: work_outbox_p7_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p7_id_idx ON public.work_outbox_p7 USING btree (id) WHERE express;

--
-- Name: work_outbox_p8_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p8_id_idx ON public.work_outbox_p8 USING btree (id) WHERE express;

--
-- Name: work_outbox_p9_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_outbox_p9_id_idx ON public.work_outbox_p9 USING btree (id) WHERE express;

--
-- Name: work_queue_p0_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p0_heartbeat_at_idx ON public.work_queue_p0 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p0_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p0_kind_kind_version_idx ON public.work_queue_p0 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p0_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p0_kind_kind_version_not_before_idx ON public.work_queue_p0 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p10_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p10_heartbeat_at_idx ON public.work_queue_p10 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p10_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p10_kind_kind_version_idx ON public.work_queue_p10 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p10_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p10_kind_kind_version_not_before_idx ON public.work_queue_p10 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p11_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p11_heartbeat_at_idx ON public.work_queue_p11 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p11_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p11_kind_kind_version_idx ON public.work_queue_p11 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p11_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p11_kind_kind_version_not_before_idx ON public.work_queue_p11 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p12_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p12_heartbeat_at_idx ON public.work_queue_p12 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p12_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p12_kind_kind_version_idx ON public.work_queue_p12 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p12_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p12_kind_kind_version_not_before_idx ON public.work_queue_p12 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p13_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p13_heartbeat_at_idx ON public.work_queue_p13 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p13_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p13_kind_kind_version_idx ON public.work_queue_p13 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p13_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p13_kind_kind_version_not_before_idx ON public.work_queue_p13 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p14_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p14_heartbeat_at_idx ON public.work_queue_p14 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p14_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p14_kind_kind_version_idx ON public.work_queue_p14 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p14_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p14_kind_kind_version_not_before_idx ON public.work_queue_p14 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p15_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p15_heartbeat_at_idx ON public.work_queue_p15 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p15_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p15_kind_kind_version_idx ON public.work_queue_p15 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p15_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p15_kind_kind_version_not_before_idx ON public.work_queue_p15 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p1_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p1_heartbeat_at_idx ON public.work_queue_p1 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p1_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p1_kind_kind_version_idx ON public.work_queue_p1 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p1_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p1_kind_kind_version_not_before_idx ON public.work_queue_p1 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p2_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p2_heartbeat_at_idx ON public.work_queue_p2 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p2_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p2_kind_kind_version_idx ON public.work_queue_p2 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p2_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p2_kind_kind_version_not_before_idx ON public.work_queue_p2 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p3_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p3_heartbeat_at_idx ON public.work_queue_p3 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p3_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p3_kind_kind_version_idx ON public.work_queue_p3 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p3_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p3_kind_kind_version_not_before_idx ON public.work_queue_p3 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p4_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p4_heartbeat_at_idx ON public.work_queue_p4 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p4_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p4_kind_kind_version_idx ON public.work_queue_p4 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p4_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p4_kind_kind_version_not_before_idx ON public.work_queue_p4 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p5_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p5_heartbeat_at_idx ON public.work_queue_p5 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p5_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p5_kind_kind_version_idx ON public.work_queue_p5 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p5_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p5_kind_kind_version_not_before_idx ON public.work_queue_p5 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p6_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p6_heartbeat_at_idx ON public.work_queue_p6 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p6_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p6_kind_kind_version_idx ON public.work_queue_p6 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p6_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p6_kind_kind_version_not_before_idx ON public.work_queue_p6 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p7_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p7_heartbeat_at_idx ON public.work_queue_p7 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p7_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p7_kind_kind_version_idx ON public.work_queue_p7 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p7_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p7_kind_kind_version_not_before_idx ON public.work_queue_p7 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p8_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p8_heartbeat_at_idx ON public.work_queue_p8 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p8_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p8_kind_kind_version_idx ON public.work_queue_p8 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p8_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p8_kind_kind_version_not_before_idx ON public.work_queue_p8 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_queue_p9_heartbeat_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p9_heartbeat_at_idx ON public.work_queue_p9 USING btree (heartbeat_at) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p9_kind_kind_version_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p9_kind_kind_version_idx ON public.work_queue_p9 USING btree (kind, kind_version) WHERE (lease_token IS NOT NULL);

--
-- Name: work_queue_p9_kind_kind_version_not_before_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_queue_p9_kind_kind_version_not_before_idx ON public.work_queue_p9 USING btree (kind, kind_version, not_before) WHERE (lease_token IS NULL);

--
-- Name: work_outbox_p0_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p0_id_idx;

--
-- Name: work_outbox_p0_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p0_pkey;

--
-- Name: work_outbox_p10_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p10_id_idx;

--
-- Name: work_outbox_p10_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p10_pkey;

--
-- Name: work_outbox_p11_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p11_id_idx;

--
-- Name: work_outbox_p11_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p11_pkey;

--
-- Name: work_outbox_p12_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p12_id_idx;

--
-- Name: work_outbox_p12_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p12_pkey;

--
-- Name: work_outbox_p13_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p13_id_idx;

--
-- Name: work_outbox_p13_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p13_pkey;

--
-- Name: work_outbox_p14_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p14_id_idx;

--
-- Name: work_outbox_p14_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p14_pkey;

--
-- Name: work_outbox_p15_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p15_id_idx;

--
-- Name: work_outbox_p15_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p15_pkey;

--
-- Name: work_outbox_p1_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p1_id_idx;

--
-- Name: work_outbox_p1_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p1_pkey;

--
-- Name: work_outbox_p2_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p2_id_idx;

--
-- Name: work_outbox_p2_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p2_pkey;

--
-- Name: work_outbox_p3_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p3_id_idx;

--
-- Name: work_outbox_p3_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p3_pkey;

--
-- Name: work_outbox_p4_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p4_id_idx;

--
-- Name: work_outbox_p4_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p4_pkey;

--
-- Name: work_outbox_p5_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p5_id_idx;

--
-- Name: work_outbox_p5_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p5_pkey;

--
-- Name: work_outbox_p6_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p6_id_idx;

--
-- Name: work_outbox_p6_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p6_pkey;

--
-- Name: work_outbox_p7_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p7_id_idx;

--
-- Name: work_outbox_p7_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p7_pkey;

--
-- Name: work_outbox_p8_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p8_id_idx;

--
-- Name: work_outbox_p8_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p8_pkey;

--
-- Name: work_outbox_p9_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_outbox_express ATTACH PARTITION public.work_outbox_p9_id_idx;

--
-- Name: work_outbox_p9_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_outbox_pkey ATTACH PARTITION public.work_outbox_p9_pkey;

--
-- Name: work_queue_p0_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p0_heartbeat_at_idx;

--
-- Name: work_queue_p0_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p0_kind_kind_version_idx;

--
-- Name: work_queue_p0_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p0_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p0_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p0_pkey;

--
-- Name: work_queue_p10_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p10_heartbeat_at_idx;

--
-- Name: work_queue_p10_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p10_kind_kind_version_idx;

--
-- Name: work_queue_p10_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p10_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p10_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p10_pkey;

--
-- Name: work_queue_p11_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p11_heartbeat_at_idx;

--
-- Name: work_queue_p11_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p11_kind_kind_version_idx;

--
-- Name: work_queue_p11_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p11_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p11_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p11_pkey;

--
-- Name: work_queue_p12_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p12_heartbeat_at_idx;

--
-- Name: work_queue_p12_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p12_kind_kind_version_idx;

--
-- Name: work_queue_p12_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p12_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p12_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p12_pkey;

--
-- Name: work_queue_p13_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p13_heartbeat_at_idx;

--
-- Name: work_queue_p13_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p13_kind_kind_version_idx;

--
-- Name: work_queue_p13_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p13_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p13_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p13_pkey;

--
-- Name: work_queue_p14_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p14_heartbeat_at_idx;

--
-- Name: work_queue_p14_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p14_kind_kind_version_idx;

--
-- Name: work_queue_p14_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p14_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p14_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p14_pkey;

--
-- Name: work_queue_p15_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p15_heartbeat_at_idx;

--
-- Name: work_queue_p15_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p15_kind_kind_version_idx;

--
-- Name: work_queue_p15_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p15_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p15_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p15_pkey;

--
-- Name: work_queue_p1_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p1_heartbeat_at_idx;

--
-- Name: work_queue_p1_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p1_kind_kind_version_idx;

--
-- Name: work_queue_p1_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p1_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p1_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p1_pkey;

--
-- Name: work_queue_p2_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p2_heartbeat_at_idx;

--
-- Name: work_queue_p2_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p2_kind_kind_version_idx;

--
-- Name: work_queue_p2_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p2_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p2_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p2_pkey;

--
-- Name: work_queue_p3_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p3_heartbeat_at_idx;

--
-- Name: work_queue_p3_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p3_kind_kind_version_idx;

--
-- Name: work_queue_p3_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p3_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p3_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p3_pkey;

--
-- Name: work_queue_p4_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p4_heartbeat_at_idx;

--
-- Name: work_queue_p4_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p4_kind_kind_version_idx;

--
-- Name: work_queue_p4_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p4_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p4_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p4_pkey;

--
-- Name: work_queue_p5_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p5_heartbeat_at_idx;

--
-- Name: work_queue_p5_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p5_kind_kind_version_idx;

--
-- Name: work_queue_p5_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p5_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p5_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p5_pkey;

--
-- Name: work_queue_p6_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p6_heartbeat_at_idx;

--
-- Name: work_queue_p6_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p6_kind_kind_version_idx;

--
-- Name: work_queue_p6_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p6_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p6_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p6_pkey;

--
-- Name: work_queue_p7_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p7_heartbeat_at_idx;

--
-- Name: work_queue_p7_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p7_kind_kind_version_idx;

--
-- Name: work_queue_p7_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p7_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p7_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p7_pkey;

--
-- Name: work_queue_p8_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p8_heartbeat_at_idx;

--
-- Name: work_queue_p8_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p8_kind_kind_version_idx;

--
-- Name: work_queue_p8_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p8_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p8_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p8_pkey;

--
-- Name: work_queue_p9_heartbeat_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased ATTACH PARTITION public.work_queue_p9_heartbeat_at_idx;

--
-- Name: work_queue_p9_kind_kind_version_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_leased_kind ATTACH PARTITION public.work_queue_p9_kind_kind_version_idx;

--
-- Name: work_queue_p9_kind_kind_version_not_before_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.idx_work_queue_pending ATTACH PARTITION public.work_queue_p9_kind_kind_version_not_before_idx;

--
-- Name: work_queue_p9_pkey; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.work_queue_pkey ATTACH PARTITION public.work_queue_p9_pkey;

--
-- Name: cluster_members cluster_members_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER cluster_members_changed AFTER INSERT OR DELETE OR UPDATE OF workers, released_at ON public.cluster_members FOR EACH ROW EXECUTE FUNCTION public.cluster_members_changed();

--
-- Name: kind_manifest kind_manifest_seed_config; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER kind_manifest_seed_config AFTER INSERT OR UPDATE ON public.kind_manifest FOR EACH ROW EXECUTE FUNCTION public.kind_manifest_seed_config();

--
-- Name: kind_manifest kind_manifest_stamp; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER kind_manifest_stamp BEFORE INSERT OR UPDATE ON public.kind_manifest FOR EACH ROW EXECUTE FUNCTION public.kind_manifest_stamp();

--
-- Name: providerconfigs providerconfigs_notify; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER providerconfigs_notify AFTER INSERT OR DELETE OR UPDATE ON public.providerconfigs FOR EACH ROW EXECUTE FUNCTION public.providerconfigs_notify();

--
-- Name: resources resource_lag_on_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER resource_lag_on_delete AFTER DELETE ON public.resources REFERENCING OLD TABLE AS lag_old FOR EACH STATEMENT EXECUTE FUNCTION public.resource_lag_on_delete();

--
-- Name: resources resource_lag_on_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER resource_lag_on_insert AFTER INSERT ON public.resources REFERENCING NEW TABLE AS lag_new FOR EACH STATEMENT EXECUTE FUNCTION public.resource_lag_on_insert();

--
-- Name: resources resource_lag_on_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER resource_lag_on_update AFTER UPDATE ON public.resources REFERENCING NEW TABLE AS lag_new FOR EACH STATEMENT EXECUTE FUNCTION public.resource_lag_on_update();

--
-- Name: resource_operations resource_operation_event; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER resource_operation_event AFTER INSERT OR UPDATE OF state ON public.resource_operations FOR EACH ROW WHEN ((new.state = ANY (ARRAY['pending'::text, 'succeeded'::text, 'failed'::text]))) EXECUTE FUNCTION public.resource_operation_event();

--
-- Name: resources resource_phase_event; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER resource_phase_event AFTER UPDATE ON public.resources FOR EACH ROW WHEN (((old.phase IS DISTINCT FROM new.phase) AND (COALESCE(current_setting('converge.batch_events'::text, true), ''::text) <> 'on'::text))) EXECUTE FUNCTION public.resource_phase_event();

--
-- Name: resources resource_problems_on_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER resource_problems_on_delete AFTER DELETE ON public.resources FOR EACH ROW WHEN ((public.resource_problem_rank(old.phase) IS NOT NULL)) EXECUTE FUNCTION public.resource_problems_track();

--
-- Name: resources resource_problems_on_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER resource_problems_on_insert AFTER INSERT ON public.resources FOR EACH ROW WHEN ((public.resource_problem_rank(new.phase) IS NOT NULL)) EXECUTE FUNCTION public.resource_problems_track();

--
-- Name: resources resource_problems_on_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER resource_problems_on_update AFTER UPDATE ON public.resources FOR EACH ROW WHEN ((public.resource_problem_rank(old.phase) IS DISTINCT FROM public.resource_problem_rank(new.phase))) EXECUTE FUNCTION public.resource_problems_track();

--
-- Name: resources resources_bump_generation; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER resources_bump_generation BEFORE UPDATE OF spec ON public.resources FOR EACH ROW WHEN ((old.spec IS DISTINCT FROM new.spec)) EXECUTE FUNCTION public.resources_bump_generation();

--
-- Name: resources resources_bump_generation_on_version; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER resources_bump_generation_on_version BEFORE UPDATE OF kind_version ON public.resources FOR EACH ROW WHEN ((old.kind_version IS DISTINCT FROM new.kind_version)) EXECUTE FUNCTION public.resources_bump_generation();

--
-- Name: resources resources_created; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER resources_created AFTER INSERT ON public.resources REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.resources_created();

--
-- Name: resources resources_deleted; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER resources_deleted AFTER DELETE ON public.resources REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.resources_deleted();

--
-- Name: resources spec_versions_on_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER spec_versions_on_delete AFTER DELETE ON public.resources REFERENCING OLD TABLE AS spec_old FOR EACH STATEMENT EXECUTE FUNCTION public.spec_versions_forget_deleted();

--
-- Name: resources spec_versions_on_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER spec_versions_on_insert AFTER INSERT ON public.resources REFERENCING NEW TABLE AS spec_new FOR EACH STATEMENT EXECUTE FUNCTION public.spec_versions_record_created();

--
-- Name: resources spec_versions_on_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER spec_versions_on_update AFTER UPDATE OF spec ON public.resources FOR EACH ROW WHEN (((new.owner_id IS NULL) AND (old.spec IS DISTINCT FROM new.spec))) EXECUTE FUNCTION public.spec_versions_record();

--
-- Name: work_queue work_queue_superseded; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER work_queue_superseded AFTER UPDATE OF generation, kind_version ON public.work_queue FOR EACH ROW WHEN (((old.lease_token IS NOT NULL) AND (new.lease_token IS NULL))) EXECUTE FUNCTION public.work_queue_superseded();

--
-- Name: providerconfigs providerconfigs_owner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.providerconfigs
    ADD CONSTRAINT providerconfigs_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES public.resources(id) ON DELETE CASCADE;

--
-- Name: resource_conditions resource_conditions_resource_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resource_conditions
    ADD CONSTRAINT resource_conditions_resource_id_fkey FOREIGN KEY (resource_id) REFERENCES public.resources(id) ON DELETE CASCADE;

--
-- Name: resource_deps resource_deps_dependency_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resource_deps
    ADD CONSTRAINT resource_deps_dependency_id_fkey FOREIGN KEY (dependency_id) REFERENCES public.resources(id) ON DELETE CASCADE;

--
-- Name: resource_deps resource_deps_dependent_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resource_deps
    ADD CONSTRAINT resource_deps_dependent_id_fkey FOREIGN KEY (dependent_id) REFERENCES public.resources(id) ON DELETE CASCADE;

--
-- Name: resource_operations resource_operations_resource_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resource_operations
    ADD CONSTRAINT resource_operations_resource_id_fkey FOREIGN KEY (resource_id) REFERENCES public.resources(id) ON DELETE CASCADE;

--
-- Name: resources resources_owner_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resources
    ADD CONSTRAINT resources_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES public.resources(id) ON DELETE CASCADE;

--
-- PostgreSQL database dump complete
--

