import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { api } from '../../api/client';
import type { KindConfig, KindConfigEdit } from '../../api/types';
import { Field } from '../../components/Field';
import { ProblemView, QueryState } from '../../components/QueryState';
import { usePermission } from '../../lib/permissions';

const NUMBERS: { key: keyof KindConfigEdit; label: string }[] = [
  { key: 'max_inflight', label: 'Cap: tasks in flight (0 = unlimited)' },
  { key: 'task_deadline_seconds', label: 'Task deadline, s (0 = none)' },
  { key: 'resync_interval_seconds', label: 'Resync interval, s (0 = off)' },
  { key: 'orphan_grace_seconds', label: 'Orphan grace, s' },
  { key: 'max_transient_attempts', label: 'Transient attempts before terminal (0 = unbounded)' },
];

const toEdit = (c: KindConfig): KindConfigEdit => ({
  max_inflight: c.max_inflight,
  task_deadline_seconds: c.task_deadline_secs,
  resync_interval_seconds: c.resync_interval_secs,
  orphan_grace_seconds: c.orphan_grace_secs,
  max_transient_attempts: c.max_transient_attempts,
  resync_recomposes: c.resync_recomposes,
  retired: c.retired,
});

/** Edits the live operational config of a kind version (full replace). */
export function KindConfigForm({ kind, version }: { kind: string; version: number }) {
  const q = useQuery({ queryKey: ['kindconfig', kind, version], queryFn: () => api.kindConfig(kind, version) });
  return (
    <QueryState what="the config" data={q.data} error={q.error} isLoading={q.isLoading}>
      {(c) => <ConfigForm key={`${kind}@${version}`} kind={kind} version={version} config={c} />}
    </QueryState>
  );
}

function ConfigForm({ kind, version, config }: { kind: string; version: number; config: KindConfig }) {
  const may = usePermission('admin');
  const [edit, setEdit] = useState<KindConfigEdit>(() => toEdit(config));
  const [dirty, setDirty] = useState(false);
  useEffect(() => {
    if (!dirty) setEdit(toEdit(config));
  }, [config, dirty]);
  const qc = useQueryClient();
  const save = useMutation({
    mutationFn: (e: KindConfigEdit) => api.putKindConfig(kind, version, e),
    onSuccess: (c) => {
      qc.setQueryData(['kindconfig', kind, version], c);
      void qc.invalidateQueries({ queryKey: ['kinds'] });
      setDirty(false);
    },
  });
  const set = (patch: Partial<KindConfigEdit>) => {
    setEdit((e) => ({ ...e, ...patch }));
    setDirty(true);
  };
  return (
    <form
      className="form"
      aria-label="Operational config"
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate(edit);
      }}
    >
      {NUMBERS.map(({ key, label }) => (
        <Field key={key} label={label} error={save.error} location={`/${key}`}>
          <input type="number" name={key} value={String(edit[key])} onChange={(e) => set({ [key]: Number(e.target.value) } as Partial<KindConfigEdit>)} />
        </Field>
      ))}
      <label className="inline">
        <input type="checkbox" checked={edit.resync_recomposes} onChange={(e) => set({ resync_recomposes: e.target.checked })} /> resync re-runs the composer
      </label>
      <label className="inline">
        <input type="checkbox" checked={edit.retired} onChange={(e) => set({ retired: e.target.checked })} /> retired (no new resources at this version)
      </label>
      <ProblemView error={save.error} />
      {save.isSuccess && !dirty && <span className="notice">Saved; applies to the next task.</span>}
      <div className="modal-actions">
        <button type="button" disabled={!dirty} onClick={() => (setEdit(toEdit(config)), setDirty(false), save.reset())}>
          Reset
        </button>
        <button type="submit" className="primary" disabled={!may.allowed || save.isPending} title={may.why}>
          Save config
        </button>
      </div>
    </form>
  );
}
