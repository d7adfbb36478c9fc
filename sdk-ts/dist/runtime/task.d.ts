/**
 * Running one task: admission, the concurrency permit, the deadline, error capture, and
 * turning the handler's result into a kept StageComplete.
 *
 * Each handler runs as its own promise owned by the worker, not by the stream, so a stream
 * drop never cancels a handler; only a CancelTask, the deadline or the end of shutdown
 * aborts its signal. A handler's permit is held until it really settles, so `maxParallel`
 * stays true even for a handler that overruns its deadline. A ROLLUP handler that may page
 * through its descendants holds the connection its task arrived on open until it settles
 * (see `Connection`).
 *
 * @module
 */
import { type HandlerResult } from "../convert.js";
import type * as pb from "../gen/converge/worker/v1/worker_pb.js";
import type { Provider } from "../provider.js";
import { type ReactionRequest } from "../types.js";
import type { Shared } from "./state.js";
import { type Connection } from "./subtree.js";
/** Calls `provider.work(req)`, capturing a synchronous throw, a rejection or a value. */
export declare function invoke(provider: Provider, req: ReactionRequest): Promise<HandlerResult>;
/**
 * Takes in a task frame that arrived on `conn`. `refuse` (draining or shutting down)
 * answers it with a transient failure instead of running it.
 */
export declare function accept(shared: Shared, task: pb.StageTask, refuse: string | undefined, conn: Connection): void;
