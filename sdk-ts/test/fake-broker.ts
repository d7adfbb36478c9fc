/**
 * An in-process fake broker (a grpc-js WorkerService server) that records every client
 * frame and lets a test push server frames, to check the SDK's stream rules precisely. It
 * also pages through a scripted subtree for ListDescendants, recording every call.
 */

import { randomUUID } from "node:crypto";
import { createServer } from "node:net";

import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";

import { uuidBytes } from "../src/convert.js";
import * as pb from "../src/gen/converge/worker/v1/worker_pb.js";
import { workerServiceDefinition } from "../src/runtime/transport.js";

/** A FIFO whose `get` waits, with a deadline. */
export class Queue<T> {
  private items: T[] = [];
  private waiters: Array<(v: T) => void> = [];

  put(v: T): void {
    const w = this.waiters.shift();
    if (w !== undefined) {
      w(v);
    } else {
      this.items.push(v);
    }
  }

  get(timeoutMs = 5_000, what = "an item"): Promise<T> {
    const v = this.items.shift();
    if (v !== undefined) {
      return Promise.resolve(v);
    }
    return new Promise((resolve, reject) => {
      const waiter = (x: T): void => {
        clearTimeout(timer);
        resolve(x);
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`timed out after ${timeoutMs}ms waiting for ${what}`));
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }
}

type ClientBody = pb.WorkStreamClientMsg["body"];
type ClientCase = NonNullable<ClientBody["case"]>;
type ValueOf<C extends ClientCase> = Extract<ClientBody, { case: C }>["value"];

/** One WorkStream as the broker sees it. */
export class Stream {
  readonly inbox = new Queue<pb.WorkStreamClientMsg | null>();
  closed = false;
  private readonly closedWaiters: Array<() => void> = [];

  constructor(
    private readonly call: grpc.ServerDuplexStream<pb.WorkStreamClientMsg, pb.WorkStreamServerMsg>,
    readonly peer: string,
  ) {
    call.on("data", (m: pb.WorkStreamClientMsg) => this.inbox.put(m));
    const close = (): void => {
      if (!this.closed) {
        this.closed = true;
        this.inbox.put(null);
        for (const w of this.closedWaiters.splice(0)) {
          w();
        }
      }
    };
    call.on("end", close);
    call.on("error", close);
    call.on("cancelled", close);
    call.on("close", close);
  }

  /** Sends one server frame. */
  push(body: pb.WorkStreamServerMsg["body"]): void {
    if (!this.closed) {
      this.call.write(create(pb.WorkStreamServerMsgSchema, { body }));
    }
  }

  /** Ends the stream from the broker side (status OK). */
  end(): void {
    this.call.end();
  }

  /** Resolves once the client has gone away. */
  whenClosed(timeoutMs = 5_000): Promise<void> {
    if (this.closed) {
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the stream did not close")), timeoutMs);
      this.closedWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** The next client frame of case `c`, skipping others (e.g. heartbeats). */
  async next<C extends ClientCase>(c: C, timeoutMs = 5_000): Promise<ValueOf<C>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = await this.inbox.get(Math.max(1, deadline - Date.now()), `a ${c} frame`);
      if (m === null) {
        throw new Error(`stream ended before a ${c} frame`);
      }
      if (m.body.case === c) {
        return m.body.value as ValueOf<C>;
      }
    }
  }

  /** The next client frame of any kind. */
  async first(timeoutMs = 5_000): Promise<pb.WorkStreamClientMsg> {
    const m = await this.inbox.get(timeoutMs, "a frame");
    if (m === null) {
      throw new Error("stream ended");
    }
    return m;
  }
}

/** Serves WorkerService on a loopback port; each new stream lands in `streams`. */
export class FakeBroker {
  readonly streams = new Queue<Stream>();
  entries: pb.ProviderConfigEntry[] = [];
  configPulls = 0;
  /** [rpc, authorization metadata or undefined] of every call, in arrival order. */
  readonly auth: Array<[string, string | undefined]> = [];
  /** The subtree ListDescendants pages through (wire Resources, in order). */
  descendants: pb.Resource[] = [];
  /** When set, every ListDescendants call fails with this code. */
  listError: grpc.status | undefined;
  /** [request, client address] of every ListDescendants call. */
  readonly listCalls: Array<[pb.ListDescendantsRequest, string]> = [];
  /** When set, every call is refused with this code (a broker that never takes a stream). */
  refuse: grpc.status | undefined;
  refused = 0;
  addr = "";
  private server: grpc.Server | undefined;

  async start(credentials: grpc.ServerCredentials = grpc.ServerCredentials.createInsecure()): Promise<this> {
    const server = new grpc.Server();
    server.addService(workerServiceDefinition, {
      WorkStream: (call: grpc.ServerDuplexStream<pb.WorkStreamClientMsg, pb.WorkStreamServerMsg>) =>
        this.workStream(call),
      GetProviderConfig: (
        call: grpc.ServerUnaryCall<pb.GetProviderConfigRequest, pb.GetProviderConfigResponse>,
        cb: grpc.sendUnaryData<pb.GetProviderConfigResponse>,
      ) => this.getProviderConfig(call, cb),
      ListDescendants: (
        call: grpc.ServerUnaryCall<pb.ListDescendantsRequest, pb.ListDescendantsResponse>,
        cb: grpc.sendUnaryData<pb.ListDescendantsResponse>,
      ) => this.listDescendants(call, cb),
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", credentials, (err, p) => (err ? reject(err) : resolve(p))),
    );
    this.server = server;
    const tls = credentials._isSecure();
    this.addr = `${tls ? "https" : "http"}://127.0.0.1:${port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.forceShutdown();
  }

  async nextStream(timeoutMs = 5_000): Promise<Stream> {
    return this.streams.get(timeoutMs, "a new stream");
  }

  private recordAuth(rpc: string, md: grpc.Metadata): void {
    const v = md.get("authorization")[0];
    this.auth.push([rpc, v === undefined ? undefined : String(v)]);
  }

  private refusal(): grpc.ServiceError | undefined {
    if (this.refuse === undefined) {
      return undefined;
    }
    this.refused += 1;
    return Object.assign(new Error("no entry"), {
      code: this.refuse,
      details: "no entry",
      metadata: new grpc.Metadata(),
    });
  }

  private workStream(call: grpc.ServerDuplexStream<pb.WorkStreamClientMsg, pb.WorkStreamServerMsg>): void {
    this.recordAuth("WorkStream", call.metadata);
    const refused = this.refusal();
    if (refused !== undefined) {
      call.emit("error", refused);
      return;
    }
    // Headers, as the real broker sends once it has taken the Subscribe.
    call.sendMetadata(new grpc.Metadata());
    this.streams.put(new Stream(call, call.getPeer()));
  }

  private getProviderConfig(
    call: grpc.ServerUnaryCall<pb.GetProviderConfigRequest, pb.GetProviderConfigResponse>,
    cb: grpc.sendUnaryData<pb.GetProviderConfigResponse>,
  ): void {
    this.configPulls += 1;
    this.recordAuth("GetProviderConfig", call.metadata);
    const refused = this.refusal();
    if (refused !== undefined) {
      cb(refused);
      return;
    }
    cb(null, create(pb.GetProviderConfigResponseSchema, { entries: this.entries }));
  }

  /** Pages through `descendants`; a page token is the decimal offset of its first row. */
  private listDescendants(
    call: grpc.ServerUnaryCall<pb.ListDescendantsRequest, pb.ListDescendantsResponse>,
    cb: grpc.sendUnaryData<pb.ListDescendantsResponse>,
  ): void {
    const req = call.request;
    this.listCalls.push([req, call.getPeer()]);
    this.recordAuth("ListDescendants", call.metadata);
    if (this.listError !== undefined) {
      cb({ code: this.listError, details: "lease is no longer current", name: "", message: "" });
      return;
    }
    const start = req.pageToken.length > 0 ? Number(Buffer.from(req.pageToken).toString()) : 0;
    const end = Math.min(start + (req.pageSize || 500), this.descendants.length);
    cb(
      null,
      create(pb.ListDescendantsResponseSchema, {
        descendants: this.descendants.slice(start, end),
        nextPageToken: end < this.descendants.length ? Buffer.from(String(end)) : new Uint8Array(),
      }),
    );
  }
}

/** A STAGE_WORK task frame body. */
export function workTask(
  lease: string,
  epoch = 1n,
  opts: { kind?: string; name?: string; spec?: string; deadlineMs?: number; attempt?: number } = {},
): pb.WorkStreamServerMsg["body"] {
  const kind = opts.kind ?? "k";
  return {
    case: "task",
    value: create(pb.StageTaskSchema, {
      stage: pb.Stage.WORK,
      kind,
      kindVersion: 1,
      generation: 1n,
      reaction: "work",
      leaseToken: lease,
      claimEpoch: epoch,
      taskDeadlineMs: BigInt(opts.deadlineMs ?? 0),
      trigger: "specChange",
      attempt: opts.attempt ?? 1,
      request: {
        case: "workReq",
        value: {
          resource: {
            kind,
            name: opts.name ?? "r",
            spec: Buffer.from(opts.spec ?? "{}"),
            generation: 1n,
          },
        },
      },
    }),
  };
}

/** `n` ready conf-leaf descendants `c0`..`c{n-1}` with fresh ids (wire Resources). */
export function leafRows(n: number): pb.Resource[] {
  return Array.from({ length: n }, (_, i) =>
    create(pb.ResourceSchema, {
      id: uuidBytes(randomUUID()),
      kind: "conf-leaf",
      kindVersion: 1,
      name: `c${i}`,
      spec: Buffer.from("{}"),
      isReady: true,
      phase: "Ready",
    }),
  );
}

/** A STAGE_ROLLUP task frame body for root `k/root` (kind `k`). */
export function rollupTask(
  lease: string,
  epoch = 1n,
  opts: { resourceId?: Uint8Array; summary?: pb.RollupSummary; descendants?: pb.Resource[]; included?: boolean } = {},
): pb.WorkStreamServerMsg["body"] {
  const resourceId = opts.resourceId ?? new Uint8Array(16).fill(1);
  return {
    case: "task",
    value: create(pb.StageTaskSchema, {
      stage: pb.Stage.ROLLUP,
      kind: "k",
      kindVersion: 1,
      generation: 1n,
      reaction: "rollup",
      leaseToken: lease,
      claimEpoch: epoch,
      resourceId,
      trigger: "childrenSettled",
      attempt: 1,
      request: {
        case: "rollupReq",
        value: {
          root: { id: resourceId, kind: "k", name: "root", spec: Buffer.from("{}"), generation: 1n },
          descendants: opts.descendants ?? [],
          ...(opts.summary !== undefined ? { summary: opts.summary } : {}),
          descendantsIncluded: opts.included ?? false,
        },
      },
    }),
  };
}

/** A loopback address nothing listens on (bound, then released). */
export async function deadAddr(): Promise<string> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/** Polls `probe` until it returns something other than undefined; fails after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) {
      return v;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}
