/**
 * Errors of the SDK: a handler's failure, a bad configuration, an unusable registry.
 *
 * A handler throws `TerminalError` to stop retries until the resource's spec changes and
 * `TransientError` to be retried with backoff. Anything else it throws (or a rejected
 * promise) is a transient failure whose message is the error's text, the equivalent of a
 * panic in the Rust SDK.
 *
 * @module
 */
/** A handler failure; `terminal` says whether a retry can help. */
export declare class HandlerError extends Error {
    /** Whether retrying cannot help (only a spec change can). */
    readonly terminal: boolean;
    constructor(message: string, terminal?: boolean);
}
/** A failure worth retrying (a flaky dependency, a timeout, a conflict). */
export declare class TransientError extends HandlerError {
    constructor(message: string);
}
/** A failure no retry can fix (an invalid spec, a missing permission). */
export declare class TerminalError extends HandlerError {
    constructor(message: string);
}
/** A worker configuration value that is missing or malformed; `variable` names it. */
export declare class ConfigError extends Error {
    /** The environment variable (or config field) at fault. */
    readonly variable: string;
    constructor(variable: string, message: string);
    /** A required variable is not set. */
    static missing(variable: string): ConfigError;
    /** A variable is set to something that cannot be used. */
    static invalid(variable: string, value: unknown, reason: string): ConfigError;
}
/** The providers cannot be served (none, a bad version, a duplicate pair, ...). */
export declare class RegistryError extends Error {
    constructor(message: string);
}
/** Why a task was cancelled: see `TaskCancelledError`. */
export type CancelKind = "deadline" | "cancelled" | "shutdown";
/**
 * The reason (`signal.reason`) a task's `AbortSignal` fires: kind `deadline` (the task's
 * deadline passed), `cancelled` (the broker sent CancelTask; `detail` is its reason:
 * deleted, quarantined, superseded or deadline) or `shutdown` (the worker stopped before
 * the handler returned).
 */
export declare class TaskCancelledError extends Error {
    /** Why the task was cancelled. */
    readonly kind: CancelKind;
    /** The broker's CancelTask reason, when `kind` is `cancelled`. */
    readonly detail: string;
    constructor(kind: CancelKind, detail?: string);
}
