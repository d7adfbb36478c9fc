-- converge baseline schema: tables, indexes, sequences and the two functions the tables
-- themselves need (shard_of and validate_kind_manifest, both in CHECK constraints).
--
-- This squashes migrations 0001-0025 (before 1.0; no deployment needed the old steps). A
-- database migrated by those files is adopted when it is next migrated
-- (the db::engine_sql module): its schema equals this file plus engine/sql/, as pg_dump
-- showed when the squash was made. From here a landed migration never changes
-- (migrations/CHECKSUMS); the schema changes by new migrations.
--
-- The engine's functions, and the triggers that call them, are not here: they live in
-- engine/sql/, one file per family, applied after the migrations whenever a file changed.
-- The current schema as a whole is engine/schema.sql (scripts/gen-schema.sh).

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
    -- Which pipeline stages a kind has, derived from its manifest (the core stays kind-blind:
    -- it only reads these flags).
    has_composer           boolean     NOT NULL DEFAULT false,
    has_rollup             boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (kind, kind_version)
);

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
    -- When a provider last observed it (a resync re-pends settled rows not observed lately).
    observed_at           timestamptz,
    CONSTRAINT resources_kind_name UNIQUE (kind, name),
    CONSTRAINT resources_shard CHECK (shard_id = shard_of(id)),
    CONSTRAINT resources_labels_object CHECK (jsonb_typeof(labels) = 'object')
) WITH (fillfactor = 85);

-- Keyset pagination of the resource list.
CREATE INDEX idx_resources_created ON resources (created_at, id);
CREATE INDEX idx_resources_frozen_sweep ON resources (frozen_until) WHERE frozen_until IS NOT NULL;
CREATE INDEX idx_resources_deleting ON resources (shard_id) WHERE deletion_requested_at IS NOT NULL;

-- `label=key:value` filters are one containment test (`labels @> '{"k":"v"}'`).
-- jsonb_path_ops is smaller and faster than the default opclass and serves exactly @>; rows
-- without labels get no entry.
CREATE INDEX idx_resources_labels ON resources USING gin (labels jsonb_path_ops)
    WHERE labels <> '{}'::jsonb;
-- Descendant counts and summaries of a root (every composed row carries its root's id).
CREATE INDEX idx_resources_root ON resources (root_id) WHERE root_id IS NOT NULL;
-- Keyset pages of the roots list, and of one owner's direct children.
CREATE INDEX idx_resources_roots_created ON resources (created_at, id) WHERE owner_id IS NULL;
CREATE INDEX idx_resources_owner_created ON resources (owner_id, created_at, id)
    WHERE owner_id IS NOT NULL;

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

-- Edges between children of one composite: ordering plus value flows
-- ([{"dep_field": "/vpc_id", "src_field": "/vpc_id"}], upstream status -> dependent spec).
CREATE TABLE resource_deps (
    dependent_id  uuid  NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    dependency_id uuid  NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    -- No foreign key: an edge's owner is its dependent's owner, so a deleted owner's edges go
    -- with its children (dependent_id cascades); a key would cost a lookup and a row lock of
    -- the composite per edge.
    owner_id      uuid  NOT NULL,
    value_flows   jsonb NOT NULL DEFAULT '[]',
    PRIMARY KEY (dependent_id, dependency_id),
    CHECK (dependent_id <> dependency_id)
);
CREATE INDEX idx_resource_deps_dependency ON resource_deps (dependency_id);
CREATE INDEX idx_resource_deps_owner ON resource_deps (owner_id);

-- Straddle close-out: one row per (drain, root) arming; a plain serial key so two
-- concurrent drains never wait on each other's arming row.
CREATE TABLE rollup_recheck (
    id       bigserial   PRIMARY KEY,
    root_id  uuid        NOT NULL,
    shard_id smallint    NOT NULL,
    armed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idx_rollup_recheck_shard ON rollup_recheck (shard_id, id);

-- The broker's read of a composite's subtree deletes that composite's rechecks.
CREATE INDEX idx_rollup_recheck_root ON rollup_recheck (root_id);

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
    -- Due since: now() for new work, the end of its backoff for a retry, '-infinity' for work
    -- that goes first (an operator's reconcile, a resource's next operation).
    not_before       timestamptz NOT NULL DEFAULT now(),
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
    -- A task may finish without advancing synced_gen (a composite waiting for its children).
    advance          boolean     NOT NULL DEFAULT true,
    -- Results of kinds with a rollup reaction go to the express lane, drained ahead of the bulk.
    express          boolean     NOT NULL DEFAULT false,
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
-- The per-kind cap counts a kind's live leases at the claim.
CREATE INDEX idx_work_queue_leased_kind ON work_queue (kind, kind_version) WHERE lease_token IS NOT NULL;
-- The express drainer's scan.
CREATE INDEX idx_work_outbox_express ON work_outbox (id) WHERE express;

-- ---------------------------------------------------------------------------------------
-- Spec history of roots (composed children are derived from their root's spec), kept to
-- the last converge.spec_history_keep generations (session setting, default 50).
-- ---------------------------------------------------------------------------------------

CREATE TABLE spec_versions (
    resource_id uuid        NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    generation  bigint      NOT NULL,
    spec        jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (resource_id, generation)
);

-- ---------------------------------------------------------------------------------------
-- Operations: a verb with an input, run by the kind's operation reaction as an operate task.
-- ---------------------------------------------------------------------------------------

CREATE TABLE resource_operations (
    uid          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    resource_id  uuid        NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    verb         text        NOT NULL,
    input        jsonb,
    state        text        NOT NULL DEFAULT 'pending'
                             CHECK (state IN ('pending', 'running', 'succeeded', 'failed')),
    output       jsonb,
    error        text,
    attempts     int         NOT NULL DEFAULT 0,
    requested_by text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);

CREATE INDEX idx_resource_operations_resource ON resource_operations (resource_id, created_at, uid);
CREATE INDEX idx_resource_operations_open ON resource_operations (resource_id, created_at, uid)
    WHERE state IN ('pending', 'running');

-- ---------------------------------------------------------------------------------------
-- Events: what happened to a resource, in order. Phase changes made by the drainer are
-- written in one statement per batch; every other phase change (apply, delete, quarantine,
-- orphaning) by a row trigger that stands aside while the drainer records its own.
-- ---------------------------------------------------------------------------------------

CREATE TABLE resource_events (
    id          bigserial   PRIMARY KEY,
    resource_id uuid        NOT NULL,
    kind        text        NOT NULL,
    name        text        NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    -- created | phase | deleted | operation
    type        text        NOT NULL,
    from_phase  text,
    to_phase    text,
    generation  bigint,
    message     text,
    -- Who did it: the principal of the API call whose transaction wrote the event (the API
    -- sets `converge.actor` transaction-locally); NULL for the engine itself.
    actor       text        DEFAULT NULLIF(current_setting('converge.actor', true), '')
);

-- Events outlive their resource (a delete is an event), so they are found by kind and name.
CREATE INDEX idx_resource_events_name ON resource_events (kind, name, id);
CREATE INDEX idx_resource_events_at ON resource_events (at);

-- ---------------------------------------------------------------------------------------
-- Reactor bindings and the lifecycle outbox.
-- ---------------------------------------------------------------------------------------

CREATE TABLE reactor_bindings (
    name        text        PRIMARY KEY,
    watch_kind  text        NOT NULL,
    transition  text        NOT NULL
                            CHECK (transition IN ('created', 'synced', 'degraded', 'failed', 'deleted')),
    reactor     text        NOT NULL,
    label_match jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(label_match) = 'object'),
    enabled     boolean     NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (reactor <> watch_kind)
);

-- The emit gate's probe (EXISTS ... WHERE enabled AND transition = ...).
CREATE INDEX idx_reactor_bindings_transition ON reactor_bindings (transition, watch_kind) WHERE enabled;

-- One row per (transition, generation, binding): LOGGED, so a committed transition survives
-- a crash; each binding's delivery is acked (deleted) or retried on its own.
CREATE TABLE lifecycle_outbox (
    id           bigserial   PRIMARY KEY,
    shard_id     smallint    NOT NULL,
    resource_id  uuid        NOT NULL,
    transition   text        NOT NULL,
    generation   bigint      NOT NULL,
    binding_name text        NOT NULL,
    reactor_kind text        NOT NULL,
    -- The watched resource as it was at the transition (a deleted one is gone by delivery).
    resource     jsonb       NOT NULL,
    claim_token  uuid,
    claim_epoch  bigint      NOT NULL DEFAULT 1,
    broker_id    text,
    claimed_at   timestamptz,
    heartbeat_at timestamptz,
    attempts     int         NOT NULL DEFAULT 0,
    not_before   timestamptz NOT NULL DEFAULT '-infinity',
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (resource_id, transition, generation, binding_name)
);

CREATE INDEX idx_lifecycle_pending ON lifecycle_outbox (reactor_kind, shard_id, id) WHERE claim_token IS NULL;
CREATE INDEX idx_lifecycle_claimed ON lifecycle_outbox (heartbeat_at) WHERE claim_token IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- The rows behind their spec, in a narrow table of their own (kept by the triggers in
-- engine/sql/lag.sql), so that updating a resource is a HOT update: no index of resources
-- names generation, synced_gen or failure_gen.
-- ---------------------------------------------------------------------------------------

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

-- ---------------------------------------------------------------------------------------
-- Broker liveness: every broker stamps its row about once a second; a broker that finds a
-- row older than the dead-after window deletes it and releases the leases stamped with it.
-- ---------------------------------------------------------------------------------------

CREATE TABLE broker_liveness (
    broker_id    text PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- ---------------------------------------------------------------------------------------
-- Wake-ups: one row per NOTIFY channel, read lock-free by notify_gated.
-- ---------------------------------------------------------------------------------------

CREATE TABLE wake_state (
    channel text        PRIMARY KEY,
    last_at timestamptz NOT NULL DEFAULT '-infinity'
);

INSERT INTO wake_state (channel) VALUES ('work_ready'), ('outbox_ready');

-- ---------------------------------------------------------------------------------------
-- The engine files (engine/sql/*.sql) applied to this database: one row per file with the
-- sha256 of the content applied. Migrating re-applies a file whose hash differs, in the
-- transaction that updates its row.
-- ---------------------------------------------------------------------------------------

CREATE TABLE engine_sql (
    file       text        PRIMARY KEY,
    sha256     text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
