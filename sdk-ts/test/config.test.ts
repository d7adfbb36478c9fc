/**
 * WorkerConfig from the environment: defaults, broker lists, durations, the token and TLS
 * settings, and errors that name the variable without showing the token.
 */

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { inspect } from "node:util";
import { test } from "node:test";

import {
  ConfigError,
  DEFAULT_DRAIN_TIMEOUT_MS,
  DEFAULT_MAX_MESSAGE_BYTES,
  DEFAULT_MAX_PARALLEL,
  WorkerConfig,
  parseDuration,
} from "../src/index.js";
import { openClient } from "../src/runtime/transport.js";
import { scratch } from "./scratch.js";

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ConfigError, `expected a ConfigError, got ${String(e)}`);
    return e;
  }
  assert.fail("expected a ConfigError");
}

const tmp = (): string => scratch("config");

test("defaults and values", () => {
  const d = WorkerConfig.fromEnv({ BROKER_ADDR: "http://127.0.0.1:9090" });
  assert.deepEqual(d.brokerAddrs, ["http://127.0.0.1:9090"]);
  assert.equal(d.maxParallel, DEFAULT_MAX_PARALLEL);
  assert.equal(d.drainTimeoutMs, DEFAULT_DRAIN_TIMEOUT_MS);
  assert.equal(d.maxMessageBytes, DEFAULT_MAX_MESSAGE_BYTES);
  assert.equal(d.kinds, undefined);
  assert.match(d.workerName, /-\d+$/);
  const c = WorkerConfig.fromEnv({
    BROKER_ADDR: "127.0.0.1:9090",
    WORKER_MAX_PARALLEL: "3",
    WORKER_DRAIN_TIMEOUT: "1500ms",
    WORKER_KINDS: " a, b ,",
    WORKER_NAME: "w1",
    GRPC_MAX_MESSAGE_BYTES: "536870912",
    GRPC_COMPRESSION: " GZIP ",
  });
  assert.deepEqual(c.brokerAddrs, ["http://127.0.0.1:9090"], "a bare host:port is h2c");
  assert.deepEqual(c.targets, ["127.0.0.1:9090"]);
  assert.equal(c.maxParallel, 3);
  assert.equal(c.drainTimeoutMs, 1500);
  assert.deepEqual(c.kinds, ["a", "b"]);
  assert.equal(c.workerName, "w1");
  assert.equal(c.maxMessageBytes, 512 * 1024 * 1024);
  assert.equal(c.compression, "gzip");
  assert.equal(WorkerConfig.fromEnv({ BROKER_ADDR: "a:1" }).compression, "none");
  assert.equal(WorkerConfig.fromEnv({ BROKER_ADDR: "a:1", GRPC_COMPRESSION: "identity" }).compression, "none");
  c.validate();
});

test("broker lists keep their order", () => {
  const c = WorkerConfig.fromEnv({ BROKER_ADDR: " a:1 , http://b:2, c.example:3/ " });
  assert.deepEqual(c.brokerAddrs, ["http://a:1", "http://b:2", "http://c.example:3/"]);
  assert.deepEqual(c.targets, ["a:1", "b:2", "c.example:3"]);
  assert.equal(c.tls, false);
  const t = WorkerConfig.fromEnv({ BROKER_ADDR: "https://a:1,https://b:2" });
  assert.equal(t.tls, true);
  assert.deepEqual(t.targets, ["a:1", "b:2"]);
});

test("bad broker lists name BROKER_ADDR and the entry", () => {
  for (const [raw, needles] of [
    ["a:1,,b:2", ["entry 2 of 3", "is empty"]],
    ["a:1,b", ["entry 2 of 2", '"b"', "missing port"]],
    ["https://a:1,b:2", ["mixes https://"]],
    ["ftp://a:1", ["expected https://host:port"]],
    ["a:99999", ["is not a number in 1..65535"]],
    ["a:1/x", ["expected https://host:port"]],
  ] as const) {
    const e = configError(() => WorkerConfig.fromEnv({ BROKER_ADDR: raw }));
    assert.equal(e.variable, "BROKER_ADDR");
    for (const n of needles) {
      assert.ok(e.message.includes(n), `${raw}: ${e.message} lacks ${n}`);
    }
  }
});

test("empty counts as unset and BROKER_ADDR is required", () => {
  const c = WorkerConfig.fromEnv({
    BROKER_ADDR: "a:1",
    WORKER_MAX_PARALLEL: "",
    WORKER_TOKEN: "  ",
    WORKER_KINDS: "",
  });
  assert.equal(c.maxParallel, DEFAULT_MAX_PARALLEL);
  assert.equal(c.token, undefined);
  assert.match(configError(() => WorkerConfig.fromEnv({ BROKER_ADDR: " " })).message, /BROKER_ADDR is required/);
});

test("malformed values name the variable", () => {
  for (const [env, variable] of [
    [{ WORKER_MAX_PARALLEL: "0" }, "WORKER_MAX_PARALLEL"],
    [{ WORKER_MAX_PARALLEL: "x" }, "WORKER_MAX_PARALLEL"],
    [{ WORKER_MAX_PARALLEL: "1048577" }, "WORKER_MAX_PARALLEL"],
    [{ WORKER_DRAIN_TIMEOUT: "5 minutes" }, "WORKER_DRAIN_TIMEOUT"],
    [{ WORKER_DRAIN_TIMEOUT: "5d" }, "WORKER_DRAIN_TIMEOUT"],
    [{ WORKER_KINDS: " , " }, "WORKER_KINDS"],
    [{ GRPC_MAX_MESSAGE_BYTES: "536870913" }, "GRPC_MAX_MESSAGE_BYTES"],
    [{ GRPC_MAX_MESSAGE_BYTES: "64MiB" }, "GRPC_MAX_MESSAGE_BYTES"],
    [{ GRPC_COMPRESSION: "zstd" }, "GRPC_COMPRESSION"],
  ] as const) {
    const e = configError(() => WorkerConfig.fromEnv({ BROKER_ADDR: "a:1", ...env }));
    assert.equal(e.variable, variable, e.message);
    assert.ok(e.message.startsWith(`${variable}=`), e.message);
  }
});

test("durations", () => {
  assert.equal(parseDuration("45s"), 45_000);
  assert.equal(parseDuration("500ms"), 500);
  assert.equal(parseDuration("2m"), 120_000);
  assert.equal(parseDuration("1h"), 3_600_000);
  assert.equal(parseDuration("7"), 7_000);
  assert.equal(parseDuration("1.5"), 1_500);
  assert.throws(() => parseDuration("-1s"), /not a duration/);
  assert.throws(() => parseDuration("3w"), /unknown unit/);
});

test("validate refuses unusable fields", () => {
  const ok = { brokerAddrs: ["http://a:1"] };
  assert.throws(() => new WorkerConfig({ ...ok, maxParallel: 0 }).validate(), /maxParallel/);
  assert.throws(() => new WorkerConfig({ ...ok, reconnectMaxMs: 6_000 }).validate(), /must not exceed 5000ms/);
  assert.throws(
    () => new WorkerConfig({ ...ok, reconnectMinMs: 300, reconnectMaxMs: 200 }).validate(),
    /reconnectMaxMs/,
  );
  assert.throws(() => new WorkerConfig({ ...ok, heartbeatEveryMs: 0 }).validate(), /heartbeatEveryMs/);
  assert.throws(() => new WorkerConfig({ brokerAddrs: [] }).validate(), /non-empty list/);
  assert.throws(() => new WorkerConfig({ brokerAddrs: ["http://a:1", "b"] }).validate(), /entry 2 of 2/);
  assert.throws(() => new WorkerConfig({ brokerAddrs: ["https://a:1", "http://b:1"] }).validate(), /mixes/);
});

test("the token is sent as bearer metadata and never shown", () => {
  const c = WorkerConfig.fromEnv({ BROKER_ADDR: "a:1", WORKER_TOKEN: "s3cret-token" });
  const { client, metadata } = openClient(c, 0);
  client.close();
  assert.deepEqual(metadata.get("authorization"), ["Bearer s3cret-token"]);
  assert.ok(!JSON.stringify(c).includes("s3cret"));
  assert.ok(!inspect(c).includes("s3cret"));
  const none = openClient(WorkerConfig.fromEnv({ BROKER_ADDR: "a:1" }), 0);
  none.client.close();
  assert.deepEqual(none.metadata.get("authorization"), []);
});

test("the token file is trimmed and re-read at every connect", () => {
  const f = join(tmp(), "token");
  writeFileSync(f, " one\n");
  const c = WorkerConfig.fromEnv({ BROKER_ADDR: "a:1", WORKER_TOKEN_FILE: f });
  assert.equal(c.readToken(), "one");
  writeFileSync(f, "two");
  assert.equal(c.readToken(), "two");
});

test("bad token settings name the variable and never show the token", () => {
  const dir = tmp();
  const f = join(dir, "token");
  writeFileSync(f, "x");
  let e = configError(() => WorkerConfig.fromEnv({ BROKER_ADDR: "a:1", WORKER_TOKEN: "x", WORKER_TOKEN_FILE: f }));
  assert.match(e.message, /WORKER_TOKEN and WORKER_TOKEN_FILE/);
  e = configError(() => WorkerConfig.fromEnv({ BROKER_ADDR: "a:1", WORKER_TOKEN_FILE: join(dir, "missing") }));
  assert.equal(e.variable, "WORKER_TOKEN_FILE");
  assert.match(e.message, /cannot read the file/);
  writeFileSync(f, "  \n");
  e = configError(() => WorkerConfig.fromEnv({ BROKER_ADDR: "a:1", WORKER_TOKEN_FILE: f }));
  assert.match(e.message, /WORKER_TOKEN_FILE.* is empty/);
  writeFileSync(f, "has space-secret");
  e = configError(() => WorkerConfig.fromEnv({ BROKER_ADDR: "a:1", WORKER_TOKEN_FILE: f }));
  assert.match(e.message, /printable ASCII/);
  assert.ok(!e.message.includes("secret"));
  e = configError(() => new WorkerConfig({ brokerAddrs: ["http://a:1"], token: "tab\tsecret" }).validate());
  assert.equal(e.variable, "WORKER_TOKEN");
  assert.ok(!e.message.includes("secret"));
});

test("TLS files need an https broker, come in pairs, and must hold PEM", () => {
  const dir = tmp();
  const pem = join(dir, "ca.pem");
  writeFileSync(pem, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
  const key = join(dir, "key.pem");
  writeFileSync(key, "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n");
  const junk = join(dir, "junk");
  writeFileSync(junk, "not pem");
  const c = WorkerConfig.fromEnv({
    BROKER_ADDR: "https://a:1",
    BROKER_CA_FILE: pem,
    WORKER_CERT_FILE: pem,
    WORKER_KEY_FILE: key,
  });
  const m = c.tlsMaterial();
  assert.ok(m.roots?.includes("BEGIN CERTIFICATE"));
  assert.ok(m.key?.includes("PRIVATE KEY"));
  for (const [env, variable, needle] of [
    [{ BROKER_ADDR: "a:1", BROKER_CA_FILE: pem }, "BROKER_CA_FILE", /is plaintext/],
    [{ BROKER_ADDR: "https://a:1", WORKER_CERT_FILE: pem }, "WORKER_KEY_FILE", /needs both/],
    [{ BROKER_ADDR: "https://a:1", BROKER_CA_FILE: junk }, "BROKER_CA_FILE", /no PEM CERTIFICATE/],
    [
      { BROKER_ADDR: "https://a:1", WORKER_CERT_FILE: pem, WORKER_KEY_FILE: junk },
      "WORKER_KEY_FILE",
      /no PEM PRIVATE KEY/,
    ],
  ] as const) {
    const e = configError(() => WorkerConfig.fromEnv(env));
    assert.equal(e.variable, variable, e.message);
    assert.match(e.message, needle);
  }
});
