-- Kinds: the manifest's content stamp, the kind_config it seeds (insert-if-absent, so an
-- operator's live edits survive a re-apply), the stage flags read from a manifest, the
-- wake-ups of kind manifest and provider config changes, and deleting a kind version with
-- the guard that keeps resource writes of it out of the way.
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction.

-- Whether a manifest declares a reaction with this trigger that emits this output (the
-- stage flags of kind_config).
CREATE OR REPLACE FUNCTION manifest_has_reaction(m jsonb, p_trigger text, p_emit text) RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(m->'reactions', '[]')) r
                   WHERE r->>'trigger' = p_trigger AND coalesce(r->'emits', '[]') ? p_emit)
$$;

-- Stamps a manifest's content hash (manifest_version) and updated_at on every write.
CREATE OR REPLACE FUNCTION kind_manifest_stamp() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.manifest_version := ('x' || substr(md5(NEW.manifest::text), 1, 15))::bit(60)::bigint;
    NEW.updated_at := now();
    RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS kind_manifest_stamp ON kind_manifest;
CREATE TRIGGER kind_manifest_stamp BEFORE INSERT OR UPDATE ON kind_manifest
    FOR EACH ROW EXECUTE FUNCTION kind_manifest_stamp();

-- Seeds kind_config insert-if-absent so an operator's live edits survive a manifest re-apply;
-- the finalizer name and the stage flags follow the manifest. Wakes the registries.
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

DROP TRIGGER IF EXISTS kind_manifest_seed_config ON kind_manifest;
CREATE TRIGGER kind_manifest_seed_config AFTER INSERT OR UPDATE ON kind_manifest
    FOR EACH ROW EXECUTE FUNCTION kind_manifest_seed_config();

-- Wakes the brokers' provider config caches of the kind(s) a write touched.
CREATE OR REPLACE FUNCTION providerconfigs_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM pg_notify('providerconfig_changed', OLD.kind || '/' || OLD.kind_version);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM pg_notify('providerconfig_changed', NEW.kind || '/' || NEW.kind_version);
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS providerconfigs_notify ON providerconfigs;
CREATE TRIGGER providerconfigs_notify AFTER INSERT OR UPDATE OR DELETE ON providerconfigs
    FOR EACH ROW EXECUTE FUNCTION providerconfigs_notify();

-- The lock that keeps a kind version's deletion apart from the writes that create or move
-- resources to that version: every such write takes it shared for each (kind, version) it
-- writes, here, and then finds the version registered or fails; kind_version_delete takes it
-- exclusively. Transaction-scoped; shared holders never wait on each other, and the pairs
-- are locked in sorted order. Raises foreign_key_violation naming the first (kind, version)
-- that is not registered.
CREATE OR REPLACE FUNCTION kind_version_guard(p_kinds text[], p_kind_versions int[]) RETURNS void
LANGUAGE plpgsql AS $$
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

-- Deletes kind version (p_kind, p_kind_version) unless something still uses it: its
-- manifest, its kind_config and the provider configs of that version go. Returns one row:
-- registered (false: no such version, nothing done), resource_count (resources of that
-- version) and binding_count (reactor bindings naming the kind, counted only when this is its
-- last version); it deletes only when both counts are 0.
--
-- Expected flow: lock, count, delete, commit. Guarantees: no resource of the version exists
-- once it is deleted. The exclusive kind_version_guard lock waits for every write of that
-- version in flight to commit (so the count sees it) and holds off new ones until this
-- transaction ends (they then find the manifest gone and fail). Assumptions: every write that
-- creates a resource or changes its kind_version calls kind_version_guard first
-- (resource_apply_batch, apply_compose_result).
CREATE OR REPLACE FUNCTION kind_version_delete(p_kind text, p_kind_version int)
RETURNS TABLE (registered boolean, resource_count bigint, binding_count bigint)
LANGUAGE plpgsql AS $$
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
