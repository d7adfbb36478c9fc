import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useSearchParams } from 'react-router-dom';
import { api, ApiError, POLL_MS } from '../../api/client';
import { TRANSITIONS, type Labels, type ReactorBinding, type ReactorBindingPut } from '../../api/types';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { Field } from '../../components/Field';
import { ProblemView, QueryState } from '../../components/QueryState';
import { when } from '../../lib/time';
import { usePermission } from '../../lib/permissions';

/** `/reactor-bindings`: "when kind X crosses transition T, run reactor R". */
export function ReactorBindingsPage() {
  const may = usePermission('operator');
  const [params, setParams] = useSearchParams();
  const list = useQuery({ queryKey: ['bindings'], queryFn: api.reactorBindings, refetchInterval: POLL_MS, placeholderData: keepPreviousData });
  const editing = params.get('edit');
  const creating = params.get('new') === '1';
  const [deleting, setDeleting] = useState<string | null>(null);
  const qc = useQueryClient();
  const del = useMutation({ mutationFn: api.deleteReactorBinding, onSettled: () => qc.invalidateQueries({ queryKey: ['bindings'] }) });
  const current = editing ? list.data?.items.find((b) => b.name === editing) : undefined;
  return (
    <div className="admin-page">
      <div className="page-head">
        <h2>Reactor bindings</h2>
        <button type="button" disabled={!may.allowed} title={may.why} onClick={() => setParams({ new: '1' })}>
          New binding…
        </button>
      </div>
      {(creating || (editing && current)) && <BindingForm key={editing ?? 'new'} initial={current} onClose={() => setParams({})} />}
      <ProblemView error={del.error} title="Delete refused" />
      <QueryState what="reactor bindings" data={list.data} error={list.error} isLoading={list.isLoading}>
        {(d) => (
          <div className="table-wrap">
            <table className="table" aria-label="Reactor bindings">
              <thead>
                <tr>
                  <th>Name</th>
                  <th>When</th>
                  <th>Run</th>
                  <th className="hide-narrow">Labels</th>
                  <th>Enabled</th>
                  <th>Deliveries</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {d.items.map((b: ReactorBinding) => (
                  <tr key={b.name}>
                    <td>{b.name}</td>
                    <td>
                      {b.watch_kind} {b.transition}
                    </td>
                    <td>{b.reactor}</td>
                    <td className="hide-narrow">
                      <div className="labels">
                        {Object.entries(b.label_match).map(([k, v]) => (
                          <span key={k} className="label">
                            {k}:{v}
                          </span>
                        ))}
                      </div>
                    </td>
                    <td>{b.enabled ? 'yes' : 'no'}</td>
                    <td>
                      {b.pending}
                      {b.failing > 0 && (
                        <div className="op-failed" title={b.last_error ?? undefined}>
                          {b.failing} failing (attempt {b.last_error_attempts}, retry {when(b.next_retry_at)}): {b.last_error}
                        </div>
                      )}
                    </td>
                    <td className="row-actions">
                      <button type="button" onClick={() => setParams({ edit: b.name })}>
                        Edit
                      </button>
                      <button type="button" className="danger" disabled={!may.allowed} title={may.why} onClick={() => (del.reset(), setDeleting(b.name))}>
                        Delete
                      </button>
                    </td>
                  </tr>
                ))}
                {d.items.length === 0 && (
                  <tr>
                    <td colSpan={7} className="empty">
                      No reactor bindings.
                    </td>
                  </tr>
                )}
              </tbody>
            </table>
          </div>
        )}
      </QueryState>
      {deleting && (
        <ConfirmDialog
          title={`Delete reactor binding ${deleting}?`}
          confirmLabel="Delete"
          onCancel={() => setDeleting(null)}
          onConfirm={() => {
            del.mutate(deleting);
            setDeleting(null);
          }}
        >
          <p>Its undelivered deliveries are dropped with it.</p>
        </ConfirmDialog>
      )}
    </div>
  );
}

const labelsText = (l: Labels) =>
  Object.entries(l)
    .map(([k, v]) => `${k}:${v}`)
    .join(', ');

function parseLabels(s: string): Labels | string {
  const out: Labels = {};
  for (const part of s.split(',').map((p) => p.trim()).filter(Boolean)) {
    const i = part.indexOf(':');
    if (i <= 0) return `"${part}" is not key:value`;
    out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

function BindingForm({ initial, onClose }: { initial?: ReactorBinding; onClose: () => void }) {
  const may = usePermission('operator');
  const kinds = useQuery({ queryKey: ['kinds'], queryFn: api.kinds });
  const all = kinds.data?.kinds ?? [];
  const reactors = all.filter((k) => (k.reactions ?? []).length > 0 && (k.reactions ?? []).every((r) => r.trigger === 'reactor'));
  const watchable = [...new Set(all.filter((k) => !reactors.includes(k)).map((k) => k.kind))];
  const [form, setForm] = useState({
    name: initial?.name ?? '',
    watch_kind: initial?.watch_kind ?? '',
    transition: initial?.transition ?? 'synced',
    reactor: initial?.reactor ?? '',
    labels: initial ? labelsText(initial.label_match) : '',
    enabled: initial?.enabled ?? true,
  });
  const [localError, setLocalError] = useState<ApiError | null>(null);
  const qc = useQueryClient();
  const save = useMutation({
    mutationFn: api.putReactorBinding,
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['bindings'] });
      onClose();
    },
  });
  const error = localError ?? save.error;
  const submit = () => {
    const labels = parseLabels(form.labels);
    if (typeof labels === 'string') {
      setLocalError(new ApiError({ status: 0, detail: labels, errors: [{ location: '/label_match', message: labels }] }));
      return;
    }
    setLocalError(null);
    const body: ReactorBindingPut = {
      name: form.name.trim(),
      watch_kind: form.watch_kind,
      transition: form.transition,
      reactor: form.reactor,
      label_match: labels,
      enabled: form.enabled,
    };
    save.mutate(body);
  };
  return (
    <form
      className="form editor"
      aria-label="Reactor binding"
      onSubmit={(e) => {
        e.preventDefault();
        submit();
      }}
    >
      <h3>{initial ? `Edit ${initial.name}` : 'New reactor binding'}</h3>
      <Field label="Name" error={error} location="/name">
        <input name="name" value={form.name} readOnly={!!initial} onChange={(e) => setForm({ ...form, name: e.target.value })} />
      </Field>
      <Field label="When kind" error={error} location="/watch_kind">
        <input name="watch_kind" list="watchable-kinds" value={form.watch_kind} onChange={(e) => setForm({ ...form, watch_kind: e.target.value })} />
        <datalist id="watchable-kinds">
          {watchable.map((k) => (
            <option key={k} value={k} />
          ))}
        </datalist>
      </Field>
      <Field label="crosses" error={error} location="/transition">
        <select name="transition" value={form.transition} onChange={(e) => setForm({ ...form, transition: e.target.value })}>
          {TRANSITIONS.map((t) => (
            <option key={t}>{t}</option>
          ))}
        </select>
      </Field>
      <Field label="run reactor" error={error} location="/reactor">
        <input name="reactor" list="reactor-kinds" value={form.reactor} onChange={(e) => setForm({ ...form, reactor: e.target.value })} />
        <datalist id="reactor-kinds">
          {reactors.map((k) => (
            <option key={k.kind} value={k.kind} />
          ))}
        </datalist>
      </Field>
      <Field label="only for labels (key:value, comma-separated)" error={error} location="/label_match">
        <input name="labels" value={form.labels} onChange={(e) => setForm({ ...form, labels: e.target.value })} />
      </Field>
      <label className="inline">
        <input type="checkbox" checked={form.enabled} onChange={(e) => setForm({ ...form, enabled: e.target.checked })} /> enabled
      </label>
      <ProblemView error={error} title="Not saved" />
      <div className="modal-actions">
        <button type="button" onClick={onClose}>
          Cancel
        </button>
        <button type="submit" className="primary" disabled={!may.allowed || save.isPending} title={may.why}>
          Save
        </button>
      </div>
    </form>
  );
}
