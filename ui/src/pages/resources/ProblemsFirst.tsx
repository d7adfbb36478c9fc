// The list's problems first: while no phase chip is chosen, the resources matching the other
// filters that are Failed (terminally or retrying) or Degraded are listed above the page, so
// they are seen before the healthy ones. The API's list is a keyset page in creation order with
// no phase-ordered sort, so this is a second, small query (`PROBLEMS_SHOWN` rows) rather than
// a reordering of the page, which would sort only that page.

import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { api, POLL_MS } from '../../api/client';
import type { Phase } from '../../api/types';
import { PhaseBadge, failureOf } from '../../components/PhaseBadge';
import { filterKey, type ResourceFilter } from '../../lib/filters';
import { useListsLive } from '../../lib/liveResources';
import { pollWhileOffline } from '../../lib/useEventStream';

/** The phases that are problems (Failed covers both terminal and retrying failures). */
export const PROBLEM_PHASES: Phase[] = ['Failed', 'Degraded'];
/** How many problems are listed; more are one chip click away. */
export const PROBLEMS_SHOWN = 10;

export function ProblemsFirst({ filter, onOpen }: { filter: ResourceFilter; onOpen: (k: string, n: string) => void }) {
  const live = useListsLive();
  const wanted = filter.phases.length === 0;
  const f = { ...filter, phases: PROBLEM_PHASES };
  const q = useQuery({
    queryKey: ['resources', 'problems', filterKey(f)],
    queryFn: () => api.listResources(f, PROBLEMS_SHOWN, ''),
    refetchInterval: pollWhileOffline(live, POLL_MS),
    placeholderData: keepPreviousData,
    enabled: wanted,
  });
  const rows = q.data?.body.resources ?? [];
  if (!wanted || rows.length === 0) return null;
  return (
    <section className="problems-first" aria-label="Problems">
      <h3>
        Problems first{q.data?.nextCursor ? ` (the first ${rows.length}; choose the Failed and Degraded chips for all)` : ''}
      </h3>
      <ul>
        {rows.map((r) => (
          <li key={r.uid} data-ref={`${r.kind}/${r.name}`}>
            <PhaseBadge phase={r.phase} {...failureOf(r)} />{' '}
            <button type="button" className="link" onClick={() => onOpen(r.kind, r.name)}>
              <span className="muted">{r.kind}/</span>
              {r.name}
            </button>
            {r.failure_message && <span className="muted message"> {r.failure_message}</span>}
          </li>
        ))}
      </ul>
    </section>
  );
}
