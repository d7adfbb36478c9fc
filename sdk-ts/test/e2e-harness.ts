/**
 * End-to-end harness: a real `converge serve` on a fresh database, an HTTP client, polling
 * waits with deadlines (never sleeps as synchronisation), and a throwaway certificate
 * authority made with the openssl command for the TLS tests.
 *
 * Needs `CONVERGE_TEST_DATABASE_URL` (an admin URL to database `postgres`) and the converge
 * binary at `CONVERGE_BIN` (default `${CARGO_TARGET_DIR:-~/.cache/converge-target}/debug/converge`).
 * Without them the e2e tests skip, or fail when `CONVERGE_E2E_REQUIRED=1` (scripts/test.sh).
 */

import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { Agent, request as httpsRequest } from "node:https";
import { createServer } from "node:net";
import { homedir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";

import { scratch } from "./scratch.js";

export const REPO = new URL("../../../", import.meta.url).pathname;
export const KINDS_DIR = join(REPO, "conformance", "kinds");

/** The converge binary the e2e tests run. */
export function convergeBin(): string {
  const env = process.env["CONVERGE_BIN"];
  if (env) {
    return env;
  }
  const target = process.env["CARGO_TARGET_DIR"] || join(homedir(), ".cache", "converge-target");
  return join(target, "debug", "converge");
}

/**
 * The admin database URL, or undefined after skipping `t` (or throwing when the e2e tests
 * are required) when the database or the binary is missing.
 */
export function e2eDatabase(t: TestContext): string | undefined {
  const url = process.env["CONVERGE_TEST_DATABASE_URL"];
  const reason = !url
    ? 'CONVERGE_TEST_DATABASE_URL is not set; run sdk-ts/scripts/test.sh or eval "$(scripts/pg-test-cluster.sh start /tmp/ts-pg)"'
    : !existsSync(convergeBin())
      ? `converge binary not found at ${convergeBin()}; set CONVERGE_BIN`
      : undefined;
  if (reason !== undefined) {
    if (process.env["CONVERGE_E2E_REQUIRED"] === "1") {
      throw new Error(reason);
    }
    t.skip(reason);
    return undefined;
  }
  return url;
}

/** A free loopback port (bound then released). */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

/** Polls `probe` until it returns something other than undefined; fails after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let delay = 20;
  for (;;) {
    const v = await probe();
    if (v !== undefined) {
      return v;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 200);
  }
}

function psql(adminUrl: string, sql: string): void {
  execFileSync("psql", [adminUrl, "-qXc", sql], { stdio: ["ignore", "ignore", "pipe"] });
}

function withDatabase(adminUrl: string, name: string): string {
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

/** One HTTP answer: status and decoded JSON body (undefined when empty). */
export interface Reply {
  status: number;
  body: any;
}

/** A JSON HTTP call, over TLS trusting `ca` when given. */
async function http(method: string, url: string, body?: unknown, token?: string, ca?: Buffer): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (body !== undefined) {
    headers["content-type"] = "application/json";
  }
  if (token !== undefined) {
    headers["authorization"] = `Bearer ${token}`;
  }
  const data = body === undefined ? undefined : JSON.stringify(body);
  if (ca === undefined) {
    const r = await fetch(url, { method, headers, ...(data !== undefined ? { body: data } : {}) });
    const text = await r.text();
    return { status: r.status, body: text ? (JSON.parse(text) as unknown) : undefined };
  }
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { method, headers, agent: new Agent({ ca }) }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString();
        resolve({ status: res.statusCode ?? 0, body: text ? (JSON.parse(text) as unknown) : undefined });
      });
    });
    req.on("error", reject);
    req.end(data);
  });
}

/**
 * A running `converge serve` (ROLE=all) on its own fresh database. With `ca` (the PEM roots
 * its certificate chains to; `env` then names the certificate files) both listeners speak
 * TLS and the URLs are https://; with `token` every API call carries it.
 */
export class Converge {
  readonly db = `tsjs_${randomBytes(8).toString("hex")}`;
  readonly databaseUrl: string;
  http = "";
  broker = "";
  proc: ChildProcess | undefined;

  constructor(
    private readonly adminUrl: string,
    private readonly opts: { env?: Record<string, string>; ca?: Buffer; token?: string } = {},
  ) {
    psql(adminUrl, `CREATE DATABASE ${this.db}`);
    this.databaseUrl = withDatabase(adminUrl, this.db);
  }

  async start(): Promise<this> {
    const [hp, gp] = [await freePort(), await freePort()];
    const scheme = this.opts.ca === undefined ? "http" : "https";
    this.http = `${scheme}://127.0.0.1:${hp}`;
    this.broker = `${scheme}://127.0.0.1:${gp}`;
    this.proc = spawn(convergeBin(), ["serve"], {
      env: {
        PATH: process.env["PATH"] ?? "",
        DATABASE_URL: this.databaseUrl,
        LISTEN_ADDR: `127.0.0.1:${hp}`,
        BROKER_LISTEN_ADDR: `127.0.0.1:${gp}`,
        RETRY_BASE: "200ms",
        RETRY_MAX: "1s",
        SHUTDOWN_DRAIN: "2s",
        DB_MAX_CONNECTIONS: "10",
        LOG_LEVEL: process.env["TEST_LOG_LEVEL"] ?? "warn",
        ...this.opts.env,
      },
      stdio: ["ignore", "inherit", "inherit"],
    });
    await waitFor("converge /readyz", async () => {
      if (this.proc?.exitCode !== null) {
        throw new Error(`converge exited with ${this.proc?.exitCode}`);
      }
      try {
        return (await http("GET", `${this.http}/readyz`, undefined, undefined, this.opts.ca)).status === 200
          ? true
          : undefined;
      } catch {
        return undefined;
      }
    });
    return this;
  }

  /** One API call with `token`, else the server's token (none for ""). */
  call(method: string, path: string, body?: unknown, token?: string): Promise<Reply> {
    const tok = token === undefined ? this.opts.token : token || undefined;
    return http(method, `${this.http}${path}`, body, tok, this.opts.ca);
  }

  async applyManifest(manifest: { kind: string }): Promise<void> {
    const r = await this.call("PUT", `/api/v1/kinds/${manifest.kind}/manifest`, manifest);
    if (r.status < 200 || r.status >= 300) {
      throw new Error(`manifest apply failed: ${r.status} ${JSON.stringify(r.body)}`);
    }
  }

  async applyConformanceKinds(): Promise<void> {
    for (const f of readdirSync(KINDS_DIR)
      .filter((n) => n.endsWith(".json"))
      .sort()) {
      await this.applyManifest(JSON.parse(readFileSync(join(KINDS_DIR, f), "utf8")) as { kind: string });
    }
  }

  async apply(kind: string, name: string, spec: unknown): Promise<unknown> {
    const r = await this.call("POST", "/api/v1/resources", { kind, kind_version: 1, name, spec });
    if (r.status !== 200 && r.status !== 201) {
      throw new Error(`apply ${kind}/${name} failed: ${r.status} ${JSON.stringify(r.body)}`);
    }
    return r.body;
  }

  async get(kind: string, name: string): Promise<any> {
    const r = await this.call("GET", `/api/v1/resources/${kind}/${name}`);
    if (r.status === 404) {
      return undefined;
    }
    if (r.status !== 200) {
      throw new Error(`GET ${kind}/${name}: ${r.status} ${JSON.stringify(r.body)}`);
    }
    return r.body;
  }

  waitResource(kind: string, name: string, what: string, pred: (r: any) => boolean, timeoutMs = 30_000): Promise<any> {
    return waitFor(
      `${kind}/${name} ${what}`,
      async () => {
        const r = await this.get(kind, name);
        return r !== undefined && pred(r) ? r : undefined;
      },
      timeoutMs,
    );
  }

  /** SIGTERM, wait, then drop the database. */
  async stop(): Promise<void> {
    await stopProcess(this.proc);
    try {
      psql(this.adminUrl, `DROP DATABASE IF EXISTS ${this.db} WITH (FORCE)`);
    } catch {
      // already gone
    }
  }
}

/** SIGTERM, then SIGKILL after 15 s. */
export async function stopProcess(proc: ChildProcess | undefined, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) {
    return;
  }
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  proc.kill(signal);
  const timer = setTimeout(() => proc.kill("SIGKILL"), 15_000);
  await exited;
  clearTimeout(timer);
}

/**
 * A broker-only `converge serve` (`ROLE=broker`) on the database of a running `Converge`: a
 * second broker pod, with its probes on its own HEALTH_ADDR.
 */
export class Broker {
  broker = "";
  proc: ChildProcess | undefined;

  constructor(private readonly converge: Converge) {}

  async start(): Promise<this> {
    const [hp, gp] = [await freePort(), await freePort()];
    this.broker = `http://127.0.0.1:${gp}`;
    this.proc = spawn(convergeBin(), ["serve"], {
      env: {
        PATH: process.env["PATH"] ?? "",
        ROLE: "broker",
        DATABASE_URL: this.converge.databaseUrl,
        HEALTH_ADDR: `127.0.0.1:${hp}`,
        BROKER_LISTEN_ADDR: `127.0.0.1:${gp}`,
        SHUTDOWN_DRAIN: "2s",
        DB_MAX_CONNECTIONS: "10",
        LOG_LEVEL: process.env["TEST_LOG_LEVEL"] ?? "warn",
      },
      stdio: ["ignore", "inherit", "inherit"],
    });
    await waitFor("broker /readyz", async () => {
      if (this.proc?.exitCode !== null) {
        throw new Error(`the broker exited with ${this.proc?.exitCode}`);
      }
      try {
        return (await fetch(`http://127.0.0.1:${hp}/readyz`)).status === 200 ? true : undefined;
      } catch {
        return undefined;
      }
    });
    return this;
  }

  /** SIGKILL (a crash: no drain). */
  kill(): Promise<void> {
    return stopProcess(this.proc, "SIGKILL");
  }
}

/** A throwaway certificate authority made with the openssl command (EC P-256, one day). */
export class CA {
  readonly dir = scratch("ca");
  readonly certFile = join(this.dir, "ca.pem");
  private readonly keyFile = join(this.dir, "ca-key.pem");
  private serial = 0;

  constructor() {
    this.openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", this.keyFile);
    this.openssl(
      "req",
      "-x509",
      "-new",
      "-key",
      this.keyFile,
      "-sha256",
      "-days",
      "1",
      "-subj",
      "/CN=converge test CA",
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
      "-out",
      this.certFile,
    );
  }

  get pem(): Buffer {
    return readFileSync(this.certFile);
  }

  private openssl(...args: string[]): void {
    execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });
  }

  /**
   * A certificate for `sans` (openssl subjectAltName entries such as `IP:127.0.0.1` or
   * `URI:spiffe://...`), server-auth unless `client`; returns the certificate and key files.
   */
  issue(cn: string, sans: string[], client = false): { cert: string; key: string } {
    this.serial += 1;
    const base = join(this.dir, `${cn}-${this.serial}`);
    const key = `${base}-key.pem`;
    const csr = `${base}.csr`;
    const cert = `${base}.pem`;
    const ext = `${base}.ext`;
    writeFileSync(
      ext,
      [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature",
        `extendedKeyUsage=${client ? "clientAuth" : "serverAuth"}`,
        // RFC 5280 4.2.1.6: a SubjectAlternativeName holds at least one name, so a
        // certificate without names has no SAN extension at all.
        ...(sans.length > 0 ? [`subjectAltName=${sans.join(",")}`] : []),
      ].join("\n"),
    );
    this.openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", `${key}.ec`);
    this.openssl("pkcs8", "-topk8", "-nocrypt", "-in", `${key}.ec`, "-out", key);
    this.openssl("req", "-new", "-key", key, "-subj", `/CN=${cn}`, "-out", csr);
    this.openssl(
      "x509",
      "-req",
      "-in",
      csr,
      "-CA",
      this.certFile,
      "-CAkey",
      this.keyFile,
      "-set_serial",
      String(1000 + this.serial),
      "-days",
      "1",
      "-sha256",
      "-extfile",
      ext,
      "-out",
      cert,
    );
    return { cert, key };
  }
}
