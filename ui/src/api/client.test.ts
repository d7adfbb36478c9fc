// The API wrapper's handling of the tab's token: attached as a Bearer header, kept in
// sessionStorage only, a 401 opens the sign-in prompt, a 403 keeps the server's detail.

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TOKEN_KEY, authState, resetAuthForTests, signIn, signOut } from './auth';
import { ApiError, api } from './client';

/** Replaces fetch with one answering `status` and `body`; returns the recorded calls. */
function answer(status: number, body: unknown = {}) {
  const fetchMock = vi.fn(async (_url: string, _init?: RequestInit) =>
    new Response(JSON.stringify(body), { status, headers: { 'content-type': status >= 400 ? 'application/problem+json' : 'application/json' } }),
  );
  vi.stubGlobal('fetch', fetchMock);
  return fetchMock;
}

const headersOf = (m: ReturnType<typeof answer>, i = 0) => (m.mock.calls[i][1]?.headers ?? {}) as Record<string, string>;

beforeEach(() => {
  resetAuthForTests();
  localStorage.clear();
});
afterEach(() => vi.unstubAllGlobals());

describe('the API token', () => {
  it('is sent as Authorization: Bearer on every call once signed in, and not before', async () => {
    const f = answer(200, { kinds: [] });
    await api.kinds();
    expect(headersOf(f)).not.toHaveProperty('authorization');
    signIn('  tok-123  ');
    await api.kinds();
    await api.reconcile('route', 'r1');
    expect(headersOf(f, 1)['authorization']).toBe('Bearer tok-123');
    expect(headersOf(f, 2)['authorization']).toBe('Bearer tok-123');
    expect(f.mock.calls[2][0]).toBe('/api/v1/resources/route/r1/reconcile');
  });

  it('lives in sessionStorage, never in localStorage, and sign out removes it', () => {
    signIn('tok-abc');
    expect(sessionStorage.getItem(TOKEN_KEY)).toBe('tok-abc');
    expect(Object.values({ ...localStorage })).not.toContain('tok-abc');
    expect(localStorage.length).toBe(0);
    expect(authState().signedIn).toBe(true);
    signOut();
    expect(sessionStorage.getItem(TOKEN_KEY)).toBeNull();
    expect(authState()).toEqual({ prompt: true, rejected: false, signedIn: false, message: null });
  });

  it('a 401 without a token opens the prompt; with a token it also drops the refused token', async () => {
    answer(401, { status: 401, detail: 'this API requires a bearer token' });
    await expect(api.kinds()).rejects.toMatchObject({ status: 401 });
    expect(authState()).toEqual({ prompt: true, rejected: false, signedIn: false, message: null });

    signIn('revoked');
    expect(authState().prompt).toBe(false);
    await expect(api.kinds()).rejects.toBeInstanceOf(ApiError);
    expect(authState()).toEqual({ prompt: true, rejected: true, signedIn: false, message: null });
    expect(sessionStorage.getItem(TOKEN_KEY)).toBeNull();
    // A tokenless poll refused while the prompt is up keeps what the prompt says.
    await expect(api.kinds()).rejects.toMatchObject({ status: 401 });
    expect(authState()).toEqual({ prompt: true, rejected: true, signedIn: false, message: null });
  });

  it('a late 401 for a replaced token leaves the new one alone', async () => {
    signIn('old');
    let release!: (r: Response) => void;
    vi.stubGlobal('fetch', vi.fn(() => new Promise<Response>((r) => (release = r))));
    const call = api.kinds();
    signIn('new');
    release(new Response('{"status":401,"detail":"unknown or revoked token"}', { status: 401 }));
    await expect(call).rejects.toMatchObject({ status: 401 });
    expect(sessionStorage.getItem(TOKEN_KEY)).toBe('new');
    expect(authState().prompt).toBe(false);
  });

  it('a late 401 for a call sent before the sign-in leaves the new token alone', async () => {
    let release!: (r: Response) => void;
    vi.stubGlobal('fetch', vi.fn(() => new Promise<Response>((r) => (release = r))));
    const call = api.whoami();
    signIn('new');
    release(new Response('{"status":401,"detail":"this API requires a bearer token"}', { status: 401 }));
    await expect(call).rejects.toMatchObject({ status: 401 });
    expect(sessionStorage.getItem(TOKEN_KEY)).toBe('new');
    expect(authState()).toEqual({ prompt: false, rejected: false, signedIn: true, message: null });
  });

  it("a 403 keeps the server's detail naming the role and does not ask for a token", async () => {
    signIn('viewer-token');
    const detail = 'POST /api/v1/resources/route/r1/quarantine needs role operator; principal "alice" has role viewer';
    answer(403, { status: 403, title: 'Forbidden', detail });
    const e = await api.quarantine('route', 'r1').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).status).toBe(403);
    expect((e as ApiError).message).toBe(detail);
    expect(authState()).toEqual({ prompt: false, rejected: false, signedIn: true, message: null });
    expect(sessionStorage.getItem(TOKEN_KEY)).toBe('viewer-token');
  });
});
