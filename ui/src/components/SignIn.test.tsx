// The app's sign-in flow: a 401 replaces the page with the token prompt (a password field);
// signing in stores the token for the tab and reloads the data; "Sign out" forgets it. With
// an OIDC issuer (`GET /auth/config`), "Sign in with <issuer>" sits beside the token field,
// and a refused ID token brings the prompt back saying the sign-in expired.

import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render, screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { MemoryRouter } from 'react-router-dom';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { App } from '../App';
import { ISSUER_KEY, TOKEN_KEY, resetAuthForTests, signInFailed } from '../api/auth';

const GOOD = 'viewer-tok';

const ISSUER = 'https://idp.example/realms/acme';

/** A converge that wants `Bearer viewer-tok` on every call and has one kind; with `oidc`,
 * it signs people in through ISSUER. */
function server(oidc = false) {
  const calls: { url: string; auth: string | undefined }[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init?: RequestInit) => {
      const auth = (init?.headers as Record<string, string> | undefined)?.['authorization'];
      calls.push({ url, auth });
      if (url.endsWith('/auth/config')) {
        return Response.json({
          oidc: oidc ? { issuer: ISSUER, client_id: 'converge-ui', scopes: 'openid', authorization_endpoint: null, token_endpoint: null } : null,
        });
      }
      if (auth !== `Bearer ${GOOD}`) {
        const detail = auth ? 'unknown or revoked token' : 'this API requires a bearer token';
        return new Response(JSON.stringify({ status: 401, detail }), { status: 401, headers: { 'www-authenticate': 'Bearer' } });
      }
      if (url.endsWith('/version')) return Response.json({ version: '9.9.9' });
      if (url.endsWith('/kinds')) return Response.json({ kinds: [{ kind: 'route', kind_version: 1, reactions: [], operational: {} }] });
      return Response.json({});
    }),
  );
  return calls;
}

function renderApp() {
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  return render(
    <QueryClientProvider client={qc}>
      <MemoryRouter initialEntries={['/kinds']}>
        <App />
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

beforeEach(() => resetAuthForTests());
afterEach(() => vi.unstubAllGlobals());

describe('sign-in', () => {
  it('asks for a token on 401, then shows the page with it; sign out forgets it', async () => {
    const calls = server();
    renderApp();
    const field = await screen.findByLabelText('API token');
    expect(field).toHaveAttribute('type', 'password');
    expect(screen.getByText(/kept for this browser tab only/)).toBeInTheDocument();
    expect(screen.queryByRole('button', { name: 'Sign out' })).toBeNull();

    await userEvent.type(field, 'wrong');
    await userEvent.click(screen.getByRole('button', { name: 'Sign in' }));
    expect(await screen.findByText(/did not accept that token/)).toBeInTheDocument();
    expect(sessionStorage.getItem(TOKEN_KEY)).toBeNull();

    await userEvent.type(screen.getByLabelText('API token'), GOOD);
    await userEvent.click(screen.getByRole('button', { name: 'Sign in' }));
    expect(await screen.findByText('converge 9.9.9')).toBeInTheDocument();
    expect(await screen.findByRole('table', { name: 'Kinds' })).toHaveTextContent('route');
    expect(screen.queryByLabelText('API token')).toBeNull();
    expect(sessionStorage.getItem(TOKEN_KEY)).toBe(GOOD);
    expect(localStorage.length).toBe(0);
    expect(calls.filter((c) => c.url.endsWith('/kinds')).at(-1)?.auth).toBe(`Bearer ${GOOD}`);

    await userEvent.click(screen.getByRole('button', { name: 'Sign out' }));
    expect(sessionStorage.getItem(TOKEN_KEY)).toBeNull();
    expect(await screen.findByLabelText('API token')).toBeInTheDocument();
    expect(screen.queryByRole('table', { name: 'Kinds' })).toBeNull();
  });

  it('offers the issuer beside the token field; an expired ID token brings it back saying so', async () => {
    server(true);
    const b64 = (o: unknown) => btoa(JSON.stringify(o)).replace(/=+$/, '');
    const expired = `${b64({ alg: 'ES256' })}.${b64({ sub: 'vera', exp: Math.floor(Date.now() / 1000) - 3600 })}.c2ln`;
    sessionStorage.setItem(TOKEN_KEY, expired);
    sessionStorage.setItem(ISSUER_KEY, ISSUER);
    renderApp();
    expect(await screen.findByRole('alert')).toHaveTextContent('Your sign-in through idp.example/realms/acme has expired. Sign in again.');
    expect(await screen.findByRole('button', { name: 'Sign in with idp.example/realms/acme' })).toBeEnabled();
    expect(screen.getByLabelText('API token')).toHaveAttribute('type', 'password');
    expect(sessionStorage.getItem(TOKEN_KEY)).toBeNull();
    expect(sessionStorage.getItem(ISSUER_KEY)).toBeNull();
  });

  it('says why a sign-in through the issuer failed; no issuer, no button', async () => {
    server(false);
    renderApp();
    await screen.findByLabelText('API token');
    signInFailed('the answer does not belong to the sign-in this tab started (its state differs), so it was refused');
    expect(await screen.findByRole('alert')).toHaveTextContent(/Signing in through the issuer failed: .*its state differs/);
    expect(screen.queryByRole('button', { name: /Sign in with/ })).toBeNull();
  });
});
