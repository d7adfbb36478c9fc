/**
 * Conversions between the wire (`StageTask`, `StageComplete`) and the SDK's value types,
 * plus turning a handler's result (or what it threw) into the `StageComplete` to send.
 *
 * @module
 */

import { create } from "@bufbuild/protobuf";

import { RollupSummary } from "./descendants.js";
import { HandlerError } from "./errors.js";
import * as pb from "./gen/converge/worker/v1/worker_pb.js";
import { log } from "./logs.js";
import {
  type ChildSpec,
  type Condition,
  type DepEdge,
  type Json,
  NIL_UUID,
  Operation,
  Outcome,
  type ProviderConfig,
  type ProviderConfigSpec,
  ReactionRequest,
  Resource,
  ResourceRef,
  Stage,
  Transition,
  Trigger,
  stageName,
} from "./types.js";

/** A task that cannot be decoded; its message becomes a terminal failure. */
export class MalformedTask extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MalformedTask";
  }
}

/** What a StageComplete must echo from its StageTask. */
export interface TaskEcho {
  leaseToken: string;
  stage: pb.Stage;
  claimEpoch: bigint;
}

/** The echo of `task`. */
export function echoOf(task: pb.StageTask): TaskEcho {
  return { leaseToken: task.leaseToken, stage: task.stage, claimEpoch: task.claimEpoch };
}

/** A version on the wire where 0 means 1. */
export function wireVersion(v: number): number {
  return v || 1;
}

/** Canonical UUID text of 16 bytes; undefined for anything else (an absent id). */
export function uuidText(b: Uint8Array): string | undefined {
  if (b.length !== 16) {
    return undefined;
  }
  const h = Buffer.from(b).toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The 16 bytes of canonical UUID text (for tests and the testing helpers). */
export function uuidBytes(id: string): Uint8Array {
  const hex = id.replace(/-/g, "");
  if (!/^[0-9a-fA-F]{32}$/.test(hex)) {
    throw new RangeError(`not a UUID: ${JSON.stringify(id)}`);
  }
  return new Uint8Array(Buffer.from(hex, "hex"));
}

const utf8 = new TextDecoder("utf-8", { fatal: true });
const encoder = new TextEncoder();

/** Decodes user JSON bytes; empty is `undefined`. */
export function jsonFromBytes(b: Uint8Array, what: string): Json | undefined {
  if (b.length === 0) {
    return undefined;
  }
  try {
    return JSON.parse(utf8.decode(b)) as Json;
  } catch (e) {
    throw new MalformedTask(`malformed ${what} JSON: ${(e as Error).message}`);
  }
}

/** Encodes user JSON; `undefined` and `null` are empty (absent). */
export function jsonBytes(v: Json | undefined): Uint8Array {
  if (v === undefined || v === null) {
    return new Uint8Array();
  }
  const text = JSON.stringify(v, (_k, x: unknown) => {
    if (typeof x === "number" && !Number.isFinite(x)) {
      throw new TypeError(`${x} is not a JSON number`);
    }
    return x;
  });
  if (text === undefined) {
    throw new TypeError(`a ${typeof v} is not JSON`);
  }
  return encoder.encode(text);
}

/** Decodes a wire Resource (spec defaults to `{}`). */
export function resourceFromPb(r: pb.Resource, what = "resource"): Resource {
  return new Resource({
    id: uuidText(r.id) ?? NIL_UUID,
    kind: r.kind,
    kindVersion: wireVersion(r.kindVersion),
    name: r.name,
    ownerId: uuidText(r.ownerId),
    rootId: uuidText(r.rootId),
    spec: jsonFromBytes(r.spec, `${what} spec`) ?? {},
    status: jsonFromBytes(r.status, `${what} status`),
    generation: Number(r.generation),
    syncedGen: Number(r.syncedGen),
    isReady: r.isReady,
    phase: r.phase,
    labels: { ...r.labels },
    finalizers: [...r.finalizers],
  });
}

/** Decodes a wire RollupSummary (an unset one reads as all zeros). */
export function summaryFromPb(s: pb.RollupSummary | undefined): RollupSummary {
  if (s === undefined) {
    return new RollupSummary();
  }
  const counts = (m: Record<string, bigint>): Record<string, number> =>
    Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Number(v)]));
  return new RollupSummary({
    total: Number(s.total),
    byPhase: counts(s.byPhase),
    byKind: counts(s.byKind),
    failed: s.failed.map((r) => new ResourceRef(r.kind, r.name)),
    notReady: s.notReady.map((r) => new ResourceRef(r.kind, r.name)),
    failedTotal: Number(s.failedTotal),
    notReadyTotal: Number(s.notReadyTotal),
  });
}

const DEFAULT_TRIGGER: Partial<Record<Stage, string>> = {
  [Stage.ROLLUP]: Trigger.CHILDREN_SETTLED,
  [Stage.DELETE]: Trigger.DELETE_REQUESTED,
  [Stage.OPERATE]: Trigger.OPERATION,
  [Stage.REACT]: Trigger.REACTOR,
};

const PAYLOAD: Record<Exclude<Stage, Stage.UNSPECIFIED>, pb.StageTask["request"]["case"]> = {
  [Stage.COMPOSE]: "composeReq",
  [Stage.WORK]: "workReq",
  [Stage.ROLLUP]: "rollupReq",
  [Stage.DELETE]: "deleteReq",
  [Stage.OPERATE]: "operateReq",
  [Stage.REACT]: "reactReq",
};

function required(r: pb.Resource | undefined, what: string): Resource {
  if (r === undefined) {
    throw new MalformedTask(`task payload has no ${what}`);
  }
  return resourceFromPb(r, what);
}

/** The runtime's per-task parts of a request. */
export interface TaskContext {
  config: ProviderConfig;
  signal?: AbortSignal | undefined;
  deadline?: Date | undefined;
}

/** Decodes a StageTask; throws MalformedTask (a terminal failure) when it cannot. */
export function requestFromTask(task: pb.StageTask, ctx: TaskContext): ReactionRequest {
  if (!task.reaction) {
    throw new MalformedTask("task has an empty reaction name");
  }
  const stage = task.stage;
  if (!(stage in PAYLOAD)) {
    throw new MalformedTask(`task has unknown stage ${stage}`);
  }
  const want = PAYLOAD[stage as Exclude<Stage, Stage.UNSPECIFIED>];
  const p = task.request;
  if (p.case === undefined) {
    throw new MalformedTask(`task has no payload for stage ${stageName(stage)}`);
  }
  if (p.case !== want) {
    throw new MalformedTask(`task payload does not match stage ${stageName(stage)}`);
  }
  const req = new ReactionRequest({
    reaction: task.reaction,
    stage,
    kind: task.kind,
    kindVersion: wireVersion(task.kindVersion),
    resource: new Resource(),
    trigger: task.trigger || (DEFAULT_TRIGGER[stage] ?? Trigger.SPEC_CHANGE),
    generation: Number(task.generation),
    attempt: task.attempt,
    deadline: ctx.deadline,
    signal: ctx.signal ?? new AbortController().signal,
    config: ctx.config,
    configOverride: jsonFromBytes(task.providerConfig, "provider_config override"),
    bundleOverride: task.providerBundle,
  });
  switch (p.case) {
    case "composeReq":
      req.resource = required(p.value.root, "root");
      req.observed = p.value.observed.map((r) => resourceFromPb(r, "observed"));
      req.dryRun = task.dryRun;
      break;
    case "workReq":
      req.resource = required(p.value.resource, "resource");
      req.status = jsonFromBytes(p.value.status, "status");
      break;
    case "rollupReq":
      req.resource = required(p.value.root, "root");
      req.descendants = p.value.descendants.map((r) => resourceFromPb(r, "descendant"));
      req.descendantsIncluded = p.value.descendantsIncluded;
      req.summary = summaryFromPb(p.value.summary);
      req.status = jsonFromBytes(p.value.status, "status");
      break;
    case "deleteReq":
      req.resource = required(p.value.resource, "resource");
      break;
    case "operateReq": {
      req.resource = required(p.value.resource, "resource");
      const op = p.value.operation;
      if (op === undefined) {
        throw new MalformedTask("task payload has no operation");
      }
      req.operation = new Operation({
        verb: op.verb,
        input: jsonFromBytes(op.input, "operation input"),
        resourceId: uuidText(op.resourceId),
        attempts: op.attempts,
        requestedBy: op.requestedBy,
      });
      break;
    }
    case "reactReq":
      req.resource = required(p.value.resource, "resource");
      req.transition =
        p.value.transition in Transition && p.value.transition !== Transition.UNSPECIFIED
          ? p.value.transition
          : undefined;
      req.dedupToken = p.value.dedupToken;
      break;
  }
  return req;
}

function conditionPb(c: Condition): pb.Condition {
  return create(pb.ConditionSchema, { type: c.type, status: c.status, reason: c.reason, message: c.message });
}

function childPb(c: ChildSpec): pb.ChildSpec {
  if (!Number.isInteger(c.kindVersion) || c.kindVersion < 1) {
    throw new RangeError(`child ${c.kind}/${c.name} has kind_version ${c.kindVersion}; it must be at least 1`);
  }
  return create(pb.ChildSpecSchema, {
    kind: c.kind,
    name: c.name,
    spec: jsonBytes(c.spec),
    labels: { ...c.labels },
    kindVersion: c.kindVersion,
  });
}

function edgePb(e: DepEdge): pb.DepEdge {
  return create(pb.DepEdgeSchema, {
    from: { kind: e.from.kind, name: e.from.name },
    to: { kind: e.to.kind, name: e.to.name },
    values: e.values.map((v) => ({ dependentField: v.dependentField, sourceField: v.sourceField })),
  });
}

function configPb(c: ProviderConfigSpec): pb.ProviderConfigSpec {
  if (!Number.isInteger(c.kindVersion) || c.kindVersion < 1) {
    throw new RangeError(`provider config ${c.name} has kind_version ${c.kindVersion}; it must be at least 1`);
  }
  return create(pb.ProviderConfigSpecSchema, {
    name: c.name,
    kind: c.kind,
    isDefault: c.isDefault,
    spec: jsonBytes(c.spec),
    kindVersion: c.kindVersion,
  });
}

/** Encodes a successful outcome; throws TypeError/RangeError when it cannot be encoded. */
export function completeFromOutcome(echo: TaskEcho, outcome: Outcome): pb.StageComplete {
  const out = create(pb.StageCompleteSchema, {
    leaseToken: echo.leaseToken,
    stage: echo.stage,
    claimEpoch: echo.claimEpoch,
    output: jsonBytes(outcome.output),
  });
  const status = jsonBytes(outcome.status);
  const conditions = outcome.conditions.map(conditionPb);
  if (echo.stage === Stage.COMPOSE) {
    out.compose = create(pb.ComposeResultSchema, {
      desired: outcome.children.map(childPb),
      edges: outcome.edges.map(edgePb),
      configs: outcome.configs.map(configPb),
      status,
      conditions,
    });
  } else {
    out.status = status;
    out.conditions = conditions;
  }
  return out;
}

/** Encodes a failure (an empty message would mean success, so it never is). */
export function failComplete(echo: TaskEcho, message: string, terminal: boolean): pb.StageComplete {
  return create(pb.StageCompleteSchema, {
    leaseToken: echo.leaseToken,
    stage: echo.stage,
    claimEpoch: echo.claimEpoch,
    errorMessage: message || "handler failed",
    terminal,
  });
}

/** The text of anything a handler threw: its name and message. */
export function describeThrown(e: unknown): string {
  if (e instanceof Error) {
    return `${e.name}: ${e.message || "(no message)"}`;
  }
  try {
    return `${typeof e}: ${JSON.stringify(e) ?? String(e)}`;
  } catch {
    return `${typeof e}: ${String(e)}`;
  }
}

/** The outcome a handler produced: a value, or what it threw. */
export type HandlerResult = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * The StageComplete for a handler's return value or thrown error.
 *
 * An `Outcome` (or nothing: an empty outcome) is a success; `TerminalError` a terminal
 * failure; `TransientError` and anything else thrown a transient failure with its message.
 */
export function resultComplete(echo: TaskEcho, result: HandlerResult): pb.StageComplete {
  if (!result.ok) {
    const e = result.error;
    if (e instanceof HandlerError) {
      return failComplete(echo, e.message, e.terminal);
    }
    const text = describeThrown(e);
    log.warn(`handler threw ${text}`, { lease: echo.leaseToken });
    return failComplete(echo, `handler threw ${text}`, false);
  }
  let value = result.value;
  if (value === undefined || value === null) {
    value = new Outcome();
  }
  if (!(value instanceof Outcome)) {
    return failComplete(echo, `handler returned ${describeValue(value)}, expected an Outcome`, true);
  }
  try {
    return completeFromOutcome(echo, value);
  } catch (e) {
    return failComplete(echo, `cannot encode outcome: ${(e as Error).message}`, true);
  }
}

function describeValue(v: unknown): string {
  if (typeof v === "object" && v !== null) {
    return `an object (${v.constructor?.name ?? "Object"})`;
  }
  return `a ${typeof v}`;
}
