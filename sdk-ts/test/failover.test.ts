/**
 * Failover along the broker list against in-process fake brokers: a dead first broker is
 * skipped without a wait, a refusing one is left for the next, streams move along the list
 * with kept results following the worker, and a silent (black-holed) connection is left by
 * keepalive for the next broker.
 */

import assert from "node:assert/strict";
import { type Server, type Socket, createServer, connect } from "node:net";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";

import * as pb from "../src/gen/converge/worker/v1/worker_pb.js";
import { FakeBroker, deadAddr, workTask } from "./fake-broker.js";
import { Running, echo } from "./worker-harness.js";

const ack = (leaseToken: string, claimEpoch: bigint): pb.WorkStreamServerMsg["body"] => ({
  case: "ack",
  value: create(pb.CompleteAckSchema, { leaseToken, claimEpoch, accepted: true }),
});

test("a dead first broker is skipped without waiting", async () => {
  const b = await new FakeBroker().start();
  // A wait after the refused first address would be at least 3.75 s, past the wait below;
  // the second is tried at once because the round of the list is not over.
  const w = new Running([echo], {
    brokerAddrs: [await deadAddr(), b.addr],
    reconnectMinMs: 5_000,
    reconnectMaxMs: 5_000,
  });
  try {
    const s = await b.nextStream(3_000);
    await s.next("subscribe");
    assert.equal(b.configPulls, 1, "configs were primed from the second broker");
    s.push(workTask("t1"));
    const c = await s.next("complete");
    assert.deepEqual([c.leaseToken, c.errorMessage], ["t1", ""]);
  } finally {
    await w.close();
    await b.stop();
  }
});

test("a refusing broker is left for the next at once", async () => {
  const refusing = await new FakeBroker().start();
  refusing.refuse = grpc.status.UNAUTHENTICATED;
  const good = await new FakeBroker().start();
  const w = new Running([echo], {
    brokerAddrs: [refusing.addr, good.addr],
    reconnectMinMs: 1_000,
    reconnectMaxMs: 5_000,
  });
  try {
    let s = await good.nextStream();
    await s.next("subscribe");
    assert.ok(refusing.refused >= 1);
    // A stream that ends moves along the list: the refusing broker's refused stream is a
    // failure within the round (no wait), then back here.
    const before = refusing.refused;
    s.end();
    s = await good.nextStream(2_500);
    await s.next("subscribe");
    assert.ok(refusing.refused > before, "the list was walked in order");
  } finally {
    await w.close();
    await refusing.stop();
    await good.stop();
  }
});

test("streams move along the list and kept results follow", async () => {
  const a = await new FakeBroker().start();
  const b = await new FakeBroker().start();
  const w = new Running([echo], { brokerAddrs: [a.addr, b.addr] });
  try {
    let s = await a.nextStream();
    await s.next("subscribe");
    s.push(workTask("kept", 7n));
    await s.next("complete");
    s.end(); // the first broker goes away before acking: the result is kept

    s = await b.nextStream();
    const sub = await s.next("subscribe");
    assert.deepEqual(
      sub.resumed.map((r) => [r.leaseToken, r.claimEpoch]),
      [["kept", 7n]],
    );
    assert.equal((await s.next("complete")).leaseToken, "kept", "re-sent to the next broker");
    s.push(ack("kept", 7n));
    s.push(workTask("on-b"));
    assert.equal((await s.next("complete")).leaseToken, "on-b");
    s.push(ack("on-b", 1n));
    s.end();

    s = await a.nextStream(); // wrapped around
    assert.deepEqual((await s.next("subscribe")).resumed, [], "acked results are forgotten");
  } finally {
    await w.close();
    await a.stop();
    await b.stop();
  }
});

/**
 * Forwards TCP connections to `target` until `frozen`; from then on it keeps both sides
 * open but forwards nothing, as a network partition or a stopped (SIGSTOP) broker looks to
 * the worker.
 */
class FrozenRelay {
  frozen = false;
  addr = "";
  private server: Server | undefined;
  private readonly sockets: Socket[] = [];

  constructor(private readonly target: string) {}

  async start(): Promise<void> {
    const [host, port] = this.target.replace("http://", "").split(":") as [string, string];
    this.server = createServer((inbound) => {
      const outbound = connect(Number(port), host);
      this.sockets.push(inbound, outbound);
      const pump = (src: Socket, dst: Socket): void => {
        src.on("data", (d) => {
          if (!this.frozen) {
            dst.write(d);
          }
        });
      };
      pump(inbound, outbound);
      pump(outbound, inbound);
      for (const sock of [inbound, outbound]) {
        sock.on("error", () => {});
      }
    });
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", resolve));
    this.addr = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  stop(): void {
    for (const s of this.sockets) {
      s.destroy();
    }
    this.server?.close();
  }
}

test("a silent connection is dropped by keepalive and the next broker taken", { timeout: 60_000 }, async () => {
  const a = await new FakeBroker().start();
  const b = await new FakeBroker().start();
  const relay = new FrozenRelay(a.addr);
  await relay.start();
  const w = new Running([echo], { brokerAddrs: [relay.addr, b.addr] });
  try {
    await (await a.nextStream()).next("subscribe");
    relay.frozen = true;
    // Keepalive: a PING every 10 s, the connection dropped 10 s later without an answer.
    const s = await b.nextStream(35_000);
    await s.next("subscribe");
    s.push(workTask("after"));
    assert.equal((await s.next("complete")).leaseToken, "after");
  } finally {
    await w.close();
    relay.stop();
    await a.stop();
    await b.stop();
  }
});
