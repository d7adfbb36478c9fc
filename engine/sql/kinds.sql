-- Kinds: the manifest's content stamp, the kind_config it seeds (insert-if-absent, so an
-- operator's live edits survive a re-apply), the stage flags read from a manifest, and the
-- wake-ups of kind manifest and provider config changes.
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
