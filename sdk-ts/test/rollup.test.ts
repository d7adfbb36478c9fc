/**
 * Rollups against an in-process fake broker: the summary without a call, paging with
 * ListDescendants under the task's lease and token on the task's own connection, the full
 * form as one page, a lost lease as a transient failure, and paging that outlives its
 * stream.
 */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { afterEach, beforeEach, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";

import { uuidBytes, uuidText } from "../src/convert.js";
import * as pb from "../src/gen/converge/worker/v1/worker_pb.js";
import {
  KindVersion,
  Outcome,
  type Provider,
  type ReactionRequest,
  type Resource,
  ResourceRef,
  RollupSummary,
  Stage,
  type WorkerConfigInit,
} from "../src/index.js";
import { FakeBroker, leafRows, rollupTask, waitFor } from "./fake-broker.js";
import { Deferred, Running } from "./worker-harness.js";

const ROOT_ID = uuidBytes(randomUUID());

/**
 * Kind `k`: records each request; with `pageSize` > 0 pages through the descendants,
 * waiting for `betweenPages` (when set) after each page.
 */
class Rollup implements Provider {
  readonly kind = new KindVersion("k", 1);
  readonly seen: ReactionRequest[] = [];
  readonly pages: Resource[][] = [];
  betweenPages: Deferred | undefined;

  constructor(private readonly pageSize = 0) {}

  async work(req: ReactionRequest): Promise<Outcome> {
    this.seen.push(req);
    if (this.pageSize > 0) {
      for await (const page of req.descendantPages(this.pageSize)) {
        this.pages.push(page);
        await this.betweenPages?.promise;
      }
    }
    return new Outcome({ status: { pages: this.pages.length } });
  }
}

let broker: FakeBroker;
let running: Running | undefined;

beforeEach(async () => {
  broker = await new FakeBroker().start();
});

afterEach(async () => {
  await running?.close();
  running = undefined;
  await broker.stop();
});

function serve(p: Provider, cfg: Partial<WorkerConfigInit> = {}): void {
  running = new Running([p], { brokerAddrs: [broker.addr], workerName: "rollup-test", ...cfg });
}

const ids = (rows: pb.Resource[]): Array<string | undefined> => rows.map((r) => uuidText(r.id));

test("a rollup that reads nothing gets the summary and makes no call", async () => {
  broker.descendants = leafRows(5);
  const p = new Rollup();
  serve(p);
  const s = await broker.nextStream();
  await s.next("subscribe");
  const summary = create(pb.RollupSummarySchema, {
    total: 5n,
    byPhase: { Ready: 3n, Failed: 1n, Reconciling: 1n },
    byKind: { "conf-leaf": 5n },
    failed: [{ kind: "conf-leaf", name: "c3" }],
    notReady: [
      { kind: "conf-leaf", name: "c3" },
      { kind: "conf-leaf", name: "c4" },
    ],
    failedTotal: 1n,
    notReadyTotal: 2n,
  });
  s.push(rollupTask("R", 3n, { resourceId: ROOT_ID, summary }));
  const c = await s.next("complete");
  assert.deepEqual([c.leaseToken, c.errorMessage], ["R", ""]);
  const req = p.seen[0]!;
  assert.equal(req.stage, Stage.ROLLUP);
  assert.deepEqual(
    req.summary,
    new RollupSummary({
      total: 5,
      byPhase: { Ready: 3, Failed: 1, Reconciling: 1 },
      byKind: { "conf-leaf": 5 },
      failed: [new ResourceRef("conf-leaf", "c3")],
      notReady: [new ResourceRef("conf-leaf", "c3"), new ResourceRef("conf-leaf", "c4")],
      failedTotal: 1,
      notReadyTotal: 2,
    }),
  );
  assert.equal(req.summary?.ready, 3);
  assert.deepEqual([req.descendants, req.descendantsIncluded], [[], false]);
  assert.deepEqual(broker.listCalls, [], "a handler that reads nothing makes no ListDescendants call");
});

test("paging reads every descendant once under the lease, with the token, on the task's connection", async () => {
  broker.descendants = leafRows(5);
  const p = new Rollup(2);
  serve(p, { token: "rollup-token" });
  const s = await broker.nextStream();
  await s.next("subscribe");
  s.push(rollupTask("P", 7n, { resourceId: ROOT_ID, summary: create(pb.RollupSummarySchema, { total: 5n }) }));
  const c = await s.next("complete");
  assert.equal(c.errorMessage, "");
  assert.deepEqual(
    p.pages.map((page) => page.length),
    [2, 2, 1],
  );
  assert.deepEqual(
    p.pages.flat().map((d) => d.id),
    ids(broker.descendants),
  );
  const calls = broker.listCalls.map(([r]) => r);
  assert.deepEqual(
    calls.map((r) => Buffer.from(r.pageToken).toString()),
    ["", "2", "4"],
  );
  for (const r of calls) {
    assert.deepEqual([uuidText(r.resourceId), r.leaseToken, r.claimEpoch, r.pageSize], [uuidText(ROOT_ID), "P", 7n, 2]);
  }
  assert.deepEqual(
    broker.auth.filter(([rpc]) => rpc === "ListDescendants"),
    Array(3).fill(["ListDescendants", "Bearer rollup-token"]),
  );
  assert.deepEqual(new Set(broker.listCalls.map(([, peer]) => peer)), new Set([s.peer]), "the task's own connection");
});

test("the full form is one page without a call", async () => {
  const rows = leafRows(3);
  const p = new Rollup(2);
  serve(p);
  const s = await broker.nextStream();
  await s.next("subscribe");
  s.push(
    rollupTask("F", 1n, { descendants: rows, included: true, summary: create(pb.RollupSummarySchema, { total: 3n }) }),
  );
  assert.equal((await s.next("complete")).errorMessage, "");
  assert.deepEqual(
    p.pages.map((page) => page.map((d) => d.id)),
    [ids(rows)],
  );
  assert.equal(p.seen[0]?.descendantsIncluded, true);
  assert.deepEqual(broker.listCalls, []);
});

test("a lease that is gone is a transient failure", async () => {
  broker.descendants = leafRows(5);
  broker.listError = grpc.status.FAILED_PRECONDITION;
  serve(new Rollup(2));
  const s = await broker.nextStream();
  await s.next("subscribe");
  s.push(rollupTask("G", 2n));
  const c = await s.next("complete");
  assert.equal(c.terminal, false);
  assert.match(c.errorMessage, /reading descendants failed: the task's lease is gone/);
  assert.equal(broker.listCalls.length, 1);
});

test("paging goes on over the task's connection after its stream drops", async () => {
  broker.descendants = leafRows(5);
  const p = new Rollup(2);
  p.betweenPages = new Deferred();
  serve(p);
  const s = await broker.nextStream();
  await s.next("subscribe");
  s.push(rollupTask("D", 1n));
  await waitFor("the first page", () => (p.pages.length > 0 ? true : undefined));
  s.end(); // the stream drops with the handler between two pages
  const s2 = await broker.nextStream();
  const sub = await s2.next("subscribe");
  assert.deepEqual(
    sub.resumed.map((r) => r.leaseToken),
    ["D"],
  );
  p.betweenPages.resolve();
  const c = await s2.next("complete");
  assert.deepEqual([c.leaseToken, c.errorMessage], ["D", ""]);
  assert.deepEqual(
    p.pages.map((page) => page.length),
    [2, 2, 1],
  );
  // Each session has a connection of its own, so the pages' peer tells them apart: all three
  // came on the first session's connection, which stayed open for the handler.
  assert.notEqual(s2.peer, s.peer, "the new session dialled a new connection");
  assert.deepEqual(
    broker.listCalls.map(([, peer]) => peer),
    [s.peer, s.peer, s.peer],
  );
});
