import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render, screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { MemoryRouter } from 'react-router-dom';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { api } from '../../api/client';
import type { ResourceItem } from '../../api/types';
import { EMPTY_FILTER, type ResourceFilter } from '../../lib/filters';
import { ListView } from './ListView';

const item = (name: string): ResourceItem => ({
  uid: `uid-${name}`,
  kind: 'route',
  kind_version: 1,
  name,
  labels: {},
  phase: 'Ready',
  generation: 1,
  synced_gen: 1,
  is_ready: true,
  failure_terminal: false,
  failure_attempts: 0,
  failure_message: null,
  owner: null,
  created_at: '2026-01-01T00:00:00Z',
  updated_at: '2026-01-01T00:00:00Z',
});

// Three pages: '' -> [a, b] next c2; c2 -> [c, d] next c3; c3 -> [e] last.
const pages: Record<string, { names: string[]; next: string }> = {
  '': { names: ['a', 'b'], next: 'c2' },
  c2: { names: ['c', 'd'], next: 'c3' },
  c3: { names: ['e'], next: '' },
};

function renderList(filter: ResourceFilter = EMPTY_FILTER) {
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  const view = (f: ResourceFilter) => (
    <QueryClientProvider client={qc}>
      <MemoryRouter initialEntries={['/resources/list?limit=25']}>
        <ListView filter={f} onOpen={() => {}} />
      </MemoryRouter>
    </QueryClientProvider>
  );
  const r = render(view(filter));
  return { ...r, rerenderWith: (f: ResourceFilter) => r.rerender(view(f)) };
}

afterEach(() => vi.restoreAllMocks());

/** `listResources` over `pages`. */
const paged = () =>
  vi.spyOn(api, 'listResources').mockImplementation(async (_f, _l, cursor) => ({
    body: { owners: [], resources: pages[cursor].names.map(item) },
    nextCursor: pages[cursor].next,
  }));

describe('ListView pagination', () => {
  it('walks Next and Prev through the cursor stack, showing "N resources · page K"', async () => {
    const spy = paged();
    renderList();
    expect(await screen.findByText('2 resources · page 1')).toBeInTheDocument();
    const prevBtn = screen.getByRole('button', { name: '← Prev' });
    const nextBtn = screen.getByRole('button', { name: 'Next →' });
    expect(prevBtn).toBeDisabled();

    await userEvent.click(nextBtn);
    expect(await screen.findByText('2 resources · page 2')).toBeInTheDocument();
    expect(screen.getByRole('button', { name: 'c' })).toBeInTheDocument();
    await waitFor(() => expect(screen.getByRole('button', { name: 'Next →' })).toBeEnabled());
    await userEvent.click(screen.getByRole('button', { name: 'Next →' }));
    expect(await screen.findByText('1 resource · page 3')).toBeInTheDocument();
    expect(screen.getByRole('button', { name: 'Next →' })).toBeDisabled();

    await userEvent.click(screen.getByRole('button', { name: '← Prev' }));
    expect(await screen.findByText('2 resources · page 2')).toBeInTheDocument();
    expect(screen.getByRole('button', { name: 'd' })).toBeInTheDocument();
    const listCalls = spy.mock.calls;
    expect(listCalls.map((c) => c[2])).toEqual(expect.arrayContaining(['', 'c2', 'c3']));
    expect(listCalls.every((c) => c[1] === 25)).toBe(true);
  });

  it('restarts at page 1 when the filter changes', async () => {
    const spy = paged();
    const { rerenderWith } = renderList();
    await screen.findByText('2 resources · page 1');
    await userEvent.click(screen.getByRole('button', { name: 'Next →' }));
    await screen.findByText('2 resources · page 2');
    rerenderWith({ ...EMPTY_FILTER, phases: ['Failed'] });
    expect(await screen.findByText('2 resources · page 1')).toBeInTheDocument();
    const listCalls = spy.mock.calls;
    const last = listCalls[listCalls.length - 1];
    expect(last[0].phases).toEqual(['Failed']);
    expect(last[2]).toBe('');
  });

  it('shows the server problem when the list fails', async () => {
    const { ApiError } = await import('../../api/client');
    vi.spyOn(api, 'listResources').mockRejectedValue(new ApiError({ status: 422, detail: 'label: "x" is not a key:value label selector' }));
    renderList();
    expect(await screen.findByRole('alert')).toHaveTextContent('422');
  });

  it('asks for the problems-first order by default and restarts at page 1 on another order', async () => {
    const spy = paged();
    renderList();
    await screen.findByText('2 resources · page 1');
    expect(spy.mock.calls.every((c) => c[3] === 'problems')).toBe(true);
    await userEvent.click(screen.getByRole('button', { name: 'Next →' }));
    await screen.findByText('2 resources · page 2');
    await userEvent.selectOptions(screen.getByRole('combobox', { name: /order/ }), 'oldest first');
    expect(await screen.findByText('2 resources · page 1')).toBeInTheDocument();
    const last = spy.mock.calls[spy.mock.calls.length - 1];
    expect(last[3]).toBe('created');
    expect(last[2]).toBe('');
  });

  it("opens a row's owner from its Owner cell", async () => {
    vi.spyOn(api, 'listResources').mockImplementation(async () => ({
      body: { owners: [], resources: [{ ...item('child'), owner: { kind: 'classicbom', name: 'bom' } }] },
      nextCursor: '',
    }));
    const onOpen = vi.fn();
    render(
      <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
        <MemoryRouter>
          <ListView filter={EMPTY_FILTER} onOpen={onOpen} />
        </MemoryRouter>
      </QueryClientProvider>,
    );
    await userEvent.click(await screen.findByRole('button', { name: 'classicbom/bom' }));
    expect(onOpen).toHaveBeenCalledTimes(1);
    expect(onOpen).toHaveBeenCalledWith('classicbom', 'bom');
  });
});
