/**
 * Test providers and a background `serve` for the stream and failover tests.
 */

import {
  KindVersion,
  Outcome,
  type Provider,
  type ProviderConfig,
  type ReactionRequest,
  WorkerConfig,
  type WorkerConfigInit,
  serve,
} from "../src/index.js";

/** A promise and the function that resolves it. */
export class Deferred<T = void> {
  resolve!: (v: T) => void;
  readonly promise = new Promise<T>((r) => {
    this.resolve = r;
  });
}

/** Resolves when `signal` aborts. */
export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
    } else {
      signal.addEventListener("abort", () => resolve(), { once: true });
    }
  });
}

/** Kind `k`: each handler waits for `release` (or its cancellation) before answering. */
export class Gate implements Provider {
  readonly kind = new KindVersion("k", 1);
  readonly release = new Deferred();
  readonly started: string[] = [];
  readonly cancelled: string[] = [];
  readonly reasons: unknown[] = [];
  readonly configs: ProviderConfig[] = [];
  isReady = true;
  forcedUnready = false;

  onConfig(cfg: ProviderConfig): void {
    this.configs.push(cfg);
    const s = cfg.spec;
    this.isReady = !(typeof s === "object" && s !== null && !Array.isArray(s) && s["ready"] === false);
  }

  ready(): boolean {
    return this.isReady && !this.forcedUnready;
  }

  async work(req: ReactionRequest): Promise<Outcome> {
    this.started.push(req.resource.name);
    await Promise.race([this.release.promise, aborted(req.signal)]);
    if (req.cancelled) {
      this.cancelled.push(req.resource.name);
      this.reasons.push(req.signal.reason);
      throw new Error("cancelled");
    }
    return new Outcome({ status: { name: req.resource.name } });
  }
}

/** Kind `k`: answers at once with the resource's name. */
export const echo: Provider = {
  kind: new KindVersion("k", 1),
  work: (req) => new Outcome({ status: { name: req.resource.name } }),
};

/** `serve` in the background until `close`. */
export class Running {
  readonly stop = new AbortController();
  readonly done: Promise<void>;
  settled = false;

  constructor(providers: Provider[], cfg: WorkerConfigInit) {
    const config = new WorkerConfig({
      workerName: "fake-test",
      reconnectMinMs: 50,
      reconnectMaxMs: 200,
      drainTimeoutMs: 500,
      ...cfg,
    });
    this.done = serve(providers, { config, signal: this.stop.signal }).finally(() => {
      this.settled = true;
    });
  }

  async close(timeoutMs = 10_000): Promise<void> {
    this.stop.abort();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.done,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error("serve did not return")), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
  }
}
