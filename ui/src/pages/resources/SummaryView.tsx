import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { Link, useLocation } from 'react-router-dom';
import { api, POLL_MS } from '../../api/client';
import { PHASES, type Phase, type Summary } from '../../api/types';
import { PhaseBadge, failureOf } from '../../components/PhaseBadge';
import { QueryState } from '../../components/QueryState';
import { TokenInput } from '../../components/TokenInput';
import { EMPTY_FILTER, isRef, writeFilter, type ResourceFilter } from '../../lib/filters';
import { useListsLive, useRoots } from '../../lib/liveResources';
import { pollWhileOffline } from '../../lib/useEventStream';

interface Props {
  filter: ResourceFilter;
  setFilter: (f: ResourceFilter) => void;
}

/** Totals per phase and counts per kind, for the roots or the chosen owners' descendants. */
export function SummaryView({ filter, setFilter }: Props) {
  const owners = filter.owners;
  const live = useListsLive();
  const summary = useQuery({
    queryKey: ['summary', owners],
    queryFn: () => api.summary(owners),
    refetchInterval: pollWhileOffline(live, POLL_MS),
    placeholderData: keepPreviousData,
  });
  const listLink = (f: Partial<ResourceFilter>) => `/resources/list?${writeFilter(new URLSearchParams(), { ...EMPTY_FILTER, owners, ...f })}`;
  return (
    <section className="summary-view" aria-label="Summary">
      <div className="summary-scope">
        <TokenInput
          label="Owner"
          values={owners}
          onChange={(o) => setFilter({ ...filter, owners: o })}
          placeholder="kind/name (empty: all roots)"
          validate={(v) => (isRef(v) ? null : 'an owner is kind/name')}
        />
        <p className="hint">{owners.length ? `Descendants of ${owners.join(', ')}` : 'All roots (resources without an owner)'}</p>
      </div>
      <QueryState what="the summary" data={summary.data} error={summary.error} isLoading={summary.isLoading}>
        {(s) => <SummaryTables s={s} listLink={listLink} />}
      </QueryState>
      {owners.length === 0 && <RootsTable onChoose={(ref) => setFilter({ ...filter, owners: [ref] })} />}
    </section>
  );
}

function SummaryTables({ s, listLink }: { s: Summary; listLink: (f: Partial<ResourceFilter>) => string }) {
  return (
    <>
      <div className="totals" aria-label="Totals per phase">
        <div className="total-card">
          <div className="total-n">{s.total}</div>
          <div>total</div>
        </div>
        {PHASES.map((p) => (
          <Link key={p} to={listLink({ phases: [p] })} className={`total-card phase-card-${p}${s.totals[p] ? '' : ' zero'}`} data-phase={p}>
            <div className="total-n">{s.totals[p]}</div>
            <div>{p}</div>
          </Link>
        ))}
      </div>
      <div className="table-wrap">
        <table className="table" aria-label="Counts per kind">
          <thead>
            <tr>
              <th>Kind</th>
              <th>Total</th>
              {PHASES.map((p) => (
                <th key={p} className="hide-narrow">
                  {p}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {s.by_kind.map((k) => (
              <tr key={k.kind}>
                <td>
                  <Link to={listLink({ kinds: [k.kind] })}>{k.kind}</Link>
                </td>
                <td>{k.total}</td>
                {PHASES.map((p: Phase) => (
                  <td key={p} className="hide-narrow">
                    {k.phases[p] ? <Link to={listLink({ kinds: [k.kind], phases: [p] })}>{k.phases[p]}</Link> : <span className="muted">0</span>}
                  </td>
                ))}
              </tr>
            ))}
            {s.by_kind.length === 0 && (
              <tr>
                <td colSpan={9} className="empty">
                  Nothing here yet.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
    </>
  );
}

function RootsTable({ onChoose }: { onChoose: (ref: string) => void }) {
  const { search } = useLocation();
  const roots = useRoots();
  return (
    <section aria-label="Roots">
      <h3>Roots</h3>
      <QueryState what="roots" data={roots.data} error={roots.error} isLoading={roots.isLoading}>
        {(d) => (
          <div className="table-wrap">
            <table className="table">
              <thead>
                <tr>
                  <th>Kind</th>
                  <th>Name</th>
                  <th>Phase</th>
                  <th>Descendants</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {d.body.roots.map((r) => (
                  <tr key={r.uid}>
                    <td>{r.kind}</td>
                    <td>
                      <Link to={`/resources/summary/r/${encodeURIComponent(r.kind)}/${encodeURIComponent(r.name)}${search}`}>{r.name}</Link>
                    </td>
                    <td>
                      <PhaseBadge phase={r.phase} {...failureOf(r)} />
                    </td>
                    <td>{r.resource_count}</td>
                    <td className="row-actions">
                      <button type="button" onClick={() => onChoose(`${r.kind}/${r.name}`)}>
                        summarise
                      </button>
                      <Link to={`/resources/graph?owner=${encodeURIComponent(`${r.kind}/${r.name}`)}`}>graph</Link>
                    </td>
                  </tr>
                ))}
                {d.body.roots.length === 0 && (
                  <tr>
                    <td colSpan={5} className="empty">
                      No roots yet.
                    </td>
                  </tr>
                )}
              </tbody>
            </table>
            {d.nextCursor && <p className="hint">Showing the first {d.body.roots.length} roots; filter the list view to find others.</p>}
          </div>
        )}
      </QueryState>
    </section>
  );
}
