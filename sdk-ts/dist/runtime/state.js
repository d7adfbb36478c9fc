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
import { wireVersion } from "../convert.js";
import { TaskCancelledError } from "../errors.js";
import * as pb from "../gen/converge/worker/v1/worker_pb.js";
import { log } from "../logs.js";
import { SDK } from "../version.js";
import { KindVersion, ProviderConfig } from "../types.js";
import { Flag, Semaphore } from "./sync.js";
/**
 * Most results kept while waiting for their CompleteAck; beyond it the oldest is dropped
 * (the broker re-runs that task after its lease expires).
 */
export const MAX_UNACKED = 1024;
function keyId(k) {
    return `${k.epoch}\u0000${k.token}`;
}
/** Results (as ready-to-send client frames) waiting for an ack, oldest first. */
export class Unacked {
    cap;
    items = new Map();
    constructor(cap = MAX_UNACKED) {
        this.cap = cap;
    }
    get size() {
        return this.items.size;
    }
    has(key) {
        return this.items.has(keyId(key));
    }
    get(key) {
        return this.items.get(keyId(key))?.frame;
    }
    remove(key) {
        return this.items.delete(keyId(key));
    }
    keys() {
        return [...this.items.values()].map((v) => v.key);
    }
    frames() {
        return [...this.items.values()].map((v) => v.frame);
    }
    /** Keeps `frame`; returns the key of the oldest result dropped to respect the cap. */
    push(key, frame) {
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
    key;
    controller = new AbortController();
    /** The handler's settlement, once it started. */
    handler = undefined;
    constructor(key) {
        this.key = key;
    }
    /** Aborts the task's signal (the handler sees `reason`). */
    abort(reason) {
        if (!this.controller.signal.aborted) {
            this.controller.abort(reason);
        }
    }
}
/** A WorkStreamClientMsg with one body set. */
export function clientFrame(body) {
    return create(pb.WorkStreamClientMsgSchema, { body });
}
/** The Interest frame flipping one pair's readiness. */
export function interestFrame(kv, hasWorker) {
    return clientFrame({
        case: "interest",
        value: create(pb.InterestSchema, { kind: kv.kind, credit: 0, hasWorker, kindVersion: kv.version }),
    });
}
/** A cached config from wire bytes; a malformed spec is logged and treated as absent. */
export function providerConfig(kv, spec, bundle) {
    let value;
    if (spec.length > 0) {
        try {
            value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(spec));
        }
        catch (e) {
            log.warn(`provider config of ${kv} is not valid JSON (${e.message}); ignoring its spec`);
        }
    }
    return new ProviderConfig(value, new Uint8Array(bundle));
}
function sameConfig(a, b) {
    return (a !== undefined &&
        JSON.stringify(a.spec) === JSON.stringify(b.spec) &&
        Buffer.from(a.bundle).equals(Buffer.from(b.bundle)));
}
/** `provider.ready()`, a throw counting as unready (an absent hook as ready). */
export function pollReady(kv, provider) {
    if (provider.ready === undefined) {
        return true;
    }
    try {
        return Boolean(provider.ready());
    }
    catch (e) {
        log.error(`ready() of ${kv} threw; treating the provider as unready`, { error: String(e) });
        return false;
    }
}
/** Polls every provider's readiness. */
export function pollReadiness(shared) {
    return shared.registry.entries().map(([kv, p]) => [kv, pollReady(kv, p)]);
}
/** Everything the runtime's loops share, for the worker's whole life. */
export class Shared {
    cfg;
    registry;
    permits;
    running = new Map();
    unacked = new Unacked();
    configs = new Map();
    advertised = new Map();
    shuttingDown = false;
    link = undefined;
    nextSession = 0;
    idle = new Flag(true);
    liveHandlers = 0;
    noHandlers = new Flag(true);
    constructor(cfg, registry) {
        this.cfg = cfg;
        this.registry = registry;
        this.permits = new Semaphore(cfg.maxParallel);
    }
    // -- bookkeeping -------------------------------------------------------------------------
    /**
     * Sends a frame on the current stream (dropped when none is open: kept results are
     * re-sent on the next one, so nothing is lost).
     */
    send(frame) {
        this.link?.write(frame);
    }
    /** Tracked leases plus kept results; 0 means nothing is left to finish or deliver. */
    get outstanding() {
        return this.running.size + this.unacked.size;
    }
    publish() {
        if (this.outstanding === 0) {
            this.idle.set();
        }
        else {
            this.idle.clear();
        }
    }
    /** Resolves true once nothing is running and every result was acked, false after `timeoutMs`. */
    waitIdle(timeoutMs) {
        return this.idle.wait(timeoutMs);
    }
    /** Counts a handler in (its permit is held until `handlerDone`). */
    handlerStarted() {
        this.liveHandlers += 1;
        this.noHandlers.clear();
    }
    /** Counts a handler out and frees its permit. */
    handlerDone() {
        this.permits.release();
        this.liveHandlers -= 1;
        if (this.liveHandlers === 0) {
            this.noHandlers.set();
        }
    }
    /** Resolves true once no handler runs, false after `timeoutMs`. */
    waitNoHandlers(timeoutMs) {
        return this.noHandlers.wait(timeoutMs);
    }
    // -- sessions ----------------------------------------------------------------------------
    /**
     * Installs `write` as the one sender and sends, in order: Subscribe (listing every
     * tracked lease and kept result in `resumed`), Interest{has_worker:false} for each pair
     * not ready (all of them once shutting down), then every kept result.
     */
    openSession(write, readiness) {
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
        log.info(`subscribing (session ${sid}, ${kinds.length} kinds, ${keys.length} resumed, ${this.unacked.size} unacked)`);
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
    closeSession(sid) {
        if (this.link?.id === sid) {
            this.link = undefined;
        }
    }
    // -- tasks -------------------------------------------------------------------------------
    /**
     * Tracks a new task; undefined for a duplicate delivery (already running, or finished and
     * waiting for its ack, in which case the kept result is re-sent).
     */
    admit(key) {
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
    isRunning(key) {
        return this.running.has(keyId(key));
    }
    /**
     * Records a tracked task's result: keeps it until acked and sends it. The result of a
     * task no longer tracked (cancelled) is dropped.
     */
    finish(key, complete) {
        if (!this.running.delete(keyId(key))) {
            log.debug(`result of cancelled task ${key.token} dropped`);
            return;
        }
        this.keepAndSend(key, complete);
    }
    /** Records a result for a task that was never tracked (refused while draining). */
    finishUntracked(key, complete) {
        this.keepAndSend(key, complete);
    }
    keepAndSend(key, complete) {
        const frame = clientFrame({ case: "complete", value: complete });
        this.send(frame);
        const old = this.unacked.push(key, frame);
        if (old !== undefined) {
            log.warn(`unacked result buffer full (${MAX_UNACKED}); dropped the oldest result ${old.token} (the broker will re-run it)`);
        }
        this.publish();
    }
    /** Handles a CompleteAck: the kept result is dropped either way. */
    ack(key, accepted) {
        if (this.unacked.remove(key)) {
            if (!accepted) {
                log.info(`result ${key.token} (epoch ${key.epoch}) refused as stale`);
            }
            this.publish();
        }
        else {
            log.debug(`ack for an unknown result ${key.token}`);
        }
    }
    /** Handles a CancelTask: aborts the handler and forgets the lease and any kept result. */
    cancelTask(key, reason) {
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
    cancelAll() {
        const handlers = [];
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
    heartbeat() {
        if (this.running.size === 0 || this.link === undefined) {
            return 0;
        }
        const keys = [...this.running.values()].map((r) => r.key);
        this.send(clientFrame({
            case: "heartbeat",
            value: create(pb.WorkHeartbeatSchema, {
                leaseToken: keys.map((k) => k.token),
                claimEpoch: keys.map((k) => k.epoch),
            }),
        }));
        return keys.length;
    }
    // -- readiness and configs ---------------------------------------------------------------
    /** Applies a readiness poll: each edge becomes an Interest frame. */
    updateReadiness(readiness) {
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
    beginShutdown() {
        this.shuttingDown = true;
        for (const a of this.advertised.values()) {
            if (a.ready) {
                a.ready = false;
                this.send(interestFrame(a.kv, false));
            }
        }
    }
    /** The cached default config of a pair. */
    configFor(kv) {
        return this.configs.get(kv.toString()) ?? new ProviderConfig();
    }
    /**
     * Stores a pair's default config; calls `onConfig` when `always` or when it changed, then
     * re-checks the provider's readiness at once.
     */
    applyConfig(kv, provider, cfg, always) {
        const changed = !sameConfig(this.configs.get(kv.toString()), cfg);
        this.configs.set(kv.toString(), cfg);
        if (!(always || changed)) {
            return;
        }
        log.debug(`provider config applied for ${kv} (empty=${cfg.isEmpty()})`);
        try {
            provider.onConfig?.(cfg);
        }
        catch (e) {
            log.error(`onConfig of ${kv} threw`, { error: String(e) });
        }
        if (this.advertised.has(kv.toString())) {
            this.updateReadiness([[kv, pollReady(kv, provider)]]);
        }
    }
    /** Applies a pulled set of default configs (pairs without an entry have none). */
    applyPulled(entries, always) {
        const byPair = new Map(entries.map((e) => [new KindVersion(e.kind, wireVersion(e.kindVersion)).toString(), e]));
        for (const [kv, provider] of this.registry.entries()) {
            const e = byPair.get(kv.toString());
            const cfg = e !== undefined ? providerConfig(kv, e.config, e.bundle) : new ProviderConfig();
            this.applyConfig(kv, provider, cfg, always);
        }
    }
}
//# sourceMappingURL=state.js.map