import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { fireEvent, render, screen, within } from '@testing-library/react';
import { MemoryRouter } from 'react-router-dom';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiError, api } from '../../api/client';
import type { ApiToken } from '../../api/types';
import { TokensPage } from './TokensPage';

const at = '2026-01-01T00:00:00Z';

const tokens: ApiToken[] = [
  { name: 'ci', role: 'operator', kinds: [], created_at: at, created_by: 'ops', expires_at: null, expired: false, last_used_at: at },
  { name: 'net-w', role: 'worker', kinds: ['net-*'], created_at: at, created_by: 'ops', expires_at: at, expired: true, last_used_at: null },
];

function renderPage() {
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  return render(
    <QueryClientProvider client={qc}>
      <MemoryRouter initialEntries={['/tokens']}>
        <TokensPage />
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

afterEach(() => vi.restoreAllMocks());

describe('TokensPage', () => {
  it('lists the tokens, marks the expired, and shows a minted secret once', async () => {
    vi.spyOn(api, 'tokens').mockResolvedValue({ items: tokens });
    const mint = vi.spyOn(api, 'mintToken').mockResolvedValue({ ...tokens[0], name: 'new', token: 'cvg_secret' });
    renderPage();

    const table = await screen.findByRole('table', { name: 'Tokens' });
    const rows = within(table).getAllByRole('row').slice(1);
    expect(rows.map((r) => within(r).getAllByRole('cell')[0].textContent)).toEqual(['ci', 'net-w']);
    expect(within(rows[1]).getByText(/expired/)).toHaveClass('warn');
    expect(within(rows[1]).getByText('net-*')).toBeInTheDocument();

    fireEvent.click(screen.getByRole('button', { name: 'New token…' }));
    const form = screen.getByRole('form', { name: 'New token' });
    fireEvent.change(within(form).getByRole('textbox'), { target: { value: 'new' } });
    fireEvent.click(within(form).getByRole('button', { name: 'Mint' }));
    expect(await screen.findByText('cvg_secret')).toBeInTheDocument();
    expect(mint.mock.calls[0][0]).toEqual({ name: 'new', role: 'viewer', expires_in: 30 * 86_400 });
  });

  it('shows the problem when tokens cannot be listed (authentication off)', async () => {
    vi.spyOn(api, 'tokens').mockRejectedValue(new ApiError({ status: 409, detail: 'authentication is off (AUTH_FILE is not set)' }));
    renderPage();
    expect(await screen.findByRole('alert')).toHaveTextContent('AUTH_FILE');
  });
});
