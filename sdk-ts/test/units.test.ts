/**
 * The small pure parts: effective config, backoff and failover order, the registry, the
 * version, and the paged-read helpers.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  type Json,
  KindVersion,
  Outcome,
  type Provider,
  RECONNECT_CAP_MS,
  ReactionRequest,
  Registry,
  RegistryError,
  Resource,
  Stage,
  Subtree,
  TerminalError,
  VERSION,
  effectiveBundle,
  effectiveConfig,
  stageName,
} from "../src/index.js";
import { Backoff } from "../src/runtime/backoff.js";
import { Failover } from "../src/runtime/failover.js";

const MIN = 1_000;
const MAX = 5_000;

/** Whether `d` is a jittered sleep around `raw` (±25 %, never above MAX). */
const around = (d: number, raw: number): boolean => raw * 0.75 <= d && d <= Math.min(raw * 1.25, MAX);

test("effective config deep-merges, the override winning per key", () => {
  const base = { a: { x: 1, y: 2 }, list: [1, 2], keep: true };
  const over = { a: { y: 3, z: null }, list: [9] };
  assert.deepEqual(effectiveConfig(base, over), { a: { x: 1, y: 3, z: null }, list: [9], keep: true });
  assert.deepEqual(base, { a: { x: 1, y: 2 }, list: [1, 2], keep: true }, "inputs are not mutated");
  assert.equal(effectiveConfig(undefined, undefined), null);
  assert.deepEqual(effectiveConfig(undefined, { a: 1 }), { a: 1 });
  assert.deepEqual(effectiveConfig({ a: 1 }, undefined), { a: 1 });
  assert.equal(effectiveConfig({ a: 1 }, 5), 5, "a non-object override replaces");
  const def = new Uint8Array([1]);
  assert.equal(effectiveBundle(def, new Uint8Array()), def);
  assert.deepEqual(effectiveBundle(def, new Uint8Array([2])), new Uint8Array([2]));
});

test("the backoff doubles to the ceiling, is jittered, and resets", () => {
  for (const r of [0, 0.5, 0.999]) {
    const b = new Backoff(MIN, MAX, () => r);
    const seen = [1, 2, 4, 5, 5].map((raw) => [b.nextDelay(), raw * 1000] as const);
    for (const [d, raw] of seen) {
      assert.ok(around(d, Math.min(raw, MAX)), `${d} around ${raw}`);
      assert.ok(d <= RECONNECT_CAP_MS);
    }
    b.reset();
    assert.ok(around(b.nextDelay(), MIN));
  }
});

test("failures walk the list in order and sleep once per round", () => {
  const f = new Failover(3, MIN, MAX, () => 0.5);
  assert.equal(f.current, 0);
  assert.equal(f.failed(), 0);
  assert.equal(f.current, 1);
  assert.equal(f.failed(), 0);
  assert.equal(f.current, 2);
  assert.ok(around(f.failed(), MIN), "a whole round failed: one wait");
  assert.equal(f.current, 0, "wrapped around");
  f.failed();
  f.failed();
  assert.ok(around(f.failed(), 2 * MIN), "the next round waits longer");
  f.succeeded();
  assert.equal(f.current, 0, "success does not move");
  assert.equal(f.failed(), 0);
});

test("an ended stream moves on after a jittered wait; one dropped at once escalates", () => {
  const f = new Failover(2, MIN, MAX, () => 0.5);
  assert.ok(around(f.ended(60_000), MIN));
  assert.equal(f.current, 1);
  assert.ok(around(f.ended(10), 2 * MIN), "a stream that did not outlive the backoff escalates");
  assert.ok(around(f.ended(10), 4 * MIN));
  assert.ok(around(f.ended(60_000), MIN), "a long-lived stream resets it");
});

test("a failover that connects resets the backoff", () => {
  const f = new Failover(2, MIN, MAX, () => 0.5);
  f.failed();
  f.failed();
  f.failed();
  f.failed();
  f.succeeded();
  assert.ok(around(f.ended(10), MIN), "recovered: the outage's backoff is gone");
});

const p = (kind: string, version = 1): Provider => ({
  kind: new KindVersion(kind, version),
  work: () => new Outcome(),
});

test("the registry checks versions, duplicates and WORKER_KINDS", () => {
  const r = new Registry([p("a"), p("b", 2)]);
  assert.deepEqual(r.kinds().map(String), ["a@v1", "b@v2"]);
  assert.equal(r.find("b", 2)?.kind.kind, "b");
  assert.equal(r.find("b", 1), undefined);
  assert.deepEqual(r.validated(["b"]).kinds().map(String), ["b@v2"]);
  assert.throws(() => r.validated(["c"]), /WORKER_KINDS names kinds no provider serves: c/);
  assert.throws(() => new Registry([p("a"), p("a")]).validated(), RegistryError);
  assert.throws(() => new Registry([p("a", 0)]).validated(), /versions start at 1/);
  assert.throws(() => new Registry().validated(), /no providers/);
  const plain = { kind: { kind: "p", version: 2 } as KindVersion, work: () => new Outcome() };
  assert.equal(new Registry([plain]).kinds()[0]?.toString(), "p@v2", "a plain { kind, version } is accepted");
  assert.throws(
    () => new Registry([{ kind: "p" as unknown as KindVersion, work: () => new Outcome() }]),
    RegistryError,
  );
});

test("VERSION matches package.json", () => {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  assert.equal(VERSION, pkg.version);
});

test("stage names are the proto enum names", () => {
  assert.equal(stageName(Stage.WORK), "STAGE_WORK");
  assert.equal(stageName(Stage.REACT), "STAGE_REACT");
});

test("req.spec parses, and a parser's refusal is terminal", () => {
  const req = new ReactionRequest({
    reaction: "work",
    stage: Stage.WORK,
    kind: "k",
    resource: new Resource({ spec: { n: 1 } }),
  });
  assert.deepEqual(req.spec(), { n: 1 });
  assert.equal(
    req.spec((s) => {
      if (typeof s !== "object" || s === null || Array.isArray(s) || typeof s["n"] !== "number") {
        throw new Error("n must be a number");
      }
      return s["n"];
    }),
    1,
  );
  assert.throws(
    () =>
      req.spec(() => {
        throw new Error("nope");
      }),
    (e) => e instanceof TerminalError && e.message === "invalid spec: nope",
  );
});

test("unknown spec keys are ignored when decoding into a typed spec", () => {
  // One decoding rule in every SDK: a kind adding an optional field never breaks a deployed
  // worker. The SDK refuses no key; a parser that reads the fields it knows ignores the rest.
  interface Spec {
    size: number;
    tier: string;
  }
  const parse = (s: Json): Spec => {
    if (typeof s !== "object" || s === null || Array.isArray(s) || typeof s["size"] !== "number") {
      throw new Error("size must be a number");
    }
    return { size: s["size"], tier: typeof s["tier"] === "string" ? s["tier"] : "basic" };
  };
  const req = new ReactionRequest({
    reaction: "work",
    stage: Stage.WORK,
    kind: "k",
    resource: new Resource({ spec: { size: 3, added_later: { x: 1 } } }),
  });
  assert.deepEqual(req.spec(parse), { size: 3, tier: "basic" });
  assert.deepEqual(req.specObject(), { size: 3, added_later: { x: 1 } });
  // What the typed spec needs is still checked.
  const missing = new ReactionRequest({
    reaction: "work",
    stage: Stage.WORK,
    kind: "k",
    resource: new Resource({ spec: { tier: "gold", added_later: true } }),
  });
  assert.throws(
    () => missing.spec(parse),
    (e) => e instanceof TerminalError && e.message === "invalid spec: size must be a number",
  );
});

test("a fixed subtree pages like the broker; no subtree is terminal; a negative page size is refused", async () => {
  const rows = Array.from({ length: 5 }, (_, i) => new Resource({ name: `c${i}` }));
  const req = new ReactionRequest({
    reaction: "rollup",
    stage: Stage.ROLLUP,
    kind: "k",
    resource: new Resource(),
    subtree: Subtree.fixed(rows),
  });
  const pages: string[][] = [];
  for await (const page of req.descendantPages(2)) {
    pages.push(page.map((r) => r.name));
  }
  assert.deepEqual(pages, [["c0", "c1"], ["c2", "c3"], ["c4"]]);
  assert.equal((await req.readDescendants()).length, 5);
  const none = new ReactionRequest({ reaction: "rollup", stage: Stage.ROLLUP, kind: "k", resource: new Resource() });
  await assert.rejects(none.readDescendants(), TerminalError);
  assert.throws(() => req.descendantPages(-1), RangeError);
  const full = new ReactionRequest({
    reaction: "rollup",
    stage: Stage.ROLLUP,
    kind: "k",
    resource: new Resource(),
    descendants: rows,
    descendantsIncluded: true,
  });
  const one: number[] = [];
  for await (const page of full.descendantPages(2)) {
    one.push(page.length);
  }
  assert.deepEqual(one, [5], "the full form is one page");
});
