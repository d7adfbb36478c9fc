/**
 * Running one task: admission, the concurrency permit, the deadline, error capture, and
 * turning the handler's result into a kept StageComplete.
 *
 * Each handler runs as its own promise owned by the worker, not by the stream, so a stream
 * drop never cancels a handler; only a CancelTask, the deadline or the end of shutdown
 * aborts its signal. A handler's permit is held until it really settles, so `maxParallel`
 * stays true even for a handler that overruns its deadline. A ROLLUP handler that may page
 * through its descendants holds the connection its task arrived on open until it settles
 * (see `Connection`).
 *
 * @module
 */
import { MalformedTask, echoOf, failComplete, requestFromTask, resultComplete, wireVersion, } from "../convert.js";
import { TaskCancelledError } from "../errors.js";
import { log } from "../logs.js";
import { KindVersion, Stage } from "../types.js";
import { BrokerSubtree } from "./subtree.js";
/** Calls `provider.work(req)`, capturing a synchronous throw, a rejection or a value. */
export async function invoke(provider, req) {
    try {
        return { ok: true, value: await provider.work(req) };
    }
    catch (error) {
        return { ok: false, error };
    }
}
/**
 * Takes in a task frame that arrived on `conn`. `refuse` (draining or shutting down)
 * answers it with a transient failure instead of running it.
 */
export function accept(shared, task, refuse, conn) {
    const key = { token: task.leaseToken, epoch: task.claimEpoch };
    const echo = echoOf(task);
    if (refuse !== undefined) {
        log.debug(`task ${key.token} refused: ${refuse}`);
        shared.finishUntracked(key, failComplete(echo, refuse, false));
        return;
    }
    const running = shared.admit(key);
    if (running === undefined) {
        return;
    }
    void runTask(shared, echo, task, running, conn).catch((e) => {
        // Nothing in runTask is meant to throw; should it, the task still gets an answer.
        log.error(`task ${key.token} failed inside the runtime`, { error: String(e) });
        shared.finish(key, failComplete(echo, `worker runtime error: ${String(e)}`, false));
    });
}
async function runTask(shared, echo, task, running, conn) {
    const key = running.key;
    const ms = Number(task.taskDeadlineMs);
    const deadline = ms > 0 ? new Date(Date.now() + ms) : undefined;
    const kv = new KindVersion(task.kind, wireVersion(task.kindVersion));
    const provider = shared.registry.find(kv.kind, kv.version);
    if (provider === undefined) {
        shared.finish(key, failComplete(echo, `no provider for ${kv} on this worker`, true));
        return;
    }
    const signal = running.controller.signal;
    let req;
    try {
        req = requestFromTask(task, { config: shared.configFor(kv), signal, deadline });
    }
    catch (e) {
        if (e instanceof MalformedTask) {
            shared.finish(key, failComplete(echo, e.message, true));
            return;
        }
        throw e;
    }
    // The deadline aborts the task's signal; this listener is registered before the handler
    // can add its own, so the deadline's failure is recorded before a handler reacting to the
    // abort settles with a result of its own.
    const timer = ms > 0 ? setTimeout(() => running.abort(new TaskCancelledError("deadline")), ms) : undefined;
    const aborted = new Promise((resolve) => {
        const onAbort = () => resolve(signal.reason);
        if (signal.aborted) {
            onAbort();
        }
        else {
            signal.addEventListener("abort", onAbort, { once: true });
        }
    });
    try {
        let release = () => { };
        if (req.stage === Stage.ROLLUP && !req.descendantsIncluded) {
            req.subtree = new BrokerSubtree(conn, task, signal);
            release = conn.hold();
        }
        if (!(await shared.permits.acquire(signal))) {
            release();
            if (deadlineReason(signal)) {
                shared.finish(key, failComplete(echo, "deadline exceeded before the handler started", false));
            }
            return;
        }
        shared.handlerStarted();
        const handler = invoke(provider, req);
        running.handler = handler.finally(() => {
            shared.handlerDone();
            release();
        });
        const first = await Promise.race([handler, aborted]);
        if (first instanceof TaskCancelledError) {
            if (first.kind === "deadline") {
                log.warn(`task ${key.token} passed its deadline; the handler's signal was aborted`, {
                    kind: kv.kind,
                    reaction: req.reaction,
                });
                shared.finish(key, failComplete(echo, "deadline exceeded", false));
            }
            else {
                // CancelTask or the end of shutdown: the lease is forgotten and a result would be refused.
                log.debug(`task ${key.token} cancelled (${first.message}); its result will not be sent`);
            }
            return;
        }
        shared.finish(key, resultComplete(echo, first));
    }
    finally {
        if (timer !== undefined) {
            clearTimeout(timer);
        }
    }
}
function deadlineReason(signal) {
    return signal.reason instanceof TaskCancelledError && signal.reason.kind === "deadline";
}
//# sourceMappingURL=task.js.map