import { useQuery } from '@tanstack/react-query';
import { api, POLL_MS } from '../../api/client';
import type { ValueMapping } from '../../api/types';
import { PhaseBadge } from '../../components/PhaseBadge';
import { ProblemView } from '../../components/QueryState';

const flows = (m: ValueMapping[]) => m.map((v) => `${v.source_field} → ${v.dependent_field}`).join(', ');

/** What the resource waits for and what waits for it, with the values that flow. */
export function DependenciesSection({ kind, name, onOpen }: { kind: string; name: string; onOpen: (k: string, n: string) => void }) {
  const q = useQuery({ queryKey: ['deps', kind, name], queryFn: () => api.dependencies(kind, name), refetchInterval: POLL_MS * 2 });
  if (q.error) return <ProblemView error={q.error} title="Dependencies" />;
  if (!q.data || (q.data.dependencies.length === 0 && q.data.dependents.length === 0)) return null;
  return (
    <>
      <h3>Dependencies</h3>
      <ul className="deps">
        {q.data.dependencies.map((d) => (
          <li key={`u-${d.kind}/${d.name}`}>
            waits for{' '}
            <button type="button" className="link" onClick={() => onOpen(d.kind, d.name)}>
              {d.kind}/{d.name}
            </button>{' '}
            <PhaseBadge phase={d.upstream_phase} /> <span className="muted">{flows(d.value_mappings)}</span>
          </li>
        ))}
        {q.data.dependents.map((d) => (
          <li key={`d-${d.kind}/${d.name}`}>
            needed by{' '}
            <button type="button" className="link" onClick={() => onOpen(d.kind, d.name)}>
              {d.kind}/{d.name}
            </button>{' '}
            <PhaseBadge phase={d.phase} /> <span className="muted">{flows(d.value_mappings)}</span>
          </li>
        ))}
      </ul>
    </>
  );
}
