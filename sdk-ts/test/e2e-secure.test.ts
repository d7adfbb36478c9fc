/**
 * End to end with the broker secured: a real `converge serve` with TLS on both listeners (a
 * CA and a 127.0.0.1 certificate made in the test with openssl) and an AUTH_FILE. The worker
 * connects over https:// with BROKER_CA_FILE and a worker token and reconciles a resource,
 * while a worker with a wrong token is refused (UNAUTHENTICATED) and gets no work. With
 * TLS_CLIENT_CA_FILE, a worker identified only by its client certificate's SPIFFE ID does the
 * same.
 */

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type TestContext, test } from "node:test";

import {
  Condition,
  KindVersion,
  type Logger,
  Outcome,
  type Provider,
  WorkerConfig,
  serve,
  setLogger,
} from "../src/index.js";
import { CA, Converge, KINDS_DIR, e2eDatabase, waitFor } from "./e2e-harness.js";

const KIND = "conf-leaf";
const SPIFFE_ID = "spiffe://converge.test/worker/m";

const token = (): string => `cvg_${randomBytes(32).toString("base64url")}`;
const sha256 = (s: string): string => createHash("sha256").update(s).digest("hex");

const greeter: Provider = {
  kind: new KindVersion(KIND, 1),
  work: (req) =>
    new Outcome({ status: { hello: req.resource.name } }).withCondition(Condition.ready(true, "Greeted", "over TLS")),
};

interface Secured {
  server: Converge;
  ca: CA;
  workerToken: string;
}

/** Starts converge with TLS and an AUTH_FILE; with `clientCa` the broker also wants client certificates. */
async function secure(t: TestContext, clientCa: boolean, body: (s: Secured) => Promise<void>): Promise<void> {
  const url = e2eDatabase(t);
  if (url === undefined) {
    return;
  }
  const ca = new CA();
  const { cert, key } = ca.issue("converge", ["IP:127.0.0.1", "DNS:localhost"]);
  const admin = token();
  const workerToken = token();
  const auth = join(ca.dir, "auth.json");
  writeFileSync(
    auth,
    JSON.stringify({
      principals: [
        { name: "ops", role: "admin", token_sha256: sha256(admin) },
        { name: "w", role: "worker", token_sha256: sha256(workerToken), kinds: [KIND] },
        { name: "m", role: "worker", spiffe_id: SPIFFE_ID, kinds: [KIND] },
      ],
    }),
  );
  const env: Record<string, string> = { TLS_CERT_FILE: cert, TLS_KEY_FILE: key, AUTH_FILE: auth };
  if (clientCa) {
    env["TLS_CLIENT_CA_FILE"] = ca.certFile;
  }
  const server = new Converge(url, { env, ca: ca.pem, token: admin });
  try {
    await server.start();
    await server.applyManifest(JSON.parse(readFileSync(join(KINDS_DIR, `${KIND}.json`), "utf8")) as { kind: string });
    await body({ server, ca, workerToken });
  } finally {
    await server.stop();
  }
}

async function running(cfg: WorkerConfig, body: () => Promise<void>): Promise<void> {
  cfg.reconnectMinMs = 100;
  cfg.reconnectMaxMs = 500;
  cfg.drainTimeoutMs = 2_000;
  const stop = new AbortController();
  const done = serve([greeter], { config: cfg, signal: stop.signal });
  try {
    await body();
  } finally {
    stop.abort();
    await done;
  }
}

test("a worker reconciles over TLS with a token, and a wrong token gets nothing", { timeout: 90_000 }, (t) =>
  secure(t, false, async ({ server: c, ca, workerToken }) => {
    assert.equal((await c.call("GET", "/api/v1/resources", undefined, "")).status, 401, "the API wants a token");
    await c.apply(KIND, "secure", { greeting: "hi" });

    // A wrong token: the broker answers UNAUTHENTICATED, the SDK logs it and retries, and
    // nothing reaches the resource.
    const lines: string[] = [];
    const capture: Logger = {
      debug: () => {},
      info: () => {},
      warn: (m) => lines.push(m),
      error: (m) => lines.push(m),
    };
    setLogger(capture);
    const wrongToken = token();
    const wrong = WorkerConfig.fromEnv({
      BROKER_ADDR: c.broker,
      BROKER_CA_FILE: ca.certFile,
      WORKER_TOKEN: wrongToken,
      WORKER_NAME: "wrong-token",
    });
    await running(wrong, async () => {
      const msg = await waitFor("the wrong token's UNAUTHENTICATED", async () =>
        lines.find((l) => l.includes("UNAUTHENTICATED")),
      );
      assert.ok(!msg.includes(wrongToken), "the token is never logged");
    });
    const r = await c.get(KIND, "secure");
    assert.ok(r.phase !== "Ready" && !r.status, JSON.stringify(r));

    // The right token, from a file as a deployment mounts it.
    const file = join(ca.dir, "token");
    writeFileSync(file, `${workerToken}\n`);
    const good = WorkerConfig.fromEnv({
      BROKER_ADDR: c.broker,
      BROKER_CA_FILE: ca.certFile,
      WORKER_TOKEN_FILE: file,
      WORKER_NAME: "right-token",
    });
    await running(good, async () => {
      const ok = await c.waitResource(KIND, "secure", "Ready", (v) => v.phase === "Ready");
      assert.deepEqual(ok.status, { hello: "secure" });
    });
  }),
);

test("a worker reconciles over mutual TLS, identified by its SPIFFE ID", { timeout: 90_000 }, (t) =>
  secure(t, true, async ({ server: c, ca }) => {
    await c.apply(KIND, "mutual", {});
    const { cert, key } = ca.issue("m", [`URI:${SPIFFE_ID}`], true);
    const cfg = WorkerConfig.fromEnv({
      BROKER_ADDR: c.broker,
      BROKER_CA_FILE: ca.certFile,
      WORKER_CERT_FILE: cert,
      WORKER_KEY_FILE: key,
      WORKER_NAME: "mtls",
    });
    await running(cfg, async () => {
      const r = await c.waitResource(KIND, "mutual", "Ready", (v) => v.phase === "Ready");
      assert.deepEqual(r.status, { hello: "mutual" });
    });
  }),
);
