-- Value flows: JSON pointers to paths, and an upstream's status copied into its dependents'
-- spec along resource_deps edges (one query per batch).
--
-- Live engine code, applied at every boot whenever this file changed (engine/sql/README.md).
-- Re-runnable: CREATE OR REPLACE, triggers dropped and re-created in the same transaction.

-- jsonptr_path's slow path: a pointer with '~' escapes, unescaped per segment.
CREATE OR REPLACE FUNCTION jsonptr_path_escaped(p text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT
AS $$
    SELECT coalesce(array_agg(replace(replace(seg, '~1', '/'), '~0', '~') ORDER BY ord), '{}')
    FROM unnest(string_to_array(substr(CASE WHEN left(p, 1) = '/' THEN p ELSE '/' || p END, 2), '/'))
         WITH ORDINALITY AS s(seg, ord)
$$;

-- RFC 6901 pointer -> jsonb path; a bare field name is a one-segment pointer. Without '~'
-- there is nothing to unescape, and the split is one expression (simple enough to inline).
CREATE OR REPLACE FUNCTION jsonptr_path(p text) RETURNS text[]
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE WHEN strpos(p, '~') = 0
                THEN coalesce(string_to_array(substr(CASE WHEN left(p, 1) = '/' THEN p ELSE '/' || p END, 2), '/'), '{}')
                ELSE jsonptr_path_escaped(p) END
$$;

-- The flowed spec of every live dependent in p_ids that has an incoming edge with flows:
-- flowed_spec() for a whole batch in one query (edges applied in dependency id order).
CREATE OR REPLACE FUNCTION flowed_specs(p_ids uuid[])
RETURNS TABLE (id uuid, spec jsonb, fspec jsonb)
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

-- One edge's flows: each dep_field of `spec` gets src_field of `status` (null when the
-- upstream has not reported it). Only the last path segment is created if missing.
CREATE OR REPLACE FUNCTION apply_value_flows(p_spec jsonb, p_flows jsonb, p_status jsonb) RETURNS jsonb
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
