/**
 * Small waiting primitives the runtime needs on Node's one event loop: an abortable
 * counting semaphore, an abortable sleep, and a flag a loop can wait on.
 *
 * @module
 */

/** A counting semaphore whose waiters are served in arrival order. */
export class Semaphore {
  private readonly waiters: Array<() => void> = [];

  constructor(private permits: number) {}

  /** Whether no permit is free now. */
  get locked(): boolean {
    return this.permits === 0;
  }

  /**
   * Takes a permit: resolves true once one is held, or false when `signal` aborts first
   * (then no permit is held).
   */
  acquire(signal?: AbortSignal): Promise<boolean> {
    if (signal?.aborted) {
      return Promise.resolve(false);
    }
    if (this.permits > 0) {
      this.permits -= 1;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const grant = (): void => {
        signal?.removeEventListener("abort", onAbort);
        resolve(true);
      };
      const onAbort = (): void => {
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
  release(): void {
    const next = this.waiters.shift();
    if (next !== undefined) {
      next();
    } else {
      this.permits += 1;
    }
  }
}

/** Resolves after `ms`, or at once when `signal` aborts (never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) {
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const done = (): void => {
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
  private waiters: Array<() => void> = [];

  constructor(private value = false) {}

  get isSet(): boolean {
    return this.value;
  }

  set(): void {
    this.value = true;
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) {
      w();
    }
  }

  clear(): void {
    this.value = false;
  }

  /** Resolves true once set, or false after `timeoutMs` (none: no limit). */
  wait(timeoutMs?: number): Promise<boolean> {
    if (this.value) {
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const waiter = (): void => {
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
