/**
 * Kind manifests from zod schemas (src/manifest.ts): the generated spec, status and config
 * schemas, the reaction helpers and the document's shape. End to end, converge accepting a
 * generated manifest is in e2e.test.ts.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { z } from "zod";

import { KindVersion, Reactions, kindManifest, schemaOf } from "../src/index.js";

const NoteSpec = z.strictObject({
  text: z.string().max(200).describe("What the note says."),
  copies: z.number().int().min(1).default(1),
  mode: z.enum(["append", "replace"]).optional(),
});
const NoteStatus = z.object({ path: z.string(), bytes: z.number().int().min(0) });
const NoteConfig = z.object({ directory: z.string(), token: z.string().meta({ writeOnly: true }).optional() });

test("schemaOf: a strict object, its constraints, defaults optional on the input side", () => {
  const s = schemaOf(NoteSpec);
  assert.equal(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
  assert.equal(s["type"], "object");
  assert.equal(s["additionalProperties"], false);
  assert.deepEqual(s["required"], ["text"]);
  const props = s["properties"] as Record<string, Record<string, unknown>>;
  assert.deepEqual(props["text"], { type: "string", maxLength: 200, description: "What the note says." });
  assert.equal(props["copies"]!["type"], "integer");
  assert.equal(props["copies"]!["minimum"], 1);
  assert.equal(props["copies"]!["default"], 1);
  assert.deepEqual(props["mode"], { type: "string", enum: ["append", "replace"] });
});

test("schemaOf: the output side requires what the handler always produces", () => {
  assert.deepEqual(schemaOf(NoteSpec, "output")["required"], ["text", "copies"]);
  const st = schemaOf(NoteStatus, "output");
  assert.deepEqual(st["required"], ["path", "bytes"]);
  assert.equal(st["additionalProperties"], false);
});

test("schemaOf refuses a type JSON Schema cannot express", () => {
  assert.throws(() => schemaOf(z.object({ at: z.date() })), /Date/);
});

test("kindManifest: the whole document, schemas from the types", () => {
  const m = kindManifest({
    kind: new KindVersion("note", 2),
    description: "A note on disk.",
    spec: NoteSpec,
    status: NoteStatus,
    config: NoteConfig,
    reactions: [Reactions.work(), Reactions.teardown()],
    finalizerName: "example.dev/note",
    taskDeadlineSecs: 30,
  });
  assert.equal(m.kind, "note");
  assert.equal(m.kind_version, 2);
  assert.equal(m.provider, "sdk");
  assert.deepEqual(m.spec_schema, schemaOf(NoteSpec, "input"));
  assert.deepEqual(m.status_schema, schemaOf(NoteStatus, "output"));
  const cfg = m.config_schema!["properties"] as Record<string, Record<string, unknown>>;
  assert.equal(cfg["token"]!["writeOnly"], true);
  assert.deepEqual(m.reactions, [
    { name: "work", trigger: "specChange", emits: ["status", "conditions"] },
    { name: "teardown", trigger: "deleteRequested", emits: ["finalizer"] },
  ]);
  assert.equal(m.finalizer_name, "example.dev/note");
  assert.equal(m.task_deadline_secs, 30);
  // Only what was set: no null or undefined fields reach the JSON.
  assert.deepEqual(Object.keys(JSON.parse(JSON.stringify(m))).sort(), [
    "config_schema",
    "description",
    "finalizer_name",
    "kind",
    "kind_version",
    "provider",
    "reactions",
    "spec_schema",
    "status_schema",
    "task_deadline_secs",
  ]);
});

test("Reactions: the composer, rollup, operation and reactor shapes", () => {
  assert.deepEqual(Reactions.compose().emits, ["children", "edges", "status", "conditions"]);
  assert.deepEqual(Reactions.rollup("rollup", "full"), {
    name: "rollup",
    trigger: "childrenSettled",
    emits: ["status", "conditions"],
    descendants: "full",
  });
  const op = Reactions.operation("backup", z.object({ snapshot_id: z.string() }));
  assert.equal(op.verb, "backup");
  assert.deepEqual(op.output_schema!["required"], ["snapshot_id"]);
  assert.deepEqual(Reactions.reactor(), { name: "react", trigger: "reactor", emits: ["sideEffect"] });
});
