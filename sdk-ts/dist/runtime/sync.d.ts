/**
 * Small waiting primitives the runtime needs on Node's one event loop: an abortable
 * counting semaphore, an abortable sleep, and a flag a loop can wait on.
 *
 * @module
 */
/** A counting semaphore whose waiters are served in arrival order. */
export declare class Semaphore {
    private permits;
    private readonly waiters;
    constructor(permits: number);
    /** Whether no permit is free now. */
    get locked(): boolean;
    /**
     * Takes a permit: resolves true once one is held, or false when `signal` aborts first
     * (then no permit is held).
     */
    acquire(signal?: AbortSignal): Promise<boolean>;
    /** Returns a permit, handing it straight to the oldest waiter if there is one. */
    release(): void;
}
/** Resolves after `ms`, or at once when `signal` aborts (never rejects). */
export declare function sleep(ms: number, signal?: AbortSignal): Promise<void>;
/** A level that waiters are woken on whenever it is set. */
export declare class Flag {
    private value;
    private waiters;
    constructor(value?: boolean);
    get isSet(): boolean;
    set(): void;
    clear(): void;
    /** Resolves true once set, or false after `timeoutMs` (none: no limit). */
    wait(timeoutMs?: number): Promise<boolean>;
}
