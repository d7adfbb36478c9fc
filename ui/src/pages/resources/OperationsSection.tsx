import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api, POLL_MS } from '../../api/client';
import type { Json, ResourceDetail } from '../../api/types';
import { ProblemView } from '../../components/QueryState';
import { usePermission } from '../../lib/permissions';
import { age } from '../../lib/time';
import { useResourceMutation } from './useResourceMutation';

/** The kind's operation verbs (reactions with `trigger: operation`), a form to run one, and recent runs. */
export function OperationsSection({ r }: { r: ResourceDetail }) {
  const manifest = useQuery({
    queryKey: ['manifest', r.kind, r.kind_version],
    queryFn: () => api.manifest(r.kind, r.kind_version),
    staleTime: 30_000,
  });
  const verbs = (manifest.data?.reactions ?? []).filter((x) => x.trigger === 'operation' && x.verb).map((x) => x.verb as string);
  const ops = useQuery({
    queryKey: ['ops', r.kind, r.name],
    queryFn: () => api.operations(r.kind, r.name),
    refetchInterval: POLL_MS,
    enabled: verbs.length > 0,
  });
  if (manifest.error) return <ProblemView error={manifest.error} title="Manifest" />;
  if (verbs.length === 0) return null;
  return (
    <section aria-label="Operations">
      <h3>Operations</h3>
      <RunOperationForm kind={r.kind} name={r.name} verbs={verbs} />
      {ops.error ? <ProblemView error={ops.error} /> : null}
      {ops.data && ops.data.items.length > 0 && (
        <ul className="ops">
          {ops.data.items.slice(0, 10).map((o) => (
            <li key={o.uid}>
              <strong>{o.verb}</strong> <span className={`op-${o.state}`}>{o.state}</span> <span className="muted">{age(o.created_at)} ago, {o.attempts} attempt(s)</span>
              {o.error && <div className="message">{o.error}</div>}
              {o.output != null && <pre className="json small">{JSON.stringify(o.output)}</pre>}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function RunOperationForm({ kind, name, verbs }: { kind: string; name: string; verbs: string[] }) {
  const [verb, setVerb] = useState(verbs[0]);
  const [input, setInput] = useState('');
  const [parseError, setParseError] = useState<string | null>(null);
  const run = useResourceMutation((v: { verb: string; input?: Json }) => api.runOperation(kind, name, v.verb, v.input));
  const may = usePermission('operator');
  return (
    <form
      className="op-form"
      onSubmit={(e) => {
        e.preventDefault();
        let parsed: Json | undefined;
        if (input.trim()) {
          try {
            parsed = JSON.parse(input) as Json;
          } catch (err) {
            setParseError(`input is not JSON: ${(err as Error).message}`);
            return;
          }
        }
        setParseError(null);
        run.mutate({ verb, input: parsed });
      }}
    >
      <select aria-label="Verb" value={verb} onChange={(e) => setVerb(e.target.value)}>
        {verbs.map((v) => (
          <option key={v}>{v}</option>
        ))}
      </select>
      <input aria-label="Operation input (JSON)" placeholder='input JSON, e.g. {"dry_run": true}' value={input} onChange={(e) => setInput(e.target.value)} />
      <button type="submit" disabled={!may.allowed || run.isPending} title={may.why}>
        Run
      </button>
      {parseError && <div className="field-error">{parseError}</div>}
      <ProblemView error={run.error} />
      {run.data && <span className="notice">Operation {run.data.uid.slice(0, 8)} {run.data.state}.</span>}
    </form>
  );
}
