import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useSearchParams } from 'react-router-dom';
import { api, ApiError, POLL_MS } from '../../api/client';
import type { Json, ProviderConfig, ProviderConfigPut } from '../../api/types';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { Field } from '../../components/Field';
import { ProblemView, QueryState } from '../../components/QueryState';
import { age } from '../../lib/time';
import { usePermission } from '../../lib/permissions';

/** `/providerconfigs`: the per-kind config store; `?edit=<name>` or `?new=1` opens the form. */
export function ProviderConfigsPage() {
  const may = usePermission('admin');
  const [params, setParams] = useSearchParams();
  const list = useQuery({ queryKey: ['providerconfigs'], queryFn: api.providerConfigs, refetchInterval: POLL_MS, placeholderData: keepPreviousData });
  const editing = params.get('edit');
  const creating = params.get('new') === '1';
  const [deleting, setDeleting] = useState<string | null>(null);
  const qc = useQueryClient();
  const del = useMutation({
    mutationFn: api.deleteProviderConfig,
    onSettled: () => qc.invalidateQueries({ queryKey: ['providerconfigs'] }),
  });
  return (
    <div className="admin-page">
      <div className="page-head">
        <h2>Provider configs</h2>
        <button type="button" disabled={!may.allowed} title={may.why} onClick={() => setParams({ new: '1' })}>
          New config…
        </button>
      </div>
      {(creating || editing) && <ProviderConfigForm key={editing ?? 'new'} name={editing} onClose={() => setParams({})} />}
      <ProblemView error={del.error} title="Delete refused" />
      <QueryState what="provider configs" data={list.data} error={list.error} isLoading={list.isLoading}>
        {(d) => (
          <div className="table-wrap">
            <table className="table" aria-label="Provider configs">
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Kind</th>
                  <th>Default</th>
                  <th className="hide-narrow">Spec</th>
                  <th className="hide-narrow">Bundle</th>
                  <th>Used by</th>
                  <th className="hide-narrow">Updated</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {d.items.map((c: ProviderConfig) => (
                  <tr key={c.name}>
                    <td>{c.name}</td>
                    <td>
                      {c.kind} v{c.kind_version}
                    </td>
                    <td>{c.is_default ? 'default' : ''}</td>
                    <td className="hide-narrow">
                      <code className="clip">{JSON.stringify(c.spec)}</code>
                    </td>
                    <td className="hide-narrow">{c.data_size ? `${c.data_size} B` : '—'}</td>
                    <td>{c.used_by}</td>
                    <td className="hide-narrow">{age(c.updated_at)} ago</td>
                    <td className="row-actions">
                      <button type="button" onClick={() => setParams({ edit: c.name })}>
                        Edit
                      </button>
                      <button type="button" className="danger" disabled={!may.allowed} title={may.why} onClick={() => (del.reset(), setDeleting(c.name))}>
                        Delete
                      </button>
                    </td>
                  </tr>
                ))}
                {d.items.length === 0 && (
                  <tr>
                    <td colSpan={8} className="empty">
                      No provider configs.
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
          title={`Delete provider config ${deleting}?`}
          confirmLabel="Delete"
          onCancel={() => setDeleting(null)}
          onConfirm={() => {
            del.mutate(deleting);
            setDeleting(null);
          }}
        >
          <p>The server refuses while resources reference it.</p>
        </ConfirmDialog>
      )}
    </div>
  );
}

function ProviderConfigForm({ name, onClose }: { name: string | null; onClose: () => void }) {
  const existing = useQuery({ queryKey: ['providerconfig', name], queryFn: () => api.providerConfig(name!), enabled: !!name });
  if (name && !existing.data) {
    return (
      <QueryState what={`provider config ${name}`} data={existing.data} error={existing.error} isLoading={existing.isLoading}>
        {() => null}
      </QueryState>
    );
  }
  return <ConfigEditor initial={existing.data} onClose={onClose} />;
}

function ConfigEditor({ initial, onClose }: { initial?: ProviderConfig; onClose: () => void }) {
  const may = usePermission('admin');
  const kinds = useQuery({ queryKey: ['kinds'], queryFn: api.kinds });
  const [form, setForm] = useState({
    name: initial?.name ?? '',
    kindRef: initial ? `${initial.kind}@${initial.kind_version}` : '',
    is_default: initial?.is_default ?? false,
    spec: JSON.stringify(initial?.spec ?? {}, null, 2),
    data: initial?.data ?? '',
  });
  const [localError, setLocalError] = useState<ApiError | null>(null);
  const qc = useQueryClient();
  const save = useMutation({
    mutationFn: api.putProviderConfig,
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['providerconfigs'] });
      void qc.invalidateQueries({ queryKey: ['providerconfig'] });
      onClose();
    },
  });
  const error = localError ?? save.error;
  const submit = () => {
    let spec: Json;
    try {
      spec = JSON.parse(form.spec || '{}') as Json;
    } catch (e) {
      setLocalError(new ApiError({ status: 0, detail: 'spec is not JSON', errors: [{ location: '/spec', message: (e as Error).message }] }));
      return;
    }
    setLocalError(null);
    const at = form.kindRef.lastIndexOf('@');
    const body: ProviderConfigPut = {
      name: form.name.trim(),
      kind: at > 0 ? form.kindRef.slice(0, at) : form.kindRef,
      kind_version: at > 0 ? Number(form.kindRef.slice(at + 1)) : 0,
      is_default: form.is_default,
      // Sent as typed: the server answers a spec that is no object with a 422 at /spec.
      spec: spec as ProviderConfigPut['spec'],
    };
    if (form.data.trim()) body.data = form.data.trim();
    save.mutate(body);
  };
  return (
    <form
      className="form editor"
      aria-label="Provider config"
      onSubmit={(e) => {
        e.preventDefault();
        submit();
      }}
    >
      <h3>{initial ? `Edit ${initial.name}` : 'New provider config'}</h3>
      <Field label="Name" error={error} location="/name">
        <input name="name" value={form.name} readOnly={!!initial} onChange={(e) => setForm({ ...form, name: e.target.value })} />
      </Field>
      <Field label="Kind" error={error} location="/kind">
        <select name="kind" value={form.kindRef} onChange={(e) => setForm({ ...form, kindRef: e.target.value })}>
          <option value="">— choose a kind —</option>
          {(kinds.data?.kinds ?? []).map((k) => (
            <option key={`${k.kind}@${k.kind_version}`} value={`${k.kind}@${k.kind_version}`}>
              {k.kind} v{k.kind_version}
            </option>
          ))}
        </select>
      </Field>
      <label className="inline">
        <input type="checkbox" checked={form.is_default} onChange={(e) => setForm({ ...form, is_default: e.target.checked })} /> the default config of this kind version
      </label>
      <Field label="Spec (JSON, checked against the kind's config_schema)" error={error} location="/spec">
        <textarea name="spec" rows={8} spellCheck={false} value={form.spec} onChange={(e) => setForm({ ...form, spec: e.target.value })} />
      </Field>
      <Field label="Bundle (base64, optional)" error={error} location="/data">
        <textarea name="data" rows={2} spellCheck={false} value={form.data} onChange={(e) => setForm({ ...form, data: e.target.value })} />
      </Field>
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
