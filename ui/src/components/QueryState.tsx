import type { ReactNode } from 'react';
import { ApiError } from '../api/client';

export function Loading({ what }: { what: string }) {
  return (
    <div className="loading" role="status">
      <span className="spinner" /> Loading {what}…
    </div>
  );
}

/** A server problem: its detail and each located error. */
export function ProblemView({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  const p = error instanceof ApiError ? error.problem : { status: 0, detail: String((error as Error)?.message ?? error) };
  // Located errors add to the detail; an unlocated one that repeats it adds nothing.
  const extra = (p.errors ?? []).filter((e) => e.location || !p.detail.includes(e.message));
  return (
    <div className="error" role="alert">
      {title && <strong>{title}: </strong>}
      {p.status ? <span className="status">{p.status}</span> : null} {p.detail}
      {extra.length > 0 && (
        <ul className="problem-errors">
          {extra.map((e, i) => (
            <li key={i}>
              {e.location && <code>{e.location}</code>} {e.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

interface StateProps<T> {
  what: string;
  data: T | undefined;
  error: unknown;
  isLoading: boolean;
  children: (data: T) => ReactNode;
}

/** Renders loading, then error, then the data; keeps showing stale data above a refetch error. */
export function QueryState<T>({ what, data, error, isLoading, children }: StateProps<T>) {
  if (data === undefined) {
    if (error) return <ProblemView error={error} title={`Could not load ${what}`} />;
    if (isLoading) return <Loading what={what} />;
    return null;
  }
  return (
    <>
      {error ? <ProblemView error={error} title={`Refreshing ${what} failed (showing the last data)`} /> : null}
      {children(data)}
    </>
  );
}
