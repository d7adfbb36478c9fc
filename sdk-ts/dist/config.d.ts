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
import { inspect } from "node:util";
/** Default number of tasks run at once. */
export declare const DEFAULT_MAX_PARALLEL = 16;
/** Default milliseconds allowed for in-flight work at shutdown. */
export declare const DEFAULT_DRAIN_TIMEOUT_MS = 50000;
/** Default milliseconds between coalesced task heartbeats. */
export declare const DEFAULT_HEARTBEAT_EVERY_MS = 5000;
/** Default milliseconds between readiness polls. */
export declare const DEFAULT_READINESS_POLL_MS = 2000;
/** Default first reconnect (and config-prime) backoff, milliseconds. */
export declare const DEFAULT_RECONNECT_MIN_MS = 1000;
/**
 * The longest wait between reconnect (or config-prime) attempts, jitter included, and the
 * most `reconnectMaxMs` may be: a broker that comes back, or another broker of the list, is
 * found within seconds rather than after a long sleep.
 */
export declare const RECONNECT_CAP_MS = 5000;
/** Default reconnect (and config-prime) backoff ceiling: `RECONNECT_CAP_MS`. */
export declare const DEFAULT_RECONNECT_MAX_MS = 5000;
/** Upper bound of `maxParallel` (it travels as a uint32). */
export declare const MAX_PARALLEL_LIMIT: number;
/** Default largest gRPC message either side accepts (the broker's default too): 64 MiB. */
export declare const DEFAULT_MAX_MESSAGE_BYTES: number;
/** The most `GRPC_MAX_MESSAGE_BYTES` may be: 512 MiB. */
export declare const MAX_MESSAGE_BYTES_LIMIT: number;
/**
 * How the worker's messages travel (`GRPC_COMPRESSION`): `gzip` compresses what it sends
 * (the broker then answers in gzip too), `none` sends plain frames.
 */
export type Compression = "gzip" | "none";
/**
 * Parses "45s", "500ms", "2m", "1h" or a bare number of seconds into milliseconds.
 * Throws an Error with a reason on anything else (negative, unknown unit, out of range).
 */
export declare function parseDuration(value: string): number;
/** `<hostname>-<pid>`, the default display name of a worker. */
export declare function defaultWorkerName(): string;
/**
 * Splits a comma-separated broker list (`BROKER_ADDR`) into its addresses, in order.
 *
 * A bare `host:port` becomes `http://host:port` (plaintext h2c). An empty entry is an error
 * rather than skipped (`a:1,,b:1` usually means a templated address came out empty), and
 * TLS (`https://`) and plaintext entries cannot be mixed: one set of TLS files and one token
 * policy serve the whole list. Throws ConfigError naming `variable`.
 */
export declare function parseBrokerAddrs(variable: string, raw: string): string[];
/** The gRPC target (`host:port`) of a checked broker address. */
export declare function brokerTarget(addr: string): string;
/** The TLS material read now, for `grpc.credentials.createSsl`. */
export interface TlsMaterial {
    roots: Buffer | null;
    key: Buffer | null;
    chain: Buffer | null;
}
/** The fields of a `WorkerConfig`, for its constructor (`brokerAddrs` required). */
export type WorkerConfigInit = Pick<WorkerConfig, "brokerAddrs"> & Partial<Omit<WorkerConfig, "brokerAddrs" | "targets" | "tls">>;
/** How a worker connects and how much work it takes (durations in milliseconds). */
export declare class WorkerConfig {
    /**
     * The brokers (`BROKER_ADDR`, comma-separated), dialled in order: the worker moves on to
     * the next on a connect failure and whenever a stream ends, wrapping around. Each is
     * `https://host:port` (TLS, server name = that entry's host), `http://host:port` or
     * `host:port` (h2c); TLS and plaintext entries cannot be mixed.
     */
    brokerAddrs: string[];
    /** Most tasks run at once (`WORKER_MAX_PARALLEL`; `Subscribe.max_inflight`). */
    maxParallel: number;
    /** How long shutdown waits for in-flight work (`WORKER_DRAIN_TIMEOUT`). */
    drainTimeoutMs: number;
    /** Serve only these kinds of the registered providers (`WORKER_KINDS`). */
    kinds: string[] | undefined;
    /** Advisory display name (`WORKER_NAME`, default `<hostname>-<pid>`). */
    workerName: string;
    /** Milliseconds between coalesced heartbeats of running tasks. */
    heartbeatEveryMs: number;
    /** Milliseconds between `Provider.ready` polls. */
    readinessPollMs: number;
    /** First reconnect backoff; it doubles after each failed round of the broker list. */
    reconnectMinMs: number;
    /** Reconnect backoff ceiling; at most `RECONNECT_CAP_MS`, which no jittered wait exceeds. */
    reconnectMaxMs: number;
    /** Largest gRPC message sent or received (`GRPC_MAX_MESSAGE_BYTES`, up to 512 MiB). */
    maxMessageBytes: number;
    /** Whether sent messages are gzipped (`GRPC_COMPRESSION`: `gzip` or `none`, the default). */
    compression: Compression;
    /** Bearer token sent as `authorization` metadata on every RPC (`WORKER_TOKEN`). */
    token: string | undefined;
    /** File holding the token, re-read at every (re)connect (`WORKER_TOKEN_FILE`). */
    tokenFile: string | undefined;
    /** PEM roots to trust for an `https://` broker (`BROKER_CA_FILE`; default: Node's roots). */
    caFile: string | undefined;
    /** PEM client certificate chain for mutual TLS (`WORKER_CERT_FILE`; needs `keyFile`). */
    certFile: string | undefined;
    /** PEM private key of `certFile` (`WORKER_KEY_FILE`). */
    keyFile: string | undefined;
    constructor(init: WorkerConfigInit);
    /** Reads the worker variables from `env` (default: the process environment). */
    static fromEnv(env?: Record<string, string | undefined>): WorkerConfig;
    /** The gRPC targets (`host:port`) of the brokers, in dialling order. */
    get targets(): string[];
    /** Whether the brokers are dialled over TLS (`https://` addresses). */
    get tls(): boolean;
    /**
     * The bearer token: `token`, or `tokenFile` read now (the runtime calls this at every
     * connect). Throws ConfigError naming the variable, never showing the token.
     */
    readToken(): string | undefined;
    /** The TLS files read now (null where unset). */
    tlsMaterial(): TlsMaterial;
    /**
     * Checks the token and TLS settings and reads their files once, so a mistake is a loud
     * error at start rather than an endless reconnect loop.
     */
    checkTransport(): void;
    /** Checks the values the runtime relies on; throws ConfigError naming the field. */
    validate(): void;
    /** The config without the token, for logs and `JSON.stringify`. */
    toJSON(): Record<string, unknown>;
    /** `util.inspect` (console.log) hides the token too. */
    [inspect.custom](): string;
}
