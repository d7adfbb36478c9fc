/**
 * Run a provider with no broker: build a request, call the handler, inspect the outcome.
 *
 * `run` calls `provider.work` directly (throwing what it throws); `executeTask` runs the
 * real wire path (StageTask decode → work → StageComplete encode) that the worker runtime
 * uses. A rollup handler that pages through its descendants reads them from
 * `Subtree.fixed(rows)` (`request(..., { subtree })` or `executeTask(..., { subtree })`).
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import { MalformedTask, echoOf, failComplete, requestFromTask, resultComplete, wireVersion, } from "./convert.js";
import { TaskCancelledError, TransientError } from "./errors.js";
import { asRegistry } from "./provider.js";
import { invoke } from "./runtime/task.js";
import { Outcome, ProviderConfig, ReactionRequest, Resource, Stage, Trigger, } from "./types.js";
/**
 * A request for a fresh resource of `kind` named `name` with `spec`: by default reaction
 * `work`, stage WORK, trigger specChange, generation 1, attempt 1, no deadline and no config.
 */
export function request(kind, spec = {}, options = {}) {
    const { name = "test", timeoutMs, ...fields } = options;
    const kindVersion = fields.kindVersion ?? 1;
    const generation = fields.generation ?? 1;
    const resource = new Resource({
        id: randomUUID(),
        kind,
        kindVersion,
        name,
        spec,
        generation,
        phase: "Reconciling",
    });
    return new ReactionRequest({
        reaction: "work",
        stage: Stage.WORK,
        trigger: Trigger.SPEC_CHANGE,
        attempt: 1,
        ...fields,
        kind,
        kindVersion,
        generation,
        resource,
        ...(timeoutMs !== undefined ? { deadline: new Date(Date.now() + timeoutMs) } : {}),
    });
}
/**
 * Runs `provider.work(req)` and returns its Outcome, throwing what the handler throws.
 *
 * With `req.deadline` set, `req.signal` aborts when it passes (its reason a
 * `TaskCancelledError` of kind `deadline`) and `TransientError("deadline exceeded")` is
 * thrown, as in the runtime. Nothing returned is an empty Outcome.
 */
export async function run(provider, req) {
    let timer;
    let result;
    if (req.deadline === undefined) {
        result = await invoke(provider, req);
    }
    else {
        const controller = new AbortController();
        req.signal = controller.signal;
        const expired = new Promise((resolve) => {
            timer = setTimeout(() => {
                controller.abort(new TaskCancelledError("deadline"));
                resolve("expired");
            }, Math.max(0, req.deadline.getTime() - Date.now()));
        });
        const first = await Promise.race([invoke(provider, req), expired]);
        clearTimeout(timer);
        if (first === "expired") {
            throw new TransientError("deadline exceeded");
        }
        result = first;
    }
    if (!result.ok) {
        throw result.error;
    }
    const v = result.value;
    if (v === undefined || v === null) {
        return new Outcome();
    }
    if (!(v instanceof Outcome)) {
        throw new TypeError(`handler returned ${typeof v}, expected an Outcome`);
    }
    return v;
}
/**
 * Runs one wire StageTask through the providers exactly as the runtime does (dispatch by
 * (kind, kindVersion), decode, handler with error capture and deadline, encode); returns
 * the StageComplete the worker would send.
 */
export async function executeTask(providers, task, options = {}) {
    const registry = asRegistry(providers);
    const echo = echoOf(task);
    const version = wireVersion(task.kindVersion);
    const provider = registry.find(task.kind, version);
    if (provider === undefined) {
        return failComplete(echo, `no provider for ${task.kind}@v${version} on this worker`, true);
    }
    const ms = Number(task.taskDeadlineMs);
    const controller = new AbortController();
    let req;
    try {
        req = requestFromTask(task, {
            config: options.config ?? new ProviderConfig(),
            signal: controller.signal,
            deadline: ms > 0 ? new Date(Date.now() + ms) : undefined,
        });
    }
    catch (e) {
        if (e instanceof MalformedTask) {
            return failComplete(echo, e.message, true);
        }
        throw e;
    }
    if (options.subtree !== undefined) {
        req.subtree = options.subtree;
    }
    let timer;
    const expired = new Promise((resolve) => {
        if (ms > 0) {
            timer = setTimeout(() => {
                controller.abort(new TaskCancelledError("deadline"));
                resolve("expired");
            }, ms);
        }
    });
    const first = await Promise.race([invoke(provider, req), expired]);
    clearTimeout(timer);
    if (first === "expired") {
        return failComplete(echo, "deadline exceeded", false);
    }
    return resultComplete(echo, first);
}
//# sourceMappingURL=testing.js.map