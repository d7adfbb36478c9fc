/**
 * Effective-config helpers: combine a kind's default provider config with a per-resource
 * override, the same way in every SDK (deep merge, the override winning per key).
 *
 * @module
 */
function isObject(v) {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}
/**
 * Deep-merges `override` onto `base`, the override winning per key.
 *
 * Objects merge recursively; any other override value (arrays, scalars, and JSON `null`
 * inside an object) replaces the default's value. With only one side present that side is
 * returned (copied); with neither, `null`. Inputs are never mutated.
 */
export function effectiveConfig(base, override) {
    if (base === undefined && override === undefined) {
        return null;
    }
    if (override === undefined) {
        return structuredClone(base);
    }
    if (base === undefined) {
        return structuredClone(override);
    }
    return merge(base, override);
}
function merge(base, over) {
    if (isObject(base) && isObject(over)) {
        const out = structuredClone(base);
        for (const [k, v] of Object.entries(over)) {
            const prev = Object.hasOwn(out, k) ? out[k] : undefined;
            out[k] = prev === undefined ? structuredClone(v) : merge(prev, v);
        }
        return out;
    }
    return structuredClone(over);
}
/** The override bundle if it is non-empty, otherwise the default bundle. */
export function effectiveBundle(base, override) {
    return override.length > 0 ? override : base;
}
//# sourceMappingURL=merge.js.map