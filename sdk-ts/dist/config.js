/**
 * `WorkerConfig`: the worker's typed configuration, parsed once from the environment.
 *
 * Reads the same variables as the Rust, Python and Go SDKs: `BROKER_ADDR` (required: one
 * broker or a comma-separated list, dialled in order with failover), `WORKER_MAX_PARALLEL`,
 * `WORKER_DRAIN_TIMEOUT`, `WORKER_KINDS` and `WORKER_NAME`, the transport-security ones
 * (`WORKER_TOKEN` or `WORKER_TOKEN_FILE`, `BROKER_CA_FILE`, `WORKER_CERT_FILE` +
 * `WORKER_KEY_FILE`), `GRPC_MAX_MESSAGE_BYTES` and `GRPC_COMPRESSION`. A malformed value is a `ConfigError`
 * naming the variable, never a silent default; an empty variable counts as unset. The token
 * never appears in a log line, an error message or the config's JSON/inspect form.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { inspect } from "node:util";
import { ConfigError } from "./errors.js";
/** Default number of tasks run at once. */
export const DEFAULT_MAX_PARALLEL = 16;
/** Default milliseconds allowed for in-flight work at shutdown. */
export const DEFAULT_DRAIN_TIMEOUT_MS = 50_000;
/** Default milliseconds between coalesced task heartbeats. */
export const DEFAULT_HEARTBEAT_EVERY_MS = 5_000;
/** Default milliseconds between readiness polls. */
export const DEFAULT_READINESS_POLL_MS = 2_000;
/** Default first reconnect (and config-prime) backoff, milliseconds. */
export const DEFAULT_RECONNECT_MIN_MS = 1_000;
/**
 * The longest wait between reconnect (or config-prime) attempts, jitter included, and the
 * most `reconnectMaxMs` may be: a broker that comes back, or another broker of the list, is
 * found within seconds rather than after a long sleep.
 */
export const RECONNECT_CAP_MS = 5_000;
/** Default reconnect (and config-prime) backoff ceiling: `RECONNECT_CAP_MS`. */
export const DEFAULT_RECONNECT_MAX_MS = RECONNECT_CAP_MS;
/** Upper bound of `maxParallel` (it travels as a uint32). */
export const MAX_PARALLEL_LIMIT = 1 << 20;
/** Default largest gRPC message either side accepts (the broker's default too): 64 MiB. */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/** The most `GRPC_MAX_MESSAGE_BYTES` may be: 512 MiB. */
export const MAX_MESSAGE_BYTES_LIMIT = 512 * 1024 * 1024;
const COMPRESSIONS = ["gzip", "none"];
const DURATION = /^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ms|s|m|h)?$/;
const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
/**
 * Parses "45s", "500ms", "2m", "1h" or a bare number of seconds into milliseconds.
 * Throws an Error with a reason on anything else (negative, unknown unit, out of range).
 */
export function parseDuration(value) {
    const s = value.trim();
    const m = DURATION.exec(s);
    if (m === null) {
        if (/^[0-9.]+[a-zA-Z]+$/.test(s)) {
            throw new Error(`${JSON.stringify(s)} has an unknown unit (use ms, s, m or h)`);
        }
        throw new Error(`${JSON.stringify(s)} is not a duration (e.g. 30s, 500ms, 2m)`);
    }
    const ms = Number(m[1]) * (UNIT_MS[m[2] ?? "s"] ?? 1_000);
    if (!Number.isFinite(ms) || ms > 1e12) {
        throw new Error(`${JSON.stringify(s)} is out of range`);
    }
    return ms;
}
/** `<hostname>-<pid>`, the default display name of a worker. */
export function defaultWorkerName() {
    const host = (process.env["HOSTNAME"] ?? "").trim() || hostname().trim() || "worker";
    return `${host}-${process.pid}`;
}
const ADDR_FORMS = "expected https://host:port, http://host:port or host:port";
function stripScheme(addr) {
    if (addr.startsWith("https://")) {
        return addr.slice("https://".length);
    }
    if (addr.startsWith("http://")) {
        return addr.slice("http://".length);
    }
    return addr;
}
/** Why `addr` is not a usable broker address, or undefined. */
function targetProblem(addr) {
    let rest = stripScheme(addr);
    if (rest.includes("://")) {
        return ADDR_FORMS;
    }
    rest = rest.replace(/\/+$/, "");
    if (!rest || rest.includes("/")) {
        return ADDR_FORMS;
    }
    const colon = rest.lastIndexOf(":");
    if (colon < 0 || colon === 0) {
        return "missing port, e.g. http://127.0.0.1:9090";
    }
    const port = rest.slice(colon + 1);
    if (!/^[0-9]+$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
        return `port ${JSON.stringify(port)} is not a number in 1..65535`;
    }
    return undefined;
}
/** A list entry's problem, numbered (and quoted) when the list has more than one. */
function entryReason(i, n, entry, reason) {
    if (n === 1) {
        return reason;
    }
    return `entry ${i + 1} of ${n}${entry ? ` (${JSON.stringify(entry)})` : ""}: ${reason}`;
}
function checkOneScheme(variable, shown, addrs) {
    const tls = addrs.filter((a) => a.startsWith("https://")).length;
    if (tls > 0 && tls < addrs.length) {
        throw ConfigError.invalid(variable, shown, "mixes https:// (TLS) and plaintext (http:// or bare host:port) brokers: use one scheme for every entry");
    }
}
/**
 * Splits a comma-separated broker list (`BROKER_ADDR`) into its addresses, in order.
 *
 * A bare `host:port` becomes `http://host:port` (plaintext h2c). An empty entry is an error
 * rather than skipped (`a:1,,b:1` usually means a templated address came out empty), and
 * TLS (`https://`) and plaintext entries cannot be mixed: one set of TLS files and one token
 * policy serve the whole list. Throws ConfigError naming `variable`.
 */
export function parseBrokerAddrs(variable, raw) {
    const shown = raw.trim();
    const entries = shown.split(",").map((e) => e.trim());
    const addrs = entries.map((entry, i) => {
        if (!entry) {
            throw ConfigError.invalid(variable, shown, entryReason(i, entries.length, entry, "is empty: separate broker addresses with single commas"));
        }
        const addr = entry.includes("://") ? entry : `http://${entry}`;
        const reason = targetProblem(addr);
        if (reason !== undefined) {
            throw ConfigError.invalid(variable, shown, entryReason(i, entries.length, entry, reason));
        }
        return addr;
    });
    checkOneScheme(variable, shown, addrs);
    return addrs;
}
/** The gRPC target (`host:port`) of a checked broker address. */
export function brokerTarget(addr) {
    return stripScheme(addr.trim()).replace(/\/+$/, "");
}
/** How a worker connects and how much work it takes (durations in milliseconds). */
export class WorkerConfig {
    /**
     * The brokers (`BROKER_ADDR`, comma-separated), dialled in order: the worker moves on to
     * the next on a connect failure and whenever a stream ends, wrapping around. Each is
     * `https://host:port` (TLS, server name = that entry's host), `http://host:port` or
     * `host:port` (h2c); TLS and plaintext entries cannot be mixed.
     */
    brokerAddrs = [];
    /** Most tasks run at once (`WORKER_MAX_PARALLEL`; `Subscribe.max_inflight`). */
    maxParallel = DEFAULT_MAX_PARALLEL;
    /** How long shutdown waits for in-flight work (`WORKER_DRAIN_TIMEOUT`). */
    drainTimeoutMs = DEFAULT_DRAIN_TIMEOUT_MS;
    /** Serve only these kinds of the registered providers (`WORKER_KINDS`). */
    kinds = undefined;
    /** Advisory display name (`WORKER_NAME`, default `<hostname>-<pid>`). */
    workerName = defaultWorkerName();
    /** Milliseconds between coalesced heartbeats of running tasks. */
    heartbeatEveryMs = DEFAULT_HEARTBEAT_EVERY_MS;
    /** Milliseconds between `Provider.ready` polls. */
    readinessPollMs = DEFAULT_READINESS_POLL_MS;
    /** First reconnect backoff; it doubles after each failed round of the broker list. */
    reconnectMinMs = DEFAULT_RECONNECT_MIN_MS;
    /** Reconnect backoff ceiling; at most `RECONNECT_CAP_MS`, which no jittered wait exceeds. */
    reconnectMaxMs = DEFAULT_RECONNECT_MAX_MS;
    /** Largest gRPC message sent or received (`GRPC_MAX_MESSAGE_BYTES`, up to 512 MiB). */
    maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES;
    /** Whether sent messages are gzipped (`GRPC_COMPRESSION`: `gzip` or `none`, the default). */
    compression = "none";
    /** Bearer token sent as `authorization` metadata on every RPC (`WORKER_TOKEN`). */
    token = undefined;
    /** File holding the token, re-read at every (re)connect (`WORKER_TOKEN_FILE`). */
    tokenFile = undefined;
    /** PEM roots to trust for an `https://` broker (`BROKER_CA_FILE`; default: Node's roots). */
    caFile = undefined;
    /** PEM client certificate chain for mutual TLS (`WORKER_CERT_FILE`; needs `keyFile`). */
    certFile = undefined;
    /** PEM private key of `certFile` (`WORKER_KEY_FILE`). */
    keyFile = undefined;
    constructor(init) {
        Object.assign(this, init);
    }
    /** Reads the worker variables from `env` (default: the process environment). */
    static fromEnv(env = process.env) {
        const get = (name) => {
            const v = env[name]?.trim();
            return v ? v : undefined;
        };
        const addr = get("BROKER_ADDR");
        if (addr === undefined) {
            throw ConfigError.missing("BROKER_ADDR");
        }
        const cfg = new WorkerConfig({ brokerAddrs: parseBrokerAddrs("BROKER_ADDR", addr) });
        const maxParallel = get("WORKER_MAX_PARALLEL");
        if (maxParallel !== undefined) {
            cfg.maxParallel = parseBounded("WORKER_MAX_PARALLEL", maxParallel, 1, MAX_PARALLEL_LIMIT);
        }
        const drain = get("WORKER_DRAIN_TIMEOUT");
        if (drain !== undefined) {
            try {
                cfg.drainTimeoutMs = parseDuration(drain);
            }
            catch (e) {
                throw ConfigError.invalid("WORKER_DRAIN_TIMEOUT", drain, e.message);
            }
        }
        const kinds = get("WORKER_KINDS");
        if (kinds !== undefined) {
            cfg.kinds = kinds
                .split(",")
                .map((k) => k.trim())
                .filter((k) => k);
            if (cfg.kinds.length === 0) {
                throw ConfigError.invalid("WORKER_KINDS", kinds, "expected a comma-separated list of kinds");
            }
        }
        cfg.workerName = get("WORKER_NAME") ?? cfg.workerName;
        const maxMessage = get("GRPC_MAX_MESSAGE_BYTES");
        if (maxMessage !== undefined) {
            cfg.maxMessageBytes = parseBounded("GRPC_MAX_MESSAGE_BYTES", maxMessage, 1, MAX_MESSAGE_BYTES_LIMIT);
        }
        const compression = get("GRPC_COMPRESSION");
        if (compression !== undefined) {
            // `identity` is gRPC's own name for no compression.
            const c = compression.toLowerCase() === "identity" ? "none" : compression.toLowerCase();
            if (!COMPRESSIONS.includes(c)) {
                throw ConfigError.invalid("GRPC_COMPRESSION", compression, "expected gzip or none");
            }
            cfg.compression = c;
        }
        cfg.token = get("WORKER_TOKEN");
        cfg.tokenFile = get("WORKER_TOKEN_FILE");
        cfg.caFile = get("BROKER_CA_FILE");
        cfg.certFile = get("WORKER_CERT_FILE");
        cfg.keyFile = get("WORKER_KEY_FILE");
        cfg.checkTransport();
        return cfg;
    }
    /** The gRPC targets (`host:port`) of the brokers, in dialling order. */
    get targets() {
        return this.brokerAddrs.map(brokerTarget);
    }
    /** Whether the brokers are dialled over TLS (`https://` addresses). */
    get tls() {
        return this.brokerAddrs[0]?.trim().startsWith("https://") ?? false;
    }
    /**
     * The bearer token: `token`, or `tokenFile` read now (the runtime calls this at every
     * connect). Throws ConfigError naming the variable, never showing the token.
     */
    readToken() {
        if (this.token !== undefined) {
            checkToken("WORKER_TOKEN", "WORKER_TOKEN", this.token);
            return this.token;
        }
        if (this.tokenFile === undefined) {
            return undefined;
        }
        const variable = "WORKER_TOKEN_FILE";
        let token;
        try {
            token = new TextDecoder("utf-8", { fatal: true }).decode(readFile(variable, this.tokenFile)).trim();
        }
        catch (e) {
            if (e instanceof ConfigError) {
                throw e;
            }
            throw ConfigError.invalid(variable, this.tokenFile, "the file is not UTF-8 text");
        }
        checkToken(variable, `${variable}=${JSON.stringify(this.tokenFile)}`, token);
        return token;
    }
    /** The TLS files read now (null where unset). */
    tlsMaterial() {
        return {
            roots: this.caFile === undefined
                ? null
                : readPem("BROKER_CA_FILE", this.caFile, "-----BEGIN CERTIFICATE-----", "CERTIFICATE"),
            key: this.keyFile === undefined ? null : readPem("WORKER_KEY_FILE", this.keyFile, "PRIVATE KEY-----", "PRIVATE KEY"),
            chain: this.certFile === undefined
                ? null
                : readPem("WORKER_CERT_FILE", this.certFile, "-----BEGIN CERTIFICATE-----", "CERTIFICATE"),
        };
    }
    /**
     * Checks the token and TLS settings and reads their files once, so a mistake is a loud
     * error at start rather than an endless reconnect loop.
     */
    checkTransport() {
        if (this.token !== undefined && this.tokenFile !== undefined) {
            throw new ConfigError("WORKER_TOKEN", "WORKER_TOKEN and WORKER_TOKEN_FILE are both set; set only one");
        }
        if ((this.certFile === undefined) !== (this.keyFile === undefined)) {
            const [have, lack] = this.certFile !== undefined ? ["WORKER_CERT_FILE", "WORKER_KEY_FILE"] : ["WORKER_KEY_FILE", "WORKER_CERT_FILE"];
            throw new ConfigError(lack, `${have} is set but ${lack} is not; a client certificate needs both`);
        }
        if (!this.tls) {
            for (const [variable, value] of [
                ["BROKER_CA_FILE", this.caFile],
                ["WORKER_CERT_FILE", this.certFile],
                ["WORKER_KEY_FILE", this.keyFile],
            ]) {
                if (value !== undefined) {
                    throw new ConfigError(variable, `${variable} is set but BROKER_ADDR=${JSON.stringify(this.brokerAddrs.join(","))} is plaintext; ` +
                        "TLS files need BROKER_ADDR=https://host:port brokers");
                }
            }
        }
        this.readToken();
        this.tlsMaterial();
    }
    /** Checks the values the runtime relies on; throws ConfigError naming the field. */
    validate() {
        if (!Array.isArray(this.brokerAddrs) || this.brokerAddrs.length === 0) {
            throw ConfigError.invalid("brokerAddrs", this.brokerAddrs, "expected a non-empty list of broker addresses");
        }
        const shown = this.brokerAddrs.join(",");
        this.brokerAddrs.forEach((addr, i) => {
            const reason = targetProblem(addr.trim());
            if (reason !== undefined) {
                throw ConfigError.invalid("brokerAddrs", shown, entryReason(i, this.brokerAddrs.length, addr, reason));
            }
        });
        checkOneScheme("brokerAddrs", shown, this.brokerAddrs.map((a) => a.trim()));
        this.checkTransport();
        if (!Number.isInteger(this.maxParallel) || this.maxParallel < 1 || this.maxParallel > MAX_PARALLEL_LIMIT) {
            throw ConfigError.invalid("maxParallel", this.maxParallel, `must be between 1 and ${MAX_PARALLEL_LIMIT}`);
        }
        for (const name of ["heartbeatEveryMs", "readinessPollMs", "reconnectMinMs"]) {
            if (!(this[name] > 0)) {
                throw ConfigError.invalid(name, this[name], "must be positive");
            }
        }
        if (!(this.drainTimeoutMs >= 0)) {
            throw ConfigError.invalid("drainTimeoutMs", this.drainTimeoutMs, "must not be negative");
        }
        if (!(this.reconnectMaxMs >= this.reconnectMinMs)) {
            throw ConfigError.invalid("reconnectMaxMs", this.reconnectMaxMs, "must not be below reconnectMinMs");
        }
        if (this.reconnectMaxMs > RECONNECT_CAP_MS) {
            throw ConfigError.invalid("reconnectMaxMs", this.reconnectMaxMs, `must not exceed ${RECONNECT_CAP_MS}ms, so an outage is noticed to be over within seconds`);
        }
        if (!Number.isInteger(this.maxMessageBytes) ||
            this.maxMessageBytes < 1 ||
            this.maxMessageBytes > MAX_MESSAGE_BYTES_LIMIT) {
            throw ConfigError.invalid("maxMessageBytes", this.maxMessageBytes, `must be between 1 and ${MAX_MESSAGE_BYTES_LIMIT}`);
        }
        if (!COMPRESSIONS.includes(this.compression)) {
            throw ConfigError.invalid("compression", this.compression, "expected gzip or none");
        }
    }
    /** The config without the token, for logs and `JSON.stringify`. */
    toJSON() {
        return { ...this, token: this.token === undefined ? undefined : "***" };
    }
    /** `util.inspect` (console.log) hides the token too. */
    [inspect.custom]() {
        return `WorkerConfig ${inspect(this.toJSON())}`;
    }
}
function parseBounded(variable, v, lo, hi) {
    if (!/^[0-9]+$/.test(v)) {
        throw ConfigError.invalid(variable, v, "expected a positive integer");
    }
    const n = Number(v);
    if (n < lo || n > hi) {
        throw ConfigError.invalid(variable, v, `must be between ${lo} and ${hi}`);
    }
    return n;
}
function readFile(variable, path) {
    try {
        return readFileSync(path);
    }
    catch (e) {
        const code = e.code;
        const why = code === "ENOENT" ? "No such file or directory" : code === "EACCES" ? "Permission denied" : code;
        throw ConfigError.invalid(variable, path, `cannot read the file: ${why ?? String(e)}`);
    }
}
function readPem(variable, path, marker, label) {
    const data = readFile(variable, path);
    if (!data.includes(marker)) {
        throw ConfigError.invalid(variable, path, `the file holds no PEM ${label} block`);
    }
    return data;
}
/**
 * Rejects a token that cannot travel in a header; `where` names its source (the variable,
 * or the variable and file path) and the message never shows the token.
 */
function checkToken(variable, where, token) {
    if (!token) {
        throw new ConfigError(variable, `${where} is empty`);
    }
    for (let i = 0; i < token.length; i++) {
        const c = token.charCodeAt(i);
        if (c < 0x21 || c > 0x7e) {
            throw new ConfigError(variable, `${where}: the token holds a space, a control or a non-ASCII character (a bearer token is printable ASCII)`);
        }
    }
}
//# sourceMappingURL=config.js.map