// The spec history of a root (`GET .../spec-history`, newest first): pick a generation, see
// what changed between it and the current spec, and roll back to it (`POST .../rollback`,
// confirmed; operator role). Composed children keep no history (their spec is derived from
// their root's), so the section shows only on roots.

import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../../api/client';
import type { ResourceDetail, SpecVersion } from '../../api/types';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { ProblemView } from '../../components/QueryState';
import { usePermission } from '../../lib/permissions';
import { changes, specDiff } from '../../lib/specDiff';
import { when } from '../../lib/time';
import { useResourceMutation } from './useResourceMutation';

export function HistorySection({ r }: { r: ResourceDetail }) {
  const { kind, name } = r;
  // Keyed by the generation, so an apply or a rollback reads the history again.
  const q = useQuery({
    queryKey: ['history', kind, name, r.generation],
    queryFn: () => api.specHistory(kind, name),
    enabled: !r.owner,
  });
  const [picked, setPicked] = useState<number | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [notice, setNotice] = useState<string | null>(null);
  const may = usePermission('operator');
  const rollback = useResourceMutation((g: number) => api.rollback(kind, name, g));
  if (r.owner) return null;
  const items = q.data?.items ?? [];
  // By default the generation before the current one: what the last apply changed.
  const chosen: SpecVersion | undefined =
    items.find((i) => i.generation === picked) ?? items.find((i) => i.generation !== r.generation) ?? items[0];
  const diff = chosen ? specDiff(chosen.spec, r.spec) : [];
  const isCurrent = chosen?.generation === r.generation || (chosen !== undefined && !changes(diff));
  return (
    <section aria-label="History">
      <h3>History</h3>
      <ProblemView error={q.error} />
      {q.data && items.length === 0 && <p className="muted">No recorded specs.</p>}
      {items.length > 0 && (
        <ol className="history" aria-label="Spec generations">
          {items.map((i) => (
            <li key={i.generation} className={i.generation === chosen?.generation ? 'chosen' : ''}>
              <button
                type="button"
                className="link"
                aria-pressed={i.generation === chosen?.generation}
                onClick={() => (setPicked(i.generation), setNotice(null), rollback.reset())}
              >
                generation {i.generation}
              </button>{' '}
              <span className="muted">{when(i.created_at)}</span>
              {i.generation === r.generation && <span className="muted"> (current)</span>}
            </li>
          ))}
        </ol>
      )}
      {chosen && (
        <>
          <h4>
            Generation {chosen.generation} → current (generation {r.generation})
          </h4>
          {isCurrent ? (
            <p className="muted">Same as the current spec.</p>
          ) : (
            <pre className="json diff" aria-label="Spec diff">
              {diff.map((l, n) => (
                <div key={n} className={l.op === '+' ? 'add' : l.op === '-' ? 'del' : 'ctx'}>
                  {l.op} {l.text}
                </div>
              ))}
            </pre>
          )}
          <div className="actions">
            <button
              type="button"
              className="danger"
              disabled={isCurrent || !may.allowed || rollback.isPending}
              title={!may.allowed ? may.why : isCurrent ? 'This is the current spec.' : undefined}
              onClick={() => (setNotice(null), rollback.reset(), setConfirming(true))}
            >
              Roll back to this generation…
            </button>
            {notice && !rollback.error && (
              <span className="notice" role="status">
                {notice}
              </span>
            )}
            <ProblemView error={rollback.error} />
          </div>
        </>
      )}
      {confirming && chosen && (
        <ConfirmDialog
          title={`Roll ${kind}/${name} back to generation ${chosen.generation}?`}
          confirmLabel="Roll back"
          busy={rollback.isPending}
          onCancel={() => setConfirming(false)}
          onConfirm={() =>
            rollback.mutate(chosen.generation, {
              onSuccess: (d) => {
                setConfirming(false);
                setPicked(null);
                setNotice(
                  d.changed
                    ? `Rolled back: generation ${d.generation} has the spec of generation ${chosen.generation}.`
                    : 'Nothing to do: the spec already is that generation\u2019s.',
                );
              },
              onError: () => setConfirming(false),
            })
          }
        >
          <p>
            The spec of generation {chosen.generation} is applied as a new generation; the resource and what it composes reconcile to it.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}
