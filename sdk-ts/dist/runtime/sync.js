/**
 * Small waiting primitives the runtime needs on Node's one event loop: an abortable
 * counting semaphore, an abortable sleep, and a flag a loop can wait on.
 *
 * @module
 */
/** A counting semaphore whose waiters are served in arrival order. */
export class Semaphore {
    permits;
    waiters = [];
    constructor(permits) {
        this.permits = permits;
    }
    /** Whether no permit is free now. */
    get locked() {
        return this.permits === 0;
    }
    /**
     * Takes a permit: resolves true once one is held, or false when `signal` aborts first
     * (then no permit is held).
     */
    acquire(signal) {
        if (signal?.aborted) {
            return Promise.resolve(false);
        }
        if (this.permits > 0) {
            this.permits -= 1;
            return Promise.resolve(true);
        }
        return new Promise((resolve) => {
            const grant = () => {
                signal?.removeEventListener("abort", onAbort);
                resolve(true);
            };
            const onAbort = () => {
                const i = this.waiters.indexOf(grant);
                if (i >= 0) {
                    this.waiters.splice(i, 1);
                }
                resolve(false);
            };
            this.waiters.push(grant);
            signal?.addEventListener("abort", onAbort, { once: true });
        });
    }
    /** Returns a permit, handing it straight to the oldest waiter if there is one. */
    release() {
        const next = this.waiters.shift();
        if (next !== undefined) {
            next();
        }
        else {
            this.permits += 1;
        }
    }
}
/** Resolves after `ms`, or at once when `signal` aborts (never rejects). */
export function sleep(ms, signal) {
    if (signal?.aborted) {
        return Promise.resolve();
    }
    return new Promise((resolve) => {
        const done = () => {
            clearTimeout(timer);
            signal?.removeEventListener("abort", done);
            resolve();
        };
        const timer = setTimeout(done, Math.max(0, ms));
        signal?.addEventListener("abort", done, { once: true });
    });
}
/** A level that waiters are woken on whenever it is set. */
export class Flag {
    value;
    waiters = [];
    constructor(value = false) {
        this.value = value;
    }
    get isSet() {
        return this.value;
    }
    set() {
        this.value = true;
        const ws = this.waiters;
        this.waiters = [];
        for (const w of ws) {
            w();
        }
    }
    clear() {
        this.value = false;
    }
    /** Resolves true once set, or false after `timeoutMs` (none: no limit). */
    wait(timeoutMs) {
        if (this.value) {
            return Promise.resolve(true);
        }
        return new Promise((resolve) => {
            let timer;
            const waiter = () => {
                if (timer !== undefined) {
                    clearTimeout(timer);
                }
                resolve(true);
            };
            this.waiters.push(waiter);
            if (timeoutMs !== undefined) {
                timer = setTimeout(() => {
                    this.waiters = this.waiters.filter((w) => w !== waiter);
                    resolve(false);
                }, timeoutMs);
            }
        });
    }
}
//# sourceMappingURL=sync.js.map