/**
 * Conversions between the wire (`StageTask`, `StageComplete`) and the SDK's value types,
 * plus turning a handler's result (or what it threw) into the `StageComplete` to send.
 *
 * @module
 */
import { RollupSummary } from "./descendants.js";
import * as pb from "./gen/converge/worker/v1/worker_pb.js";
import { type Json, Outcome, type ProviderConfig, ReactionRequest, Resource } from "./types.js";
/** A task that cannot be decoded; its message becomes a terminal failure. */
export declare class MalformedTask extends Error {
    constructor(message: string);
}
/** What a StageComplete must echo from its StageTask. */
export interface TaskEcho {
    leaseToken: string;
    stage: pb.Stage;
    claimEpoch: bigint;
}
/** The echo of `task`. */
export declare function echoOf(task: pb.StageTask): TaskEcho;
/** A version on the wire where 0 means 1. */
export declare function wireVersion(v: number): number;
/** Canonical UUID text of 16 bytes; undefined for anything else (an absent id). */
export declare function uuidText(b: Uint8Array): string | undefined;
/** The 16 bytes of canonical UUID text (for tests and the testing helpers). */
export declare function uuidBytes(id: string): Uint8Array;
/** Decodes user JSON bytes; empty is `undefined`. */
export declare function jsonFromBytes(b: Uint8Array, what: string): Json | undefined;
/** Encodes user JSON; `undefined` and `null` are empty (absent). */
export declare function jsonBytes(v: Json | undefined): Uint8Array;
/** Decodes a wire Resource (spec defaults to `{}`). */
export declare function resourceFromPb(r: pb.Resource, what?: string): Resource;
/** Decodes a wire RollupSummary (an unset one reads as all zeros). */
export declare function summaryFromPb(s: pb.RollupSummary | undefined): RollupSummary;
/** The runtime's per-task parts of a request. */
export interface TaskContext {
    config: ProviderConfig;
    signal?: AbortSignal | undefined;
    deadline?: Date | undefined;
}
/** Decodes a StageTask; throws MalformedTask (a terminal failure) when it cannot. */
export declare function requestFromTask(task: pb.StageTask, ctx: TaskContext): ReactionRequest;
/** Encodes a successful outcome; throws TypeError/RangeError when it cannot be encoded. */
export declare function completeFromOutcome(echo: TaskEcho, outcome: Outcome): pb.StageComplete;
/** Encodes a failure (an empty message would mean success, so it never is). */
export declare function failComplete(echo: TaskEcho, message: string, terminal: boolean): pb.StageComplete;
/** The text of anything a handler threw: its name and message. */
export declare function describeThrown(e: unknown): string;
/** The outcome a handler produced: a value, or what it threw. */
export type HandlerResult = {
    ok: true;
    value: unknown;
} | {
    ok: false;
    error: unknown;
};
/**
 * The StageComplete for a handler's return value or thrown error.
 *
 * An `Outcome` (or nothing: an empty outcome) is a success; `TerminalError` a terminal
 * failure; `TransientError` and anything else thrown a transient failure with its message.
 */
export declare function resultComplete(echo: TaskEcho, result: HandlerResult): pb.StageComplete;
