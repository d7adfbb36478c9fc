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

import type { JsonObject, KindVersion } from "./types.js";

/** What fires a reaction (docs/manifest.md, "Triggers"). */
export type TriggerName = "specChange" | "childrenSettled" | "deleteRequested" | "operation" | "reactor";

/** A part of a handler's outcome the core applies (docs/manifest.md, "emits"). */
export type Emit =
  | "children"
  | "edges"
  | "configs"
  | "status"
  | "conditions"
  | "finalizer"
  | "operationOutput"
  | "sideEffect";

/** One reaction of a manifest, in the manifest's own (snake_case) field names. */
export interface ReactionDecl {
  name: string;
  trigger: TriggerName;
  emits: Emit[];
  verb?: string;
  finalizer?: string;
  descendants?: "summary" | "full";
  output_schema?: JsonObject;
}

/** A value flow a manifest declares statically (docs/manifest.md, "Edges"). */
export interface EdgeDecl {
  from: { kind: string; kind_version?: number };
  to: { kind: string; kind_version?: number };
  values: { dependent_field: string; source_field: string }[];
}

/**
 * The manifest document, as converge takes it. Only the fields set are present, so the JSON
 * is what a person would write by hand.
 */
export interface KindManifest {
  kind: string;
  kind_version: number;
  description?: string;
  provider?: string;
  spec_schema?: JsonObject;
  status_schema?: JsonObject;
  config_schema?: JsonObject;
  reactions: ReactionDecl[];
  finalizer_name?: string;
  max_inflight?: number;
  task_deadline_secs?: number;
  resync_interval_secs?: number;
  resync_recomposes?: boolean;
  orphan_grace_secs?: number;
  max_transient_attempts?: number;
  edges?: EdgeDecl[];
}

/** The reactions most kinds declare, with the `emits` each needs. */
export const Reactions = {
  /** The kind's worker: runs on every spec change, reports status and conditions. */
  work(name = "work"): ReactionDecl {
    return { name, trigger: "specChange", emits: ["status", "conditions"] };
  },
  /** A composite's composer: children, edges, status and conditions. */
  compose(name = "compose"): ReactionDecl {
    return { name, trigger: "specChange", emits: ["children", "edges", "status", "conditions"] };
  },
  /** A composite's rollup, once its subtree has settled. */
  rollup(name = "rollup", descendants?: "summary" | "full"): ReactionDecl {
    const r: ReactionDecl = { name, trigger: "childrenSettled", emits: ["status", "conditions"] };
    if (descendants !== undefined) {
      r.descendants = descendants;
    }
    return r;
  },
  /** The teardown a deletion waits for (set the manifest's `finalizerName` too). */
  teardown(name = "teardown"): ReactionDecl {
    return { name, trigger: "deleteRequested", emits: ["finalizer"] };
  },
  /** An operation (`POST .../ops {"verb": verb}`), its output checked against `output`. */
  operation(verb: string, output?: z.ZodType): ReactionDecl {
    const r: ReactionDecl = { name: verb, trigger: "operation", verb, emits: ["operationOutput"] };
    if (output !== undefined) {
      r.output_schema = schemaOf(output, "output");
    }
    return r;
  },
  /** A reactor kind's one reaction. */
  reactor(name = "react"): ReactionDecl {
    return { name, trigger: "reactor", emits: ["sideEffect"] };
  },
} as const;

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
export function schemaOf(type: z.ZodType, io: "input" | "output" = "input"): JsonObject {
  return z.toJSONSchema(type, { target: "draft-2020-12", io }) as JsonObject;
}

/** What `kindManifest` takes: the kind, the zod schemas and the manifest's other fields. */
export interface KindManifestInit {
  kind: KindVersion;
  description?: string;
  /** Default `"sdk"`: a worker written with an SDK serves the kind. */
  provider?: string;
  /** The spec's type (input side; see `schemaOf`). Absent: untyped. */
  spec?: z.ZodType;
  /** The status's type (output side). */
  status?: z.ZodType;
  /** The provider config's type (input side); mark a secret with `.meta({ writeOnly: true })`. */
  config?: z.ZodType;
  reactions: ReactionDecl[];
  finalizerName?: string;
  maxInflight?: number;
  taskDeadlineSecs?: number;
  resyncIntervalSecs?: number;
  resyncRecomposes?: boolean;
  orphanGraceSecs?: number;
  maxTransientAttempts?: number;
  edges?: EdgeDecl[];
}

/**
 * The kind's manifest, its schemas generated from the handler's zod schemas. Serialise it
 * with `JSON.stringify` and apply it (`conctl apply -f`, or `PUT /api/v1/kinds/{kind}/manifest`);
 * converge checks the rest (the reaction rules, each schema compiles) and answers every
 * problem at once.
 */
export function kindManifest(init: KindManifestInit): KindManifest {
  // Built in the order a person writes a manifest (docs/manifest.md), leaving out what is unset.
  const fields: [keyof KindManifest, unknown][] = [
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
  return Object.fromEntries(fields.filter(([, v]) => v !== undefined)) as unknown as KindManifest;
}
