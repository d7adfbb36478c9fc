/**
 * One WorkStream session, the reconnect loop around it (walking the broker list, see
 * `failover`), and the provider-config prime.
 *
 * @module
 */
import { Failover } from "./failover.js";
import { type Shared } from "./state.js";
/** Bound on one GetProviderConfig call, milliseconds. */
export declare const CONFIG_PULL_TIMEOUT_MS = 10000;
/**
 * Loads every registered pair's default config from the first broker of the list that
 * answers (retrying along the list with jittered backoff until one does), and calls
 * `onConfig` for each before any task can arrive. Returns the failover position, on the
 * broker that answered, for the connection loop to start from; undefined when `stop`
 * aborted first.
 */
export declare function prime(shared: Shared, stop: AbortSignal): Promise<Failover | undefined>;
/** What one session got to, for the failover decision after it ends. */
export interface Attempt {
    index: number;
    /** Whether the broker took the Subscribe (answered the stream with headers). */
    opened: boolean;
}
/** How a session ended without an error. */
export type SessionEnd = "drained" | "closed" | "stopped";
/**
 * Runs one stream to its end on broker `attempt.index`; resolves "drained", "closed" (the
 * broker ended it) or "stopped" (`stop` aborted), rejects on a stream error
 * (`attempt.opened` says whether the stream had opened).
 */
export declare function runSession(shared: Shared, attempt: Attempt, reconnect: boolean, stop: AbortSignal): Promise<SessionEnd>;
/**
 * Runs sessions until `stop`, starting on the broker `failover` points at and moving along
 * the list on every failure or stream end (see `failover` for the waits and the backoff).
 * Handlers survive reconnects.
 */
export declare function connectionLoop(shared: Shared, stop: AbortSignal, failover: Failover): Promise<void>;
