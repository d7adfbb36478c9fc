/**
 * The gRPC side of a broker connection on @grpc/grpc-js: the WorkerService method
 * definitions (protobuf-es messages as the codec), the channel options every SDK uses
 * (message cap, keepalive, no retries, a private connection per session), TLS or h2c
 * credentials, and the bearer-token metadata. The token and TLS files are read at every
 * connect, so rotated ones are picked up without a restart.
 *
 * @module
 */
import { type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import type { WorkerConfig } from "../config.js";
import * as pb from "../gen/converge/worker/v1/worker_pb.js";
/** How often an HTTP/2 PING goes out, also with no call open (the broker does not limit pings). */
export declare const KEEPALIVE_TIME_MS = 10000;
/**
 * How long a PING may wait for its answer before the connection is dropped: a dead or
 * black-holed broker is left within about 20 s instead of at the TCP timeout.
 */
export declare const KEEPALIVE_TIMEOUT_MS = 10000;
/** Bound on one connect attempt, so a black-holed address fails over in seconds. */
export declare const CONNECT_TIMEOUT_MS = 5000;
/** One WorkerService method: its path and its codec. */
export interface Method<I extends DescMessage, O extends DescMessage> {
    path: string;
    serialize: (m: MessageShape<I>) => Buffer;
    deserializeRequest: (b: Buffer) => MessageShape<I>;
    serializeResponse: (m: MessageShape<O>) => Buffer;
    deserialize: (b: Buffer) => MessageShape<O>;
}
/** The three WorkerService methods. */
export declare const methods: {
    workStream: Method<import("@bufbuild/protobuf/codegenv2").GenMessage<pb.WorkStreamClientMsg>, import("@bufbuild/protobuf/codegenv2").GenMessage<pb.WorkStreamServerMsg>>;
    getProviderConfig: Method<import("@bufbuild/protobuf/codegenv2").GenMessage<pb.GetProviderConfigRequest>, import("@bufbuild/protobuf/codegenv2").GenMessage<pb.GetProviderConfigResponse>>;
    listDescendants: Method<import("@bufbuild/protobuf/codegenv2").GenMessage<pb.ListDescendantsRequest>, import("@bufbuild/protobuf/codegenv2").GenMessage<pb.ListDescendantsResponse>>;
};
/**
 * The WorkerService as a grpc-js service definition (for a server: the tests' fake broker,
 * or anything else that wants to serve the contract from Node).
 */
export declare const workerServiceDefinition: grpc.ServiceDefinition;
/** The channel options of every connection. */
export declare function channelOptions(cfg: WorkerConfig): grpc.ChannelOptions;
/** A fresh client (one connection) to broker `index` of the list, and the metadata its calls carry. */
export declare function openClient(cfg: WorkerConfig, index: number): {
    client: grpc.Client;
    metadata: grpc.Metadata;
};
/** A short description of a gRPC failure (code name and details) or any other error. */
export declare function describeError(e: unknown): string;
/** Whether `e` is a grpc-js call failure (it has a status code). */
export declare function isServiceError(e: unknown): e is grpc.ServiceError;
/**
 * One unary call with a deadline of `timeoutMs`, cancelled when `signal` aborts (it then
 * fails with CANCELLED).
 */
export declare function unary<I extends DescMessage, O extends DescMessage>(client: grpc.Client, m: Method<I, O>, req: MessageShape<I>, metadata: grpc.Metadata, timeoutMs: number, signal?: AbortSignal): Promise<MessageShape<O>>;
