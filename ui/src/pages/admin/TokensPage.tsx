// `/tokens`: API tokens with a life cycle (admin only): the minted tokens (never a secret),
// a form to mint one whose secret is shown once, and revoke. `AUTH_FILE`'s principals are not
// listed here: they are managed in the file.

import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, POLL_MS } from '../../api/client';
import type { ApiToken, MintedApiToken, TokenBody } from '../../api/types';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { Field } from '../../components/Field';
import { ProblemView, QueryState } from '../../components/QueryState';
import { usePermission } from '../../lib/permissions';
import { when } from '../../lib/time';

const ROLES = ['viewer', 'operator', 'admin', 'worker'] as const;

/** Lifetimes offered by the form, in seconds (`0`: never expires). */
const LIFETIMES: [string, number][] = [
  ['never expires', 0],
  ['1 day', 86_400],
  ['30 days', 30 * 86_400],
  ['90 days', 90 * 86_400],
  ['1 year', 365 * 86_400],
];

export function TokensPage() {
  const may = usePermission('admin');
  const list = useQuery({ queryKey: ['tokens'], queryFn: api.tokens, refetchInterval: POLL_MS, placeholderData: keepPreviousData });
  const [creating, setCreating] = useState(false);
  const [minted, setMinted] = useState<MintedApiToken | null>(null);
  const [revoking, setRevoking] = useState<string | null>(null);
  const qc = useQueryClient();
  const revoke = useMutation({ mutationFn: api.revokeToken, onSettled: () => qc.invalidateQueries({ queryKey: ['tokens'] }) });
  return (
    <div className="admin-page">
      <div className="page-head">
        <h2>API tokens</h2>
        <button type="button" disabled={!may.allowed} title={may.why} onClick={() => (setMinted(null), setCreating(true))}>
          New token…
        </button>
      </div>
      {creating && (
        <MintForm
          onClose={() => setCreating(false)}
          onMinted={(t) => {
            setCreating(false);
            setMinted(t);
          }}
        />
      )}
      {minted && (
        <div className="minted" role="status" aria-label="New token">
          <p>
            Token <strong>{minted.name}</strong> ({minted.role}) — copy it now, it is not shown again:
          </p>
          <pre>{minted.token}</pre>
          <button type="button" onClick={() => setMinted(null)}>
            Done
          </button>
        </div>
      )}
      <ProblemView error={revoke.error} title="Revoke refused" />
      <QueryState what="tokens" data={list.data} error={list.error} isLoading={list.isLoading}>
        {(d) => (
          <div className="table-wrap">
            <table className="table" aria-label="Tokens">
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Role</th>
                  <th className="hide-narrow">Kinds</th>
                  <th>Created</th>
                  <th>Expires</th>
                  <th>Last used</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {d.items.map((t: ApiToken) => (
                  <tr key={t.name}>
                    <td>{t.name}</td>
                    <td>{t.role}</td>
                    <td className="hide-narrow">{t.kinds.length ? t.kinds.join(', ') : '—'}</td>
                    <td title={t.created_by ? `by ${t.created_by}` : undefined}>{when(t.created_at)}</td>
                    <td className={t.expired ? 'warn' : undefined}>{t.expires_at ? `${when(t.expires_at)}${t.expired ? ' (expired)' : ''}` : 'never'}</td>
                    <td>{t.last_used_at ? when(t.last_used_at) : 'never'}</td>
                    <td className="row-actions">
                      <button type="button" className="danger" disabled={!may.allowed} title={may.why} onClick={() => (revoke.reset(), setRevoking(t.name))}>
                        Revoke
                      </button>
                    </td>
                  </tr>
                ))}
                {d.items.length === 0 && (
                  <tr>
                    <td colSpan={7} className="empty">
                      No tokens minted. The principals of AUTH_FILE are managed in the file.
                    </td>
                  </tr>
                )}
              </tbody>
            </table>
          </div>
        )}
      </QueryState>
      {revoking && (
        <ConfirmDialog
          title={`Revoke token ${revoking}?`}
          confirmLabel="Revoke"
          onCancel={() => setRevoking(null)}
          onConfirm={() => {
            revoke.mutate(revoking);
            setRevoking(null);
          }}
        >
          <p>Every converge refuses it within a second; its open worker streams and watches close.</p>
        </ConfirmDialog>
      )}
    </div>
  );
}

function MintForm({ onClose, onMinted }: { onClose: () => void; onMinted: (t: MintedApiToken) => void }) {
  const may = usePermission('admin');
  const [form, setForm] = useState({ name: '', role: 'viewer', kinds: '', lifetime: 30 * 86_400 });
  const qc = useQueryClient();
  const mint = useMutation({
    mutationFn: api.mintToken,
    onSuccess: (t) => {
      void qc.invalidateQueries({ queryKey: ['tokens'] });
      onMinted(t);
    },
  });
  const submit = () => {
    const kinds = form.kinds
      .split(',')
      .map((k) => k.trim())
      .filter(Boolean);
    const body: TokenBody = { name: form.name.trim(), role: form.role };
    if (kinds.length) body.kinds = kinds;
    if (form.lifetime > 0) body.expires_in = form.lifetime;
    mint.mutate(body);
  };
  return (
    <form
      className="form editor"
      aria-label="New token"
      onSubmit={(e) => {
        e.preventDefault();
        submit();
      }}
    >
      <h3>New token</h3>
      <Field label="Name" error={mint.error} location="/name">
        <input name="name" value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} />
      </Field>
      <Field label="Role" error={mint.error} location="/role">
        <select name="role" value={form.role} onChange={(e) => setForm({ ...form, role: e.target.value })}>
          {ROLES.map((r) => (
            <option key={r}>{r}</option>
          ))}
        </select>
      </Field>
      {form.role === 'worker' && (
        <Field label="Kinds it may serve (globs, comma-separated)" error={mint.error} location="/kinds">
          <input name="kinds" value={form.kinds} onChange={(e) => setForm({ ...form, kinds: e.target.value })} />
        </Field>
      )}
      <Field label="Expires" error={mint.error} location="/expires_in">
        <select name="lifetime" value={form.lifetime} onChange={(e) => setForm({ ...form, lifetime: Number(e.target.value) })}>
          {LIFETIMES.map(([label, secs]) => (
            <option key={secs} value={secs}>
              {label}
            </option>
          ))}
        </select>
      </Field>
      <ProblemView error={mint.error} title="Not minted" />
      <div className="modal-actions">
        <button type="button" onClick={onClose}>
          Cancel
        </button>
        <button type="submit" className="primary" disabled={!may.allowed || mint.isPending} title={may.why}>
          Mint
        </button>
      </div>
    </form>
  );
}
