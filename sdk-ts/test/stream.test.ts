/**
 * The SDK's stream behaviour against an in-process fake broker: Subscribe first, readiness
 * Interest, config prime and push, bounded concurrency, heartbeats, keep-until-ack and
 * resend after reconnect, stale acks, CancelTask, deadlines, Drain, unknown kinds, tokens.
 */

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, test } from "node:test";

import { create } from "@bufbuild/protobuf";

import * as pb from "../src/gen/converge/worker/v1/worker_pb.js";
import { KindVersion, type Provider, ProviderConfig, SDK, TaskCancelledError } from "../src/index.js";
import { FakeBroker, type Stream, waitFor, workTask } from "./fake-broker.js";
import { scratch } from "./scratch.js";
import { Gate, Running } from "./worker-harness.js";

let broker: FakeBroker;
let gate: Gate;
let running: Running | undefined;

beforeEach(async () => {
  broker = await new FakeBroker().start();
  gate = new Gate();
});

afterEach(async () => {
  gate.release.resolve();
  await running?.close();
  running = undefined;
  await broker.stop();
});

async function start(cfg: Partial<ConstructorParameters<typeof Running>[1]> = {}): Promise<Stream> {
  running = new Running([gate], { brokerAddrs: [broker.addr], ...cfg });
  return broker.nextStream();
}

const ack = (leaseToken: string, claimEpoch: bigint, accepted = true): pb.WorkStreamServerMsg["body"] => ({
  case: "ack",
  value: create(pb.CompleteAckSchema, { leaseToken, claimEpoch, accepted }),
});

const json = (b: Uint8Array): unknown => JSON.parse(Buffer.from(b).toString());

test("Subscribe is first, then Interest for unready kinds", async () => {
  gate.forcedUnready = true;
  const s = await start({ maxParallel: 7 });
  const first = await s.first();
  assert.equal(first.body.case, "subscribe");
  const sub = first.body.value as pb.Subscribe;
  assert.deepEqual(sub.kinds, ["k"]);
  assert.deepEqual(sub.kindVersions, [1]);
  assert.equal(sub.maxInflight, 7);
  assert.equal(sub.sdk, SDK);
  assert.ok(SDK.startsWith("ts/"));
  assert.equal(sub.workerName, "fake-test");
  const i = await s.next("interest");
  assert.deepEqual([i.kind, i.kindVersion, i.hasWorker], ["k", 1, false]);
});

test("the config is primed before the stream and pushes flip readiness", async () => {
  broker.entries = [
    create(pb.ProviderConfigEntrySchema, {
      kind: "k",
      kindVersion: 1,
      config: Buffer.from('{"ready": true}'),
      bundle: Buffer.from("xy"),
    }),
  ];
  const s = await start();
  assert.equal(broker.configPulls, 1);
  assert.deepEqual(gate.configs[0], new ProviderConfig({ ready: true }, new Uint8Array(Buffer.from("xy"))));
  await s.next("subscribe");
  s.push({
    case: "config",
    value: create(pb.ProviderConfigUpdateSchema, {
      kind: "k",
      kindVersion: 1,
      config: Buffer.from('{"ready": false}'),
    }),
  });
  assert.equal((await s.next("interest")).hasWorker, false, "a push re-evaluates readiness at once");
  assert.deepEqual(gate.configs.at(-1)?.spec, { ready: false });
  s.push({
    case: "config",
    value: create(pb.ProviderConfigUpdateSchema, { kind: "k", kindVersion: 1, config: Buffer.from("{}") }),
  });
  assert.equal((await s.next("interest")).hasWorker, true);
});

test("a result is kept until acked and re-sent after a reconnect", async () => {
  gate.release.resolve();
  const s = await start();
  await s.next("subscribe");
  s.push(workTask("L1", 4n, { name: "one" }));
  const c = await s.next("complete");
  assert.deepEqual([c.leaseToken, c.claimEpoch, c.stage, c.errorMessage], ["L1", 4n, pb.Stage.WORK, ""]);
  assert.deepEqual(json(c.status), { name: "one" });
  s.end(); // the stream drops before the ack
  const s2 = await broker.nextStream();
  const sub = await s2.next("subscribe");
  assert.deepEqual(
    sub.resumed.map((r) => [r.leaseToken, r.claimEpoch]),
    [["L1", 4n]],
  );
  assert.equal((await s2.next("complete")).leaseToken, "L1");
  s2.push(ack("L1", 4n));
  // A delivery after the ack runs the task again instead of re-sending.
  s2.push(workTask("L2", 1n, { name: "two" }));
  assert.equal((await s2.next("complete")).leaseToken, "L2");
  s2.push(ack("L2", 1n, false));
  s2.push(workTask("L3", 1n, { name: "three" }));
  await s2.next("complete");
  s2.end();
  const s3 = await broker.nextStream();
  const sub3 = await s3.next("subscribe");
  assert.deepEqual(
    sub3.resumed.map((r) => r.leaseToken),
    ["L3"],
    "acked and refused results are dropped",
  );
});

test("a duplicate task while unacked re-sends the kept result", async () => {
  gate.release.resolve();
  const s = await start();
  await s.next("subscribe");
  s.push(workTask("D", 1n, { name: "dup" }));
  await s.next("complete");
  s.push(workTask("D", 1n, { name: "dup" }));
  assert.equal((await s.next("complete")).leaseToken, "D");
  assert.deepEqual(gate.started, ["dup"], "the handler ran once");
});

test("concurrency is bounded and heartbeats are coalesced", async () => {
  const s = await start({ maxParallel: 2, heartbeatEveryMs: 100 });
  await s.next("subscribe");
  for (let i = 0; i < 4; i++) {
    s.push(workTask(`T${i}`, BigInt(i + 1), { name: `n${i}` }));
  }
  const hb = await s.next("heartbeat");
  assert.deepEqual(
    hb.leaseToken.map((t, i) => [t, hb.claimEpoch[i]]).sort(),
    [0, 1, 2, 3].map((i) => [`T${i}`, BigInt(i + 1)]),
  );
  assert.equal(gate.started.length, 2, "maxParallel bounds running handlers");
  gate.release.resolve();
  const done = new Set<string>();
  for (let i = 0; i < 4; i++) {
    done.add((await s.next("complete")).leaseToken);
  }
  assert.deepEqual([...done].sort(), ["T0", "T1", "T2", "T3"]);
});

test("CancelTask aborts the handler's signal with its reason and drops its result", async () => {
  const s = await start();
  await s.next("subscribe");
  s.push(workTask("C", 2n, { name: "cancelme" }));
  await waitFor("the handler to start", () => (gate.started.length > 0 ? true : undefined));
  s.push({
    case: "cancel",
    value: create(pb.CancelTaskSchema, { leaseToken: "C", claimEpoch: 2n, reason: "superseded" }),
  });
  await waitFor("the handler to see its cancellation", () => (gate.cancelled.length > 0 ? true : undefined));
  const reason = gate.reasons[0];
  assert.ok(reason instanceof TaskCancelledError);
  assert.equal(reason.kind, "cancelled");
  assert.equal(reason.detail, "superseded");
  gate.release.resolve();
  s.push(workTask("N", 1n, { name: "next" }));
  assert.equal((await s.next("complete")).leaseToken, "N", "no result is sent for a cancelled task");
});

test("a task waiting for a permit is cancelled without running", async () => {
  const s = await start({ maxParallel: 1 });
  await s.next("subscribe");
  s.push(workTask("A", 1n, { name: "a" }));
  s.push(workTask("B", 1n, { name: "b" }));
  await waitFor("the first handler to start", () => (gate.started.length > 0 ? true : undefined));
  s.push({
    case: "cancel",
    value: create(pb.CancelTaskSchema, { leaseToken: "B", claimEpoch: 1n, reason: "deleted" }),
  });
  s.push({
    case: "cancel",
    value: create(pb.CancelTaskSchema, { leaseToken: "B", claimEpoch: 1n, reason: "deleted" }),
  });
  // Frames are handled in order: once this push reached onConfig, so did the cancels.
  const seen = gate.configs.length;
  s.push({ case: "config", value: create(pb.ProviderConfigUpdateSchema, { kind: "k", kindVersion: 1 }) });
  await waitFor("the config push behind the cancels", () => (gate.configs.length > seen ? true : undefined));
  gate.release.resolve();
  assert.equal((await s.next("complete")).leaseToken, "A");
  s.push(workTask("C", 1n, { name: "c" }));
  assert.equal((await s.next("complete")).leaseToken, "C");
  assert.deepEqual(gate.started, ["a", "c"], "the cancelled task never ran");
});

test("the deadline fails the task transiently and aborts the handler", async () => {
  const s = await start();
  await s.next("subscribe");
  s.push(workTask("DL", 1n, { name: "slow", deadlineMs: 100 }));
  const c = await s.next("complete");
  assert.deepEqual([c.errorMessage, c.terminal], ["deadline exceeded", false]);
  await waitFor("the handler to see the deadline", () => (gate.cancelled.length > 0 ? true : undefined));
  assert.deepEqual(gate.cancelled, ["slow"]);
  assert.ok(gate.reasons[0] instanceof TaskCancelledError && gate.reasons[0].kind === "deadline");
});

test("handler errors are transient, unknown kinds and malformed tasks terminal", async () => {
  const errs: Provider = {
    kind: new KindVersion("k", 1),
    work() {
      throw new TypeError("kaput");
    },
  };
  running = new Running([errs], { brokerAddrs: [broker.addr] });
  const s = await broker.nextStream();
  await s.next("subscribe");
  s.push(workTask("E", 1n));
  let c = await s.next("complete");
  assert.equal(c.terminal, false);
  assert.match(c.errorMessage, /TypeError: kaput/);
  s.push(workTask("U", 1n, { kind: "other" }));
  c = await s.next("complete");
  assert.equal(c.terminal, true);
  assert.match(c.errorMessage, /no provider/);
  const bad = workTask("M", 1n);
  (bad.value as pb.StageTask).reaction = "";
  s.push(bad);
  c = await s.next("complete");
  assert.equal(c.terminal, true);
  assert.match(c.errorMessage, /reaction/);
  const badJson = workTask("J", 1n, { spec: "{nope" });
  s.push(badJson);
  c = await s.next("complete");
  assert.equal(c.terminal, true);
  assert.match(c.errorMessage, /malformed resource spec JSON/);
});

test("Drain finishes in-flight work, refuses new tasks, then reconnects", async () => {
  const s = await start();
  await s.next("subscribe");
  s.push(workTask("R", 1n, { name: "inflight" }));
  await waitFor("the handler to start", () => (gate.started.length > 0 ? true : undefined));
  s.push({ case: "drain", value: create(pb.DrainSchema, { reason: "shutdown", deadlineMs: 0n }) });
  s.push(workTask("X", 1n, { name: "late" }));
  const refused = await s.next("complete");
  assert.equal(refused.leaseToken, "X");
  assert.equal(refused.terminal, false);
  assert.match(refused.errorMessage, /draining/);
  s.push(ack("X", 1n));
  gate.release.resolve();
  const c = await s.next("complete");
  assert.deepEqual([c.leaseToken, c.errorMessage], ["R", ""]);
  s.push(ack("R", 1n));
  await s.whenClosed();
  const s2 = await broker.nextStream();
  assert.deepEqual((await s2.next("subscribe")).resumed, []);
});

test("shutdown reports every kind unready and waits for the acks", async () => {
  const s = await start({ drainTimeoutMs: 30_000 });
  await s.next("subscribe");
  s.push(workTask("S", 1n, { name: "s" }));
  await waitFor("the handler to start", () => (gate.started.length > 0 ? true : undefined));
  running?.stop.abort();
  assert.equal((await s.next("interest")).hasWorker, false);
  gate.release.resolve();
  assert.equal((await s.next("complete")).leaseToken, "S");
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(running?.settled, false, "shutdown waits for the ack");
  s.push(ack("S", 1n));
  await running?.close(5_000);
});

test("shutdown past the drain timeout aborts the handler with kind shutdown", async () => {
  const s = await start({ drainTimeoutMs: 100 });
  await s.next("subscribe");
  s.push(workTask("Z", 1n, { name: "z" }));
  await waitFor("the handler to start", () => (gate.started.length > 0 ? true : undefined));
  await running?.close(5_000);
  assert.deepEqual(gate.cancelled, ["z"]);
  assert.ok(gate.reasons[0] instanceof TaskCancelledError && gate.reasons[0].kind === "shutdown");
});

test("no token sends no authorization", async () => {
  const s = await start();
  await s.next("subscribe");
  assert.deepEqual(broker.auth, [
    ["GetProviderConfig", undefined],
    ["WorkStream", undefined],
  ]);
});

test("the token file is sent on both RPCs and re-read at a reconnect", async () => {
  const dir = scratch("token");
  const token = join(dir, "token");
  writeFileSync(token, "first-token\n");
  const s = await start({ tokenFile: token });
  await s.next("subscribe");
  assert.deepEqual(broker.auth, [
    ["GetProviderConfig", "Bearer first-token"],
    ["WorkStream", "Bearer first-token"],
  ]);
  writeFileSync(token, "  rotated-token ");
  s.end();
  const s2 = await broker.nextStream();
  await s2.next("subscribe");
  // The reconnect re-pulls the configs, then reopens the stream, both with the new token.
  assert.deepEqual(broker.auth.slice(2), [
    ["GetProviderConfig", "Bearer rotated-token"],
    ["WorkStream", "Bearer rotated-token"],
  ]);
});
