/**
 * The worker-lifetime state every loop shares: tracked leases, kept results (the outbox of
 * finished results waiting for their CompleteAck), the config cache, advertised readiness
 * and the link to the current stream.
 *
 * Everything runs on Node's one event loop, so no lock is needed: each method runs to
 * completion without awaiting. Every frame goes through the current session's one writer,
 * so frames built from one consistent view are sent in order (the Subscribe burst cannot
 * interleave with a result or an Interest).
 *
 * @module
 */

import { create } from "@bufbuild/protobuf";

import type { WorkerConfig } from "../config.js";
import { wireVersion } from "../convert.js";
import { TaskCancelledError } from "../errors.js";
import * as pb from "../gen/converge/worker/v1/worker_pb.js";
import { log } from "../logs.js";
import type { Provider, Registry } from "../provider.js";
import { SDK } from "../version.js";
import { type Json, KindVersion, ProviderConfig } from "../types.js";
import { Flag, Semaphore } from "./sync.js";

/**
 * Most results kept while waiting for their CompleteAck; beyond it the oldest is dropped
 * (the broker re-runs that task after its lease expires).
 */
export const MAX_UNACKED = 1024;

/** A lease as the broker fences it: token plus claim epoch. */
export interface LeaseKey {
  readonly token: string;
  readonly epoch: bigint;
}

function keyId(k: LeaseKey): string {
  return `${k.epoch}\u0000${k.token}`;
}

/** Results (as ready-to-send client frames) waiting for an ack, oldest first. */
export class Unacked {
  private readonly items = new Map<string, { key: LeaseKey; frame: pb.WorkStreamClientMsg }>();

  constructor(readonly cap = MAX_UNACKED) {}

  get size(): number {
    return this.items.size;
  }

  has(key: LeaseKey): boolean {
    return this.items.has(keyId(key));
  }

  get(key: LeaseKey): pb.WorkStreamClientMsg | undefined {
    return this.items.get(keyId(key))?.frame;
  }

  remove(key: LeaseKey): boolean {
    return this.items.delete(keyId(key));
  }

  keys(): LeaseKey[] {
    return [...this.items.values()].map((v) => v.key);
  }

  frames(): pb.WorkStreamClientMsg[] {
    return [...this.items.values()].map((v) => v.frame);
  }

  /** Keeps `frame`; returns the key of the oldest result dropped to respect the cap. */
  push(key: LeaseKey, frame: pb.WorkStreamClientMsg): LeaseKey | undefined {
    const id = keyId(key);
    this.items.delete(id);
    this.items.set(id, { key, frame });
    if (this.items.size > this.cap) {
      const oldest = this.items.keys().next();
      if (!oldest.done) {
        const dropped = this.items.get(oldest.value)?.key;
        this.items.delete(oldest.value);
        return dropped;
      }
    }
    return undefined;
  }
}

/** A task accepted from the broker whose handler has not returned (or not started). */
export class Running {
  readonly controller = new AbortController();
  /** The handler's settlement, once it started. */
  handler: Promise<unknown> | undefined = undefined;

  constructor(readonly key: LeaseKey) {}

  /** Aborts the task's signal (the handler sees `reason`). */
  abort(reason: TaskCancelledError): void {
    if (!this.controller.signal.aborted) {
      this.controller.abort(reason);
    }
  }
}

/** The current stream: its session id and its one writer. */
interface Link {
  id: number;
  write: (frame: pb.WorkStreamClientMsg) => void;
}

/** A WorkStreamClientMsg with one body set. */
export function clientFrame(body: pb.WorkStreamClientMsg["body"]): pb.WorkStreamClientMsg {
  return create(pb.WorkStreamClientMsgSchema, { body });
}

/** The Interest frame flipping one pair's readiness. */
export function interestFrame(kv: KindVersion, hasWorker: boolean): pb.WorkStreamClientMsg {
  return clientFrame({
    case: "interest",
    value: create(pb.InterestSchema, { kind: kv.kind, credit: 0, hasWorker, kindVersion: kv.version }),
  });
}

/** A cached config from wire bytes; a malformed spec is logged and treated as absent. */
export function providerConfig(kv: KindVersion, spec: Uint8Array, bundle: Uint8Array): ProviderConfig {
  let value: Json | undefined;
  if (spec.length > 0) {
    try {
      value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(spec)) as Json;
    } catch (e) {
      log.warn(`provider config of ${kv} is not valid JSON (${(e as Error).message}); ignoring its spec`);
    }
  }
  return new ProviderConfig(value, new Uint8Array(bundle));
}

function sameConfig(a: ProviderConfig | undefined, b: ProviderConfig): boolean {
  return (
    a !== undefined &&
    JSON.stringify(a.spec) === JSON.stringify(b.spec) &&
    Buffer.from(a.bundle).equals(Buffer.from(b.bundle))
  );
}

/** `provider.ready()`, a throw counting as unready (an absent hook as ready). */
export function pollReady(kv: KindVersion, provider: Provider): boolean {
  if (provider.ready === undefined) {
    return true;
  }
  try {
    return Boolean(provider.ready());
  } catch (e) {
    log.error(`ready() of ${kv} threw; treating the provider as unready`, { error: String(e) });
    return false;
  }
}

/** Polls every provider's readiness. */
export function pollReadiness(shared: Shared): Array<[KindVersion, boolean]> {
  return shared.registry.entries().map(([kv, p]) => [kv, pollReady(kv, p)]);
}

/** Everything the runtime's loops share, for the worker's whole life. */
export class Shared {
  readonly permits: Semaphore;
  readonly running = new Map<string, Running>();
  unacked = new Unacked();
  readonly configs = new Map<string, ProviderConfig>();
  readonly advertised = new Map<string, { kv: KindVersion; ready: boolean }>();
  shuttingDown = false;
  private link: Link | undefined = undefined;
  private nextSession = 0;
  private readonly idle = new Flag(true);
  liveHandlers = 0;
  private readonly noHandlers = new Flag(true);

  constructor(
    readonly cfg: WorkerConfig,
    readonly registry: Registry,
  ) {
    this.permits = new Semaphore(cfg.maxParallel);
  }

  // -- bookkeeping -------------------------------------------------------------------------

  /**
   * Sends a frame on the current stream (dropped when none is open: kept results are
   * re-sent on the next one, so nothing is lost).
   */
  send(frame: pb.WorkStreamClientMsg): void {
    this.link?.write(frame);
  }

  /** Tracked leases plus kept results; 0 means nothing is left to finish or deliver. */
  get outstanding(): number {
    return this.running.size + this.unacked.size;
  }

  private publish(): void {
    if (this.outstanding === 0) {
      this.idle.set();
    } else {
      this.idle.clear();
    }
  }

  /** Resolves true once nothing is running and every result was acked, false after `timeoutMs`. */
  waitIdle(timeoutMs: number): Promise<boolean> {
    return this.idle.wait(timeoutMs);
  }

  /** Counts a handler in (its permit is held until `handlerDone`). */
  handlerStarted(): void {
    this.liveHandlers += 1;
    this.noHandlers.clear();
  }

  /** Counts a handler out and frees its permit. */
  handlerDone(): void {
    this.permits.release();
    this.liveHandlers -= 1;
    if (this.liveHandlers === 0) {
      this.noHandlers.set();
    }
  }

  /** Resolves true once no handler runs, false after `timeoutMs`. */
  waitNoHandlers(timeoutMs: number): Promise<boolean> {
    return this.noHandlers.wait(timeoutMs);
  }

  // -- sessions ----------------------------------------------------------------------------

  /**
   * Installs `write` as the one sender and sends, in order: Subscribe (listing every
   * tracked lease and kept result in `resumed`), Interest{has_worker:false} for each pair
   * not ready (all of them once shutting down), then every kept result.
   */
  openSession(write: Link["write"], readiness: Array<[KindVersion, boolean]>): number {
    this.nextSession += 1;
    const sid = this.nextSession;
    const keys = [...[...this.running.values()].map((r) => r.key), ...this.unacked.keys()];
    const kinds = this.registry.kinds();
    const subscribe = create(pb.SubscribeSchema, {
      kinds: kinds.map((kv) => kv.kind),
      kindVersions: kinds.map((kv) => kv.version),
      maxInflight: this.cfg.maxParallel,
      resumed: keys.map((k) => create(pb.ResumedTaskSchema, { leaseToken: k.token, claimEpoch: k.epoch })),
      workerName: this.cfg.workerName,
      sdk: SDK,
      // Compose handlers get `ReactionRequest.dryRun` and answer as usual.
      dryRuns: true,
    });
    log.info(
      `subscribing (session ${sid}, ${kinds.length} kinds, ${keys.length} resumed, ${this.unacked.size} unacked)`,
    );
    this.link = { id: sid, write };
    this.send(clientFrame({ case: "subscribe", value: subscribe }));
    for (const [kv, polled] of readiness) {
      const ready = polled && !this.shuttingDown;
      this.advertised.set(kv.toString(), { kv, ready });
      if (!ready) {
        this.send(interestFrame(kv, false));
      }
    }
    for (const frame of this.unacked.frames()) {
      this.send(frame);
    }
    return sid;
  }

  /** Detaches session `sid` if it is still the current one. */
  closeSession(sid: number): void {
    if (this.link?.id === sid) {
      this.link = undefined;
    }
  }

  // -- tasks -------------------------------------------------------------------------------

  /**
   * Tracks a new task; undefined for a duplicate delivery (already running, or finished and
   * waiting for its ack, in which case the kept result is re-sent).
   */
  admit(key: LeaseKey): Running | undefined {
    const id = keyId(key);
    if (this.running.has(id)) {
      log.debug(`duplicate task ${key.token} ignored; it is already running`);
      return undefined;
    }
    const kept = this.unacked.get(key);
    if (kept !== undefined) {
      log.debug(`duplicate task ${key.token}; its kept result was re-sent`);
      this.send(kept);
      return undefined;
    }
    const r = new Running(key);
    this.running.set(id, r);
    this.publish();
    return r;
  }

  /** Whether `key` is still tracked as running. */
  isRunning(key: LeaseKey): boolean {
    return this.running.has(keyId(key));
  }

  /**
   * Records a tracked task's result: keeps it until acked and sends it. The result of a
   * task no longer tracked (cancelled) is dropped.
   */
  finish(key: LeaseKey, complete: pb.StageComplete): void {
    if (!this.running.delete(keyId(key))) {
      log.debug(`result of cancelled task ${key.token} dropped`);
      return;
    }
    this.keepAndSend(key, complete);
  }

  /** Records a result for a task that was never tracked (refused while draining). */
  finishUntracked(key: LeaseKey, complete: pb.StageComplete): void {
    this.keepAndSend(key, complete);
  }

  private keepAndSend(key: LeaseKey, complete: pb.StageComplete): void {
    const frame = clientFrame({ case: "complete", value: complete });
    this.send(frame);
    const old = this.unacked.push(key, frame);
    if (old !== undefined) {
      log.warn(
        `unacked result buffer full (${MAX_UNACKED}); dropped the oldest result ${old.token} (the broker will re-run it)`,
      );
    }
    this.publish();
  }

  /** Handles a CompleteAck: the kept result is dropped either way. */
  ack(key: LeaseKey, accepted: boolean): void {
    if (this.unacked.remove(key)) {
      if (!accepted) {
        log.info(`result ${key.token} (epoch ${key.epoch}) refused as stale`);
      }
      this.publish();
    } else {
      log.debug(`ack for an unknown result ${key.token}`);
    }
  }

  /** Handles a CancelTask: aborts the handler and forgets the lease and any kept result. */
  cancelTask(key: LeaseKey, reason: string): boolean {
    const id = keyId(key);
    const r = this.running.get(id);
    this.running.delete(id);
    const hadResult = this.unacked.remove(key);
    r?.abort(new TaskCancelledError("cancelled", reason));
    this.publish();
    return r !== undefined || hadResult;
  }

  /**
   * End of shutdown: aborts every task and forgets every lease and kept result; returns the
   * handlers that had started.
   */
  cancelAll(): Array<Promise<unknown>> {
    const handlers: Array<Promise<unknown>> = [];
    for (const r of this.running.values()) {
      r.abort(new TaskCancelledError("shutdown"));
      if (r.handler !== undefined) {
        handlers.push(r.handler);
      }
    }
    this.running.clear();
    this.unacked = new Unacked();
    this.publish();
    return handlers;
  }

  /** Sends one coalesced heartbeat of every tracked task, if any and a stream is up. */
  heartbeat(): number {
    if (this.running.size === 0 || this.link === undefined) {
      return 0;
    }
    const keys = [...this.running.values()].map((r) => r.key);
    this.send(
      clientFrame({
        case: "heartbeat",
        value: create(pb.WorkHeartbeatSchema, {
          leaseToken: keys.map((k) => k.token),
          claimEpoch: keys.map((k) => k.epoch),
        }),
      }),
    );
    return keys.length;
  }

  // -- readiness and configs ---------------------------------------------------------------

  /** Applies a readiness poll: each edge becomes an Interest frame. */
  updateReadiness(readiness: Array<[KindVersion, boolean]>): void {
    if (this.shuttingDown) {
      return;
    }
    for (const [kv, ready] of readiness) {
      const prev = this.advertised.get(kv.toString());
      this.advertised.set(kv.toString(), { kv, ready });
      if (prev?.ready !== ready) {
        log.info(`provider ${kv} readiness changed: ready=${ready}`);
        this.send(interestFrame(kv, ready));
      }
    }
  }

  /** Refuses new tasks and tells the broker every pair is unready. */
  beginShutdown(): void {
    this.shuttingDown = true;
    for (const a of this.advertised.values()) {
      if (a.ready) {
        a.ready = false;
        this.send(interestFrame(a.kv, false));
      }
    }
  }

  /** The cached default config of a pair. */
  configFor(kv: KindVersion): ProviderConfig {
    return this.configs.get(kv.toString()) ?? new ProviderConfig();
  }

  /**
   * Stores a pair's default config; calls `onConfig` when `always` or when it changed, then
   * re-checks the provider's readiness at once.
   */
  applyConfig(kv: KindVersion, provider: Provider, cfg: ProviderConfig, always: boolean): void {
    const changed = !sameConfig(this.configs.get(kv.toString()), cfg);
    this.configs.set(kv.toString(), cfg);
    if (!(always || changed)) {
      return;
    }
    log.debug(`provider config applied for ${kv} (empty=${cfg.isEmpty()})`);
    try {
      provider.onConfig?.(cfg);
    } catch (e) {
      log.error(`onConfig of ${kv} threw`, { error: String(e) });
    }
    if (this.advertised.has(kv.toString())) {
      this.updateReadiness([[kv, pollReady(kv, provider)]]);
    }
  }

  /** Applies a pulled set of default configs (pairs without an entry have none). */
  applyPulled(entries: readonly pb.ProviderConfigEntry[], always: boolean): void {
    const byPair = new Map(entries.map((e) => [new KindVersion(e.kind, wireVersion(e.kindVersion)).toString(), e]));
    for (const [kv, provider] of this.registry.entries()) {
      const e = byPair.get(kv.toString());
      const cfg = e !== undefined ? providerConfig(kv, e.config, e.bundle) : new ProviderConfig();
      this.applyConfig(kv, provider, cfg, always);
    }
  }
}
