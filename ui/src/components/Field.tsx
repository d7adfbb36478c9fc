import type { ReactNode } from 'react';
import { ApiError } from '../api/client';

/** A labelled form field with the server's messages for its JSON pointer shown under it. */
export function Field({ label, error, location, children }: { label: string; error?: unknown; location?: string; children: ReactNode }) {
  const msgs = location && error instanceof ApiError ? error.at(location) : [];
  return (
    <label className="field">
      <span className="field-label">{label}</span>
      {children}
      {msgs.map((m, i) => (
        <span key={i} className="field-error" role="alert">
          {m}
        </span>
      ))}
    </label>
  );
}
