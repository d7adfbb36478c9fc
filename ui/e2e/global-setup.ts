// Starts a real converge for the browser tests: `converge dev` on free ports with a private
// PostgreSQL, the classic example worker, the classic manifests, and a BOM whose
// payments-alpha-route child fails terminally. Then serves ui/dist (proxying /api) unless
// UI_BASE_URL names where the UI already is (e.g. converge itself once it embeds the UI).
//
//   CONVERGE_BIN / CLASSIC_WORKER_BIN  binaries (default $CARGO_TARGET_DIR/debug/...)
//   CONVERGE_URL                       use this running converge (with a classic worker) instead
//   UI_BASE_URL                        the UI's origin; default: a static server over ui/dist
//   UI_FROM_CONVERGE=1                 the UI is served by the converge started here

import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
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

async function call(api: string, method: string, p: string, body?: unknown) {
  const r = await fetch(api + p, {
    method,
    headers: { 'content-type': 'application/json' },
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
  const start = (name: string, bin: string, env: Record<string, string>) => {
    if (!existsSync(bin)) throw new Error(`${name} binary not found at ${bin} (cargo build the workspace, or set the *_BIN variable)`);
    const log = path.join(tmp, `${name}.log`);
    logs.push(log);
    const out = createWriteStream(log);
    const p = spawn(bin, name === 'converge' ? ['dev'] : [], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    p.stdout!.pipe(out);
    p.stderr!.pipe(out);
    procs.push(p);
    return p;
  };

  let convergeUrl = process.env.CONVERGE_URL?.replace(/\/$/, '');
  let converge: ChildProcess | undefined;
  if (!convergeUrl) {
    const [http, grpc, health, pg] = [await freePort(), await freePort(), await freePort(), await freePort()];
    convergeUrl = `http://127.0.0.1:${http}`;
    converge = start('converge', process.env.CONVERGE_BIN || path.join(targetDir, 'debug/converge'), {
      CONVERGE_DEV_DIR: path.join(tmp, 'dev'),
      CONVERGE_DEV_PG_PORT: String(pg),
      LISTEN_ADDR: `127.0.0.1:${http}`,
      BROKER_LISTEN_ADDR: `127.0.0.1:${grpc}`,
      HEALTH_ADDR: `127.0.0.1:${health}`,
      DEVDB_FAST: '1',
      LOG_LEVEL: 'warn',
    });
    await waitFor('converge /readyz', 90_000, async () => {
      if (converge!.exitCode !== null) throw new Fatal(`converge exited (${converge!.exitCode}); see ${logs[0]}`);
      const r = await fetch(`${convergeUrl}/readyz`).catch(() => undefined);
      return r?.ok ? true : undefined;
    });
    start('classic-worker', process.env.CLASSIC_WORKER_BIN || path.join(targetDir, 'debug/classic-worker'), {
      BROKER_ADDR: `http://127.0.0.1:${grpc}`,
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

  let server: Awaited<ReturnType<typeof startStaticServer>> | undefined;
  let uiBase = process.env.UI_BASE_URL?.replace(/\/$/, '');
  if (!uiBase && process.env.UI_FROM_CONVERGE === '1') uiBase = convergeUrl;
  if (!uiBase) {
    const dist = path.join(uiDir, 'dist');
    if (!existsSync(path.join(dist, 'index.html'))) throw new Error('ui/dist is missing: run `npm run build` first');
    const port = await freePort();
    server = await startStaticServer(dist, convergeUrl, port);
    uiBase = `http://127.0.0.1:${port}`;
  }
  process.env.E2E_UI_BASE = uiBase;
  process.env.E2E_API = api;

  return async () => {
    server?.close();
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
}
