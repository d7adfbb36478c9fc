/**
 * The wire path without a broker: a StageTask decoded into a ReactionRequest for every
 * stage, an Outcome encoded into a StageComplete, errors mapped to terminal or transient,
 * and the testing helpers (`request`, `run`, `executeTask`).
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { requestFromTask, resultComplete, uuidBytes } from "../src/convert.js";
import * as pb from "../src/gen/converge/worker/v1/worker_pb.js";
import {
  ChildSpec,
  Condition,
  DepEdge,
  KindVersion,
  Outcome,
  type Provider,
  ProviderConfig,
  ProviderConfigSpec,
  ResourceRef,
  Stage,
  Subtree,
  TaskCancelledError,
  TerminalError,
  Transition,
  TransientError,
  Trigger,
  ValueFlow,
} from "../src/index.js";
import { executeTask, request, run } from "../src/testing.js";
import { leafRows, rollupTask, workTask } from "./fake-broker.js";

const ID = "0a1b2c3d-4e5f-4061-8293-a4b5c6d7e8f9";
const json = (b: Uint8Array): unknown => JSON.parse(Buffer.from(b).toString());
const task = (body: pb.WorkStreamServerMsg["body"]): pb.StageTask => body.value as pb.StageTask;
const echo = { leaseToken: "L", stage: Stage.COMPOSE, claimEpoch: 3n };

test("a WORK task decodes with its resource, config override, trigger and deadline", () => {
  const t = task(workTask("L", 2n, { spec: '{"a":1}', attempt: 3 }));
  const res = (t.request.value as pb.WorkRequest).resource!;
  res.id = uuidBytes(ID);
  res.labels = { team: "x" };
  res.status = Buffer.from('{"s":true}');
  t.providerConfig = Buffer.from('{"o":2}');
  t.providerBundle = Buffer.from("B");
  const signal = new AbortController().signal;
  const deadline = new Date(Date.now() + 1000);
  const req = requestFromTask(t, { config: new ProviderConfig({ d: 1 }), signal, deadline });
  assert.equal(req.stage, Stage.WORK);
  assert.equal(req.reaction, "work");
  assert.equal(req.attempt, 3);
  assert.equal(req.generation, 1);
  assert.equal(req.trigger, Trigger.SPEC_CHANGE);
  assert.equal(req.resource.id, ID);
  assert.deepEqual(req.resource.spec, { a: 1 });
  assert.deepEqual(req.resource.status, { s: true });
  assert.deepEqual(req.resource.labels, { team: "x" });
  assert.equal(req.resource.ownerId, undefined);
  assert.deepEqual(req.effectiveConfig(), { d: 1, o: 2 });
  assert.deepEqual([...req.effectiveBundle()], [...Buffer.from("B")]);
  assert.equal(req.signal, signal);
  assert.equal(req.deadline, deadline);
});

test("OPERATE, REACT and ROLLUP payloads decode", () => {
  const op = create(pb.StageTaskSchema, {
    stage: pb.Stage.OPERATE,
    kind: "k",
    reaction: "ping",
    request: {
      case: "operateReq",
      value: {
        resource: { kind: "k", name: "r" },
        operation: { verb: "ping", input: Buffer.from("[1]"), attempts: 2 },
      },
    },
  });
  const r1 = requestFromTask(op, { config: new ProviderConfig() });
  assert.equal(r1.trigger, Trigger.OPERATION, "a missing trigger defaults by stage");
  assert.deepEqual([r1.operation?.verb, r1.operation?.input, r1.operation?.attempts], ["ping", [1], 2]);
  const react = create(pb.StageTaskSchema, {
    stage: pb.Stage.REACT,
    kind: "k",
    reaction: "notify",
    trigger: "reactor",
    request: {
      case: "reactReq",
      value: { resource: { kind: "w", name: "r" }, transition: pb.Transition.SYNCED, dedupToken: "id:2:1:b" },
    },
  });
  const r2 = requestFromTask(react, { config: new ProviderConfig() });
  assert.equal(r2.transition, Transition.SYNCED);
  assert.equal(r2.dedupToken, "id:2:1:b");
  const summary = create(pb.RollupSummarySchema, {
    total: 3n,
    byPhase: { Ready: 2n, Failed: 1n },
    byKind: { leaf: 3n },
    failed: [{ kind: "leaf", name: "x" }],
    failedTotal: 1n,
    notReadyTotal: 1n,
  });
  const r3 = requestFromTask(task(rollupTask("R", 1n, { summary, descendants: leafRows(2), included: true })), {
    config: new ProviderConfig(),
  });
  assert.equal(r3.trigger, Trigger.CHILDREN_SETTLED);
  assert.equal(r3.descendants.length, 2);
  assert.equal(r3.descendantsIncluded, true);
  assert.equal(r3.summary?.total, 3);
  assert.equal(r3.summary?.ready, 2);
  assert.deepEqual(r3.summary?.byPhase, { Ready: 2, Failed: 1 });
  assert.deepEqual(r3.summary?.failed, [new ResourceRef("leaf", "x")]);
});

test("dryRun is read from a COMPOSE task only", () => {
  const compose = (dryRun: boolean): pb.StageTask =>
    create(pb.StageTaskSchema, {
      stage: pb.Stage.COMPOSE,
      kind: "k",
      reaction: "compose",
      dryRun,
      request: { case: "composeReq", value: { root: { kind: "k", name: "r" } } },
    });
  assert.equal(requestFromTask(compose(true), { config: new ProviderConfig() }).dryRun, true);
  assert.equal(requestFromTask(compose(false), { config: new ProviderConfig() }).dryRun, false);
  const work = task(workTask("L", 2n, { spec: "{}" }));
  work.dryRun = true;
  assert.equal(requestFromTask(work, { config: new ProviderConfig() }).dryRun, false);
});

test("malformed tasks are refused with a reason", () => {
  const noPayload = create(pb.StageTaskSchema, { stage: pb.Stage.WORK, kind: "k", reaction: "work" });
  assert.throws(() => requestFromTask(noPayload, { config: new ProviderConfig() }), /no payload for stage STAGE_WORK/);
  const mismatch = task(workTask("L"));
  mismatch.stage = pb.Stage.COMPOSE;
  assert.throws(
    () => requestFromTask(mismatch, { config: new ProviderConfig() }),
    /does not match stage STAGE_COMPOSE/,
  );
  const unspecified = task(workTask("L"));
  unspecified.stage = pb.Stage.UNSPECIFIED;
  assert.throws(() => requestFromTask(unspecified, { config: new ProviderConfig() }), /unknown stage 0/);
  const noResource = task(workTask("L"));
  (noResource.request.value as pb.WorkRequest).resource = undefined;
  assert.throws(() => requestFromTask(noResource, { config: new ProviderConfig() }), /no resource/);
});

test("a compose outcome encodes children, edges, flows, configs and conditions", () => {
  const out = new Outcome({ status: { composed: 2 } })
    .withChild(new ChildSpec("leaf", 1, "a", { i: 0 }).withLabel("x", "y"))
    .withChild(new ChildSpec("leaf", 1, "b", { i: 1 }))
    .withEdge(
      new DepEdge(new ResourceRef("leaf", "b"), new ResourceRef("leaf", "a")).withValue(new ValueFlow("/up", "/echo")),
    )
    .withConfig(new ProviderConfigSpec({ name: "cfg", kind: "leaf", isDefault: true, spec: { z: 1 } }))
    .withCondition(Condition.ready(true, "Composed"));
  const c = resultComplete(echo, { ok: true, value: out });
  assert.equal(c.errorMessage, "");
  assert.equal(c.claimEpoch, 3n);
  const r = c.compose!;
  assert.deepEqual(
    r.desired.map((d) => [d.kind, d.name, json(d.spec), d.labels, d.kindVersion]),
    [
      ["leaf", "a", { i: 0 }, { x: "y" }, 1],
      ["leaf", "b", { i: 1 }, {}, 1],
    ],
  );
  assert.deepEqual(
    [r.edges[0]?.from?.name, r.edges[0]?.to?.name, r.edges[0]?.values[0]?.dependentField],
    ["b", "a", "/up"],
  );
  assert.deepEqual([r.configs[0]?.name, r.configs[0]?.isDefault, json(r.configs[0]!.spec)], ["cfg", true, { z: 1 }]);
  assert.deepEqual(json(r.status), { composed: 2 });
  assert.deepEqual(
    r.conditions.map((x) => [x.type, x.status, x.reason]),
    [["Ready", "True", "Composed"]],
  );
  assert.equal(c.status.length, 0, "a compose result carries its status in compose");
});

test("errors map to terminal or transient, bad outcomes to terminal", () => {
  const w = { ...echo, stage: Stage.WORK };
  let c = resultComplete(w, { ok: false, error: new TerminalError("bad spec") });
  assert.deepEqual([c.errorMessage, c.terminal], ["bad spec", true]);
  c = resultComplete(w, { ok: false, error: new TransientError("flaky") });
  assert.deepEqual([c.errorMessage, c.terminal], ["flaky", false]);
  c = resultComplete(w, { ok: false, error: new RangeError("boom") });
  assert.deepEqual([c.errorMessage, c.terminal], ["handler threw RangeError: boom", false]);
  c = resultComplete(w, { ok: false, error: "a string" });
  assert.deepEqual([c.errorMessage, c.terminal], ['handler threw string: "a string"', false]);
  c = resultComplete(w, { ok: true, value: undefined });
  assert.deepEqual([c.errorMessage, c.status.length], ["", 0], "nothing returned is an empty outcome");
  c = resultComplete(w, { ok: true, value: { status: 1 } });
  assert.equal(c.terminal, true);
  assert.match(c.errorMessage, /expected an Outcome/);
  c = resultComplete(w, { ok: true, value: new Outcome({ status: { n: Number.NaN } }) });
  assert.equal(c.terminal, true);
  assert.match(c.errorMessage, /cannot encode outcome: NaN is not a JSON number/);
  c = resultComplete(echo, { ok: true, value: new Outcome().withChild(new ChildSpec("leaf", 0, "a")) });
  assert.equal(c.terminal, true);
  assert.match(c.errorMessage, /kind_version 0/);
});

const hello: Provider = {
  kind: new KindVersion("hello"),
  async work(req) {
    const g = req.specObject()["greeting"] ?? "hello";
    if (typeof g !== "string") {
      throw new TerminalError("greeting must be a string");
    }
    return new Outcome({ status: { message: `${g}, ${req.resource.name}!` } });
  },
};

test("the testing helpers run a provider without a broker", async () => {
  const out = await run(hello, request("hello", { greeting: "hi" }, { name: "world" }));
  assert.deepEqual(out.status, { message: "hi, world!" });
  await assert.rejects(run(hello, request("hello", { greeting: 1 })), TerminalError);
  const waits: Provider = {
    kind: new KindVersion("hello"),
    work: (req) =>
      new Promise((_, reject) => req.signal.addEventListener("abort", () => reject(req.signal.reason as Error))),
  };
  await assert.rejects(
    run(waits, request("hello", {}, { timeoutMs: 20 })),
    (e) => e instanceof TransientError && e.message === "deadline exceeded",
  );
  const seen: unknown[] = [];
  const watcher: Provider = {
    kind: new KindVersion("hello"),
    work: (req) =>
      new Promise((resolve) =>
        req.signal.addEventListener("abort", () => {
          seen.push(req.signal.reason);
          resolve(new Outcome());
        }),
      ),
  };
  const t = task(workTask("D", 1n, { kind: "hello", deadlineMs: 20 }));
  const c = await executeTask([watcher], t);
  assert.deepEqual([c.errorMessage, c.terminal], ["deadline exceeded", false]);
  assert.ok(seen[0] instanceof TaskCancelledError && seen[0].kind === "deadline");
  const ok = await executeTask(hello, task(workTask("E", 1n, { kind: "hello", name: "w" })));
  assert.deepEqual(json(ok.status), { message: "hello, w!" });
  const none = await executeTask(hello, task(workTask("U", 1n, { kind: "other" })));
  assert.equal(none.terminal, true);
  const paging: Provider = {
    kind: new KindVersion("k"),
    async work(req) {
      return new Outcome({ status: { read: (await req.readDescendants()).length } });
    },
  };
  const pc = await executeTask(paging, task(rollupTask("P")), { subtree: Subtree.fixed([]) });
  assert.deepEqual(json(pc.status), { read: 0 });
});
