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
import type { WorkerConfig } from "../config.js";
import { TaskCancelledError } from "../errors.js";
import * as pb from "../gen/converge/worker/v1/worker_pb.js";
import type { Provider, Registry } from "../provider.js";
import { KindVersion, ProviderConfig } from "../types.js";
import { Semaphore } from "./sync.js";
/**
 * Most results kept while waiting for their CompleteAck; beyond it the oldest is dropped
 * (the broker re-runs that task after its lease expires).
 */
export declare const MAX_UNACKED = 1024;
/** A lease as the broker fences it: token plus claim epoch. */
export interface LeaseKey {
    readonly token: string;
    readonly epoch: bigint;
}
/** Results (as ready-to-send client frames) waiting for an ack, oldest first. */
export declare class Unacked {
    readonly cap: number;
    private readonly items;
    constructor(cap?: number);
    get size(): number;
    has(key: LeaseKey): boolean;
    get(key: LeaseKey): pb.WorkStreamClientMsg | undefined;
    remove(key: LeaseKey): boolean;
    keys(): LeaseKey[];
    frames(): pb.WorkStreamClientMsg[];
    /** Keeps `frame`; returns the key of the oldest result dropped to respect the cap. */
    push(key: LeaseKey, frame: pb.WorkStreamClientMsg): LeaseKey | undefined;
}
/** A task accepted from the broker whose handler has not returned (or not started). */
export declare class Running {
    readonly key: LeaseKey;
    readonly controller: AbortController;
    /** The handler's settlement, once it started. */
    handler: Promise<unknown> | undefined;
    constructor(key: LeaseKey);
    /** Aborts the task's signal (the handler sees `reason`). */
    abort(reason: TaskCancelledError): void;
}
/** The current stream: its session id and its one writer. */
interface Link {
    id: number;
    write: (frame: pb.WorkStreamClientMsg) => void;
}
/** A WorkStreamClientMsg with one body set. */
export declare function clientFrame(body: pb.WorkStreamClientMsg["body"]): pb.WorkStreamClientMsg;
/** The Interest frame flipping one pair's readiness. */
export declare function interestFrame(kv: KindVersion, hasWorker: boolean): pb.WorkStreamClientMsg;
/** A cached config from wire bytes; a malformed spec is logged and treated as absent. */
export declare function providerConfig(kv: KindVersion, spec: Uint8Array, bundle: Uint8Array): ProviderConfig;
/** `provider.ready()`, a throw counting as unready (an absent hook as ready). */
export declare function pollReady(kv: KindVersion, provider: Provider): boolean;
/** Polls every provider's readiness. */
export declare function pollReadiness(shared: Shared): Array<[KindVersion, boolean]>;
/** Everything the runtime's loops share, for the worker's whole life. */
export declare class Shared {
    readonly cfg: WorkerConfig;
    readonly registry: Registry;
    readonly permits: Semaphore;
    readonly running: Map<string, Running>;
    unacked: Unacked;
    readonly configs: Map<string, ProviderConfig>;
    readonly advertised: Map<string, {
        kv: KindVersion;
        ready: boolean;
    }>;
    shuttingDown: boolean;
    private link;
    private nextSession;
    private readonly idle;
    liveHandlers: number;
    private readonly noHandlers;
    constructor(cfg: WorkerConfig, registry: Registry);
    /**
     * Sends a frame on the current stream (dropped when none is open: kept results are
     * re-sent on the next one, so nothing is lost).
     */
    send(frame: pb.WorkStreamClientMsg): void;
    /** Tracked leases plus kept results; 0 means nothing is left to finish or deliver. */
    get outstanding(): number;
    private publish;
    /** Resolves true once nothing is running and every result was acked, false after `timeoutMs`. */
    waitIdle(timeoutMs: number): Promise<boolean>;
    /** Counts a handler in (its permit is held until `handlerDone`). */
    handlerStarted(): void;
    /** Counts a handler out and frees its permit. */
    handlerDone(): void;
    /** Resolves true once no handler runs, false after `timeoutMs`. */
    waitNoHandlers(timeoutMs: number): Promise<boolean>;
    /**
     * Installs `write` as the one sender and sends, in order: Subscribe (listing every
     * tracked lease and kept result in `resumed`), Interest{has_worker:false} for each pair
     * not ready (all of them once shutting down), then every kept result.
     */
    openSession(write: Link["write"], readiness: Array<[KindVersion, boolean]>): number;
    /** Detaches session `sid` if it is still the current one. */
    closeSession(sid: number): void;
    /**
     * Tracks a new task; undefined for a duplicate delivery (already running, or finished and
     * waiting for its ack, in which case the kept result is re-sent).
     */
    admit(key: LeaseKey): Running | undefined;
    /** Whether `key` is still tracked as running. */
    isRunning(key: LeaseKey): boolean;
    /**
     * Records a tracked task's result: keeps it until acked and sends it. The result of a
     * task no longer tracked (cancelled) is dropped.
     */
    finish(key: LeaseKey, complete: pb.StageComplete): void;
    /** Records a result for a task that was never tracked (refused while draining). */
    finishUntracked(key: LeaseKey, complete: pb.StageComplete): void;
    private keepAndSend;
    /** Handles a CompleteAck: the kept result is dropped either way. */
    ack(key: LeaseKey, accepted: boolean): void;
    /** Handles a CancelTask: aborts the handler and forgets the lease and any kept result. */
    cancelTask(key: LeaseKey, reason: string): boolean;
    /**
     * End of shutdown: aborts every task and forgets every lease and kept result; returns the
     * handlers that had started.
     */
    cancelAll(): Array<Promise<unknown>>;
    /** Sends one coalesced heartbeat of every tracked task, if any and a stream is up. */
    heartbeat(): number;
    /** Applies a readiness poll: each edge becomes an Interest frame. */
    updateReadiness(readiness: Array<[KindVersion, boolean]>): void;
    /** Refuses new tasks and tells the broker every pair is unready. */
    beginShutdown(): void;
    /** The cached default config of a pair. */
    configFor(kv: KindVersion): ProviderConfig;
    /**
     * Stores a pair's default config; calls `onConfig` when `always` or when it changed, then
     * re-checks the provider's readiness at once.
     */
    applyConfig(kv: KindVersion, provider: Provider, cfg: ProviderConfig, always: boolean): void;
    /** Applies a pulled set of default configs (pairs without an entry have none). */
    applyPulled(entries: readonly pb.ProviderConfigEntry[], always: boolean): void;
}
export {};
