/**
 * The SDK's logger: `initLogging()` configures it from `LOG_LEVEL` and `LOG_FORMAT` (the
 * variables the other SDKs read), `setLogger()` replaces it (e.g. with pino or winston).
 * Until either is called, warnings and errors go to stderr as text.
 *
 * @module
 */
/** A structured logger: a message and optional fields. */
export interface Logger {
    debug(message: string, fields?: Record<string, unknown>): void;
    info(message: string, fields?: Record<string, unknown>): void;
    warn(message: string, fields?: Record<string, unknown>): void;
    error(message: string, fields?: Record<string, unknown>): void;
}
/** The logger the SDK writes to (whatever `setLogger` or `initLogging` installed last). */
export declare const log: Logger;
/** Sends the SDK's log lines to `logger`. */
export declare function setLogger(logger: Logger): void;
/**
 * Logs to stderr per `LOG_LEVEL` (default info; trace, debug, info, warn, warning or error;
 * a Rust-style directive list such as `info,converge=debug` uses its first bare level) and
 * `LOG_FORMAT` (`text`, the default, or `json`). A malformed value throws ConfigError.
 */
export declare function initLogging(env?: Record<string, string | undefined>): void;
