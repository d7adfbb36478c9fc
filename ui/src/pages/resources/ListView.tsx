import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useSearchParams } from 'react-router-dom';
import { api, POLL_MS } from '../../api/client';
import type { ListSort, ResourceItem } from '../../api/types';
import { Pager } from '../../components/Pager';
import { PhaseBadge, failureOf } from '../../components/PhaseBadge';
import { QueryState } from '../../components/QueryState';
import { filterKey, type ResourceFilter } from '../../lib/filters';
import { useListsLive } from '../../lib/liveResources';
import { pollWhileOffline } from '../../lib/useEventStream';
import { age } from '../../lib/time';
import { useCursorStack } from '../../lib/useCursorStack';

const PAGE_SIZES = [25, 50, 100, 200];

/** The orders the list offers; the first is the default (`?sort=` absent from the URL). */
const ORDERS: { sort: ListSort; label: string }[] = [
  { sort: 'problems', label: 'problems first' },
  { sort: 'created', label: 'oldest first' },
];

/** One keyset page of resources matching the filter, kept fresh; Next/Prev walk a cursor
 * stack. The server orders the walk: problems first (Failed, Quarantined, Degraded,
 * Orphaned, then the rest) by default, so a failure is seen before the healthy rows whatever
 * page it would fall on in creation order. */
export function ListView({ filter, onOpen, selected }: { filter: ResourceFilter; onOpen: (k: string, n: string) => void; selected?: string }) {
  const [params, setParams] = useSearchParams();
  const limit = Math.min(500, Math.max(1, Number(params.get('limit')) || 50));
  const sort: ListSort = ORDERS.find((o) => o.sort === params.get('sort'))?.sort ?? ORDERS[0].sort;
  const key = filterKey(filter);
  const pager = useCursorStack(`${key}|${limit}|${sort}`);
  const live = useListsLive();
  const q = useQuery({
    queryKey: ['resources', key, limit, sort, pager.cursor],
    queryFn: () => api.listResources(filter, limit, pager.cursor, sort),
    refetchInterval: pollWhileOffline(live, POLL_MS),
    placeholderData: keepPreviousData,
  });
  const rows = q.data?.body.resources ?? [];
  return (
    <section className="list-view" aria-label="Resource list" aria-busy={q.isPlaceholderData}>
      <div className="list-head">
        <Pager
          count={rows.length}
          page={pager.page}
          canPrev={pager.canPrev}
          canNext={!!q.data?.nextCursor && !q.isPlaceholderData}
          onPrev={pager.prev}
          onNext={() => q.data && pager.next(q.data.nextCursor)}
          busy={q.isFetching}
        />
        <label className="page-size">
          order{' '}
          <select
            value={sort}
            onChange={(e) =>
              setParams((p) => {
                const o = new URLSearchParams(p);
                if (e.target.value === ORDERS[0].sort) o.delete('sort');
                else o.set('sort', e.target.value);
                return o;
              })
            }
          >
            {ORDERS.map((o) => (
              <option key={o.sort} value={o.sort}>
                {o.label}
              </option>
            ))}
          </select>
        </label>
        <label className="page-size">
          per page{' '}
          <select
            value={limit}
            onChange={(e) =>
              setParams((p) => {
                const o = new URLSearchParams(p);
                o.set('limit', e.target.value);
                return o;
              })
            }
          >
            {[...new Set([...PAGE_SIZES, limit])].sort((a, b) => a - b).map((n) => (
              <option key={n}>{n}</option>
            ))}
          </select>
        </label>
      </div>
      <QueryState what="resources" data={q.data} error={q.error} isLoading={q.isLoading}>
        {() =>
          rows.length === 0 ? (
            <p className="empty">No resources match these filters.</p>
          ) : (
            <div className="table-wrap">
              <table className="table resource-table">
                <thead>
                  <tr>
                    <th>Kind</th>
                    <th>Name</th>
                    <th>Phase</th>
                    <th>Gen</th>
                    <th className="hide-narrow">Owner</th>
                    <th className="hide-narrow">Labels</th>
                    <th className="hide-narrow">Updated</th>
                  </tr>
                </thead>
                <tbody>
                  {rows.map((r) => (
                    <ResourceRow key={r.uid} r={r} onOpen={onOpen} selected={selected === `${r.kind}/${r.name}`} />
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </QueryState>
    </section>
  );
}

function ResourceRow({ r, onOpen, selected }: { r: ResourceItem; onOpen: (k: string, n: string) => void; selected: boolean }) {
  return (
    <tr className={selected ? 'selected' : undefined} data-ref={`${r.kind}/${r.name}`} onClick={() => onOpen(r.kind, r.name)}>
      <td>{r.kind}</td>
      <td>
        <button type="button" className="link" onClick={(e) => (e.stopPropagation(), onOpen(r.kind, r.name))}>
          {r.name}
        </button>
      </td>
      <td>
        <PhaseBadge phase={r.phase} {...failureOf(r)} />
      </td>
      <td title="synced / generation">
        {r.synced_gen}/{r.generation}
      </td>
      <td className="hide-narrow">
        {r.owner ? (
          <button type="button" className="link owner-link" onClick={(e) => (e.stopPropagation(), onOpen(r.owner!.kind, r.owner!.name))}>
            {r.owner.kind}/{r.owner.name}
          </button>
        ) : (
          '—'
        )}
      </td>
      <td className="hide-narrow">
        <div className="labels">
          {Object.entries(r.labels).map(([k, v]) => (
            <span key={k} className="label">
              {k}:{v}
            </span>
          ))}
        </div>
      </td>
      <td className="hide-narrow" title={r.updated_at}>
        {age(r.updated_at)} ago
      </td>
    </tr>
  );
}
