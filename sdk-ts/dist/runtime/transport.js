/**
 * The gRPC side of a broker connection on @grpc/grpc-js: the WorkerService method
 * definitions (protobuf-es messages as the codec), the channel options every SDK uses
 * (message cap, keepalive, no retries, a private connection per session), TLS or h2c
 * credentials, and the bearer-token metadata. The token and TLS files are read at every
 * connect, so rotated ones are picked up without a restart.
 *
 * @module
 */
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import * as pb from "../gen/converge/worker/v1/worker_pb.js";
/** How often an HTTP/2 PING goes out, also with no call open (the broker does not limit pings). */
export const KEEPALIVE_TIME_MS = 10_000;
/**
 * How long a PING may wait for its answer before the connection is dropped: a dead or
 * black-holed broker is left within about 20 s instead of at the TCP timeout.
 */
export const KEEPALIVE_TIMEOUT_MS = 10_000;
/** Bound on one connect attempt, so a black-holed address fails over in seconds. */
export const CONNECT_TIMEOUT_MS = 5_000;
function method(name, input, output) {
    return {
        path: `/${pb.WorkerService.typeName}/${name}`,
        serialize: (m) => Buffer.from(toBinary(input, m)),
        deserializeRequest: (b) => fromBinary(input, b),
        serializeResponse: (m) => Buffer.from(toBinary(output, m)),
        deserialize: (b) => fromBinary(output, b),
    };
}
/** The three WorkerService methods. */
export const methods = {
    workStream: method("WorkStream", pb.WorkStreamClientMsgSchema, pb.WorkStreamServerMsgSchema),
    getProviderConfig: method("GetProviderConfig", pb.GetProviderConfigRequestSchema, pb.GetProviderConfigResponseSchema),
    listDescendants: method("ListDescendants", pb.ListDescendantsRequestSchema, pb.ListDescendantsResponseSchema),
};
/**
 * The WorkerService as a grpc-js service definition (for a server: the tests' fake broker,
 * or anything else that wants to serve the contract from Node).
 */
export const workerServiceDefinition = {
    WorkStream: {
        path: methods.workStream.path,
        requestStream: true,
        responseStream: true,
        requestSerialize: methods.workStream.serialize,
        requestDeserialize: methods.workStream.deserializeRequest,
        responseSerialize: methods.workStream.serializeResponse,
        responseDeserialize: methods.workStream.deserialize,
    },
    GetProviderConfig: {
        path: methods.getProviderConfig.path,
        requestStream: false,
        responseStream: false,
        requestSerialize: methods.getProviderConfig.serialize,
        requestDeserialize: methods.getProviderConfig.deserializeRequest,
        responseSerialize: methods.getProviderConfig.serializeResponse,
        responseDeserialize: methods.getProviderConfig.deserialize,
    },
    ListDescendants: {
        path: methods.listDescendants.path,
        requestStream: false,
        responseStream: false,
        requestSerialize: methods.listDescendants.serialize,
        requestDeserialize: methods.listDescendants.deserializeRequest,
        responseSerialize: methods.listDescendants.serializeResponse,
        responseDeserialize: methods.listDescendants.deserialize,
    },
};
/** The channel options of every connection. */
export function channelOptions(cfg) {
    return {
        "grpc.max_send_message_length": cfg.maxMessageBytes,
        "grpc.max_receive_message_length": cfg.maxMessageBytes,
        // grpc-js's CompressionAlgorithms: 2 is gzip, 0 identity (plain frames).
        "grpc.default_compression_algorithm": cfg.compression === "gzip" ? 2 : 0,
        "grpc.keepalive_time_ms": KEEPALIVE_TIME_MS,
        "grpc.keepalive_timeout_ms": KEEPALIVE_TIMEOUT_MS,
        "grpc.keepalive_permit_without_calls": 1,
        "grpc.enable_retries": 0,
        // A connection of its own per session (grpc-js otherwise shares one per target), so
        // that after a drain or a lost stream the next session really dials again.
        "grpc.use_local_subchannel_pool": 1,
    };
}
/** A fresh client (one connection) to broker `index` of the list, and the metadata its calls carry. */
export function openClient(cfg, index) {
    const target = cfg.targets[index];
    if (target === undefined) {
        throw new RangeError(`no broker at index ${index}`);
    }
    const metadata = new grpc.Metadata();
    const token = cfg.readToken();
    if (token !== undefined) {
        metadata.set("authorization", `Bearer ${token}`);
    }
    let creds;
    if (cfg.tls) {
        const { roots, key, chain } = cfg.tlsMaterial();
        creds = grpc.credentials.createSsl(roots, key, chain);
    }
    else {
        creds = grpc.credentials.createInsecure();
    }
    return { client: new grpc.Client(target, creds, channelOptions(cfg)), metadata };
}
/** A short description of a gRPC failure (code name and details) or any other error. */
export function describeError(e) {
    if (isServiceError(e)) {
        return `${grpc.status[e.code] ?? e.code}: ${e.details}`;
    }
    return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}
/** Whether `e` is a grpc-js call failure (it has a status code). */
export function isServiceError(e) {
    return typeof e === "object" && e !== null && "code" in e && typeof e.code === "number";
}
/**
 * One unary call with a deadline of `timeoutMs`, cancelled when `signal` aborts (it then
 * fails with CANCELLED).
 */
export function unary(client, m, req, metadata, timeoutMs, signal) {
    return new Promise((resolve, reject) => {
        const call = client.makeUnaryRequest(m.path, m.serialize, m.deserialize, req, metadata, { deadline: Date.now() + timeoutMs }, (err, resp) => {
            signal?.removeEventListener("abort", cancel);
            if (err !== null || resp === undefined) {
                reject(err ?? new Error("empty response"));
            }
            else {
                resolve(resp);
            }
        });
        const cancel = () => call.cancel();
        if (signal?.aborted) {
            call.cancel();
        }
        else {
            signal?.addEventListener("abort", cancel, { once: true });
        }
    });
}
//# sourceMappingURL=transport.js.map