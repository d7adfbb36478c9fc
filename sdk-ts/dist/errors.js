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
export class HandlerError extends Error {
    /** Whether retrying cannot help (only a spec change can). */
    terminal;
    constructor(message, terminal = false) {
        super(message);
        this.name = "HandlerError";
        this.terminal = terminal;
    }
}
/** A failure worth retrying (a flaky dependency, a timeout, a conflict). */
export class TransientError extends HandlerError {
    constructor(message) {
        super(message, false);
        this.name = "TransientError";
    }
}
/** A failure no retry can fix (an invalid spec, a missing permission). */
export class TerminalError extends HandlerError {
    constructor(message) {
        super(message, true);
        this.name = "TerminalError";
    }
}
/** A worker configuration value that is missing or malformed; `variable` names it. */
export class ConfigError extends Error {
    /** The environment variable (or config field) at fault. */
    variable;
    constructor(variable, message) {
        super(message);
        this.name = "ConfigError";
        this.variable = variable;
    }
    /** A required variable is not set. */
    static missing(variable) {
        return new ConfigError(variable, `${variable} is required but not set`);
    }
    /** A variable is set to something that cannot be used. */
    static invalid(variable, value, reason) {
        return new ConfigError(variable, `${variable}=${JSON.stringify(String(value))} is invalid: ${reason}`);
    }
}
/** The providers cannot be served (none, a bad version, a duplicate pair, ...). */
export class RegistryError extends Error {
    constructor(message) {
        super(message);
        this.name = "RegistryError";
    }
}
/**
 * The reason (`signal.reason`) a task's `AbortSignal` fires: kind `deadline` (the task's
 * deadline passed), `cancelled` (the broker sent CancelTask; `detail` is its reason:
 * deleted, quarantined, superseded or deadline) or `shutdown` (the worker stopped before
 * the handler returned).
 */
export class TaskCancelledError extends Error {
    /** Why the task was cancelled. */
    kind;
    /** The broker's CancelTask reason, when `kind` is `cancelled`. */
    detail;
    constructor(kind, detail = "") {
        super(kind === "deadline"
            ? "deadline exceeded"
            : kind === "cancelled"
                ? `task cancelled by the broker${detail ? ` (${detail})` : ""}`
                : "worker is shutting down");
        this.name = "TaskCancelledError";
        this.kind = kind;
        this.detail = detail;
    }
}
//# sourceMappingURL=errors.js.map