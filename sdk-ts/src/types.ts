/**
 * The value types a provider sees and returns: requests, resources, outcomes, conditions.
 *
 * They mirror the wire messages of `converge.worker.v1` with JSON already decoded, so a
 * handler never touches protobuf. The same vocabulary exists in the Rust, Python and Go SDKs.
 *
 * @module
 */

import {
  DEFAULT_PAGE_SIZE,
  type RollupSummary,
  Subtree,
  checkedPageSize,
  includedPage,
  subtreePages,
} from "./descendants.js";
import { TerminalError } from "./errors.js";
import { Stage, Transition } from "./gen/converge/worker/v1/worker_pb.js";
import { effectiveBundle, effectiveConfig } from "./merge.js";

export { Stage, Transition };

/** A decoded JSON value. */
export type Json = null | boolean | number | string | Json[] | JsonObject;
/** A decoded JSON object. */
export type JsonObject = { [key: string]: Json };

/** The all-zero UUID: a resource id the broker did not send. */
export const NIL_UUID = "00000000-0000-0000-0000-000000000000";

/** Condition type that feeds a resource's health. */
export const CONDITION_READY = "Ready";
/** Condition type derived by the core from syncedGen vs generation. */
export const CONDITION_SYNCED = "Synced";

/** The wire spellings of `StageTask.trigger`: what fired a task. */
export const Trigger = {
  /** The generation bumped (a spec edit or the first apply). */
  SPEC_CHANGE: "specChange",
  /** A composite's whole live subtree settled. */
  CHILDREN_SETTLED: "childrenSettled",
  /** A finalizer-bearing resource is being torn down. */
  DELETE_REQUESTED: "deleteRequested",
  /** An operation was requested. */
  OPERATION: "operation",
  /** A reactor binding matched a lifecycle transition. */
  REACTOR: "reactor",
  /** A drift tick re-observes the resource without a generation bump. */
  RESYNC: "resync",
} as const;

/** The proto enum name of a stage, e.g. `STAGE_WORK`. */
export function stageName(stage: Stage): string {
  const name = Stage[stage];
  return name === undefined ? `STAGE_${stage}` : `STAGE_${name}`;
}

/** The proto enum name of a transition, e.g. `TRANSITION_SYNCED`. */
export function transitionName(transition: Transition): string {
  const name = Transition[transition];
  return name === undefined ? `TRANSITION_${transition}` : `TRANSITION_${name}`;
}

/** One (kind, kindVersion) pair a provider serves; the version is at least 1. */
export class KindVersion {
  constructor(
    readonly kind: string,
    readonly version = 1,
  ) {}

  /** The pair as `kind@vN`. */
  toString(): string {
    return `${this.kind}@v${this.version}`;
  }

  /** Whether both pairs name the same kind and version. */
  equals(other: KindVersion): boolean {
    return this.kind === other.kind && this.version === other.version;
  }
}

/** A kind's default provider config as pushed by the broker (both parts empty = none). */
export class ProviderConfig {
  constructor(
    /** The config spec JSON; `undefined` when absent. */
    readonly spec: Json | undefined = undefined,
    /** The config's opaque bundle (e.g. a WASM component); empty when absent. */
    readonly bundle: Uint8Array = new Uint8Array(),
  ) {}

  /** Whether neither a spec nor a bundle is present (no config, or a deleted one). */
  isEmpty(): boolean {
    return this.spec === undefined && this.bundle.length === 0;
  }
}

/** A read-only view of one resource row. */
export class Resource {
  /** The resource id (canonical UUID text). */
  id = NIL_UUID;
  kind = "";
  kindVersion = 1;
  /** Unique within its kind. */
  name = "";
  /** The composing parent; `undefined` for a root. */
  ownerId: string | undefined = undefined;
  /** The composition root; `undefined` for a root. */
  rootId: string | undefined = undefined;
  /** The spec JSON (`{}` when the broker sent none). */
  spec: Json = {};
  /** The last applied status JSON; `undefined` when none. */
  status: Json | undefined = undefined;
  generation = 0;
  syncedGen = 0;
  /** Synced, healthy and not being deleted. */
  isReady = false;
  /** The derived phase (Ready, Reconciling, Degraded, Failed, Deleting, ...). */
  phase = "";
  labels: Record<string, string> = {};
  finalizers: string[] = [];

  constructor(init: Partial<Resource> = {}) {
    Object.assign(this, init);
  }
}

/** An imperative verb requested against a resource (STAGE_OPERATE). */
export class Operation {
  /** The verb, as declared by the kind's manifest. */
  verb = "";
  /** The verb's input JSON; `undefined` when none. */
  input: Json | undefined = undefined;
  /** The target resource's id; `undefined` when the broker sent none. */
  resourceId: string | undefined = undefined;
  attempts = 0;
  requestedBy = "";

  constructor(init: Partial<Operation> = {}) {
    Object.assign(this, init);
  }
}

/** A Kubernetes-style condition; only type `Ready` feeds health. */
export class Condition {
  constructor(
    /** `Ready`, `Synced` or a custom type. */
    readonly type: string,
    /** `True`, `False` or `Unknown`. */
    readonly status: string,
    /** A short CamelCase reason. */
    readonly reason = "",
    /** A human-readable message. */
    readonly message = "",
  ) {}

  /** A `Ready` condition, `True` or `False`. */
  static ready(ready: boolean, reason = "", message = ""): Condition {
    return new Condition(CONDITION_READY, ready ? "True" : "False", reason, message);
  }
}

/** Names a resource by kind and name (an edge endpoint). */
export class ResourceRef {
  constructor(
    readonly kind: string,
    readonly name: string,
  ) {}
}

/** Copies one upstream status field into one dependent spec field (JSON pointers). */
export class ValueFlow {
  constructor(
    /** JSON pointer into the dependent's spec. */
    readonly dependentField: string,
    /** JSON pointer into the upstream's status. */
    readonly sourceField: string,
  ) {}
}

/** One desired child of a composite; `kindVersion` must be at least 1. */
export class ChildSpec {
  constructor(
    readonly kind: string,
    readonly kindVersion: number,
    readonly name: string,
    readonly spec: Json = {},
    readonly labels: Record<string, string> = {},
  ) {}

  /** Adds a label (builder style). */
  withLabel(key: string, value: string): this {
    this.labels[key] = value;
    return this;
  }
}

/** Orders two children: `from` (the dependent) waits for `to` (the dependency). */
export class DepEdge {
  constructor(
    readonly from: ResourceRef,
    readonly to: ResourceRef,
    readonly values: ValueFlow[] = [],
  ) {}

  /** Adds a value flow (builder style). */
  withValue(flow: ValueFlow): this {
    this.values.push(flow);
    return this;
  }
}

/** A provider config emitted by a composer (owned by the root). */
export class ProviderConfigSpec {
  /** The config's global name. */
  name = "";
  /** The kind it configures. */
  kind = "";
  /** The kind version it configures; at least 1. */
  kindVersion = 1;
  /** Whether it is the kind's default config. */
  isDefault = false;
  /** The config spec JSON. */
  spec: Json = {};

  constructor(init: Partial<ProviderConfigSpec> = {}) {
    Object.assign(this, init);
  }
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
export class Outcome {
  status: Json | undefined;
  conditions: Condition[];
  children: ChildSpec[];
  edges: DepEdge[];
  configs: ProviderConfigSpec[];
  output: Json | undefined;

  constructor(init: OutcomeInit = {}) {
    this.status = init.status;
    this.conditions = init.conditions ?? [];
    this.children = init.children ?? [];
    this.edges = init.edges ?? [];
    this.configs = init.configs ?? [];
    this.output = init.output;
  }

  /** Sets the status (builder style). */
  withStatus(status: Json): this {
    this.status = status;
    return this;
  }

  /** Sets the operation output (builder style). */
  withOutput(output: Json): this {
    this.output = output;
    return this;
  }

  /** Adds a condition (builder style). */
  withCondition(condition: Condition): this {
    this.conditions.push(condition);
    return this;
  }

  /** Adds a desired child (builder style). */
  withChild(child: ChildSpec): this {
    this.children.push(child);
    return this;
  }

  /** Adds a dependency edge (builder style). */
  withEdge(edge: DepEdge): this {
    this.edges.push(edge);
    return this;
  }

  /** Adds a provider config (builder style). */
  withConfig(config: ProviderConfigSpec): this {
    this.configs.push(config);
    return this;
  }
}

/** The fields of a `ReactionRequest`, for its constructor (`reaction`, `stage`, `kind`, `resource` required). */
export type ReactionRequestInit = Pick<ReactionRequest, "reaction" | "stage" | "kind" | "resource"> &
  Partial<Omit<ReactionRequest, "reaction" | "stage" | "kind" | "resource">>;

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
export class ReactionRequest {
  /** The manifest reaction being run; a provider switches on this (or on `stage`). */
  reaction!: string;
  stage!: Stage;
  kind!: string;
  /** The resource (the root for COMPOSE and ROLLUP). */
  resource!: Resource;
  kindVersion = 1;
  /** What fired the task (one of the `Trigger` values). */
  trigger: string = Trigger.SPEC_CHANGE;
  /** The status accumulated so far in this reconcile (WORK, ROLLUP); `undefined` if none. */
  status: Json | undefined = undefined;
  /** The spec generation this task reconciles. */
  generation = 0;
  /** 1 for the first attempt at this generation, counting up with each retry. */
  attempt = 1;
  /** When the broker stops waiting for the task; `undefined` means no deadline. */
  deadline: Date | undefined = undefined;
  /** Aborts on the deadline, a CancelTask or shutdown; `reason` is a `TaskCancelledError`. */
  signal: AbortSignal = new AbortController().signal;
  /** The kind's cached default provider config. */
  config: ProviderConfig = new ProviderConfig();
  /** The per-resource config override JSON; `undefined` when none. */
  configOverride: Json | undefined = undefined;
  /** The per-resource bundle override; empty means the default bundle. */
  bundleOverride: Uint8Array = new Uint8Array();
  /** The children the root currently owns (COMPOSE). */
  observed: Resource[] = [];
  /** The root's live subtree (ROLLUP), only with the full form (`descendantsIncluded`). */
  descendants: Resource[] = [];
  /** Whether `descendants` holds the whole live subtree (the full form). */
  descendantsIncluded = false;
  /** The subtree's counts and the refs that need attention (ROLLUP); `undefined` otherwise. */
  summary: RollupSummary | undefined = undefined;
  /** Where `descendantPages` reads from (the broker for a ROLLUP task; a test sets `Subtree.fixed`). */
  subtree: Subtree = new Subtree();
  /** The operation to run (OPERATE); `undefined` otherwise. */
  operation: Operation | undefined = undefined;
  /** The lifecycle transition that fired (REACT); `undefined` otherwise. */
  transition: Transition | undefined = undefined;
  /** A stable key `<id>:<transition>:<generation>:<binding>` for idempotent side effects (REACT). */
  dedupToken = "";
  /**
   * A plan's dry run (COMPOSE only; `POST /api/v1/resources:plan`): compose as usual and
   * return the outcome, which is compared with the stored children and never stored. A
   * composer is meant to be pure; one that is not must skip its side effects then.
   */
  dryRun = false;

  constructor(init: ReactionRequestInit) {
    Object.assign(this, init);
  }

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
  spec<T>(parse?: (spec: Json) => T): T | Json {
    if (parse === undefined) {
      return this.resource.spec;
    }
    try {
      return parse(this.resource.spec);
    } catch (e) {
      throw new TerminalError(`invalid spec: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /** The spec as an object (`{}` when it is not one), for reading optional fields. */
  specObject(): JsonObject {
    const s = this.resource.spec;
    return typeof s === "object" && s !== null && !Array.isArray(s) ? s : {};
  }

  /** Whether the task has been cancelled (deadline, CancelTask or shutdown). */
  get cancelled(): boolean {
    return this.signal.aborted;
  }

  /** The default config deep-merged with the per-resource override (`null` when neither). */
  effectiveConfig(): Json {
    return effectiveConfig(this.config.spec, this.configOverride);
  }

  /** The per-resource bundle override if non-empty, otherwise the default bundle. */
  effectiveBundle(): Uint8Array {
    return effectiveBundle(this.config.bundle, this.bundleOverride);
  }

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
  descendantPages(pageSize: number = DEFAULT_PAGE_SIZE): AsyncIterable<Resource[]> {
    const size = checkedPageSize(pageSize);
    if (this.descendantsIncluded) {
      return includedPage([...this.descendants]);
    }
    return subtreePages(this.subtree, size);
  }

  /** Every live descendant of the composite (all pages of `descendantPages`, 500 a page). */
  async readDescendants(): Promise<Resource[]> {
    const out: Resource[] = [];
    for await (const page of this.descendantPages()) {
      out.push(...page);
    }
    return out;
  }
}
