/**
 * `serve` / `runWorker`: load provider configs, keep one WorkStream session open to a
 * broker of the list (failing over along it, with backoff), heartbeat and poll readiness,
 * and drain on shutdown.
 *
 * @module
 */
import { WorkerConfig } from "../config.js";
import { type Provider, type Registry } from "../provider.js";
/** Milliseconds cancelled handlers get to return at the end of shutdown. */
export declare const SHUTDOWN_CANCEL_GRACE_MS = 1000;
/** Options of `serve`. */
export interface ServeOptions {
    /** The configuration; default `WorkerConfig.fromEnv()`. */
    config?: WorkerConfig;
    /** Aborting it starts the drain; default: SIGTERM or SIGINT. */
    signal?: AbortSignal;
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
export declare function serve(providers: Registry | Provider | Iterable<Provider>, options?: ServeOptions): Promise<void>;
/**
 * The entry point of a worker program: `serve` with the configuration from the environment
 * until SIGTERM or SIGINT, then drain and resolve (exit code 0 is the caller's).
 */
export declare function runWorker(providers: Registry | Provider | Iterable<Provider>, config?: WorkerConfig): Promise<void>;
