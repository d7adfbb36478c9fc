import { useMutation } from '@tanstack/react-query';
import { useState } from 'react';
import { ApiError, api } from '../../api/client';
import type { ApplyBody, DiffEntry, PlanItem, ResourceDetail } from '../../api/types';
import { ProblemView } from '../../components/QueryState';
import { useResourceMutation } from './useResourceMutation';

interface Props {
  r: ResourceDetail;
  onClose: () => void;
  onSaved: (message: string) => void;
}

/** A value on one line. */
const show = (v: unknown) => JSON.stringify(v);

/** `-` and `+` lines of a diff, one pointer each. */
function DiffLines({ entries, label }: { entries: DiffEntry[]; label: string }) {
  return (
    <pre className="diff" aria-label={label}>
      {entries.flatMap((e) => [
        ...(e.old !== undefined ? [<div key={`${e.path}-`} className="del">{`- ${e.path}: ${show(e.old)}`}</div>] : []),
        ...(e.new !== undefined ? [<div key={`${e.path}+`} className="add">{`+ ${e.path}: ${show(e.new)}`}</div>] : []),
      ])}
    </pre>
  );
}

/** What the server's plan says the apply would do: the spec diff, and for a composite the
 * children and edges its compose would add, change and remove. */
export function PlanView({ item }: { item: PlanItem }) {
  const ref = (r: { kind: string; name: string }) => `${r.kind}/${r.name}`;
  const edge = (e: { from: { kind: string; name: string }; to: { kind: string; name: string } }) => `${ref(e.from)} → ${ref(e.to)}`;
  const children = item.children;
  const edges = item.edges;
  return (
    <section className="plan" aria-label="Plan">
      <p>
        The apply would <strong>{item.action === 'unchanged' ? 'change nothing' : item.action}</strong> this resource
        {item.action === 'update' && `: ${item.diff.length + item.diff_omitted} difference(s)`}.
      </p>
      {item.diff.length > 0 && <DiffLines entries={item.diff} label="Plan diff" />}
      {item.compose_error && (
        <div className="failure" role="note" aria-label="Compose error">
          <strong>Its compose would fail:</strong> {item.compose_error}
        </div>
      )}
      {item.warnings.map((w) => (
        <p key={w} className="warn" role="note">
          {w}
        </p>
      ))}
      {children && (
        <div aria-label="Planned children">
          <h4>
            Children: {children.add.length} added, {children.change.length} changed, {children.remove.length} removed, {children.unchanged}{' '}
            unchanged
          </h4>
          <ul className="plan-list">
            {children.add.map((c) => (
              <li key={`+${ref(c)}`} className="add">
                + {ref(c)}
              </li>
            ))}
            {children.remove.map((c) => (
              <li key={`-${ref(c)}`} className="del">
                − {ref(c)}
              </li>
            ))}
            {children.change.map((c) => (
              <li key={`~${ref(c)}`}>
                ~ {ref(c)}
                <DiffLines entries={c.diff} label={`Diff of ${ref(c)}`} />
              </li>
            ))}
          </ul>
        </div>
      )}
      {edges && (edges.add.length > 0 || edges.remove.length > 0 || edges.change.length > 0) && (
        <div aria-label="Planned edges">
          <h4>
            Edges: {edges.add.length} added, {edges.change.length} changed, {edges.remove.length} removed
          </h4>
          <ul className="plan-list">
            {edges.add.map((e) => (
              <li key={`+${edge(e)}`} className="add">
                + {edge(e)}
              </li>
            ))}
            {edges.remove.map((e) => (
              <li key={`-${edge(e)}`} className="del">
                − {edge(e)}
              </li>
            ))}
            {edges.change.map((e) => (
              <li key={`~${edge(e)}`}>~ {edge(e)} (value flows)</li>
            ))}
          </ul>
        </div>
      )}
    </section>
  );
}

/**
 * Edits a resource's spec: the JSON is reviewed first (the server's plan, nothing written),
 * and only a reviewed spec can be saved; editing the text again asks for a new review.
 */
export function EditSpecDialog({ r, onClose, onSaved }: Props) {
  const [text, setText] = useState(() => JSON.stringify(r.spec ?? {}, null, 2));
  const [parseError, setParseError] = useState<string | null>(null);
  const [reviewed, setReviewed] = useState<{ text: string; item: PlanItem } | null>(null);
  const body = (spec: ApplyBody['spec']): ApplyBody => ({
    kind: r.kind,
    kind_version: r.kind_version,
    name: r.name,
    labels: r.labels,
    spec,
    provider_config_ref: r.provider_config_ref ?? null,
  });
  const plan = useMutation({ mutationFn: (doc: ApplyBody) => api.plan(doc) });
  const save = useResourceMutation((doc: ApplyBody) => api.applyResource(doc));
  const review = () => {
    let spec: ApplyBody['spec'];
    try {
      spec = JSON.parse(text) as ApplyBody['spec'];
    } catch (e) {
      setParseError(`The spec is not JSON: ${(e as Error).message}`);
      return;
    }
    setParseError(null);
    plan.mutate(body(spec), { onSuccess: (p) => setReviewed({ text, item: p.results[0] }) });
  };
  const current = reviewed && reviewed.text === text ? reviewed.item : null;
  const refused = current?.error ?? null;
  const canSave = current !== null && !refused && current.action !== 'unchanged' && !save.isPending;
  const title = `Edit ${r.kind}/${r.name}`;
  return (
    <div className="modal-backdrop" onClick={onClose}>
      <div className="modal wide" role="dialog" aria-modal="true" aria-label={title} onClick={(e) => e.stopPropagation()}>
        <h3>{title}</h3>
        <label>
          Spec (JSON)
          <textarea
            aria-label="Spec JSON"
            className="spec-editor"
            rows={12}
            spellCheck={false}
            value={text}
            onChange={(e) => setText(e.target.value)}
          />
        </label>
        {parseError && (
          <p className="error" role="alert">
            {parseError}
          </p>
        )}
        <ProblemView error={plan.error ?? save.error} />
        {refused && <ProblemView error={new ApiError(refused)} title="The apply would be refused" />}
        {current && !refused && <PlanView item={current} />}
        {reviewed && !current && <p className="muted">The spec changed since the review: review it again before saving.</p>}
        <div className="modal-actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="button" onClick={review} disabled={plan.isPending}>
            Review changes
          </button>
          <button
            type="button"
            className="primary"
            disabled={!canSave}
            title={current ? undefined : 'Review the changes first'}
            onClick={() => {
              const spec = JSON.parse(text) as ApplyBody['spec'];
              save.mutate(body(spec), { onSuccess: (a) => onSaved(`Applied: ${a.result}, generation ${a.generation}.`) });
            }}
          >
            Save
          </button>
        </div>
      </div>
    </div>
  );
}
