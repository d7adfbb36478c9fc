/**
 * The broker side of the paged descendant read: a session's connection, kept open while a
 * ROLLUP handler whose task arrived on it may still page, and the `Subtree` that calls
 * ListDescendants on it under the task's lease.
 *
 * @module
 */
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { MalformedTask, resourceFromPb } from "../convert.js";
import { Subtree } from "../descendants.js";
import { TransientError } from "../errors.js";
import * as pb from "../gen/converge/worker/v1/worker_pb.js";
import { describeError, isServiceError, methods, unary } from "./transport.js";
/** Bound on one ListDescendants call, milliseconds. */
export const PAGE_TIMEOUT_MS = 30_000;
/**
 * One session's client and the metadata its calls carry (the bearer token read at connect).
 *
 * Guarantees: the client is closed once, after the session has ended (`end`) and every
 * `hold` has been released, so a ROLLUP handler paging through its descendants keeps the
 * connection its task arrived on when the stream drops (handlers outlive their session).
 */
export class Connection {
    client;
    metadata;
    holds = 0;
    ended = false;
    closed = false;
    constructor(client, metadata) {
        this.client = client;
        this.metadata = metadata;
    }
    /** Keeps the client open until the returned release is called (a second call is a no-op). */
    hold() {
        this.holds += 1;
        let released = false;
        return () => {
            if (released) {
                return;
            }
            released = true;
            this.holds -= 1;
            if (this.ended && this.holds === 0) {
                this.close();
            }
        };
    }
    /** The session is over: closes the client now, or at the last release. */
    end() {
        this.ended = true;
        if (this.holds === 0) {
            this.close();
        }
    }
    close() {
        if (!this.closed) {
            this.closed = true;
            this.client.close();
        }
    }
}
/**
 * A ROLLUP task's descendants, paged with ListDescendants on the connection the task
 * arrived on, under its lease (resource_id, lease_token, claim_epoch).
 */
export class BrokerSubtree extends Subtree {
    conn;
    signal;
    resourceId;
    leaseToken;
    claimEpoch;
    constructor(conn, task, signal) {
        super();
        this.conn = conn;
        this.signal = signal;
        this.resourceId = task.resourceId;
        this.leaseToken = task.leaseToken;
        this.claimEpoch = task.claimEpoch;
    }
    /** One ListDescendants call; any failure is a TransientError (the task is retried). */
    async page(token, pageSize) {
        const req = create(pb.ListDescendantsRequestSchema, {
            resourceId: this.resourceId,
            leaseToken: this.leaseToken,
            claimEpoch: this.claimEpoch,
            pageToken: token,
            pageSize,
        });
        let resp;
        try {
            resp = await unary(this.conn.client, methods.listDescendants, req, this.conn.metadata, PAGE_TIMEOUT_MS, this.signal);
        }
        catch (e) {
            const why = isServiceError(e) && e.code === grpc.status.FAILED_PRECONDITION
                ? `the task's lease is gone (cancelled, superseded or expired): ${e.details}`
                : `the broker answered ${describeError(e)}`;
            throw new TransientError(`reading descendants failed: ${why}`);
        }
        try {
            return { rows: resp.descendants.map((d) => resourceFromPb(d, "descendant")), next: resp.nextPageToken };
        }
        catch (e) {
            if (e instanceof MalformedTask) {
                throw new TransientError(`reading descendants failed: ${e.message}`);
            }
            throw e;
        }
    }
    toString() {
        return `Subtree(broker, lease ${this.leaseToken})`;
    }
}
//# sourceMappingURL=subtree.js.map