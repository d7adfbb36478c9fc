import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render, screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { api } from '../../api/client';
import type { RootItem } from '../../api/types';
import { RootsTopology } from './RootsTopology';

const root = (name: string, phase: RootItem['phase'] = 'Ready'): RootItem => ({
  uid: `uid-${name}`,
  kind: 'classicbom',
  kind_version: 1,
  name,
  labels: {},
  phase,
  generation: 1,
  synced_gen: 1,
  is_ready: phase === 'Ready',
  failure_terminal: false,
  failure_attempts: 0,
  failure_message: null,
  owner: null,
  created_at: '2026-01-01T00:00:00Z',
  updated_at: '2026-01-01T00:00:00Z',
  resource_count: name.length,
});

// Two pages of two roots: '' -> [a, bb] next p2; p2 -> [ccc] last.
const pages: Record<string, { roots: RootItem[]; next: string }> = {
  '': { roots: [root('a'), root('bb', 'Degraded')], next: 'p2' },
  p2: { roots: [root('ccc')], next: '' },
};

afterEach(() => vi.restoreAllMocks());

describe('RootsTopology', () => {
  it('pages through the roots with their phase and size, and picks one', async () => {
    const spy = vi.spyOn(api, 'listRoots').mockImplementation(async (_f, _l, cursor = '') => ({
      body: { roots: pages[cursor].roots },
      nextCursor: pages[cursor].next,
    }));
    const onPick = vi.fn();
    render(
      <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
        <RootsTopology onPick={onPick} pageSize={2} />
      </QueryClientProvider>,
    );
    expect(await screen.findByText('2 resources · page 1')).toBeInTheDocument();
    const table = screen.getByRole('table', { name: 'Roots' });
    const bb = within(table).getByRole('row', { name: /classicbom\/bb/ });
    expect(bb).toHaveTextContent('Degraded');
    expect(bb).toHaveTextContent('2');
    expect(spy).toHaveBeenLastCalledWith({}, 2, '');
    await userEvent.click(screen.getByRole('button', { name: 'Next →' }));
    expect(await screen.findByText('1 resource · page 2')).toBeInTheDocument();
    expect(spy).toHaveBeenLastCalledWith({}, 2, 'p2');
    expect(screen.getByRole('button', { name: 'Next →' })).toBeDisabled();
    await userEvent.click(screen.getByRole('button', { name: 'classicbom/ccc' }));
    expect(onPick).toHaveBeenCalledWith('classicbom/ccc');
    await userEvent.click(screen.getByRole('button', { name: '← Prev' }));
    expect(await screen.findByText('2 resources · page 1')).toBeInTheDocument();
  });
});
