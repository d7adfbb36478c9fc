/**
 * converge-sdk: write converge providers in TypeScript.
 *
 * Implement a `Provider` for each (kind, kindVersion) you serve and call `runWorker`
 * (configuration from the environment, SIGTERM/SIGINT drain) or `serve(providers, {config,
 * signal})`. The runtime dials the broker's WorkerService over @grpc/grpc-js, subscribes,
 * runs tasks with bounded concurrency, keeps results until the broker acks them,
 * heartbeats running tasks, reports readiness flips, applies provider-config pushes and
 * reconnects with backoff and jitter, failing over along a list of brokers
 * (`BROKER_ADDR=a:9090,b:9090`).
 *
 * ```ts
 * import { KindVersion, Outcome, type Provider, runWorker } from "converge-sdk";
 *
 * const hello: Provider = {
 *   kind: new KindVersion("hello", 1),
 *   async work(req) {
 *     return new Outcome({ status: { message: `hello, ${req.resource.name}!` } });
 *   },
 * };
 * await runWorker([hello]);
 * ```
 *
 * @module
 */
export { DEFAULT_DRAIN_TIMEOUT_MS, DEFAULT_HEARTBEAT_EVERY_MS, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_PARALLEL, DEFAULT_READINESS_POLL_MS, DEFAULT_RECONNECT_MAX_MS, DEFAULT_RECONNECT_MIN_MS, MAX_MESSAGE_BYTES_LIMIT, RECONNECT_CAP_MS, WorkerConfig, parseDuration, } from "./config.js";
export { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, RollupSummary, Subtree } from "./descendants.js";
export { ConfigError, HandlerError, RegistryError, TaskCancelledError, TerminalError, TransientError, } from "./errors.js";
export { initLogging, setLogger } from "./logs.js";
export { Reactions, kindManifest, schemaOf, } from "./manifest.js";
export { effectiveBundle, effectiveConfig } from "./merge.js";
export { Registry, providerFunc } from "./provider.js";
export { runWorker, serve } from "./runtime/worker.js";
export { CONDITION_READY, CONDITION_SYNCED, ChildSpec, Condition, DepEdge, KindVersion, NIL_UUID, Operation, Outcome, ProviderConfig, ProviderConfigSpec, ReactionRequest, Resource, ResourceRef, Stage, Transition, Trigger, ValueFlow, stageName, transitionName, } from "./types.js";
export { SDK, VERSION } from "./version.js";
//# sourceMappingURL=index.js.map