/**
 * One WorkStream session, the reconnect loop around it (walking the broker list, see
 * `failover`), and the provider-config prime.
 *
 * @module
 */
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { wireVersion } from "../convert.js";
import { ConfigError } from "../errors.js";
import * as pb from "../gen/converge/worker/v1/worker_pb.js";
import { log } from "../logs.js";
import { KindVersion } from "../types.js";
import { Failover } from "./failover.js";
import { pollReadiness, providerConfig } from "./state.js";
import { Connection } from "./subtree.js";
import { sleep } from "./sync.js";
import { accept } from "./task.js";
import { CONNECT_TIMEOUT_MS, describeError, isServiceError, methods, openClient, unary } from "./transport.js";
/** Bound on one GetProviderConfig call, milliseconds. */
export const CONFIG_PULL_TIMEOUT_MS = 10_000;
/**
 * One GetProviderConfig call per registered pair: one call for all of them would put every
 * pair's bundle into one answer, which many kinds sharing a large WASM component push past
 * the message cap (the worker would never start). Per pair, an answer carries at most one
 * bundle.
 */
async function pullConfigs(conn, shared, signal) {
    const entries = [];
    for (const kv of shared.registry.kinds()) {
        const req = create(pb.GetProviderConfigRequestSchema, { kinds: [kv.kind], kindVersions: [kv.version] });
        const resp = await unary(conn.client, methods.getProviderConfig, req, conn.metadata, CONFIG_PULL_TIMEOUT_MS, signal);
        entries.push(...resp.entries);
    }
    return entries;
}
/**
 * Loads every registered pair's default config from the first broker of the list that
 * answers (retrying along the list with jittered backoff until one does), and calls
 * `onConfig` for each before any task can arrive. Returns the failover position, on the
 * broker that answered, for the connection loop to start from; undefined when `stop`
 * aborted first.
 */
export async function prime(shared, stop) {
    const addrs = shared.cfg.brokerAddrs;
    const failover = new Failover(addrs.length, shared.cfg.reconnectMinMs, shared.cfg.reconnectMaxMs);
    while (!stop.aborted) {
        const addr = addrs[failover.current];
        let entries;
        try {
            const { client, metadata } = openClient(shared.cfg, failover.current);
            const conn = new Connection(client, metadata);
            try {
                entries = await pullConfigs(conn, shared, stop);
            }
            finally {
                conn.end();
            }
        }
        catch (e) {
            if (stop.aborted) {
                return undefined;
            }
            if (!(e instanceof ConfigError) && !isServiceError(e)) {
                throw e;
            }
            const delay = failover.failed();
            log.warn(`cannot load provider configs from ${addr} (${describeError(e)}); trying ${addrs[failover.current]} in ${(delay / 1000).toFixed(1)}s`);
            await sleep(delay, stop);
            continue;
        }
        log.info(`provider configs loaded from ${addr} (${entries.length})`);
        shared.applyPulled(entries, true);
        failover.succeeded();
        return failover;
    }
    return undefined;
}
/**
 * Handles one server frame that arrived on `conn`; returns whether the session is now
 * draining.
 */
function dispatch(shared, conn, msg, draining) {
    const body = msg.body;
    switch (body.case) {
        case "task": {
            const refuse = draining
                ? "worker stream is draining; task refused"
                : shared.shuttingDown
                    ? "worker is shutting down; task refused"
                    : undefined;
            accept(shared, body.value, refuse, conn);
            break;
        }
        case "ack":
            shared.ack({ token: body.value.leaseToken, epoch: body.value.claimEpoch }, body.value.accepted);
            break;
        case "config": {
            const u = body.value;
            const kv = new KindVersion(u.kind, wireVersion(u.kindVersion));
            const provider = shared.registry.find(kv.kind, kv.version);
            if (provider === undefined) {
                log.debug(`config for unserved pair ${kv} ignored`);
            }
            else {
                shared.applyConfig(kv, provider, providerConfig(kv, u.config, u.bundle), true);
            }
            break;
        }
        case "cancel": {
            const c = body.value;
            const known = shared.cancelTask({ token: c.leaseToken, epoch: c.claimEpoch }, c.reason);
            log.info(`task ${c.leaseToken} cancelled by the broker (${c.reason}, known=${known})`);
            break;
        }
        case "drain":
            log.info(`broker is draining (${body.value.reason}); finishing ${shared.running.size} running and ` +
                `${shared.unacked.size} unacked before reconnecting`);
            return true;
        default:
            log.debug("empty frame ignored");
    }
    return draining;
}
/**
 * Runs one stream to its end on broker `attempt.index`; resolves "drained", "closed" (the
 * broker ended it) or "stopped" (`stop` aborted), rejects on a stream error
 * (`attempt.opened` says whether the stream had opened).
 */
export async function runSession(shared, attempt, reconnect, stop) {
    const { client, metadata } = openClient(shared.cfg, attempt.index);
    const conn = new Connection(client, metadata);
    let sid;
    try {
        if (reconnect) {
            // Pulled before the stream opens, so the broker's own push at subscribe time (newer)
            // is applied after it.
            try {
                shared.applyPulled(await pullConfigs(conn, shared, stop), false);
            }
            catch (e) {
                if (stop.aborted) {
                    return "stopped";
                }
                log.warn(`config re-pull after reconnect failed: ${describeError(e)}`);
            }
        }
        if (stop.aborted) {
            return "stopped";
        }
        const call = client.makeBidiStreamRequest(methods.workStream.path, methods.workStream.serialize, methods.workStream.deserialize, metadata);
        sid = shared.openSession((frame) => call.write(frame), pollReadiness(shared));
        return await new Promise((resolve, reject) => {
            let settled = false;
            let draining = false;
            const finish = (end) => {
                if (settled) {
                    return;
                }
                settled = true;
                // No frame is written to a call that is over; kept results go out on the next one.
                if (sid !== undefined) {
                    shared.closeSession(sid);
                }
                clearTimeout(connectTimer);
                stop.removeEventListener("abort", onStop);
                if (end instanceof Error) {
                    reject(end);
                }
                else {
                    resolve(end);
                }
            };
            const onStop = () => {
                finish("stopped");
                call.cancel();
            };
            // A connect that neither succeeds nor fails (a black-holed address) is given up after
            // CONNECT_TIMEOUT_MS, so the next broker of the list is tried within seconds.
            const connectTimer = setTimeout(() => {
                if (!attempt.opened && client.getChannel().getConnectivityState(false) !== grpc.connectivityState.READY) {
                    finish(new Error(`no connection within ${CONNECT_TIMEOUT_MS / 1000}s`));
                    call.cancel();
                }
            }, CONNECT_TIMEOUT_MS);
            // Headers come once the broker has taken the Subscribe; a refusal (or no connection)
            // ends the call instead, with no headers.
            call.on("metadata", () => {
                attempt.opened = true;
                log.info(`work stream open (session ${sid}, broker ${shared.cfg.brokerAddrs[attempt.index]})`);
            });
            call.on("data", (msg) => {
                if (settled) {
                    return;
                }
                draining = dispatch(shared, conn, msg, draining);
                if (draining && shared.outstanding === 0) {
                    log.info("drained: in-flight work delivered; closing the stream");
                    finish("drained");
                    call.cancel();
                }
            });
            call.on("error", (e) => finish(e));
            call.on("status", (s) => {
                if (s.code === grpc.status.OK) {
                    finish("closed");
                }
            });
            if (stop.aborted) {
                onStop();
            }
            else {
                stop.addEventListener("abort", onStop, { once: true });
            }
        });
    }
    finally {
        if (sid !== undefined) {
            shared.closeSession(sid);
        }
        // Closes the client, or leaves that to the last ROLLUP handler still paging on it.
        conn.end();
    }
}
/**
 * Runs sessions until `stop`, starting on the broker `failover` points at and moving along
 * the list on every failure or stream end (see `failover` for the waits and the backoff).
 * Handlers survive reconnects.
 */
export async function connectionLoop(shared, stop, failover) {
    const addrs = shared.cfg.brokerAddrs;
    let reconnect = false;
    while (!stop.aborted) {
        const started = performance.now();
        const attempt = { index: failover.current, opened: false };
        const addr = addrs[attempt.index];
        let end;
        let error;
        try {
            end = await runSession(shared, attempt, reconnect, stop);
        }
        catch (e) {
            error = e;
        }
        if (stop.aborted || end === "stopped") {
            return;
        }
        reconnect = true;
        if (end === "drained") {
            log.info(`session with ${addr} drained`);
        }
        else if (end === "closed") {
            log.warn(`broker ${addr} closed the work stream`);
        }
        else if (attempt.opened) {
            log.warn(`work stream to ${addr} lost: ${describeError(error)}`);
        }
        else {
            log.warn(`no work stream from ${addr}: ${describeError(error)}`);
        }
        const delay = attempt.opened ? failover.ended(performance.now() - started) : failover.failed();
        log.info(`reconnecting to ${addrs[failover.current]} in ${(delay / 1000).toFixed(2)}s`);
        await sleep(delay, stop);
    }
}
//# sourceMappingURL=session.js.map