/**
 * The SDK's logger: `initLogging()` configures it from `LOG_LEVEL` and `LOG_FORMAT` (the
 * variables the other SDKs read), `setLogger()` replaces it (e.g. with pino or winston).
 * Until either is called, warnings and errors go to stderr as text.
 *
 * @module
 */
import { ConfigError } from "./errors.js";
const LEVELS = { trace: 0, debug: 0, info: 1, warn: 2, warning: 2, error: 3 };
const NAMES = ["DEBUG", "INFO", "WARN", "ERROR"];
/** Writes lines at or above `level` to stderr, as text or JSON. */
class StderrLogger {
    level;
    json;
    constructor(level, json) {
        this.level = level;
        this.json = json;
    }
    write(level, message, fields) {
        if (level < this.level) {
            return;
        }
        const timestamp = new Date().toISOString();
        const name = NAMES[level] ?? "INFO";
        let line;
        if (this.json) {
            line = JSON.stringify({ timestamp, level: name, target: "converge_sdk", message, ...fields });
        }
        else {
            const extra = fields
                ? Object.entries(fields)
                    .map(([k, v]) => ` ${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
                    .join("")
                : "";
            line = `${timestamp} ${name} converge_sdk: ${message}${extra}`;
        }
        process.stderr.write(`${line}\n`);
    }
    debug(message, fields) {
        this.write(0, message, fields);
    }
    info(message, fields) {
        this.write(1, message, fields);
    }
    warn(message, fields) {
        this.write(2, message, fields);
    }
    error(message, fields) {
        this.write(3, message, fields);
    }
}
let current = new StderrLogger(LEVELS.warn, false);
/** The logger the SDK writes to (whatever `setLogger` or `initLogging` installed last). */
export const log = {
    debug: (m, f) => current.debug(m, f),
    info: (m, f) => current.info(m, f),
    warn: (m, f) => current.warn(m, f),
    error: (m, f) => current.error(m, f),
};
/** Sends the SDK's log lines to `logger`. */
export function setLogger(logger) {
    current = logger;
}
/**
 * Logs to stderr per `LOG_LEVEL` (default info; trace, debug, info, warn, warning or error;
 * a Rust-style directive list such as `info,converge=debug` uses its first bare level) and
 * `LOG_FORMAT` (`text`, the default, or `json`). A malformed value throws ConfigError.
 */
export function initLogging(env = process.env) {
    const level = (env["LOG_LEVEL"] || "info").trim().toLowerCase();
    const bare = level.split(",").filter((p) => p && !p.includes("="));
    const first = bare[0];
    if (first === undefined || !(first in LEVELS)) {
        throw ConfigError.invalid("LOG_LEVEL", level, `expected one of ${Object.keys(LEVELS).join(", ")}`);
    }
    const format = (env["LOG_FORMAT"] || "text").trim();
    if (format !== "text" && format !== "json") {
        throw ConfigError.invalid("LOG_FORMAT", format, "expected json or text");
    }
    current = new StderrLogger(LEVELS[first], format === "json");
}
//# sourceMappingURL=logs.js.map