/**
 * Effective-config helpers: combine a kind's default provider config with a per-resource
 * override, the same way in every SDK (deep merge, the override winning per key).
 *
 * @module
 */
import type { Json } from "./types.js";
/**
 * Deep-merges `override` onto `base`, the override winning per key.
 *
 * Objects merge recursively; any other override value (arrays, scalars, and JSON `null`
 * inside an object) replaces the default's value. With only one side present that side is
 * returned (copied); with neither, `null`. Inputs are never mutated.
 */
export declare function effectiveConfig(base: Json | undefined, override: Json | undefined): Json;
/** The override bundle if it is non-empty, otherwise the default bundle. */
export declare function effectiveBundle(base: Uint8Array, override: Uint8Array): Uint8Array;
