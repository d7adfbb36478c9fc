import { render, screen, within } from '@testing-library/react';
import { MemoryRouter } from 'react-router-dom';
import { describe, expect, it } from 'vitest';
import type { ResourceEvent } from '../../api/types';
import { ActivityTable } from './ActivityPage';
import { mergeNewestFirst } from './activity';

const ev = (id: number, over: Partial<ResourceEvent> = {}): ResourceEvent => ({
  id,
  resource_id: '00000000-0000-0000-0000-000000000001',
  kind: 'route',
  name: 'payments-alpha-route',
  at: '2026-01-02T03:04:05Z',
  type: 'phase',
  from_phase: 'Reconciling',
  to_phase: 'Failed',
  generation: 3,
  message: 'spec.fail asks for a terminal failure',
  actor: null,
  ...over,
});

describe('the activity feed', () => {
  it('renders who did what to which resource, linking to it', () => {
    render(
      <MemoryRouter>
        <ActivityTable events={[ev(2, { type: 'created', from_phase: null, to_phase: 'Reconciling', actor: 'alice', message: null, name: 'a b' }), ev(1)]} />
      </MemoryRouter>,
    );
    const rows = within(screen.getByRole('table', { name: 'Activity' })).getAllByRole('row').slice(1);
    expect(rows).toHaveLength(2);
    const [created, failed] = rows;
    expect(within(created).getByText('alice')).toBeInTheDocument();
    expect(created).toHaveTextContent('created ∅ → Reconciling gen 3');
    expect(within(created).getByRole('link')).toHaveAttribute('href', '/resources/list/r/route/a%20b');
    // No actor: the engine's own work.
    expect(within(failed).getByText('engine')).toBeInTheDocument();
    expect(failed).toHaveTextContent('phase Reconciling → Failed gen 3');
    expect(failed).toHaveTextContent('spec.fail asks for a terminal failure');
    expect(within(failed).getByRole('link')).toHaveTextContent('route/payments-alpha-route');
  });

  it('says when there is nothing yet', () => {
    render(<ActivityTable events={[]} />);
    expect(screen.getByText('No events yet.')).toBeInTheDocument();
  });

  it('merges pages and streamed events newest first, each once, bounded', () => {
    const merged = mergeNewestFirst([ev(5), ev(3)], [ev(4), ev(3, { message: 'again' }), ev(1)], 3);
    expect(merged.map((e) => e.id)).toEqual([5, 4, 3]);
    expect(merged[2].message).toBe('again');
  });
});
