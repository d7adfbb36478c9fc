import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render, screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { MemoryRouter } from 'react-router-dom';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { api } from '../../api/client';
import type { ResourceItem } from '../../api/types';
import { EMPTY_FILTER, type ResourceFilter } from '../../lib/filters';
import { ListView } from './ListView';
import { PROBLEM_PHASES } from './ProblemsFirst';

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

/** The problems-first query (Failed and Degraded, first 10): none unless `problems` given. */
const isProblems = (f: ResourceFilter) => f.phases.join() === PROBLEM_PHASES.join();

/** `listResources` over `pages`, answering the problems query with `problems`. */
const paged = (problems: string[] = []) =>
  vi.spyOn(api, 'listResources').mockImplementation(async (f, _l, cursor) =>
    isProblems(f)
      ? { body: { owners: [], resources: problems.map((n) => ({ ...item(n), phase: 'Failed' as const, failure_message: `${n} broke` })) }, nextCursor: '' }
      : { body: { owners: [], resources: pages[cursor].names.map(item) }, nextCursor: pages[cursor].next },
  );

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
    const listCalls = spy.mock.calls.filter((c) => !isProblems(c[0]));
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
    const listCalls = spy.mock.calls.filter((c) => !isProblems(c[0]));
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

  it('lists the Failed and Degraded resources first while no phase chip is chosen', async () => {
    const spy = paged(['broken-route']);
    const { rerenderWith } = renderList();
    const problems = await screen.findByRole('region', { name: 'Problems' });
    expect(problems).toHaveTextContent('route/broken-route');
    expect(problems).toHaveTextContent('broken-route broke');
    expect(problems).toHaveTextContent('Retrying'); // Failed, not terminal
    const asked = spy.mock.calls.find((c) => isProblems(c[0]))!;
    expect(asked[1]).toBe(10);
    expect(await screen.findByText('2 resources · page 1')).toBeInTheDocument();
    // A chosen phase is the user's own order: no strip.
    rerenderWith({ ...EMPTY_FILTER, phases: ['Ready'] });
    await waitFor(() => expect(screen.queryByRole('region', { name: 'Problems' })).toBeNull());
  });

  it("opens a row's owner from its Owner cell", async () => {
    vi.spyOn(api, 'listResources').mockImplementation(async (f) => ({
      body: { owners: [], resources: isProblems(f) ? [] : [{ ...item('child'), owner: { kind: 'classicbom', name: 'bom' } }] },
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
