-- converge HTTP API support: indexes behind the list filters, roots and summaries, and the
-- operator actions (reconcile now, quarantine, unquarantine, delete). Forward-only.

-- `label=key:value` filters are one containment test (`labels @> '{"k":"v"}'`).
-- jsonb_path_ops is smaller and faster than the default opclass and serves exactly @>.
CREATE INDEX idx_resources_labels ON resources USING gin (labels jsonb_path_ops);

-- Descendant counts and summaries of a root (every composed row carries its root's id).
CREATE INDEX idx_resources_root ON resources (root_id) WHERE root_id IS NOT NULL;

-- Keyset pages of the roots list, and of one owner's direct children.
CREATE INDEX idx_resources_roots_created ON resources (created_at, id) WHERE owner_id IS NULL;
CREATE INDEX idx_resources_owner_created ON resources (owner_id, created_at, id)
    WHERE owner_id IS NOT NULL;

-- Every row below p_id (not p_id itself). A root's descendants all carry its id in root_id,
-- so one index scan finds them; a mid-level composite's share the top root's root_id, so they
-- are found by walking the owner chain.
CREATE FUNCTION resource_descendant_ids(p_id uuid) RETURNS TABLE (id uuid)
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

-- "Reconcile now": queues a reconcile task for the live generation even when the resource is
-- synced (trigger 'manual', no backoff), unless a reconcile task is already queued; a queued
-- one still waiting out a retry backoff is made due now instead. The gates of
-- schedule_eligible that an operator must lift explicitly still apply: a deleting or frozen
-- (orphaned or quarantined) resource is refused. A terminally failed resource is retried once.
-- Returns 'queued', 'already_queued', 'deleting', 'frozen', or NULL for an unknown id.
CREATE FUNCTION resource_reconcile_now(p_id uuid) RETURNS text
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
    INSERT INTO work_queue AS w (resource_id, shard_id, task_type, kind, kind_version,
                                 generation, trigger, attempt, not_before, provider_config,
                                 provider_bundle)
    SELECT r.id, r.shard_id, 'reconcile', r.kind, r.kind_version, r.generation, 'manual',
           r.failure_attempts + 1, '-infinity'::timestamptz, pc.spec, pc.data
    FROM (SELECT 1) one
    LEFT JOIN providerconfigs pc ON pc.name = r.provider_config_ref
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
-- scheduler (they all gate on frozen_until IS NULL) and drops its pending, unclaimed
-- reconcile task. A claimed task finishes; its result is applied but re-pends nothing.
-- Delete tasks are left alone: quarantine must not interfere with teardown.
-- Returns false for an unknown id.
CREATE FUNCTION resource_quarantine(p_id uuid) RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    v_shard smallint;
BEGIN
    UPDATE resources SET frozen_until = 'infinity', updated_at = now()
    WHERE id = p_id
    RETURNING shard_id INTO v_shard;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM work_queue w
    WHERE w.resource_id = p_id AND w.shard_id = v_shard AND w.task_type = 'reconcile'
      AND w.lease_token IS NULL;
    RETURN true;
END
$$;

-- Lifts a quarantine (and only a quarantine: a finite frozen_until is an orphan-grace
-- deadline owned by the composer) and re-arms the row through the normal gate.
-- Returns false for an unknown id.
CREATE FUNCTION resource_unquarantine(p_id uuid) RETURNS boolean
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
CREATE FUNCTION resource_delete_now(p_id uuid) RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids uuid[];
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
    DELETE FROM work_queue w WHERE w.resource_id = ANY (v_ids);
    DELETE FROM work_outbox o WHERE o.resource_id = ANY (v_ids);
    DELETE FROM resources WHERE id = p_id;
    RETURN FOUND;
END
$$;
