// The OIDC sign-in's checks in the browser (api/oidc.ts), against a stubbed issuer: the
// authorization request carries the S256 challenge of the verifier kept for the tab, a fresh
// state and nonce, and this origin's callback; a callback with another state is refused
// before any code exchange; an ID token with another nonce is refused; a good one is taken
// and the pending sign-in is spent. (The real issuer and converge: e2e/oidc.spec.ts.)
//
// In Node's environment, not jsdom's: oauth4webapi checks WebCrypto's ArrayBuffers with
// `instanceof`, which jsdom's own ArrayBuffer fails; the tab's window (origin, session
// storage) is stubbed instead.
// @vitest-environment node

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CALLBACK_PATH, PENDING_KEY, beginSignIn, completeSignIn, issuerLabel, jwtExpiry } from './oidc';

const ISSUER = 'https://idp.example/realms/acme';
const CFG = {
  issuer: ISSUER,
  client_id: 'converge-ui',
  scopes: 'openid profile',
  authorization_endpoint: `${ISSUER}/auth`,
  token_endpoint: `${ISSUER}/token`,
};
const b64url = (s: string | Uint8Array) =>
  btoa(typeof s === 'string' ? s : String.fromCharCode(...s))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');
/** A JWT-shaped ID token (the UI reads its claims; the server checks its signature). */
const idToken = (claims: Record<string, unknown>) => `${b64url(JSON.stringify({ alg: 'ES256', kid: 'k' }))}.${b64url(JSON.stringify(claims))}.c2ln`;

/** The issuer: discovery, and a token endpoint answering `claims` in its ID token. */
function issuer(claims: (nonce: string) => Record<string, unknown>) {
  const exchanges: URLSearchParams[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
      const url = String(input instanceof Request ? input.url : input);
      if (url === `${ISSUER}/.well-known/openid-configuration`) {
        return Response.json({
          issuer: ISSUER,
          authorization_endpoint: CFG.authorization_endpoint,
          token_endpoint: CFG.token_endpoint,
          jwks_uri: `${ISSUER}/jwks`,
          id_token_signing_alg_values_supported: ['ES256'],
        });
      }
      if (url === CFG.token_endpoint) {
        const form = new URLSearchParams(String(init?.body));
        exchanges.push(form);
        const pending = JSON.parse(sessionStorage.getItem('test.nonce') ?? '""') as string;
        return Response.json({ access_token: 'opaque', token_type: 'Bearer', expires_in: 600, id_token: idToken(claims(pending)) });
      }
      return new Response('no', { status: 404 });
    }),
  );
  return exchanges;
}

async function started(): Promise<{ url: URL; pending: { state: string; nonce: string; verifier: string } }> {
  let to = '';
  await beginSignIn(CFG, '/resources/list?kind=route', (u) => (to = u));
  const pending = JSON.parse(sessionStorage.getItem(PENDING_KEY)!);
  sessionStorage.setItem('test.nonce', JSON.stringify(pending.nonce));
  return { url: new URL(to), pending };
}

const now = () => Math.floor(Date.now() / 1000);
const goodClaims = (nonce: string) => ({ iss: ISSUER, aud: 'converge-ui', sub: 'vera', iat: now(), exp: now() + 600, nonce });

/** A Storage over a Map: this tab's sessionStorage. */
function memoryStorage(): Storage {
  const m = new Map<string, string>();
  return {
    get length() {
      return m.size;
    },
    clear: () => m.clear(),
    getItem: (k) => m.get(k) ?? null,
    key: (i) => [...m.keys()][i] ?? null,
    removeItem: (k) => void m.delete(k),
    setItem: (k, v) => void m.set(k, String(v)),
  };
}

beforeEach(() => {
  const store = memoryStorage();
  vi.stubGlobal('sessionStorage', store);
  vi.stubGlobal('window', { location: { origin: 'http://ui.test' }, sessionStorage: store });
});
afterEach(() => vi.unstubAllGlobals());

describe('OIDC sign-in', () => {
  it('asks the issuer with PKCE S256, a state, a nonce and this origin’s callback', async () => {
    issuer(goodClaims);
    const { url, pending } = await started();
    expect(url.origin + url.pathname).toBe(CFG.authorization_endpoint);
    const q = Object.fromEntries(url.searchParams);
    const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(pending.verifier)));
    expect(q).toEqual({
      response_type: 'code',
      client_id: 'converge-ui',
      redirect_uri: `${window.location.origin}${CALLBACK_PATH}`,
      scope: 'openid profile',
      code_challenge: b64url(digest),
      code_challenge_method: 'S256',
      state: pending.state,
      nonce: pending.nonce,
    });
    expect(pending.verifier.length).toBeGreaterThanOrEqual(43);
    expect(pending.state).not.toBe(pending.nonce);
  });

  it('refuses a callback with another state before exchanging the code', async () => {
    const exchanges = issuer(goodClaims);
    await started();
    const cb = new URL(`${window.location.origin}${CALLBACK_PATH}?code=c&state=tampered`);
    await expect(completeSignIn(cb)).rejects.toThrow('its state differs');
    expect(exchanges).toHaveLength(0);
    expect(sessionStorage.getItem(PENDING_KEY)).toBeNull();
    // Spent: the same callback again has nothing to complete.
    await expect(completeSignIn(cb)).rejects.toThrow('no sign-in was started');
  });

  it('refuses an ID token issued for another sign-in (nonce)', async () => {
    issuer((n) => ({ ...goodClaims(n), nonce: 'someone-elses' }));
    const { pending } = await started();
    const cb = new URL(`${window.location.origin}${CALLBACK_PATH}?code=c&state=${pending.state}`);
    await expect(completeSignIn(cb)).rejects.toThrow(/nonce/);
  });

  it('exchanges the code with the verifier and takes the ID token', async () => {
    const exchanges = issuer(goodClaims);
    const { pending } = await started();
    const cb = new URL(`${window.location.origin}${CALLBACK_PATH}?code=the-code&state=${pending.state}`);
    const done = await completeSignIn(cb);
    expect(done.issuer).toBe(ISSUER);
    expect(done.returnTo).toBe('/resources/list?kind=route');
    expect(jwtExpiry(done.idToken)).toBeGreaterThan(now());
    expect(Object.fromEntries(exchanges[0])).toMatchObject({
      grant_type: 'authorization_code',
      code: 'the-code',
      code_verifier: pending.verifier,
      redirect_uri: `${window.location.origin}${CALLBACK_PATH}`,
      client_id: 'converge-ui',
    });
  });

  it('names the issuer by host and path', () => {
    expect(issuerLabel(ISSUER)).toBe('idp.example/realms/acme');
    expect(issuerLabel('http://127.0.0.1:9000')).toBe('127.0.0.1:9000');
  });
});
