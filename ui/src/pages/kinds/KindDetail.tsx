import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../../api/client';
import type { KindManifest } from '../../api/types';
import { JsonView } from '../../components/JsonView';
import { QueryState } from '../../components/QueryState';
import { KindConfigForm } from './KindConfigForm';
import { ManifestEditor } from './ManifestEditor';
import { usePermission } from '../../lib/permissions';

/** One kind version: reactions, schemas, the raw manifest, and its operational config. */
export function KindDetail({ kind, version }: { kind: string; version: number }) {
  const may = usePermission('admin');
  const m = useQuery({ queryKey: ['manifest', kind, version], queryFn: () => api.manifest(kind, version) });
  const [editing, setEditing] = useState(false);
  return (
    <section className="kind-detail" aria-label={`Kind ${kind}`}>
      <h3>
        {kind} <span className="muted">v{version}</span>
      </h3>
      <QueryState what={`the manifest of ${kind}`} data={m.data} error={m.error} isLoading={m.isLoading}>
        {(man) => (
          <>
            {man.description && <p>{man.description}</p>}
            <ReactionsTable m={man} />
            <div className="two-col">
              <div>
                <h4>Operational config</h4>
                <KindConfigForm kind={kind} version={version} />
              </div>
              <div>
                <h4>Schemas</h4>
                {(['spec_schema', 'status_schema', 'config_schema'] as const).map((s) =>
                  man[s] ? (
                    <details key={s} open={s === 'spec_schema'}>
                      <summary>{s}</summary>
                      <JsonView value={man[s]} label={s} />
                    </details>
                  ) : null,
                )}
                <details>
                  <summary>Full manifest</summary>
                  <JsonView value={man as never} label="Manifest" />
                </details>
                <button type="button" disabled={!may.allowed} title={may.why} onClick={() => setEditing(true)}>
                  Edit and re-apply…
                </button>
              </div>
            </div>
            {editing && <ManifestEditor initial={man} onClose={() => setEditing(false)} />}
          </>
        )}
      </QueryState>
    </section>
  );
}

function ReactionsTable({ m }: { m: KindManifest }) {
  return (
    <div className="table-wrap">
      <table className="table" aria-label="Reactions">
        <thead>
          <tr>
            <th>Reaction</th>
            <th>Trigger</th>
            <th>Verb</th>
            <th>Emits</th>
          </tr>
        </thead>
        <tbody>
          {m.reactions.map((r) => (
            <tr key={r.name}>
              <td>{r.name}</td>
              <td>{r.trigger}</td>
              <td>{r.verb ?? '—'}</td>
              <td>{(r.emits ?? []).join(', ')}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
