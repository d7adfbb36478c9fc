/**
 * `serve` / `runWorker`: load provider configs, keep one WorkStream session open to a
 * broker of the list (failing over along it, with backoff), heartbeat and poll readiness,
 * and drain on shutdown.
 *
 * @module
 */
import { WorkerConfig } from "../config.js";
import { log } from "../logs.js";
import { asRegistry } from "../provider.js";
import { connectionLoop, prime } from "./session.js";
import { Shared, pollReadiness } from "./state.js";
/** Milliseconds cancelled handlers get to return at the end of shutdown. */
export const SHUTDOWN_CANCEL_GRACE_MS = 1_000;
/** An AbortSignal that aborts on SIGTERM or SIGINT, and a function removing the handlers. */
function signalAbort() {
    const controller = new AbortController();
    const on = (sig) => {
        log.info(`${sig} received`);
        controller.abort();
    };
    process.on("SIGTERM", on);
    process.on("SIGINT", on);
    return {
        signal: controller.signal,
        remove: () => {
            process.off("SIGTERM", on);
            process.off("SIGINT", on);
        },
    };
}
function abortPromise(signal) {
    return new Promise((resolve) => {
        if (signal.aborted) {
            resolve();
        }
        else {
            signal.addEventListener("abort", () => resolve(), { once: true });
        }
    });
}
/**
 * Runs a worker until `options.signal` aborts (default: SIGTERM or SIGINT), then drains.
 *
 * On shutdown the worker stops taking tasks (every kind is reported unready and stragglers
 * are refused as transient failures), waits up to `drainTimeoutMs` for running handlers to
 * finish and their results to be acked, then aborts whatever still runs and resolves.
 * Broker outages are retried forever; only an unusable configuration (ConfigError) or
 * registry (RegistryError) rejects.
 */
export async function serve(providers, options = {}) {
    const cfg = options.config ?? WorkerConfig.fromEnv();
    cfg.validate();
    const registry = asRegistry(providers).validated(cfg.kinds);
    const shared = new Shared(cfg, registry);
    const signals = options.signal === undefined ? signalAbort() : undefined;
    const shutdown = options.signal ?? signals.signal;
    log.info(`worker ${cfg.workerName} starting: brokers ${cfg.brokerAddrs.join(",")}, kinds ${registry}, ` +
        `max_parallel ${cfg.maxParallel}`);
    // `stop` ends the loops; it aborts only after the drain, so results still go out.
    const stop = new AbortController();
    const timers = [];
    let loop;
    try {
        const failover = await prime(shared, shutdown);
        if (failover === undefined) {
            log.info("shutdown before the provider configs were loaded");
            return;
        }
        loop = connectionLoop(shared, stop.signal, failover);
        timers.push(setInterval(() => shared.heartbeat(), cfg.heartbeatEveryMs), setInterval(() => shared.updateReadiness(pollReadiness(shared)), cfg.readinessPollMs));
        await abortPromise(shutdown);
        log.info(`shutdown requested; draining ${shared.running.size} running and ${shared.unacked.size} unacked ` +
            `(timeout ${(cfg.drainTimeoutMs / 1000).toFixed(1)}s)`);
        shared.beginShutdown();
        if (!(await shared.waitIdle(cfg.drainTimeoutMs))) {
            log.warn(`drain timeout passed with ${shared.running.size} running and ${shared.unacked.size} unacked; ` +
                "cancelling the rest");
        }
        const handlers = shared.cancelAll();
        if (handlers.length > 0 && !(await shared.waitNoHandlers(SHUTDOWN_CANCEL_GRACE_MS))) {
            log.warn("handlers ignored their cancellation; leaving them behind");
        }
        log.info(`worker stopped (${handlers.length} handlers cancelled)`);
    }
    finally {
        stop.abort();
        for (const t of timers) {
            clearInterval(t);
        }
        shared.cancelAll();
        if (loop !== undefined) {
            await loop;
        }
        signals?.remove();
    }
}
/**
 * The entry point of a worker program: `serve` with the configuration from the environment
 * until SIGTERM or SIGINT, then drain and resolve (exit code 0 is the caller's).
 */
export function runWorker(providers, config) {
    return serve(providers, config === undefined ? {} : { config });
}
//# sourceMappingURL=worker.js.map