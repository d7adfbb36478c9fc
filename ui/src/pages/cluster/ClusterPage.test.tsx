import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render, screen, within } from '@testing-library/react';
import { MemoryRouter } from 'react-router-dom';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiError, api } from '../../api/client';
import type { Cluster } from '../../api/types';
import { ClusterPage } from './ClusterPage';

const at = '2026-01-01T00:00:00Z';

const cluster: Cluster = {
  members: [
    {
      id: 'ctl-1-aaaa',
      role: 'control',
      status: 'Ready',
      version: '0.1.0',
      host: 'ctl',
      pid: 1,
      addresses: { http: '10.0.0.1:8080' },
      started_at: at,
      heartbeat_at: at,
      workers: [],
      workers_at: null,
      shards: { lo: 0, hi: 255 },
      claims: [],
    },
    {
      id: 'brk-7-bbbb',
      role: 'broker',
      status: 'Ready',
      version: '0.1.0',
      host: 'brk',
      pid: 7,
      addresses: { grpc: '10.0.0.2:9090', health: '10.0.0.2:8081' },
      started_at: at,
      heartbeat_at: at,
      workers_at: at,
      shards: { lo: 0, hi: 255 },
      claims: [{ kind: 'vpc', kind_version: 1, lo: 0, hi: 255 }],
      workers: [
        {
          stream: 1,
          name: 'net-worker',
          sdk: 'rust/0.1.0',
          principal: null,
          peer: '10.0.0.9:51000',
          kinds: [
            { kind: 'vpc', kind_version: 1, ready: true },
            { kind: 'subnett', kind_version: 1, ready: true },
          ],
          unknown_kinds: [{ kind: 'subnett', kind_version: 1 }],
          max_inflight: 16,
          inflight: 3,
          connected_at: at,
          draining: false,
        },
      ],
    },
    {
      id: 'brk-9-dead',
      role: 'broker',
      status: 'NotReady',
      version: '0.1.0',
      host: 'brk2',
      pid: 9,
      addresses: { grpc: '10.0.0.3:9090' },
      started_at: at,
      heartbeat_at: at,
      workers_at: at,
      workers: [],
      shards: null,
      claims: [],
    },
  ],
  kinds: [
    { kind: 'db', kind_version: 2, registered: true, workers: 0, ready_workers: 0 },
    { kind: 'subnett', kind_version: 1, registered: false, workers: 1, ready_workers: 1 },
    { kind: 'vpc', kind_version: 1, registered: true, workers: 1, ready_workers: 1 },
  ],
};

function renderPage() {
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  return render(
    <QueryClientProvider client={qc}>
      <MemoryRouter initialEntries={['/cluster']}>
        <ClusterPage />
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

afterEach(() => vi.restoreAllMocks());

describe('ClusterPage', () => {
  it('lists the members, the workers on each broker and who serves each kind', async () => {
    vi.spyOn(api, 'cluster').mockResolvedValue(cluster);
    renderPage();

    const members = await screen.findByRole('table', { name: 'Members' });
    const rows = within(members).getAllByRole('row').slice(1);
    expect(rows.map((r) => within(r).getAllByRole('cell')[0].textContent)).toEqual(['control', 'broker', 'broker']);
    // A member silent past the liveness window stays listed, greyed, until its row is removed.
    expect(rows[2]).toHaveClass('not-ready');
    expect(within(rows[2]).getByText('NotReady')).toHaveClass('warn');
    expect(rows[1]).not.toHaveClass('not-ready');
    expect(within(rows[1]).getByText('brk-7-bbbb')).toBeInTheDocument();
    expect(within(rows[1]).getByText('grpc 10.0.0.2:9090')).toBeInTheDocument();
    // Dynamic sharding: each live member's share, and the shards a broker claims each kind in.
    expect(within(rows[1]).getByText('0–255')).toBeInTheDocument();
    expect(within(rows[1]).getByText('vpc v1 0–255')).toBeInTheDocument();
    expect(within(rows[2]).getAllByRole('cell')[4].textContent).toBe('—');

    const worker = within(screen.getByRole('table', { name: 'Workers' })).getByText('net-worker').closest('tr')!;
    expect(within(worker).getByText('brk-7-bbbb')).toBeInTheDocument();
    expect(within(worker).getByText('3 / 16')).toBeInTheDocument();
    expect(within(worker).getByText('vpc v1')).not.toHaveClass('warn');
    // A kind the worker subscribed for that no manifest registers is called out.
    expect(within(worker).getByText('subnett v1 — not registered')).toHaveClass('warn');

    const coverage = screen.getByRole('table', { name: 'Kind coverage' });
    const row = (k: string) => coverage.querySelector(`tr[data-kind="${k}"]`) as HTMLElement;
    expect(within(row('db@2')).getByText('no worker serves it: its resources wait')).toBeInTheDocument();
    expect(within(row('subnett@1')).getByText(/not registered/)).toBeInTheDocument();
    expect(within(row('vpc@1')).getAllByRole('cell').map((c) => c.textContent)).toEqual(['vpc', '1', '1', '1', '']);
  });

  it('says so when no worker is connected', async () => {
    vi.spyOn(api, 'cluster').mockResolvedValue({ members: [cluster.members[0]], kinds: [] });
    renderPage();
    expect(await screen.findByText('No worker is connected to any broker.')).toBeInTheDocument();
    expect(screen.getByText('No kinds yet.')).toBeInTheDocument();
  });

  it('shows the problem when the cluster cannot be read', async () => {
    vi.spyOn(api, 'cluster').mockRejectedValue(new ApiError({ status: 503, detail: 'database unreachable' }));
    renderPage();
    expect(await screen.findByRole('alert')).toHaveTextContent('database unreachable');
  });
});
