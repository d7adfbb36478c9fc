import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../../api/client';
import type { Json, KindManifest } from '../../api/types';
import { ProblemView } from '../../components/QueryState';
import { usePermission } from '../../lib/permissions';

const TEMPLATE = {
  kind: 'example',
  kind_version: 1,
  description: 'What this kind provisions.',
  spec_schema: { type: 'object', properties: { size: { type: 'integer', minimum: 1 } }, required: ['size'] },
  reactions: [{ name: 'work', trigger: 'specChange', emits: ['status', 'conditions'] }],
};

/** A JSON editor that applies a manifest and shows the server's validation errors inline. */
export function ManifestEditor({ initial, onClose }: { initial?: KindManifest; onClose: () => void }) {
  const may = usePermission('admin');
  const start = initial ? (({ manifest_version: _v, ...rest }) => rest)(initial) : TEMPLATE;
  const [text, setText] = useState(() => JSON.stringify(start, null, 2));
  const [parseError, setParseError] = useState<string | null>(null);
  const [force, setForce] = useState(false);
  const qc = useQueryClient();
  const apply = useMutation({
    mutationFn: (doc: Json) => api.applyManifest(doc, force),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['kinds'] });
      void qc.invalidateQueries({ queryKey: ['manifest'] });
    },
  });
  const submit = () => {
    let doc: Json;
    try {
      doc = JSON.parse(text) as Json;
    } catch (e) {
      setParseError(`Not valid JSON: ${(e as Error).message}`);
      return;
    }
    setParseError(null);
    apply.mutate(doc);
  };
  return (
    <section className="editor" aria-label="Apply manifest">
      <h3>{initial ? `Re-apply ${initial.kind} v${initial.kind_version}` : 'Apply a manifest'}</h3>
      <textarea
        aria-label="Manifest JSON"
        spellCheck={false}
        value={text}
        rows={Math.min(30, Math.max(12, text.split('\n').length))}
        onChange={(e) => setText(e.target.value)}
      />
      {parseError && (
        <div className="error" role="alert">
          {parseError}
        </div>
      )}
      <ProblemView error={apply.error} title="The server refused the manifest" />
      {apply.data && (
        <div className="notice" role="status">
          {apply.data.kind} v{apply.data.kind_version}: {apply.data.result}
        </div>
      )}
      <div className="modal-actions">
        <label className="inline">
          <input type="checkbox" checked={force} onChange={(e) => setForce(e.target.checked)} /> force (allow breaking changes to a version in use)
        </label>
        <button type="button" onClick={onClose}>
          Close
        </button>
        <button type="button" className="primary" onClick={submit} disabled={!may.allowed || apply.isPending} title={may.why}>
          Apply
        </button>
      </div>
    </section>
  );
}
