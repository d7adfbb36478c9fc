// The app's sign-in flow: a 401 replaces the page with the token prompt (a password field);
// signing in stores the token for the tab and reloads the data; "Sign out" forgets it.

import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render, screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { MemoryRouter } from 'react-router-dom';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { App } from '../App';
import { TOKEN_KEY, resetAuthForTests } from '../api/auth';

const GOOD = 'viewer-tok';

/** A converge that wants `Bearer viewer-tok` on every call and has one kind. */
function server() {
  const calls: { url: string; auth: string | undefined }[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init?: RequestInit) => {
      const auth = (init?.headers as Record<string, string> | undefined)?.['authorization'];
      calls.push({ url, auth });
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
});
