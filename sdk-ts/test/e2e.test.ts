/**
 * End to end against the real `converge` binary over real gRPC: each test gets a fresh
 * database and a converge process; TypeScript providers run in-process (or as a subprocess
 * for the kill test) and results are checked through the HTTP API.
 */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type TestContext, test } from "node:test";

import { z } from "zod";

import {
  ChildSpec,
  Condition,
  DepEdge,
  KindVersion,
  type Logger,
  Outcome,
  type Provider,
  type ProviderConfig,
  ProviderConfigSpec,
  type ReactionRequest,
  ResourceRef,
  Reactions,
  TerminalError,
  ValueFlow,
  WorkerConfig,
  type WorkerConfigInit,
  kindManifest,
  serve,
  setLogger,
} from "../src/index.js";
import { Broker, Converge, REPO, e2eDatabase, stopProcess, waitFor } from "./e2e-harness.js";
import { scratch } from "./scratch.js";

const T = 30_000;

/** Runs `body` with a fresh converge that has the conformance kinds; stops it afterwards. */
async function withConverge(t: TestContext, body: (c: Converge) => Promise<void>): Promise<void> {
  const url = e2eDatabase(t);
  if (url === undefined) {
    return;
  }
  const c = new Converge(url);
  try {
    await c.start();
    await c.applyConformanceKinds();
    await body(c);
  } finally {
    await c.stop();
  }
}

/** Serves `providers` in-process until `body` returns, then drains. */
async function worker(providers: Provider[], cfg: WorkerConfigInit, body: () => Promise<void>): Promise<void> {
  const stop = new AbortController();
  const config = new WorkerConfig({ reconnectMinMs: 100, reconnectMaxMs: 500, drainTimeoutMs: 2_000, ...cfg });
  const done = serve(providers, { config, signal: stop.signal });
  try {
    await body();
  } finally {
    stop.abort();
    await done;
  }
}

class Leaf implements Provider {
  readonly kind = new KindVersion("conf-leaf", 1);
  calls = 0;

  constructor(private readonly tag = "leaf") {}

  work(req: ReactionRequest): Outcome {
    this.calls += 1;
    return new Outcome({
      status: { hello: req.resource.name, spec: req.resource.spec, by: this.tag, generation: req.generation },
    }).withCondition(Condition.ready(true, "Greeted", "ok"));
  }
}

/** conf-fail: throws a plain error until attempt 3, or terminally when asked. */
const flaky: Provider = {
  kind: new KindVersion("conf-fail", 1),
  work(req) {
    if (req.specObject()["mode"] === "terminal") {
      throw new TerminalError("nope, terminally");
    }
    if (req.attempt < 3) {
      throw new Error(`boom ${req.attempt}`);
    }
    return new Outcome({ status: { ok: true, attempt: req.attempt } });
  },
};

const ready = (v: any): boolean => v.phase === "Ready";

test("a leaf reaches Ready with the returned status, and a spec edit with generation 2", { timeout: 90_000 }, (t) =>
  withConverge(t, async (c) => {
    await worker([new Leaf()], { brokerAddrs: [c.broker], workerName: "e2e-leaf" }, async () => {
      await c.apply("conf-leaf", "world", { greeting: "hi" });
      let r = await c.waitResource("conf-leaf", "world", "Ready", ready);
      assert.deepEqual(r.status, { hello: "world", spec: { greeting: "hi" }, by: "leaf", generation: 1 });
      assert.equal(r.is_ready, true);
      await c.apply("conf-leaf", "world", { greeting: "hey" });
      r = await c.waitResource("conf-leaf", "world", "Ready at generation 2", (v) => ready(v) && v.synced_gen === 2);
      assert.deepEqual(r.status.spec, { greeting: "hey" });
      assert.equal(r.status.generation, 2);
    });
  }),
);

test(
  "a manifest generated from zod schemas is accepted; its spec schema refuses, its types serve",
  { timeout: 90_000 },
  (t) =>
    withConverge(t, async (c) => {
      const Spec = z.strictObject({ text: z.string().max(20), copies: z.number().int().min(1).default(1) });
      const Status = z.object({ text: z.string(), copies: z.number().int() });
      const kind = new KindVersion("tsnote-e2e", 1);
      const manifest = kindManifest({ kind, spec: Spec, status: Status, reactions: [Reactions.work()] });
      const put = await c.call("PUT", `/api/v1/kinds/${kind.kind}/manifest`, manifest);
      assert.equal(put.status, 201, JSON.stringify(put.body));
      // The generated spec schema is what converge checks: an unknown key and a too-long
      // text are both refused at apply, before any worker sees them.
      for (const spec of [{ text: "hi", colour: "red" }, { text: "x".repeat(21) }]) {
        const r = await c.call("POST", "/api/v1/resources", { kind: kind.kind, kind_version: 1, name: "bad", spec });
        assert.equal(r.status, 422, JSON.stringify(r.body));
      }
      const note: Provider = {
        kind,
        work(req) {
          const spec = req.spec(Spec.parse);
          return new Outcome({ status: Status.parse({ text: spec.text, copies: spec.copies }) }).withCondition(
            Condition.ready(true, "Written"),
          );
        },
      };
      await worker([note], { brokerAddrs: [c.broker], workerName: "e2e-manifest" }, async () => {
        await c.apply(kind.kind, "hello", { text: "hi" });
        const r = await c.waitResource(kind.kind, "hello", "Ready", ready);
        assert.deepEqual(r.status, { text: "hi", copies: 1 });
      });
    }),
);

test("an operation's output is recorded", { timeout: 90_000 }, (t) =>
  withConverge(t, async (c) => {
    const leaf: Provider = {
      kind: new KindVersion("conf-leaf", 1),
      work(req) {
        if (req.reaction === "ping") {
          return new Outcome({ output: { pong: req.operation?.input ?? null, name: req.resource.name } });
        }
        return new Outcome({ status: {} });
      },
    };
    await worker([leaf], { brokerAddrs: [c.broker], workerName: "e2e-op" }, async () => {
      await c.apply("conf-leaf", "pinged", {});
      await c.waitResource("conf-leaf", "pinged", "Ready", ready);
      const op = await c.call("POST", "/api/v1/resources/conf-leaf/pinged/ops", { verb: "ping", input: { n: 1 } });
      assert.equal(op.status, 202, JSON.stringify(op.body));
      const final = await waitFor(
        "operation finished",
        async () => {
          const r = await c.call("GET", `/api/v1/resources/conf-leaf/pinged/ops/${op.body.uid}`);
          return r.status === 200 && ["succeeded", "failed"].includes(r.body.state) ? r.body : undefined;
        },
        T,
      );
      assert.equal(final.state, "succeeded", JSON.stringify(final));
      assert.deepEqual(final.output, { pong: { n: 1 }, name: "pinged" });
    });
  }),
);

test("a terminal error fails the resource once; a thrown error is transient and retried", { timeout: 90_000 }, (t) =>
  withConverge(t, async (c) => {
    await worker([flaky], { brokerAddrs: [c.broker], workerName: "e2e-fail" }, async () => {
      await c.apply("conf-fail", "doomed", { mode: "terminal" });
      await c.apply("conf-fail", "flaky", { mode: "transient" });
      const doomed = await c.waitResource("conf-fail", "doomed", "Failed", (v) => v.phase === "Failed");
      assert.equal(doomed.failure_terminal, true);
      assert.equal(doomed.failure_attempts, 1);
      const r = await c.waitResource("conf-fail", "flaky", "Ready", ready);
      assert.deepEqual(r.status, { ok: true, attempt: 3 });
    });
  }),
);

/**
 * `ts-stack`, a composite of this test's own (the conformance suite's form `ts` covers the
 * conformance kinds): a `db` child with a label, an `app` child that waits for it and takes
 * its status `hello` into its spec, a provider config owned by the root, and a rollup of the
 * summary form that reads its descendants with the paged read.
 */
const STACK = {
  kind: "ts-stack",
  kind_version: 1,
  reactions: [
    { name: "compose", trigger: "specChange", emits: ["children", "edges", "configs", "status"] },
    { name: "rollup", trigger: "childrenSettled", emits: ["status"] },
  ],
};

const stack: Provider = {
  kind: new KindVersion("ts-stack", 1),
  async work(req) {
    const name = req.resource.name;
    if (req.reaction === "compose") {
      return new Outcome({ status: { composed: true } })
        .withChild(new ChildSpec("conf-leaf", 1, `${name}-db`, { role: "db" }).withLabel("tier", "db"))
        .withChild(new ChildSpec("conf-leaf", 1, `${name}-app`, { role: "app" }))
        .withEdge(
          new DepEdge(
            new ResourceRef("conf-leaf", `${name}-app`),
            new ResourceRef("conf-leaf", `${name}-db`),
          ).withValue(new ValueFlow("/upstream", "/hello")),
        )
        .withConfig(new ProviderConfigSpec({ name: `${name}-cfg`, kind: "conf-leaf", spec: { owner: name } }));
    }
    const rows = await req.readDescendants();
    return new Outcome({
      status: {
        names: rows.map((d) => d.name).sort(),
        total: req.summary?.total ?? -1,
        ready: req.summary?.ready ?? -1,
        included: req.descendantsIncluded,
      },
    });
  },
};

test("a composite's children, labels, edges, value flows, configs and paged rollup", { timeout: 90_000 }, (t) =>
  withConverge(t, async (c) => {
    await c.applyManifest(STACK);
    await worker([stack, new Leaf("stack")], { brokerAddrs: [c.broker], workerName: "e2e-stack" }, async () => {
      await c.apply("ts-stack", "shop", {});
      const r = await c.waitResource("ts-stack", "shop", "rolled up", (v) => ready(v) && v.status?.total === 2);
      assert.deepEqual(r.status, { names: ["shop-app", "shop-db"], total: 2, ready: 2, included: false });
      const db = await c.get("conf-leaf", "shop-db");
      assert.deepEqual(db.labels, { tier: "db" });
      const app = await c.get("conf-leaf", "shop-app");
      assert.deepEqual(app.spec, { role: "app", upstream: "shop-db" }, "the db's status flowed into the app's spec");
      const cfg = await c.call("GET", "/api/v1/providerconfigs/shop-cfg");
      assert.equal(cfg.status, 200, JSON.stringify(cfg.body));
      assert.deepEqual(cfg.body.spec, { owner: "shop" });
    });
  }),
);

test("a gzip worker composes, rolls up and flows values", { timeout: 90_000 }, (t) =>
  withConverge(t, async (c) => {
    // GRPC_COMPRESSION=gzip: grpc-js compresses every message the worker sends, as the
    // original implementation's workers did; a broker without gzip answers UNIMPLEMENTED.
    const { compression } = WorkerConfig.fromEnv({ BROKER_ADDR: c.broker, GRPC_COMPRESSION: "gzip" });
    assert.equal(compression, "gzip");
    await c.applyManifest(STACK);
    await worker(
      [stack, new Leaf("stack")],
      { brokerAddrs: [c.broker], workerName: "e2e-gzip", compression },
      async () => {
        await c.apply("ts-stack", "zipped", {});
        const r = await c.waitResource("ts-stack", "zipped", "rolled up", (v) => ready(v) && v.status?.total === 2);
        assert.deepEqual(r.status, { names: ["zipped-app", "zipped-db"], total: 2, ready: 2, included: false });
        const app = await c.get("conf-leaf", "zipped-app");
        assert.deepEqual(app.spec, { role: "app", upstream: "zipped-db" });
      },
    );
  }),
);

test("a handler stopped midway is finished by a new worker", { timeout: 90_000 }, (t) =>
  withConverge(t, async (c) => {
    let started = false;
    let sawCancel = false;
    const stuck: Provider = {
      kind: new KindVersion("conf-leaf", 1),
      work: (req) =>
        new Promise((resolve) => {
          started = true;
          req.signal.addEventListener("abort", () => {
            sawCancel = true;
            resolve(new Outcome({ status: { by: "stuck" } }));
          });
        }),
    };
    const stop = new AbortController();
    const config = new WorkerConfig({ brokerAddrs: [c.broker], workerName: "e2e-stuck", drainTimeoutMs: 200 });
    const first = serve([stuck], { config, signal: stop.signal });
    await c.apply("conf-leaf", "victim", {});
    await waitFor("the handler to start", async () => (started ? true : undefined));
    stop.abort();
    await first;
    assert.ok(sawCancel, "shutdown past the drain timeout aborts the handler");
    const second = new Leaf("second");
    await worker([second], { brokerAddrs: [c.broker], workerName: "e2e-second" }, async () => {
      const r = await c.waitResource("conf-leaf", "victim", "Ready", ready);
      assert.equal(r.status.by, "second");
      assert.equal(r.synced_gen, 1);
    });
  }),
);

test("a killed worker process is replaced and nothing is applied twice", { timeout: 90_000 }, (t) =>
  withConverge(t, async (c) => {
    const log = join(scratch("slow"), "slow.log");
    const proc = spawn(process.execPath, [new URL("./slow-worker.js", import.meta.url).pathname], {
      env: { ...process.env, BROKER_ADDR: c.broker, WORKER_NAME: "slow", SLOW_LOG: log },
      stdio: ["ignore", "inherit", "inherit"],
    });
    try {
      await c.apply("conf-leaf", "killme", { sleep_ms: 60_000 });
      await waitFor("the subprocess worker to start the task", async () =>
        existsSync(log) && readFileSync(log, "utf8").includes("start killme") ? true : undefined,
      );
    } finally {
      await stopProcess(proc, "SIGKILL");
    }
    const replacement = new Leaf("replacement");
    await worker([replacement], { brokerAddrs: [c.broker], workerName: "e2e-replacement" }, async () => {
      const r = await c.waitResource("conf-leaf", "killme", "Ready", ready);
      assert.equal(r.status.by, "replacement");
    });
    assert.equal(replacement.calls, 1, "the task runs exactly once more");
    assert.ok(!readFileSync(log, "utf8").includes("done killme"));
  }),
);

test("a worker process drains on SIGTERM and exits 0", { timeout: 90_000 }, (t) =>
  withConverge(t, async (c) => {
    const log = join(scratch("slow"), "slow.log");
    const proc = spawn(process.execPath, [new URL("./slow-worker.js", import.meta.url).pathname], {
      env: { ...process.env, BROKER_ADDR: c.broker, WORKER_NAME: "drains", SLOW_LOG: log, WORKER_DRAIN_TIMEOUT: "20s" },
      stdio: ["ignore", "inherit", "inherit"],
    });
    const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
    try {
      await c.apply("conf-leaf", "inflight", { sleep_ms: 1_000 });
      await waitFor("the task to start", async () =>
        existsSync(log) && readFileSync(log, "utf8").includes("start inflight") ? true : undefined,
      );
      proc.kill("SIGTERM");
      assert.equal(await exited, 0);
      assert.ok(readFileSync(log, "utf8").includes("done inflight"), "the in-flight task finished");
      const r = await c.waitResource("conf-leaf", "inflight", "Ready", ready);
      assert.deepEqual(r.status, { worker: "slow" });
    } finally {
      await stopProcess(proc, "SIGKILL");
    }
  }),
);

test("a provider config push reaches onConfig and the effective config", { timeout: 90_000 }, (t) =>
  withConverge(t, async (c) => {
    const seen: ProviderConfig[] = [];
    const cfg: Provider = {
      kind: new KindVersion("conf-config", 1),
      onConfig: (p) => seen.push(p),
      work: (req) =>
        new Outcome({ status: { config: req.effectiveConfig(), bundle_len: req.effectiveBundle().length } }),
    };
    await worker([cfg], { brokerAddrs: [c.broker], workerName: "e2e-cfg" }, async () => {
      const r0 = await c.call("POST", "/api/v1/providerconfigs", {
        name: "cfg-default",
        kind: "conf-config",
        kind_version: 1,
        is_default: true,
        spec: { a: { x: 1, y: 2 } },
      });
      assert.ok([200, 201].includes(r0.status), JSON.stringify(r0.body));
      await waitFor("the config push", async () =>
        seen.some((s) => JSON.stringify(s.spec) === JSON.stringify({ a: { x: 1, y: 2 } })) ? true : undefined,
      );
      await c.apply("conf-config", "c1", {});
      const r = await c.waitResource("conf-config", "c1", "Ready", ready);
      assert.deepEqual(r.status, { config: { a: { x: 1, y: 2 } }, bundle_len: 0 });
    });
  }),
);

test("a worker with two brokers keeps working when the first dies", { timeout: 120_000 }, (t) =>
  withConverge(t, async (c) => {
    const lines: string[] = [];
    const capture: Logger = {
      debug: () => {},
      info: (m) => lines.push(m),
      warn: (m) => lines.push(m),
      error: (m) => lines.push(m),
    };
    setLogger(capture);
    const first = await new Broker(c).start();
    const openedOn = (addr: string): boolean =>
      lines.some((l) => l.includes("work stream open") && l.includes(`broker ${addr})`));
    try {
      await worker(
        [new Leaf("failover")],
        { brokerAddrs: [first.broker, c.broker], workerName: "e2e-failover" },
        async () => {
          for (let i = 0; i < 3; i++) {
            await c.apply("conf-leaf", `before-${i}`, {});
          }
          for (let i = 0; i < 3; i++) {
            await c.waitResource("conf-leaf", `before-${i}`, "Ready", ready);
          }
          assert.ok(openedOn(first.broker) && !openedOn(c.broker));
          await first.kill(); // SIGKILL: the worker's stream just breaks
          for (let i = 0; i < 3; i++) {
            await c.apply("conf-leaf", `after-${i}`, {});
          }
          for (let i = 0; i < 3; i++) {
            const r = await c.waitResource("conf-leaf", `after-${i}`, "Ready", ready);
            assert.equal(r.status.by, "failover");
          }
          assert.ok(openedOn(c.broker), "served through the second broker");
        },
      );
    } finally {
      await first.kill();
    }
  }),
);

test("the example worker greets the world and exits 0 on SIGTERM", { timeout: 90_000 }, (t) =>
  withConverge(t, async (c) => {
    const hello = join(REPO, "examples", "hello");
    await c.applyManifest(JSON.parse(readFileSync(join(hello, "kind-hello.json"), "utf8")) as { kind: string });
    const world = JSON.parse(readFileSync(join(hello, "hello.json"), "utf8")) as { name: string; spec: unknown };
    const proc = spawn(process.execPath, [new URL("../examples/hello-worker.js", import.meta.url).pathname], {
      env: { ...process.env, BROKER_ADDR: c.broker, WORKER_NAME: "example" },
      stdio: ["ignore", "inherit", "inherit"],
    });
    const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
    try {
      await c.apply("hello", world.name, world.spec);
      await c.apply("hello", "doomed", { fail: "terminal" });
      const r = await c.waitResource("hello", world.name, "Ready", ready);
      assert.deepEqual(r.status, { message: "hello, world!", observed_generation: 1, attempt: 1 });
      const d = await c.waitResource("hello", "doomed", "Failed", (v) => v.phase === "Failed");
      assert.equal(d.failure_terminal, true);
      proc.kill("SIGTERM");
      assert.equal(await exited, 0);
    } finally {
      await stopProcess(proc, "SIGKILL");
    }
  }),
);
