-- converge schema: tables, indexes and the row-level triggers that keep them consistent.
-- Forward-only. The engine's plpgsql functions live in 0002_engine.sql.

-- One logical shard axis: 256 shards from the resource id. Byte 15 of a v4 (or v7) UUID is
-- random, so shards are uniform without hashing; 16 physical partitions of 16 shards each.
CREATE FUNCTION shard_of(p_id uuid) RETURNS smallint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT get_byte(uuid_send(p_id), 15)::smallint $$;

-- ---------------------------------------------------------------------------------------
-- Kinds: manifests are data; kind_config is the operator-editable operational policy that a
-- manifest seeds insert-if-absent.
-- ---------------------------------------------------------------------------------------

-- Returns every legality violation of a manifest document (empty array = legal). The SDK half
-- of this check is converge_proto::manifest::KindManifest::validate; both enforce one lattice.
CREATE FUNCTION validate_kind_manifest(m jsonb) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE
AS $$
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
$$;

CREATE TABLE kind_manifest (
    kind             text        NOT NULL,
    kind_version     int         NOT NULL CHECK (kind_version BETWEEN 1 AND 32767),
    manifest         jsonb       NOT NULL CHECK (cardinality(validate_kind_manifest(manifest)) = 0),
    -- Content hash of the manifest; rides every task so a worker can tell manifests apart.
    manifest_version bigint      NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, kind_version)
);

CREATE TABLE kind_config (
    kind                   text        NOT NULL,
    kind_version           int         NOT NULL,
    max_inflight           int         NOT NULL DEFAULT 0 CHECK (max_inflight >= 0),
    task_deadline_secs     int         NOT NULL DEFAULT 0 CHECK (task_deadline_secs >= 0),
    resync_interval_secs   int         NOT NULL DEFAULT 0 CHECK (resync_interval_secs >= 0),
    resync_recomposes      boolean     NOT NULL DEFAULT false,
    orphan_grace_secs      int         NOT NULL DEFAULT 0 CHECK (orphan_grace_secs >= 0),
    max_transient_attempts int         NOT NULL DEFAULT 0 CHECK (max_transient_attempts >= 0),
    -- Follows the manifest (not operator-editable): the reaper reads it without a registry.
    finalizer_name         text,
    retired                boolean     NOT NULL DEFAULT false,
    updated_at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, kind_version)
);

CREATE FUNCTION kind_manifest_stamp() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.manifest_version := ('x' || substr(md5(NEW.manifest::text), 1, 15))::bit(60)::bigint;
    NEW.updated_at := now();
    RETURN NEW;
END $$;

CREATE TRIGGER kind_manifest_stamp BEFORE INSERT OR UPDATE ON kind_manifest
    FOR EACH ROW EXECUTE FUNCTION kind_manifest_stamp();

-- Seeds kind_config insert-if-absent so an operator's live edits survive a manifest re-apply.
CREATE FUNCTION kind_manifest_seed_config() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO kind_config (kind, kind_version, max_inflight, task_deadline_secs,
                             resync_interval_secs, resync_recomposes, orphan_grace_secs,
                             max_transient_attempts, finalizer_name)
    VALUES (NEW.kind, NEW.kind_version,
            coalesce((NEW.manifest->>'max_inflight')::int, 0),
            coalesce((NEW.manifest->>'task_deadline_secs')::int, 0),
            coalesce((NEW.manifest->>'resync_interval_secs')::int, 0),
            coalesce((NEW.manifest->>'resync_recomposes')::boolean, false),
            coalesce((NEW.manifest->>'orphan_grace_secs')::int, 0),
            coalesce((NEW.manifest->>'max_transient_attempts')::int, 0),
            nullif(NEW.manifest->>'finalizer_name', ''))
    ON CONFLICT (kind, kind_version) DO UPDATE
        SET finalizer_name = EXCLUDED.finalizer_name
        WHERE kind_config.finalizer_name IS DISTINCT FROM EXCLUDED.finalizer_name;
    PERFORM pg_notify('kind_manifest_changed', NEW.kind || '/' || NEW.kind_version);
    RETURN NULL;
END $$;

CREATE TRIGGER kind_manifest_seed_config AFTER INSERT OR UPDATE ON kind_manifest
    FOR EACH ROW EXECUTE FUNCTION kind_manifest_seed_config();

-- ---------------------------------------------------------------------------------------
-- Resources: one table for roots and composed children.
-- ---------------------------------------------------------------------------------------

CREATE TABLE resources (
    id                    uuid        PRIMARY KEY,
    kind                  text        NOT NULL,
    kind_version          int         NOT NULL DEFAULT 1 CHECK (kind_version BETWEEN 1 AND 32767),
    name                  text        NOT NULL,
    owner_id              uuid        REFERENCES resources (id) ON DELETE CASCADE,
    root_id               uuid,
    shard_id              smallint    NOT NULL CHECK (shard_id BETWEEN 0 AND 255),
    spec                  jsonb       NOT NULL DEFAULT '{}',
    status                jsonb,
    labels                jsonb       NOT NULL DEFAULT '{}',
    -- Synced axis: generation bumps on every spec change; synced_gen follows on success.
    generation            bigint      NOT NULL DEFAULT 1,
    synced_gen            bigint      NOT NULL DEFAULT 0,
    composed_gen          bigint      NOT NULL DEFAULT 0,
    -- Health axis: only a handler's Ready condition moves it.
    health_ok             boolean     NOT NULL DEFAULT true,
    -- Failed state: failure_gen = generation means failed for the live spec.
    failure_gen           bigint      NOT NULL DEFAULT 0,
    failure_terminal      boolean     NOT NULL DEFAULT false,
    failure_attempts      int         NOT NULL DEFAULT 0,
    failure_message       text,
    -- Finite = orphaned (grace deadline); 'infinity' = quarantined.
    frozen_until          timestamptz,
    deletion_requested_at timestamptz,
    finalizers            text[]      NOT NULL DEFAULT '{}',
    provider_config_ref   text,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    is_ready boolean GENERATED ALWAYS AS (
        synced_gen >= generation AND health_ok AND deletion_requested_at IS NULL
    ) STORED,
    phase text GENERATED ALWAYS AS (
        CASE
            WHEN deletion_requested_at IS NOT NULL          THEN 'Deleting'
            WHEN frozen_until = 'infinity'                  THEN 'Quarantined'
            WHEN failure_gen = generation                   THEN 'Failed'
            WHEN frozen_until IS NOT NULL                   THEN 'Orphaned'
            WHEN synced_gen >= generation AND NOT health_ok THEN 'Degraded'
            WHEN synced_gen >= generation                   THEN 'Ready'
            ELSE 'Reconciling'
        END
    ) STORED,
    CONSTRAINT resources_kind_name UNIQUE (kind, name),
    CONSTRAINT resources_shard CHECK (shard_id = shard_of(id)),
    CONSTRAINT resources_labels_object CHECK (jsonb_typeof(labels) = 'object')
) WITH (fillfactor = 85);

-- Keyset pagination of the resource list.
CREATE INDEX idx_resources_created ON resources (created_at, id);
CREATE INDEX idx_resources_owner ON resources (owner_id) WHERE owner_id IS NOT NULL;
-- The reaper's catch-up: rows whose spec is ahead of what was reconciled.
CREATE INDEX idx_resources_lagging ON resources (shard_id)
    WHERE synced_gen < generation AND deletion_requested_at IS NULL;
-- Empty on a healthy fleet.
CREATE INDEX idx_resources_failed ON resources (shard_id) WHERE failure_gen = generation;
CREATE INDEX idx_resources_frozen_sweep ON resources (frozen_until) WHERE frozen_until IS NOT NULL;
CREATE INDEX idx_resources_deleting ON resources (shard_id) WHERE deletion_requested_at IS NOT NULL;

-- A spec change bumps the generation and clears the failure bookkeeping of the old spec.
CREATE FUNCTION resources_bump_generation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.generation := OLD.generation + 1;
    NEW.failure_attempts := 0;
    NEW.failure_terminal := false;
    NEW.updated_at := now();
    RETURN NEW;
END $$;

CREATE TRIGGER resources_bump_generation BEFORE UPDATE OF spec ON resources
    FOR EACH ROW WHEN (OLD.spec IS DISTINCT FROM NEW.spec)
    EXECUTE FUNCTION resources_bump_generation();

-- Conditions are decoration, written only on transition.
CREATE TABLE resource_conditions (
    resource_id          uuid        NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    type                 text        NOT NULL,
    status               text        NOT NULL CHECK (status IN ('True', 'False', 'Unknown')),
    reason               text        NOT NULL DEFAULT '',
    message              text        NOT NULL DEFAULT '',
    last_transition_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (resource_id, type)
);

-- ---------------------------------------------------------------------------------------
-- Provider configs: per-kind runtime-editable worker configuration.
-- ---------------------------------------------------------------------------------------

CREATE TABLE providerconfigs (
    name         text        PRIMARY KEY,
    kind         text        NOT NULL,
    kind_version int         NOT NULL CHECK (kind_version BETWEEN 1 AND 32767),
    is_default   boolean     NOT NULL DEFAULT false,
    spec         jsonb       NOT NULL DEFAULT '{}',
    data         bytea,
    owner_id     uuid        REFERENCES resources (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX idx_providerconfigs_default ON providerconfigs (kind, kind_version) WHERE is_default;

CREATE FUNCTION providerconfigs_notify() RETURNS trigger
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

CREATE TRIGGER providerconfigs_notify AFTER INSERT OR UPDATE OR DELETE ON providerconfigs
    FOR EACH ROW EXECUTE FUNCTION providerconfigs_notify();

-- ---------------------------------------------------------------------------------------
-- The queue. UNLOGGED: resources (generation vs synced_gen) is the source of truth and the
-- reaper rebuilds the queue after a crash. RANGE-partitioned by shard_id, 16 x 16 shards, so
-- every claim, drain and sweep prunes to its own partition(s) with shard_id BETWEEN lo AND hi.
-- ---------------------------------------------------------------------------------------

CREATE UNLOGGED TABLE work_queue (
    resource_id      uuid        NOT NULL,
    shard_id         smallint    NOT NULL,
    task_type        text        NOT NULL CHECK (task_type IN ('reconcile', 'delete', 'operate')),
    kind             text        NOT NULL,
    kind_version     int         NOT NULL,
    generation       bigint      NOT NULL,
    trigger          text        NOT NULL,
    attempt          int         NOT NULL DEFAULT 1,
    -- The lease: set by a claim, cleared by a release or the reaper.
    lease_token      uuid,
    -- Bumped in the same statement that makes the row claimable; every result write is
    -- fenced on it, so a stale or duplicate result changes nothing.
    claim_epoch      bigint      NOT NULL DEFAULT 1,
    broker_id        text,
    worker_id        text,
    claimed_at       timestamptz,
    heartbeat_at     timestamptz,
    not_before       timestamptz NOT NULL DEFAULT '-infinity',
    provider_config  jsonb,
    provider_bundle  bytea,
    enqueued_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (resource_id, task_type, shard_id)
) PARTITION BY RANGE (shard_id);

CREATE UNLOGGED TABLE work_outbox (
    id               bigserial,
    shard_id         smallint    NOT NULL,
    resource_id      uuid        NOT NULL,
    task_type        text        NOT NULL,
    generation       bigint      NOT NULL,
    ok               boolean     NOT NULL,
    terminal         boolean     NOT NULL DEFAULT false,
    error_message    text,
    status           jsonb,
    conditions       jsonb,
    health_ok        boolean     NOT NULL DEFAULT true,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, shard_id)
) PARTITION BY RANGE (shard_id);

DO $$
BEGIN
    FOR p IN 0..15 LOOP
        EXECUTE format('CREATE UNLOGGED TABLE work_queue_p%s PARTITION OF work_queue FOR VALUES FROM (%s) TO (%s)',
                       p, p * 16, (p + 1) * 16);
        EXECUTE format('CREATE UNLOGGED TABLE work_outbox_p%s PARTITION OF work_outbox FOR VALUES FROM (%s) TO (%s)',
                       p, p * 16, (p + 1) * 16);
    END LOOP;
END $$;

-- The claim scan: unleased rows of one (kind, version).
CREATE INDEX idx_work_queue_pending ON work_queue (kind, kind_version, not_before) WHERE lease_token IS NULL;
-- The reaper's stale-lease scan and the cap's recount.
CREATE INDEX idx_work_queue_leased ON work_queue (heartbeat_at) WHERE lease_token IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- Wake-ups: one row per NOTIFY channel, read lock-free by notify_gated.
-- ---------------------------------------------------------------------------------------

CREATE TABLE wake_state (
    channel text        PRIMARY KEY,
    last_at timestamptz NOT NULL DEFAULT '-infinity'
);

INSERT INTO wake_state (channel) VALUES ('work_ready'), ('outbox_ready');
