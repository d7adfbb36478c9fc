/**
 * Kind manifests built from the handler's own types: `schemaOf(zodType)` is the JSON Schema
 * (2020-12) of a zod schema, and `kindManifest({...})` the whole manifest document that
 * `PUT /api/v1/kinds/{kind}/manifest` (or `conctl apply -f`) takes, with its spec, status and
 * config schemas generated from the zod schemas the handler parses with. One source for both,
 * so the schema converge checks every spec against cannot drift from the type the worker
 * decodes. The fields are described in docs/manifest.md.
 *
 * ```ts
 * const NoteSpec = z.object({ text: z.string().max(200) });
 * const manifest = kindManifest({
 *   kind: new KindVersion("note"),
 *   spec: NoteSpec,
 *   reactions: [Reactions.work()],
 * });
 * process.stdout.write(JSON.stringify(manifest, null, 2));
 * ```
 *
 * @module
 */
import { z } from "zod";
/** The reactions most kinds declare, with the `emits` each needs. */
export const Reactions = {
    /** The kind's worker: runs on every spec change, reports status and conditions. */
    work(name = "work") {
        return { name, trigger: "specChange", emits: ["status", "conditions"] };
    },
    /** A composite's composer: children, edges, status and conditions. */
    compose(name = "compose") {
        return { name, trigger: "specChange", emits: ["children", "edges", "status", "conditions"] };
    },
    /** A composite's rollup, once its subtree has settled. */
    rollup(name = "rollup", descendants) {
        const r = { name, trigger: "childrenSettled", emits: ["status", "conditions"] };
        if (descendants !== undefined) {
            r.descendants = descendants;
        }
        return r;
    },
    /** The teardown a deletion waits for (set the manifest's `finalizerName` too). */
    teardown(name = "teardown") {
        return { name, trigger: "deleteRequested", emits: ["finalizer"] };
    },
    /** An operation (`POST .../ops {"verb": verb}`), its output checked against `output`. */
    operation(verb, output) {
        const r = { name: verb, trigger: "operation", verb, emits: ["operationOutput"] };
        if (output !== undefined) {
            r.output_schema = schemaOf(output, "output");
        }
        return r;
    },
    /** A reactor kind's one reaction. */
    reactor(name = "react") {
        return { name, trigger: "reactor", emits: ["sideEffect"] };
    },
};
/**
 * The JSON Schema (draft 2020-12) of a zod schema.
 *
 * `io` picks the side of a transform or default: `"input"` (the default) is what a person
 * writes — a field with `.default(...)` is optional — and suits specs and configs;
 * `"output"` is what the handler produces, for statuses. In input mode `z.object` leaves
 * unknown keys open (zod strips them when parsing); use `z.strictObject` for a spec whose
 * typos converge should refuse. A type JSON Schema cannot express (a `z.date()`, a
 * transform's output) throws, naming it, rather than weakening the schema.
 */
export function schemaOf(type, io = "input") {
    return z.toJSONSchema(type, { target: "draft-2020-12", io });
}
/**
 * The kind's manifest, its schemas generated from the handler's zod schemas. Serialise it
 * with `JSON.stringify` and apply it (`conctl apply -f`, or `PUT /api/v1/kinds/{kind}/manifest`);
 * converge checks the rest (the reaction rules, each schema compiles) and answers every
 * problem at once.
 */
export function kindManifest(init) {
    // Built in the order a person writes a manifest (docs/manifest.md), leaving out what is unset.
    const fields = [
        ["kind", init.kind.kind],
        ["kind_version", init.kind.version],
        ["description", init.description],
        ["provider", init.provider ?? "sdk"],
        ["spec_schema", init.spec === undefined ? undefined : schemaOf(init.spec, "input")],
        ["status_schema", init.status === undefined ? undefined : schemaOf(init.status, "output")],
        ["config_schema", init.config === undefined ? undefined : schemaOf(init.config, "input")],
        ["reactions", init.reactions],
        ["finalizer_name", init.finalizerName],
        ["max_inflight", init.maxInflight],
        ["task_deadline_secs", init.taskDeadlineSecs],
        ["resync_interval_secs", init.resyncIntervalSecs],
        ["resync_recomposes", init.resyncRecomposes],
        ["orphan_grace_secs", init.orphanGraceSecs],
        ["max_transient_attempts", init.maxTransientAttempts],
        ["edges", init.edges],
    ];
    return Object.fromEntries(fields.filter(([, v]) => v !== undefined));
}
//# sourceMappingURL=manifest.js.map