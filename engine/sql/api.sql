-- The resource API: apply, reconcile now, quarantine, hard delete, descendants, rollback, and
-- the row triggers that bump a resource's generation and keep its roots' spec history.
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction.

-- A new resource's id: a UUIDv7 (RFC 9562), the first 48 bits the milliseconds since the
-- epoch, then the version, then random bits. Resources created together get ids close
-- together, so a batch of them (a bulk apply, a composer's children, the tasks a claim takes
-- in due order, the results a drain applies in id order) is read and written in a few leaf
-- pages of every index keyed by id instead of one random page per row. Measured on 100k
-- leaves against gen_random_uuid() ids (issue 44, BENCHMARKS.md): claim and completion 14 %
-- less time, the drain about 8 % less. The last byte, which picks the shard (shard_of), is
-- still random, so shards stay even.
CREATE OR REPLACE FUNCTION uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$
    SELECT encode(set_bit(set_bit(
               overlay(uuid_send(gen_random_uuid())
                       PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp())
                                                        * 1000)::bigint) FROM 3)
                       FROM 1 FOR 6),
               52, 1), 53, 1), 'hex')::uuid
$$;

-- A spec change bumps the generation and clears the failure bookkeeping of the old spec.
CREATE OR REPLACE FUNCTION resources_bump_generation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.generation := OLD.generation + 1;
    NEW.failure_attempts := 0;
    NEW.failure_terminal := false;
    NEW.updated_at := now();
    RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS resources_bump_generation ON resources;
CREATE TRIGGER resources_bump_generation BEFORE UPDATE OF spec ON resources
    FOR EACH ROW WHEN (OLD.spec IS DISTINCT FROM NEW.spec)
    EXECUTE FUNCTION resources_bump_generation();

DROP TRIGGER IF EXISTS resources_bump_generation_on_version ON resources;
CREATE TRIGGER resources_bump_generation_on_version BEFORE UPDATE OF kind_version ON resources
    FOR EACH ROW WHEN (OLD.kind_version IS DISTINCT FROM NEW.kind_version)
    EXECUTE FUNCTION resources_bump_generation();

-- Keeps a root's spec history: the new generation's spec, trimmed to the last
-- converge.spec_history_keep generations (session setting, default 50). Called per row for
-- the updates that changed a root's spec (rare next to the drain's status updates, and a
-- statement trigger on UPDATE cannot name `spec` as it needs the old rows too).
CREATE OR REPLACE FUNCTION spec_versions_record() RETURNS trigger
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

-- The first spec of every root a statement created, in one insert: a batch apply of 1,000
-- roots was 1,000 calls of the row trigger. Composed children (owner_id set) have no
-- history. A new row's generation is 1, so nothing is trimmed.
CREATE OR REPLACE FUNCTION spec_versions_record_created() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO spec_versions (resource_id, generation, spec)
    SELECT n.id, n.generation, n.spec FROM spec_new n WHERE n.owner_id IS NULL
    ON CONFLICT (resource_id, generation) DO UPDATE SET spec = EXCLUDED.spec, created_at = now();
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS spec_versions_on_insert ON resources;
CREATE TRIGGER spec_versions_on_insert AFTER INSERT ON resources
    REFERENCING NEW TABLE AS spec_new
    FOR EACH STATEMENT EXECUTE FUNCTION spec_versions_record_created();

-- Forgets the history of a statement's deleted rows (spec_versions has no foreign key, 0009).
CREATE OR REPLACE FUNCTION spec_versions_forget_deleted() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    DELETE FROM spec_versions s USING spec_old o WHERE s.resource_id = o.id;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS spec_versions_on_delete ON resources;
CREATE TRIGGER spec_versions_on_delete AFTER DELETE ON resources
    REFERENCING OLD TABLE AS spec_old
    FOR EACH STATEMENT EXECUTE FUNCTION spec_versions_forget_deleted();

DROP TRIGGER IF EXISTS spec_versions_on_update ON resources;
CREATE TRIGGER spec_versions_on_update AFTER UPDATE OF spec ON resources
    FOR EACH ROW WHEN (NEW.owner_id IS NULL AND OLD.spec IS DISTINCT FROM NEW.spec)
    EXECUTE FUNCTION spec_versions_record();

-- Applies many resources in one statement set: each item is created or updated by (kind, name)
-- exactly as resource_apply does it, and every changed one is scheduled together. The arrays
-- are parallel, one element per item; (kind, name) pairs must be distinct (the API refuses
-- a duplicate within a batch). Returns one row per item, `ord` its 1-based position.
--
-- Lock order: rows that exist are locked first, in ascending id (the order the drain and the
-- cascade use), so a batch never deadlocks with them; new rows are inserted in (kind, name)
-- order, so two batches creating the same names wait on each other instead of deadlocking.
--
-- Sequential scans are off: every read here is by key. A backend caches this function's
-- plans, and one planned while `resources` was small (statistics of a few hundred rows, a
-- table then growing faster than autoanalyze re-reads it) read the unchanged rows with a hash
-- join over a scan of the whole table, once per single apply: 362 buffers at 6,000 rows, the
-- cost growing with the table (issue 44, item 4).
CREATE OR REPLACE FUNCTION resource_apply_batch(p_kinds text[], p_kind_versions int[],
                                                p_names text[], p_specs jsonb[],
                                                p_labels jsonb[], p_provider_config_refs text[])
RETURNS TABLE (ord bigint, id uuid, result text, generation bigint)
LANGUAGE plpgsql
SET enable_seqscan = off SET jit = off
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

-- Creates or updates a resource by (kind, name) and schedules it, in one round trip: a batch
-- of one, so the single and the batch apply share one definition of what an apply does.
-- Returns the id, 'created' | 'configured' | 'unchanged', and the generation.
CREATE OR REPLACE FUNCTION resource_apply(p_kind text, p_kind_version int, p_name text, p_spec jsonb,
                               p_labels jsonb, p_provider_config_ref text)
RETURNS TABLE (id uuid, result text, generation bigint)
LANGUAGE sql
AS $$
    SELECT b.id, b.result, b.generation
    FROM resource_apply_batch(ARRAY[p_kind], ARRAY[p_kind_version], ARRAY[p_name],
                              ARRAY[p_spec], ARRAY[p_labels], ARRAY[p_provider_config_ref]) b
$$;

-- "Reconcile now": queues a reconcile task for the live generation even when the resource is
-- synced (trigger 'manual', no backoff), unless a reconcile task is already queued; a queued
-- one still waiting out a retry backoff is made due now instead. The gates of
-- schedule_eligible that an operator must lift explicitly still apply: a deleting or frozen
-- (orphaned or quarantined) resource is refused. A terminally failed resource is retried once.
-- Returns 'queued', 'already_queued', 'deleting', 'frozen', or NULL for an unknown id.
CREATE OR REPLACE FUNCTION resource_reconcile_now(p_id uuid) RETURNS text
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

-- Quarantine (operator set-aside): frozen_until = 'infinity' freezes the row from every
-- scheduler (they all gate on frozen_until IS NULL) and drops its reconcile task, pending or
-- running: a running one's broker is told (CancelTask, reason `quarantined`) and its late
-- result is refused, since the queue row is gone. Delete and operate tasks are left alone:
-- quarantine must not interfere with teardown or an operator's verb. Its owners' rollups are
-- re-evaluated at once. Returns false for an unknown id.
CREATE OR REPLACE FUNCTION resource_quarantine(p_id uuid) RETURNS boolean
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

-- Lifts a quarantine (and only a quarantine: a finite frozen_until is an orphan-grace
-- deadline owned by the composer), re-arms the row through the normal gate and re-evaluates
-- its owners. Returns false for an unknown id.
CREATE OR REPLACE FUNCTION resource_unquarantine(p_id uuid) RETURNS boolean
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

-- Hard delete of a resource and its composed subtree, for now: issue 4 replaces this with
-- ordered soft deletion (deletion_requested_at, finalizers, reverse-dependency order).
--
-- Queue and outbox rows are removed first so nothing can write back afterwards: a completion
-- needs its queue row (work_complete is fenced on it), and an undrained result for a vanished
-- resource would make the drainer write conditions for a row that no longer exists. The
-- outbox is cleared on both sides of the queue delete: a completion that committed in between
-- (it held the queue row, so the queue delete waited for it) is caught by the second pass.
-- The row itself goes last; children, conditions and owned providerconfigs follow through
-- ON DELETE CASCADE. Returns false for an unknown id.
CREATE OR REPLACE FUNCTION resource_delete_now(p_id uuid) RETURNS boolean
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

-- Every row below p_id (not p_id itself). A root's descendants all carry its id in root_id,
-- so one index scan finds them; a mid-level composite's share the top root's root_id, so they
-- are found by walking the owner chain.
CREATE OR REPLACE FUNCTION resource_descendant_ids(p_id uuid) RETURNS TABLE (id uuid)
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

-- Re-applies the spec recorded for p_generation as a new generation (a rollback is a spec
-- change like any other: it bumps the generation and reconciles). Returns the resulting
-- generation and whether the spec changed; no row when that generation is not recorded.
CREATE OR REPLACE FUNCTION resource_rollback(p_id uuid, p_generation bigint)
RETURNS TABLE (generation bigint, changed boolean)
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
