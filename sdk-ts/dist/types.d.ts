/**
 * The value types a provider sees and returns: requests, resources, outcomes, conditions.
 *
 * They mirror the wire messages of `converge.worker.v1` with JSON already decoded, so a
 * handler never touches protobuf. The same vocabulary exists in the Rust, Python and Go SDKs.
 *
 * @module
 */
import { type RollupSummary, Subtree } from "./descendants.js";
import { Stage, Transition } from "./gen/converge/worker/v1/worker_pb.js";
export { Stage, Transition };
/** A decoded JSON value. */
export type Json = null | boolean | number | string | Json[] | JsonObject;
/** A decoded JSON object. */
export type JsonObject = {
    [key: string]: Json;
};
/** The all-zero UUID: a resource id the broker did not send. */
export declare const NIL_UUID = "00000000-0000-0000-0000-000000000000";
/** Condition type that feeds a resource's health. */
export declare const CONDITION_READY = "Ready";
/** Condition type derived by the core from syncedGen vs generation. */
export declare const CONDITION_SYNCED = "Synced";
/** The wire spellings of `StageTask.trigger`: what fired a task. */
export declare const Trigger: {
    /** The generation bumped (a spec edit or the first apply). */
    readonly SPEC_CHANGE: "specChange";
    /** A composite's whole live subtree settled. */
    readonly CHILDREN_SETTLED: "childrenSettled";
    /** A finalizer-bearing resource is being torn down. */
    readonly DELETE_REQUESTED: "deleteRequested";
    /** An operation was requested. */
    readonly OPERATION: "operation";
    /** A reactor binding matched a lifecycle transition. */
    readonly REACTOR: "reactor";
    /** A drift tick re-observes the resource without a generation bump. */
    readonly RESYNC: "resync";
};
/** The proto enum name of a stage, e.g. `STAGE_WORK`. */
export declare function stageName(stage: Stage): string;
/** The proto enum name of a transition, e.g. `TRANSITION_SYNCED`. */
export declare function transitionName(transition: Transition): string;
/** One (kind, kindVersion) pair a provider serves; the version is at least 1. */
export declare class KindVersion {
    readonly kind: string;
    readonly version: number;
    constructor(kind: string, version?: number);
    /** The pair as `kind@vN`. */
    toString(): string;
    /** Whether both pairs name the same kind and version. */
    equals(other: KindVersion): boolean;
}
/** A kind's default provider config as pushed by the broker (both parts empty = none). */
export declare class ProviderConfig {
    /** The config spec JSON; `undefined` when absent. */
    readonly spec: Json | undefined;
    /** The config's opaque bundle (e.g. a WASM component); empty when absent. */
    readonly bundle: Uint8Array;
    constructor(
    /** The config spec JSON; `undefined` when absent. */
    spec?: Json | undefined, 
    /** The config's opaque bundle (e.g. a WASM component); empty when absent. */
    bundle?: Uint8Array);
    /** Whether neither a spec nor a bundle is present (no config, or a deleted one). */
    isEmpty(): boolean;
}
/** A read-only view of one resource row. */
export declare class Resource {
    /** The resource id (canonical UUID text). */
    id: string;
    kind: string;
    kindVersion: number;
    /** Unique within its kind. */
    name: string;
    /** The composing parent; `undefined` for a root. */
    ownerId: string | undefined;
    /** The composition root; `undefined` for a root. */
    rootId: string | undefined;
    /** The spec JSON (`{}` when the broker sent none). */
    spec: Json;
    /** The last applied status JSON; `undefined` when none. */
    status: Json | undefined;
    generation: number;
    syncedGen: number;
    /** Synced, healthy and not being deleted. */
    isReady: boolean;
    /** The derived phase (Ready, Reconciling, Degraded, Failed, Deleting, ...). */
    phase: string;
    labels: Record<string, string>;
    finalizers: string[];
    constructor(init?: Partial<Resource>);
}
/** An imperative verb requested against a resource (STAGE_OPERATE). */
export declare class Operation {
    /** The verb, as declared by the kind's manifest. */
    verb: string;
    /** The verb's input JSON; `undefined` when none. */
    input: Json | undefined;
    /** The target resource's id; `undefined` when the broker sent none. */
    resourceId: string | undefined;
    attempts: number;
    requestedBy: string;
    constructor(init?: Partial<Operation>);
}
/** A Kubernetes-style condition; only type `Ready` feeds health. */
export declare class Condition {
    /** `Ready`, `Synced` or a custom type. */
    readonly type: string;
    /** `True`, `False` or `Unknown`. */
    readonly status: string;
    /** A short CamelCase reason. */
    readonly reason: string;
    /** A human-readable message. */
    readonly message: string;
    constructor(
    /** `Ready`, `Synced` or a custom type. */
    type: string, 
    /** `True`, `False` or `Unknown`. */
    status: string, 
    /** A short CamelCase reason. */
    reason?: string, 
    /** A human-readable message. */
    message?: string);
    /** A `Ready` condition, `True` or `False`. */
    static ready(ready: boolean, reason?: string, message?: string): Condition;
}
/** Names a resource by kind and name (an edge endpoint). */
export declare class ResourceRef {
    readonly kind: string;
    readonly name: string;
    constructor(kind: string, name: string);
}
/** Copies one upstream status field into one dependent spec field (JSON pointers). */
export declare class ValueFlow {
    /** JSON pointer into the dependent's spec. */
    readonly dependentField: string;
    /** JSON pointer into the upstream's status. */
    readonly sourceField: string;
    constructor(
    /** JSON pointer into the dependent's spec. */
    dependentField: string, 
    /** JSON pointer into the upstream's status. */
    sourceField: string);
}
/** One desired child of a composite; `kindVersion` must be at least 1. */
export declare class ChildSpec {
    readonly kind: string;
    readonly kindVersion: number;
    readonly name: string;
    readonly spec: Json;
    readonly labels: Record<string, string>;
    constructor(kind: string, kindVersion: number, name: string, spec?: Json, labels?: Record<string, string>);
    /** Adds a label (builder style). */
    withLabel(key: string, value: string): this;
}
/** Orders two children: `from` (the dependent) waits for `to` (the dependency). */
export declare class DepEdge {
    readonly from: ResourceRef;
    readonly to: ResourceRef;
    readonly values: ValueFlow[];
    constructor(from: ResourceRef, to: ResourceRef, values?: ValueFlow[]);
    /** Adds a value flow (builder style). */
    withValue(flow: ValueFlow): this;
}
/** A provider config emitted by a composer (owned by the root). */
export declare class ProviderConfigSpec {
    /** The config's global name. */
    name: string;
    /** The kind it configures. */
    kind: string;
    /** The kind version it configures; at least 1. */
    kindVersion: number;
    /** Whether it is the kind's default config. */
    isDefault: boolean;
    /** The config spec JSON. */
    spec: Json;
    constructor(init?: Partial<ProviderConfigSpec>);
}
/** The parts of an `Outcome`, for its constructor. */
export interface OutcomeInit {
    status?: Json | undefined;
    conditions?: Condition[];
    children?: ChildSpec[];
    edges?: DepEdge[];
    configs?: ProviderConfigSpec[];
    output?: Json | undefined;
}
/**
 * What a handler returns; the core applies only the parts the reaction's `emits` allows.
 *
 * An empty successful `children` list from a composer prunes every child: a composer that
 * cannot compute its children must throw instead. `output` is the operation's output.
 * `status` or `output` left `undefined` (or `null`) sends none.
 */
export declare class Outcome {
    status: Json | undefined;
    conditions: Condition[];
    children: ChildSpec[];
    edges: DepEdge[];
    configs: ProviderConfigSpec[];
    output: Json | undefined;
    constructor(init?: OutcomeInit);
    /** Sets the status (builder style). */
    withStatus(status: Json): this;
    /** Sets the operation output (builder style). */
    withOutput(output: Json): this;
    /** Adds a condition (builder style). */
    withCondition(condition: Condition): this;
    /** Adds a desired child (builder style). */
    withChild(child: ChildSpec): this;
    /** Adds a dependency edge (builder style). */
    withEdge(edge: DepEdge): this;
    /** Adds a provider config (builder style). */
    withConfig(config: ProviderConfigSpec): this;
}
/** The fields of a `ReactionRequest`, for its constructor (`reaction`, `stage`, `kind`, `resource` required). */
export type ReactionRequestInit = Pick<ReactionRequest, "reaction" | "stage" | "kind" | "resource"> & Partial<Omit<ReactionRequest, "reaction" | "stage" | "kind" | "resource">>;
/**
 * Everything a handler gets for one task.
 *
 * `signal` aborts when the task's deadline passes, the broker cancels the task (CancelTask)
 * or the worker stops; its `reason` is a `TaskCancelledError` saying which. Long handlers
 * should watch it. `deadline` is when the broker stops waiting (`undefined` = none).
 *
 * A ROLLUP task carries `summary` (the subtree's counts and the refs that need attention)
 * and, only when the kind's rollup reaction declares `"descendants": "full"`, every live
 * descendant in `descendants` (then `descendantsIncluded` is true). Otherwise a handler that
 * needs the rows reads them with `descendantPages` or `readDescendants`, which page through
 * the broker's ListDescendants (`subtree` says where from).
 */
export declare class ReactionRequest {
    /** The manifest reaction being run; a provider switches on this (or on `stage`). */
    reaction: string;
    stage: Stage;
    kind: string;
    /** The resource (the root for COMPOSE and ROLLUP). */
    resource: Resource;
    kindVersion: number;
    /** What fired the task (one of the `Trigger` values). */
    trigger: string;
    /** The status accumulated so far in this reconcile (WORK, ROLLUP); `undefined` if none. */
    status: Json | undefined;
    /** The spec generation this task reconciles. */
    generation: number;
    /** 1 for the first attempt at this generation, counting up with each retry. */
    attempt: number;
    /** When the broker stops waiting for the task; `undefined` means no deadline. */
    deadline: Date | undefined;
    /** Aborts on the deadline, a CancelTask or shutdown; `reason` is a `TaskCancelledError`. */
    signal: AbortSignal;
    /** The kind's cached default provider config. */
    config: ProviderConfig;
    /** The per-resource config override JSON; `undefined` when none. */
    configOverride: Json | undefined;
    /** The per-resource bundle override; empty means the default bundle. */
    bundleOverride: Uint8Array;
    /** The children the root currently owns (COMPOSE). */
    observed: Resource[];
    /** The root's live subtree (ROLLUP), only with the full form (`descendantsIncluded`). */
    descendants: Resource[];
    /** Whether `descendants` holds the whole live subtree (the full form). */
    descendantsIncluded: boolean;
    /** The subtree's counts and the refs that need attention (ROLLUP); `undefined` otherwise. */
    summary: RollupSummary | undefined;
    /** Where `descendantPages` reads from (the broker for a ROLLUP task; a test sets `Subtree.fixed`). */
    subtree: Subtree;
    /** The operation to run (OPERATE); `undefined` otherwise. */
    operation: Operation | undefined;
    /** The lifecycle transition that fired (REACT); `undefined` otherwise. */
    transition: Transition | undefined;
    /** A stable key `<id>:<transition>:<generation>:<binding>` for idempotent side effects (REACT). */
    dedupToken: string;
    /**
     * A plan's dry run (COMPOSE only; `POST /api/v1/resources:plan`): compose as usual and
     * return the outcome, which is compared with the stored children and never stored. A
     * composer is meant to be pure; one that is not must skip its side effects then.
     */
    dryRun: boolean;
    constructor(init: ReactionRequestInit);
    /**
     * The resource's spec: as is, or `parse(spec)` when a parser is given (e.g. a schema
     * library's `parse`). A spec the parser rejects (it throws) is a `TerminalError`:
     * retrying cannot fix it, a spec change can.
     *
     * Keys the typed spec does not know are ignored (the rule every converge SDK follows), so
     * a kind can add an optional spec field without breaking the workers already deployed:
     * the SDK hands the parser every key and refuses none itself, and a parser should ignore
     * the keys it does not read (zod's `z.object(...).parse` strips them; `.strict()` would
     * break that rule).
     */
    spec(): Json;
    spec<T>(parse: (spec: Json) => T): T;
    /** The spec as an object (`{}` when it is not one), for reading optional fields. */
    specObject(): JsonObject;
    /** Whether the task has been cancelled (deadline, CancelTask or shutdown). */
    get cancelled(): boolean;
    /** The default config deep-merged with the per-resource override (`null` when neither). */
    effectiveConfig(): Json;
    /** The per-resource bundle override if non-empty, otherwise the default bundle. */
    effectiveBundle(): Uint8Array;
    /**
     * Pages through the composite's live subtree (ROLLUP): `for await (const page of
     * req.descendantPages(100))` yields arrays of at most `pageSize` descendants (0 means 500;
     * the broker caps it at 2,000), every live descendant exactly once over all pages.
     *
     * With the full form (`descendantsIncluded`) the one page is `descendants` and no call is
     * made. Otherwise each page is one ListDescendants call on the connection the task arrived
     * on, under the task's lease; a failed call throws `TransientError` (the task is retried),
     * including when the lease is gone because the task was cancelled or superseded. A
     * negative `pageSize` is a RangeError.
     */
    descendantPages(pageSize?: number): AsyncIterable<Resource[]>;
    /** Every live descendant of the composite (all pages of `descendantPages`, 500 a page). */
    readDescendants(): Promise<Resource[]>;
}
