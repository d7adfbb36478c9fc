/**
 * The TypeScript SDK's conformance worker: serves every kind in conformance/KINDS.md.
 *
 * Built by conformance/run.sh (`npm ci` and `tsc` here, against ../../../sdk-ts) and run as
 * `node dist/worker.js` with the standard worker environment (BROKER_ADDR,
 * WORKER_MAX_PARALLEL, WORKER_NAME, WORKER_DRAIN_TIMEOUT). CONFORMANCE_FORM names the form
 * (default `ts`); CONFORMANCE_LOG, when set, receives one JSON line per handler invocation.
 * Exits 0 after draining on SIGTERM/SIGINT.
 *
 * @module
 */

import { appendFileSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";

import {
  ChildSpec,
  ConfigError,
  DepEdge,
  type Json,
  KindVersion,
  Outcome,
  type Provider,
  type ProviderConfig,
  type ReactionRequest,
  RegistryError,
  ResourceRef,
  RollupSummary,
  TaskCancelledError,
  TerminalError,
  TransientError,
  ValueFlow,
  initLogging,
  runWorker,
  stageName,
  transitionName,
} from "converge-sdk";

const FORM = process.env["CONFORMANCE_FORM"] || "ts";
const LOG_PATH = process.env["CONFORMANCE_LOG"] || undefined;

/**
 * Appends one event line (one O_APPEND write of the whole line); `extra` adds keys (`reason`
 * on `cancelled`, `transition` and `dedup_token` on `react`).
 */
function record(req: ReactionRequest, event: string, extra: Record<string, Json> = {}): void {
  if (LOG_PATH === undefined) {
    return;
  }
  const line = JSON.stringify({
    form: FORM,
    kind: req.kind,
    name: req.resource.name,
    reaction: req.reaction,
    stage: stageName(req.stage),
    generation: req.generation,
    attempt: req.attempt,
    event,
    ...extra,
  });
  appendFileSync(LOG_PATH, `${line}\n`, { flag: "a" });
}

/** The status of a `work` reaction shared by conf-leaf, conf-final and conf-ready. */
function echoStatus(req: ReactionRequest): Outcome {
  return new Outcome({
    status: {
      echo: req.resource.spec,
      form: FORM,
      generation: req.generation,
      attempt: req.attempt,
      trigger: req.trigger,
    },
  });
}

function unknown(req: ReactionRequest): TerminalError {
  return new TerminalError(`${req.kind} has no reaction ${JSON.stringify(req.reaction)}`);
}

/** A provider whose one reaction is `work`: it records the `work` event, then runs `body`. */
function workOnly(kind: string, body: (req: ReactionRequest) => Outcome | Promise<Outcome>): Provider {
  return {
    kind: new KindVersion(kind, 1),
    work(req) {
      if (req.reaction !== "work") {
        throw unknown(req);
      }
      record(req, "work");
      return body(req);
    },
  };
}

/** `spec[key]` as an integer in 0..50 (`fallback` when absent); anything else is terminal. */
function specInt(req: ReactionRequest, key: string, fallback: number): number {
  const v = req.specObject()[key] ?? fallback;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 50) {
    throw new TerminalError(`${key} must be an integer in 0..50, got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * A provider whose `work` reaction echoes its spec (conf-leaf, conf-final), and whose one
 * other reaction `reaction` records `event` and runs `body`.
 */
function echoing(
  kind: string,
  reaction: string,
  event: string,
  body: (req: ReactionRequest) => Outcome | Promise<Outcome>,
): Provider {
  return {
    kind: new KindVersion(kind, 1),
    work(req) {
      if (req.reaction === "work") {
        record(req, "work");
        return echoStatus(req);
      }
      if (req.reaction === reaction) {
        record(req, event);
        return body(req);
      }
      throw unknown(req);
    },
  };
}

/** conf-leaf: echoes its spec; verb ping. */
const leaf = echoing(
  "conf-leaf",
  "ping",
  "operate",
  (req) => new Outcome({ output: { pong: req.operation?.input ?? null, name: req.resource.name } }),
);

/**
 * A composite serving `compose` and `rollup`: compose emits `spec.children` (default 2)
 * conf-leaf children `<name>-<i>` with spec `{"index": i}`, chained (child i waits for child
 * i-1 and gets its `/echo/index` as `/upstream_index`) when `chained`; `rollup` makes the
 * rollup's outcome from the request and the child count.
 */
function composer(
  kind: string,
  chained: boolean,
  rollup: (req: ReactionRequest, n: number) => Outcome | Promise<Outcome>,
): Provider {
  return {
    kind: new KindVersion(kind, 1),
    work(req) {
      const n = specInt(req, "children", 2);
      const name = req.resource.name;
      if (req.reaction === "compose") {
        record(req, "compose");
        const out = new Outcome({ status: { composed: n } });
        for (let i = 0; i < n; i++) {
          out.withChild(new ChildSpec("conf-leaf", 1, `${name}-${i}`, { index: i }));
          if (chained && i >= 1) {
            out.withEdge(
              new DepEdge(
                new ResourceRef("conf-leaf", `${name}-${i}`),
                new ResourceRef("conf-leaf", `${name}-${i - 1}`),
              ).withValue(new ValueFlow("/upstream_index", "/echo/index")),
            );
          }
        }
        return out;
      }
      if (req.reaction === "rollup") {
        record(req, "rollup");
        return rollup(req, n);
      }
      throw unknown(req);
    },
  };
}

/** conf-composite: a chain of conf-leaf children with value flows, and a rollup (full form). */
const composite = composer(
  "conf-composite",
  true,
  (req, n) =>
    new Outcome({
      status: {
        composed: n,
        descendants: req.descendants.length,
        ready: req.descendants.filter((d) => d.isReady).length,
      },
    }),
);

/**
 * conf-summary: children without edges, and a rollup that reads the subtree's summary and
 * pages through the descendants only when the spec's `page_size` asks it to.
 */
const summary = composer("conf-summary", false, async (req) => {
  const pageSize = specInt(req, "page_size", 0);
  let pages = 0;
  let read = 0;
  const distinct = new Set<string>();
  if (pageSize > 0) {
    for await (const page of req.descendantPages(pageSize)) {
      pages += 1;
      read += page.length;
      for (const d of page) {
        distinct.add(d.id);
      }
    }
  }
  const s = req.summary ?? new RollupSummary();
  return new Outcome({
    status: {
      sent: req.descendants.length,
      included: req.descendantsIncluded,
      total: s.total,
      by_kind: s.byKind,
      by_phase: s.byPhase,
      not_ready: s.notReadyTotal,
      pages,
      read,
      distinct: distinct.size,
    },
  });
});

/** conf-final: a leaf with a finalizer whose teardown may fail transiently first. */
const final = echoing("conf-final", "teardown", "delete", (req) => {
  const k = req.specObject()["delete_failures"] ?? 0;
  if (typeof k === "number" && Number.isInteger(k) && k > 0 && req.attempt <= k) {
    throw new TransientError(`teardown failure ${req.attempt}`);
  }
  return new Outcome();
});

/** conf-fail: fails terminally, transiently or by throwing, as its spec says. */
const fail = workOnly("conf-fail", (req) => {
  const spec = req.specObject();
  const mode = spec["mode"] ?? "ok";
  const times = spec["times"] ?? 0;
  const ok = new Outcome({ status: { ok: true, attempt: req.attempt } });
  switch (mode) {
    case "ok":
      return ok;
    case "terminal":
      throw new TerminalError("conformance terminal");
    case "transient":
      if (typeof times !== "number" || !Number.isInteger(times) || times <= 0 || req.attempt <= times) {
        throw new TransientError(`conformance transient ${req.attempt}`);
      }
      return ok;
    case "panic":
      // Not the SDK's error type: the SDK must make it a transient failure.
      throw new RangeError("conformance panic");
    default:
      throw new TerminalError(`unknown mode ${JSON.stringify(mode)}`);
  }
});

/** conf-slow (and conf-hold, the same under a long deadline): sleeps, cancellably, for spec.sleep_ms. */
async function sleepWork(req: ReactionRequest): Promise<Outcome> {
  const n: Json | undefined = req.specObject()["sleep_ms"] ?? 0;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0) {
    throw new TerminalError(`sleep_ms must be a non-negative integer, got ${JSON.stringify(n)}`);
  }
  try {
    await delay(n, undefined, { signal: req.signal });
  } catch {
    const why: unknown = req.signal.reason;
    // CancelTask carries the broker's reason as `detail`; a deadline or shutdown is its kind.
    const reason = why instanceof TaskCancelledError ? why.detail || why.kind : "";
    record(req, "cancelled", { reason });
    throw new TransientError("cancelled");
  }
  return new Outcome({ status: { slept_ms: n, attempt: req.attempt } });
}

const slow = workOnly("conf-slow", sleepWork);
const hold = workOnly("conf-hold", sleepWork);

/**
 * conf-react: logs each delivery's transition and dedup token; fails transiently while the
 * attempt is at most the watched resource's `react_failures`.
 */
const react: Provider = {
  kind: new KindVersion("conf-react", 1),
  work(req) {
    if (req.reaction !== "react") {
      throw unknown(req);
    }
    const transition = req.transition === undefined ? null : transitionName(req.transition);
    record(req, "react", { transition, dedup_token: req.dedupToken });
    const k = req.specObject()["react_failures"] ?? 0;
    if (typeof k === "number" && k > 0 && req.attempt <= k) {
      throw new TransientError(`react failure ${req.attempt}`);
    }
    return new Outcome();
  },
};

/** conf-ready: ready unless the default provider config says `"ready": false`. */
function ready(): Provider {
  let isReady = true;
  return {
    ...workOnly("conf-ready", echoStatus),
    onConfig(cfg: ProviderConfig): void {
      const spec = cfg.spec;
      isReady = !(typeof spec === "object" && spec !== null && !Array.isArray(spec) && spec["ready"] === false);
    },
    ready: () => isReady,
  };
}

/** conf-config: echoes its effective config and the effective bundle's length. */
const configEcho = workOnly(
  "conf-config",
  (req) =>
    new Outcome({
      status: {
        config: req.effectiveConfig(),
        bundle_len: req.effectiveBundle().length,
      },
    }),
);

/** Every conformance kind. */
export function providers(): Provider[] {
  return [leaf, composite, summary, final, fail, slow, hold, react, ready(), configEcho];
}

async function main(): Promise<number> {
  try {
    initLogging();
    await runWorker(providers());
  } catch (e) {
    if (e instanceof ConfigError || e instanceof RegistryError) {
      process.stderr.write(`conformance worker: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  return 0;
}

process.exitCode = await main();
