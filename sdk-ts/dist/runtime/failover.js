/**
 * Which broker of `BROKER_ADDR` to dial next, and how long to wait first.
 *
 * The list is walked in order, wrapping around, the way gRPC's connection backoff treats an
 * address list: an attempt that gets no stream moves straight on to the next address, and
 * only once every address has failed in a row does the worker sleep (one jittered backoff
 * per failed round, doubling to the ceiling). A stream that opened and later ended also
 * moves on to the next address, after one jittered wait so that the workers of a broker that
 * died or drained do not all land on the next one in the same instant.
 *
 * The backoff starts over when a stream opens after failures (a failover, or the one broker
 * back from an outage) and when an ended stream had outlived the current backoff. A broker
 * that keeps accepting streams and dropping them at once therefore still escalates. The same
 * rules as the Rust, Python and Go SDKs.
 *
 * @module
 */
import { Backoff } from "./backoff.js";
/** The dialling position in the broker list and the backoff shared across the list. */
export class Failover {
    count;
    /** The index of the address to dial now. */
    current = 0;
    /** Attempts in a row that got no stream (or no config) since the last success. */
    failures = 0;
    backoff;
    constructor(count, loMs, hiMs, random) {
        this.count = Math.max(count, 1);
        this.backoff = new Backoff(loMs, hiMs, random);
    }
    /**
     * A stream (or a config pull) succeeded on the current address. After failures this is a
     * recovery, so the backoff starts over: a stream lost soon after a failover is retried
     * within the minimum, not after the escalated wait of the outage.
     */
    succeeded() {
        if (this.failures > 0) {
            this.failures = 0;
            this.backoff.reset();
        }
    }
    /**
     * The attempt on the current address failed before a stream opened (no connection,
     * refused, bad credentials): moves on to the next address and returns the milliseconds to
     * wait before dialling it, 0 while this round still has untried addresses.
     */
    failed() {
        this.failures += 1;
        this.advance();
        return this.failures % this.count === 0 ? this.backoff.nextDelay() : 0;
    }
    /**
     * A stream that had opened on the current address ended after `livedMs`: moves on to the
     * next address and returns the jittered wait before dialling it.
     */
    ended(livedMs) {
        this.succeeded();
        if (livedMs > this.backoff.current) {
            this.backoff.reset();
        }
        this.advance();
        return this.backoff.nextDelay();
    }
    advance() {
        this.current = (this.current + 1) % this.count;
    }
}
//# sourceMappingURL=failover.js.map