/**
 * Exponential reconnect backoff with ±25 % jitter applied to the sleep only, never above
 * the ceiling.
 *
 * @module
 */
/** Doubles from `lo` to `hi` milliseconds; only the returned sleep is jittered. */
export class Backoff {
    lo;
    random;
    hi;
    current;
    constructor(lo, hi, random = Math.random) {
        this.lo = lo;
        this.random = random;
        this.hi = Math.max(hi, lo);
        this.current = lo;
    }
    /** Back to the minimum, after a healthy session or a recovery. */
    reset() {
        this.current = this.lo;
    }
    /**
     * The next sleep, escalating the raw value for the one after: uniform in
     * [current × 0.75, current × 1.25], the upper end clipped at `hi`. Clipping the range
     * rather than the drawn value keeps the sleeps at the ceiling spread out (workers that
     * lost the same broker do not all come back in the same instant) and never above it.
     */
    nextDelay() {
        const base = this.current;
        this.current = Math.min(this.current * 2, this.hi);
        const lo = base * 0.75;
        const hi = Math.min(base * 1.25, this.hi);
        return lo + (hi - lo) * this.random();
    }
}
//# sourceMappingURL=backoff.js.map