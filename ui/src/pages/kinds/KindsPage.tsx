import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useSearchParams } from 'react-router-dom';
import { api, POLL_MS } from '../../api/client';
import type { KindSummary } from '../../api/types';
import { QueryState } from '../../components/QueryState';
import { KindDetail } from './KindDetail';
import { ManifestEditor } from './ManifestEditor';
import { usePermission } from '../../lib/permissions';

/** `/kinds`: the declared kinds; `?kind=&v=` opens one, `?apply=1` the manifest editor. */
export function KindsPage() {
  const may = usePermission('admin');
  const [params, setParams] = useSearchParams();
  const kinds = useQuery({ queryKey: ['kinds'], queryFn: api.kinds, refetchInterval: POLL_MS * 2, placeholderData: keepPreviousData });
  const sel = params.get('kind');
  const ver = Number(params.get('v')) || undefined;
  const applying = params.get('apply') === '1';
  const choose = (k: KindSummary) => setParams({ kind: k.kind, v: String(k.kind_version) });
  return (
    <div className="kinds-page">
      <div className="page-head">
        <h2>Kinds</h2>
        <button type="button" disabled={!may.allowed} title={may.why} onClick={() => setParams({ apply: '1' })}>
          Apply a manifest…
        </button>
      </div>
      {applying && <ManifestEditor onClose={() => setParams({})} />}
      <QueryState what="kinds" data={kinds.data} error={kinds.error} isLoading={kinds.isLoading}>
        {(d) => (
          <div className="table-wrap">
            <table className="table" aria-label="Kinds">
              <thead>
                <tr>
                  <th>Kind</th>
                  <th>Version</th>
                  <th>Reactions</th>
                  <th className="hide-narrow">Cap</th>
                  <th className="hide-narrow">Deadline</th>
                  <th className="hide-narrow">Resync</th>
                  <th className="hide-narrow">Retired</th>
                  <th className="hide-narrow">Description</th>
                </tr>
              </thead>
              <tbody>
                {d.kinds.map((k) => (
                  <tr key={`${k.kind}@${k.kind_version}`} data-kind={`${k.kind}@${k.kind_version}`} className={sel === k.kind && (ver ?? k.kind_version) === k.kind_version ? 'selected' : undefined} onClick={() => choose(k)}>
                    <td>
                      <button type="button" className="link" onClick={(e) => (e.stopPropagation(), choose(k))}>
                        {k.kind}
                      </button>
                    </td>
                    <td>{k.kind_version}</td>
                    <td>
                      <div className="reactions">
                      {(k.reactions ?? []).map((r) => (
                        <span key={r.name} className="label" title={(r.emits ?? []).join(', ')}>
                          {r.name}: {r.trigger}
                          {r.verb ? ` (${r.verb})` : ''}
                        </span>
                      ))}
                      </div>
                    </td>
                    <td className="hide-narrow">{k.operational?.max_inflight || '∞'}</td>
                    <td className="hide-narrow">{k.operational ? `${k.operational.task_deadline_secs}s` : '—'}</td>
                    <td className="hide-narrow">{k.operational?.resync_interval_secs ? `${k.operational.resync_interval_secs}s` : 'off'}</td>
                    <td className="hide-narrow">{k.operational?.retired ? 'yes' : 'no'}</td>
                    <td className="hide-narrow description">{k.description}</td>
                  </tr>
                ))}
                {d.kinds.length === 0 && (
                  <tr>
                    <td colSpan={8} className="empty">
                      No kinds yet — apply a manifest.
                    </td>
                  </tr>
                )}
              </tbody>
            </table>
          </div>
        )}
      </QueryState>
      {sel && <KindDetail kind={sel} version={ver ?? kinds.data?.kinds.find((k) => k.kind === sel)?.kind_version ?? 1} />}
    </div>
  );
}
