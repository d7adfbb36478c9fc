/**
 * The broker side of the paged descendant read: a session's connection, kept open while a
 * ROLLUP handler whose task arrived on it may still page, and the `Subtree` that calls
 * ListDescendants on it under the task's lease.
 *
 * @module
 */
import * as grpc from "@grpc/grpc-js";
import { type Page, Subtree } from "../descendants.js";
import * as pb from "../gen/converge/worker/v1/worker_pb.js";
/** Bound on one ListDescendants call, milliseconds. */
export declare const PAGE_TIMEOUT_MS = 30000;
/**
 * One session's client and the metadata its calls carry (the bearer token read at connect).
 *
 * Guarantees: the client is closed once, after the session has ended (`end`) and every
 * `hold` has been released, so a ROLLUP handler paging through its descendants keeps the
 * connection its task arrived on when the stream drops (handlers outlive their session).
 */
export declare class Connection {
    readonly client: grpc.Client;
    readonly metadata: grpc.Metadata;
    private holds;
    private ended;
    private closed;
    constructor(client: grpc.Client, metadata: grpc.Metadata);
    /** Keeps the client open until the returned release is called (a second call is a no-op). */
    hold(): () => void;
    /** The session is over: closes the client now, or at the last release. */
    end(): void;
    private close;
}
/**
 * A ROLLUP task's descendants, paged with ListDescendants on the connection the task
 * arrived on, under its lease (resource_id, lease_token, claim_epoch).
 */
export declare class BrokerSubtree extends Subtree {
    private readonly conn;
    private readonly signal?;
    private readonly resourceId;
    private readonly leaseToken;
    private readonly claimEpoch;
    constructor(conn: Connection, task: pb.StageTask, signal?: AbortSignal | undefined);
    /** One ListDescendants call; any failure is a TransientError (the task is retried). */
    page(token: Uint8Array, pageSize: number): Promise<Page>;
    toString(): string;
}
