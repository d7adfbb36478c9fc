// Starts a real converge for the browser tests: `converge dev` on free ports with a private
// PostgreSQL, the classic example worker, the classic manifests, and a BOM whose
// payments-alpha-route child fails terminally. Then serves ui/dist (proxying /api) unless
// UI_BASE_URL names where the UI already is (e.g. converge itself once it embeds the UI).
// A second `converge dev` runs with an AUTH_FILE (an admin, an operator and a viewer token
// made here) and one resource with two spec generations, for the sign-in and role tests; its
// UI is served the same way. It also signs people in through a real OIDC issuer started here
// first (`oidc-test-issuer`: discovery, JWKS, /authorize, /token, ES256 keys of its own;
// people vera viewer, otto operator, ada admin), for e2e/oidc.spec.ts. An issuer that does
// not start fails the setup.
//
//   CONVERGE_BIN / CLASSIC_WORKER_BIN  binaries (default $CARGO_TARGET_DIR/debug/...)
//   OIDC_ISSUER_BIN                    the test issuer (default $CARGO_TARGET_DIR/debug/oidc-test-issuer)
//   CONVERGE_URL                       use this running converge (with a classic worker) instead
//   UI_BASE_URL                        the UI's origin; default: a static server over ui/dist
//   UI_FROM_CONVERGE=1                 the UI is served by the converge started here

import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStaticServer } from './staticServer';

const here = path.dirname(fileURLToPath(import.meta.url));
const uiDir = path.resolve(here, '..');
const repo = path.resolve(uiDir, '..');
const targetDir = process.env.CARGO_TARGET_DIR || path.join(os.homedir(), '.cache/converge-target');

export const BOM = 'demo-bom';
export const FAILING_CHILD = 'payments-alpha-route';
/** The UI's public client at the test issuer (OIDC_CLIENT_ID; the ID tokens' `aud`). */
export const OIDC_CLIENT_ID = 'converge-ui';
/** The one resource of the converge that requires tokens. */
export const AUTH_RESOURCE = { kind: 'account', name: 'signed-in-acct' };

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** An error that stops a wait at once. */
class Fatal extends Error {}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      if (e instanceof Fatal) throw e;
      last = e;
    }
    await sleep(250);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

async function call(api: string, method: string, p: string, body?: unknown, token?: string) {
  const r = await fetch(api + p, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${await r.text()}`);
  return r.json();
}

export default async function globalSetup() {
  const procs: ChildProcess[] = [];
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'converge-ui-e2e-'));
  // As root, converge dev runs PostgreSQL as the postgres user, which must traverse this.
  chmodSync(tmp, 0o755);
  const logs: string[] = [];
  const servers: Awaited<ReturnType<typeof startStaticServer>>[] = [];
  // Stops everything started here; also run when the setup fails half-way, so no converge
  // or PostgreSQL outlives it.
  const teardown = async () => {
    servers.forEach((s) => s.close());
    for (const p of procs.reverse()) {
      if (p.exitCode === null) {
        p.kill('SIGTERM');
        await Promise.race([new Promise((r) => p.once('exit', r)), sleep(15_000)]);
        if (p.exitCode === null) p.kill('SIGKILL');
      }
    }
    const keep = path.join(uiDir, 'test-results', 'logs');
    mkdirSync(keep, { recursive: true });
    for (const l of logs) if (existsSync(l)) copyFileSync(l, path.join(keep, path.basename(l)));
    rmSync(tmp, { recursive: true, force: true });
  };

  try {
    const start = (name: string, bin: string, env: Record<string, string>) => {
      if (!existsSync(bin)) throw new Error(`${name} binary not found at ${bin} (cargo build the workspace, or set the *_BIN variable)`);
      const log = path.join(tmp, `${name}.log`);
      logs.push(log);
      const out = createWriteStream(log);
      const p = spawn(bin, name.startsWith('converge') ? ['dev'] : [], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      p.stdout!.pipe(out);
      p.stderr!.pipe(out);
      procs.push(p);
      return p;
    };

    const convergeBin = process.env.CONVERGE_BIN || path.join(targetDir, 'debug/converge');
    /** `converge dev` on free loopback ports with its own data dir and PostgreSQL. */
    const startConverge = async (name: string, extra: Record<string, string> = {}) => {
      const [http, grpc, health, pg] = [await freePort(), await freePort(), await freePort(), await freePort()];
      const url = `http://127.0.0.1:${http}`;
      const proc = start(name, convergeBin, {
        CONVERGE_DEV_DIR: path.join(tmp, `${name}-dev`),
        CONVERGE_DEV_PG_PORT: String(pg),
        LISTEN_ADDR: `127.0.0.1:${http}`,
        BROKER_LISTEN_ADDR: `127.0.0.1:${grpc}`,
        HEALTH_ADDR: `127.0.0.1:${health}`,
        DEVDB_FAST: '1',
        LOG_LEVEL: 'warn',
        ...extra,
      });
      const log = logs[logs.length - 1];
      const ready = waitFor(`${name} /readyz`, 90_000, async () => {
        if (proc.exitCode !== null) throw new Fatal(`${name} exited (${proc.exitCode}); see ${log}`);
        const r = await fetch(`${url}/readyz`).catch(() => undefined);
        return r?.ok ? true : undefined;
      });
      // Awaited later; a failure meanwhile must not count as unhandled.
      ready.catch(() => undefined);
      return { url, grpc, ready };
    };

    // The converge that requires tokens: an admin sets it up, the browser signs in as a viewer.
    const token = () => `cvg_${randomBytes(24).toString('base64url')}`;
    const adminToken = token();
    const viewerToken = token();
    const operatorToken = token();
    const sha256 = (t: string) => createHash('sha256').update(t, 'utf8').digest('hex');
    const authFile = path.join(tmp, 'auth.yaml');
    writeFileSync(
      authFile,
      `principals:\n  - {name: e2e-admin, role: admin, token_sha256: "${sha256(adminToken)}"}\n` +
        `  - {name: e2e-operator, role: operator, token_sha256: "${sha256(operatorToken)}"}\n` +
        `  - {name: e2e-viewer, role: viewer, token_sha256: "${sha256(viewerToken)}"}\n`,
    );
    // The issuer the secured converge trusts: up (its URL printed) before converge boots.
    const issuerBin = process.env.OIDC_ISSUER_BIN || path.join(targetDir, 'debug/oidc-test-issuer');
    if (!existsSync(issuerBin)) {
      throw new Error(
        `oidc-test-issuer not found at ${issuerBin} (cargo build -p converge-auth --features test-util --bin oidc-test-issuer, or set OIDC_ISSUER_BIN)`,
      );
    }
    const issuerLog = path.join(tmp, 'oidc-issuer.log');
    logs.push(issuerLog);
    const issuerProc = spawn(issuerBin, ['--client-id', OIDC_CLIENT_ID], { stdio: ['ignore', 'pipe', 'pipe'] });
    procs.push(issuerProc);
    issuerProc.stderr!.pipe(createWriteStream(issuerLog));
    let issuerOut = '';
    issuerProc.stdout!.on('data', (b: Buffer) => (issuerOut += b.toString()));
    const issuer = await waitFor('the OIDC test issuer to print its URL', 30_000, async () => {
      if (issuerProc.exitCode !== null) throw new Fatal(`oidc-test-issuer exited (${issuerProc.exitCode}); see ${issuerLog}`);
      const line = issuerOut.split('\n')[0];
      return issuerOut.includes('\n') ? (JSON.parse(line) as { url: string; expired_token: string }) : undefined;
    });

    // Started first so that its PostgreSQL boots while the main one's setup runs.
    const secured = await startConverge('converge-auth', {
      AUTH_FILE: authFile,
      OIDC_ISSUER: issuer.url,
      OIDC_CLIENT_ID: OIDC_CLIENT_ID,
    });

    let convergeUrl = process.env.CONVERGE_URL?.replace(/\/$/, '');
    if (!convergeUrl) {
      const main = await startConverge('converge');
      convergeUrl = main.url;
      await main.ready;
      start('classic-worker', process.env.CLASSIC_WORKER_BIN || path.join(targetDir, 'debug/classic-worker'), {
        BROKER_ADDR: `http://127.0.0.1:${main.grpc}`,
        WORKER_NAME: 'ui-e2e',
        LOG_LEVEL: 'warn',
      });
    }
    const api = `${convergeUrl}/api/v1`;

    const manifests = path.join(repo, 'examples/classic/manifests');
    for (const kind of ['account', 'vpc', 'tgw', 'route', 'classicbom', 'statussink']) {
      const file = path.join(manifests, `${kind}.json`);
      if (existsSync(file)) await call(api, 'PUT', `/kinds/${kind}/manifest`, readFileSync(file, 'utf8'));
    }
    const bom = JSON.parse(readFileSync(path.join(repo, 'examples/classic/bom.json'), 'utf8'));
    bom.name = BOM;
    bom.spec.fail = { [FAILING_CHILD]: 'terminal' };
    await call(api, 'POST', '/resources', bom);
    await waitFor('the BOM to settle Degraded with its failing child', 90_000, async () => {
      const root = await call(api, 'GET', `/resources/classicbom/${BOM}`);
      const child = await call(api, 'GET', `/resources/route/${FAILING_CHILD}`).catch(() => undefined);
      return root.phase === 'Degraded' && child?.phase === 'Failed' ? true : undefined;
    });

    await secured.ready;
    const securedApi = `${secured.url}/api/v1`;
    const unauthenticated = await fetch(`${securedApi}/resources`);
    if (unauthenticated.status !== 401) throw new Error(`converge-auth answered ${unauthenticated.status} without a token, not 401`);
    await call(securedApi, 'PUT', '/kinds/account/manifest', readFileSync(path.join(manifests, 'account.json'), 'utf8'), adminToken);
    // Two generations, so that its history has one to roll back to.
    for (const region of ['us-east-1', 'eu-west-1']) {
      await call(
        securedApi,
        'POST',
        '/resources',
        { kind: AUTH_RESOURCE.kind, kind_version: 1, name: AUTH_RESOURCE.name, spec: { domain: 'payments', team: 'alpha', region } },
        adminToken,
      );
    }

    /** Where the browser opens the UI of the converge at `target`. */
    const uiFor = async (target: string) => {
      if (process.env.UI_FROM_CONVERGE === '1') return target;
      const dist = path.join(uiDir, 'dist');
      if (!existsSync(path.join(dist, 'index.html'))) throw new Error('ui/dist is missing: run `npm run build` first');
      const port = await freePort();
      servers.push(await startStaticServer(dist, target, port));
      return `http://127.0.0.1:${port}`;
    };
    process.env.E2E_UI_BASE = process.env.UI_BASE_URL?.replace(/\/$/, '') || (await uiFor(convergeUrl));
    process.env.E2E_API = api;
    process.env.E2E_AUTH_UI_BASE = await uiFor(secured.url);
    process.env.E2E_AUTH_API = securedApi;
    process.env.E2E_AUTH_VIEWER_TOKEN = viewerToken;
    process.env.E2E_AUTH_OPERATOR_TOKEN = operatorToken;
    process.env.E2E_OIDC_ISSUER = issuer.url;
    process.env.E2E_OIDC_EXPIRED_TOKEN = issuer.expired_token;

    return teardown;
  } catch (e) {
    await teardown();
    throw e;
  }
}
