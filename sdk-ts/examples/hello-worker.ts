/**
 * A minimal converge worker written with the TypeScript SDK: it serves the `hello` kind of
 * examples/hello (version 1), whose handler greets the resource by name. Spec knobs make it
 * slow or failing on purpose: `greeting` (default `hello`), `fail_attempts` (fail
 * transiently while attempt <= n), `fail` (`terminal` or `transient` every attempt) and
 * `sleep_ms` (sleep first; cut short, as a transient failure, when the task is cancelled).
 *
 *     converge dev &
 *     conctl apply -f examples/hello/kind-hello.json
 *     BROKER_ADDR=http://127.0.0.1:9090 node sdk-ts/build/examples/hello-worker.js
 *     conctl apply -f examples/hello/hello.json       # status.message = "hello, world!"
 *
 * Configuration is the environment (BROKER_ADDR, WORKER_MAX_PARALLEL, WORKER_NAME, ...,
 * LOG_LEVEL, LOG_FORMAT); SIGINT or SIGTERM drains in-flight work and exits 0.
 */

import { setTimeout as sleep } from "node:timers/promises";

import {
  Condition,
  ConfigError,
  KindVersion,
  Outcome,
  type Provider,
  type ReactionRequest,
  TerminalError,
  TransientError,
  initLogging,
  runWorker,
} from "converge-sdk";

/** The spec of a `hello` resource, checked (a spec that does not fit is terminal). */
interface HelloSpec {
  greeting: string;
  failAttempts: number;
  fail: "terminal" | "transient" | undefined;
  sleepMs: number;
}

function parseSpec(raw: unknown): HelloSpec {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new Error("the spec must be an object");
  }
  const s = raw as Record<string, unknown>;
  const int = (key: string): number => {
    const v = s[key] ?? 0;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0) {
      throw new Error(`${key} must be a non-negative integer`);
    }
    return v;
  };
  const greeting = s["greeting"] ?? "hello";
  if (typeof greeting !== "string") {
    throw new Error("greeting must be a string");
  }
  const fail = s["fail"];
  if (fail !== undefined && fail !== "terminal" && fail !== "transient") {
    throw new Error("fail must be terminal or transient");
  }
  return { greeting, failAttempts: int("fail_attempts"), fail, sleepMs: int("sleep_ms") };
}

const hello: Provider = {
  kind: new KindVersion("hello", 1),
  async work(req: ReactionRequest): Promise<Outcome> {
    const spec = req.spec(parseSpec);
    if (spec.sleepMs > 0) {
      try {
        await sleep(spec.sleepMs, undefined, { signal: req.signal });
      } catch {
        throw new TransientError("cancelled while sleeping");
      }
    }
    if (spec.fail === "terminal") {
      throw new TerminalError("asked to fail terminally");
    }
    if (spec.fail === "transient" || req.attempt <= spec.failAttempts) {
      throw new TransientError(`asked to fail (attempt ${req.attempt})`);
    }
    return new Outcome({
      status: {
        message: `${spec.greeting}, ${req.resource.name}!`,
        observed_generation: req.generation,
        attempt: req.attempt,
      },
    }).withCondition(Condition.ready(true, "Greeted"));
  },
};

try {
  initLogging();
  await runWorker([hello]);
} catch (e) {
  if (!(e instanceof ConfigError)) {
    throw e;
  }
  process.stderr.write(`hello-worker: ${e.message}\n`);
  process.exitCode = 2;
}
