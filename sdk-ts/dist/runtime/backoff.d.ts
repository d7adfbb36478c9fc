/**
 * Exponential reconnect backoff with ±25 % jitter applied to the sleep only, never above
 * the ceiling.
 *
 * @module
 */
/** Doubles from `lo` to `hi` milliseconds; only the returned sleep is jittered. */
export declare class Backoff {
    readonly lo: number;
    private readonly random;
    readonly hi: number;
    current: number;
    constructor(lo: number, hi: number, random?: () => number);
    /** Back to the minimum, after a healthy session or a recovery. */
    reset(): void;
    /**
     * The next sleep, escalating the raw value for the one after: uniform in
     * [current × 0.75, current × 1.25], the upper end clipped at `hi`. Clipping the range
     * rather than the drawn value keeps the sleeps at the ceiling spread out (workers that
     * lost the same broker do not all come back in the same instant) and never above it.
     */
    nextDelay(): number;
}
