/**
 * Run a provider with no broker: build a request, call the handler, inspect the outcome.
 *
 * `run` calls `provider.work` directly (throwing what it throws); `executeTask` runs the
 * real wire path (StageTask decode → work → StageComplete encode) that the worker runtime
 * uses. A rollup handler that pages through its descendants reads them from
 * `Subtree.fixed(rows)` (`request(..., { subtree })` or `executeTask(..., { subtree })`).
 *
 * @module
 */
import type { Subtree } from "./descendants.js";
import type * as pb from "./gen/converge/worker/v1/worker_pb.js";
import { type Provider, type Registry } from "./provider.js";
import { type Json, Outcome, ProviderConfig, ReactionRequest, type ReactionRequestInit } from "./types.js";
/** Extra fields of `request`: any ReactionRequest field, plus `name` and `timeoutMs`. */
export type RequestOptions = Partial<Omit<ReactionRequestInit, "kind" | "resource">> & {
    /** The resource's name (default `test`). */
    name?: string;
    /** A deadline this many milliseconds from now; `signal` aborts when it passes (in `run`). */
    timeoutMs?: number;
};
/**
 * A request for a fresh resource of `kind` named `name` with `spec`: by default reaction
 * `work`, stage WORK, trigger specChange, generation 1, attempt 1, no deadline and no config.
 */
export declare function request(kind: string, spec?: Json, options?: RequestOptions): ReactionRequest;
/**
 * Runs `provider.work(req)` and returns its Outcome, throwing what the handler throws.
 *
 * With `req.deadline` set, `req.signal` aborts when it passes (its reason a
 * `TaskCancelledError` of kind `deadline`) and `TransientError("deadline exceeded")` is
 * thrown, as in the runtime. Nothing returned is an empty Outcome.
 */
export declare function run(provider: Provider, req: ReactionRequest): Promise<Outcome>;
/** Options of `executeTask`. */
export interface ExecuteOptions {
    /** The kind's cached default config. */
    config?: ProviderConfig;
    /** Serves a ROLLUP handler's paged read (none: paging fails terminally). */
    subtree?: Subtree;
}
/**
 * Runs one wire StageTask through the providers exactly as the runtime does (dispatch by
 * (kind, kindVersion), decode, handler with error capture and deadline, encode); returns
 * the StageComplete the worker would send.
 */
export declare function executeTask(providers: Registry | Provider | Iterable<Provider>, task: pb.StageTask, options?: ExecuteOptions): Promise<pb.StageComplete>;
