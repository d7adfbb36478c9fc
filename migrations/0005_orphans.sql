-- Orphan-grace expiry: composer-dropped children whose grace window ended without a re-emit
-- are removed, and the composites that owned them re-evaluate their rollup. Forward-only.

-- Removes expired orphans in a shard range (finite frozen_until in the past; 'infinity' —
-- quarantine — is never < now(), so it is never swept). Returns how many were removed.
-- Kinds with a finalizer get the ordered soft delete once issue 4's teardown lands; until
-- then every expired orphan is removed outright (its own children go with it by owner_id).
CREATE FUNCTION sweep_expired_orphans(p_lo smallint, p_hi smallint, p_limit int) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids uuid[];
    v_owners uuid[];
BEGIN
    SELECT array_agg(id ORDER BY id), array_agg(DISTINCT owner_id) FILTER (WHERE owner_id IS NOT NULL)
    INTO v_ids, v_owners
    FROM (SELECT r.id, r.owner_id FROM resources r
          WHERE r.frozen_until < now() AND r.shard_id BETWEEN p_lo AND p_hi
          ORDER BY r.id
          LIMIT p_limit
          FOR UPDATE SKIP LOCKED) s;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    DELETE FROM work_queue q USING resources r
    WHERE r.id = ANY (v_ids) AND q.resource_id = r.id AND q.shard_id = r.shard_id;
    DELETE FROM resources WHERE id = ANY (v_ids);
    IF v_owners IS NOT NULL THEN
        PERFORM schedule_eligible(v_owners);
        PERFORM schedule_rollup(v_owners);
    END IF;
    RETURN cardinality(v_ids);
END
$$;

-- Setting a child aside (or taking it back) changes what its composite's rollup sees:
-- re-evaluate the owners at once, like any other descendant transition.
CREATE FUNCTION cascade_to_owners(p_id uuid) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_owners uuid[];
BEGIN
    SELECT array_remove(ARRAY[owner_id, root_id], NULL) INTO v_owners FROM resources WHERE id = p_id;
    IF v_owners IS NOT NULL AND cardinality(v_owners) > 0 THEN
        PERFORM schedule_eligible(v_owners);
        PERFORM schedule_rollup(v_owners);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION resource_quarantine(p_id uuid) RETURNS boolean
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
    PERFORM cascade_to_owners(p_id);
    RETURN true;
END
$$;

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
