import { useState } from 'react';
import { api } from '../../api/client';
import type { ResourceDetail } from '../../api/types';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { EditSpecDialog } from './EditSpecDialog';
import { ProblemView } from '../../components/QueryState';
import { usePermission } from '../../lib/permissions';
import { useResourceMutation } from './useResourceMutation';

/** Edit the spec (reviewed through the server's plan before it is saved), reconcile now,
 * quarantine / unquarantine, delete (with confirmation); disabled, saying why, for a role
 * that may not (they need operator). */
export function ResourceActions({ r }: { r: ResourceDetail }) {
  const { kind, name } = r;
  const [confirming, setConfirming] = useState(false);
  const [editing, setEditing] = useState(false);
  const [notice, setNotice] = useState<string | null>(null);
  const may = usePermission('operator');
  const denied = !may.allowed;
  const why = may.why;
  const reconcile = useResourceMutation(() => api.reconcile(kind, name));
  const quarantine = useResourceMutation(() => api.quarantine(kind, name));
  const unquarantine = useResourceMutation(() => api.unquarantine(kind, name));
  const del = useResourceMutation(() => api.deleteResource(kind, name));
  const quarantined = r.phase === 'Quarantined';
  const deleting = r.phase === 'Deleting';
  const error = reconcile.error ?? quarantine.error ?? unquarantine.error ?? del.error;
  const reset = () => [reconcile, quarantine, unquarantine, del].forEach((m) => m.reset());
  return (
    <div className="actions" aria-label="Actions">
      <button type="button" disabled={denied || deleting} title={why} onClick={() => (reset(), setNotice(null), setEditing(true))}>
        Edit spec…
      </button>
      <button
        type="button"
        disabled={denied || quarantined || deleting || reconcile.isPending}
        title={why}
        onClick={() => {
          reset();
          reconcile.mutate(undefined, { onSuccess: (d) => setNotice(`Reconcile ${d.status.replace('_', ' ')}.`) });
        }}
      >
        Reconcile
      </button>
      {quarantined ? (
        <button type="button" disabled={denied || unquarantine.isPending} title={why} onClick={() => (reset(), unquarantine.mutate(undefined, { onSuccess: () => setNotice('Released from quarantine.') }))}>
          Unquarantine
        </button>
      ) : (
        <button type="button" disabled={denied || deleting || quarantine.isPending} title={why} onClick={() => (reset(), quarantine.mutate(undefined, { onSuccess: () => setNotice('Quarantined.') }))}>
          Quarantine
        </button>
      )}
      <button type="button" className="danger" disabled={denied || deleting} title={why} onClick={() => (reset(), setConfirming(true))}>
        Delete…
      </button>
      {notice && !error && (
        <span className="notice" role="status">
          {notice}
        </span>
      )}
      <ProblemView error={error} />
      {editing && (
        <EditSpecDialog
          r={r}
          onClose={() => setEditing(false)}
          onSaved={(message) => {
            setEditing(false);
            setNotice(message);
          }}
        />
      )}
      {confirming && (
        <ConfirmDialog
          title={`Delete ${kind}/${name}?`}
          confirmLabel="Delete"
          busy={del.isPending}
          onCancel={() => setConfirming(false)}
          onConfirm={() =>
            del.mutate(undefined, {
              onSuccess: (d) => {
                setConfirming(false);
                setNotice(`Deleting: ${d.marked} resource(s) marked.`);
              },
              onError: () => setConfirming(false),
            })
          }
        >
          <p>
            This marks the resource, everything it owns and everything that depends on it as <strong>Deleting</strong>; they are torn down
            dependents first. It cannot be undone.
          </p>
        </ConfirmDialog>
      )}
    </div>
  );
}
