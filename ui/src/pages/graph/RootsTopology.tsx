// The topology across roots, for the graph view before a root is chosen: every root
// (`GET /resources/roots`, keyset pages of `ROOTS_PAGE`, Prev/Next over a cursor stack) with
// its phase and how many resources it holds; choosing one draws its graph. Kept fresh by the
// event log like the lists (`['roots', ...]`).

import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { api, POLL_MS } from '../../api/client';
import type { RootItem } from '../../api/types';
import { Pager } from '../../components/Pager';
import { PhaseBadge, failureOf } from '../../components/PhaseBadge';
import { QueryState } from '../../components/QueryState';
import { useCursorStack } from '../../lib/useCursorStack';
import { useListsLive } from '../../lib/liveResources';
import { pollWhileOffline } from '../../lib/useEventStream';

/** Roots per page. */
export const ROOTS_PAGE = 25;

export function RootsTopology({ onPick, pageSize = ROOTS_PAGE }: { onPick: (ref: string) => void; pageSize?: number }) {
  const live = useListsLive();
  const pages = useCursorStack('roots');
  const q = useQuery({
    queryKey: ['roots', 'page', pageSize, pages.cursor],
    queryFn: () => api.listRoots({}, pageSize, pages.cursor),
    refetchInterval: pollWhileOffline(live, POLL_MS),
    placeholderData: keepPreviousData,
  });
  return (
    <section aria-label="Choose a root">
      <p>Choose a root to draw its dependency graph.</p>
      <QueryState what="roots" data={q.data} error={q.error} isLoading={q.isLoading}>
        {(d) =>
          d.body.roots.length === 0 && pages.page === 1 ? (
            <p className="empty">No roots yet.</p>
          ) : (
            <>
              <Pager
                count={d.body.roots.length}
                page={pages.page}
                canPrev={pages.canPrev}
                canNext={!!d.nextCursor}
                onPrev={pages.prev}
                onNext={() => pages.next(d.nextCursor)}
                busy={q.isFetching}
              />
              <table className="resource-table roots-topology" aria-label="Roots">
                <thead>
                  <tr>
                    <th>Root</th>
                    <th>Phase</th>
                    <th>Resources under it</th>
                  </tr>
                </thead>
                <tbody>
                  {d.body.roots.map((r: RootItem) => (
                    <tr key={r.uid} data-ref={`${r.kind}/${r.name}`}>
                      <td>
                        <button type="button" className="link" onClick={() => onPick(`${r.kind}/${r.name}`)}>
                          {r.kind}/{r.name}
                        </button>
                      </td>
                      <td>
                        <PhaseBadge phase={r.phase} {...failureOf(r)} />
                      </td>
                      <td>{r.resource_count}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </>
          )
        }
      </QueryState>
    </section>
  );
}
