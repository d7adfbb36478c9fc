import type { Phase } from '../api/types';

/**
 * A phase as a coloured badge. A `Failed` resource whose failure is transient (it is being
 * retried with backoff) is shown as `Retrying`, amber rather than red: only a terminal failure
 * waits for a person. `data-phase` keeps the API's phase for filters and tests.
 */
export function PhaseBadge({ phase, retrying = false, title }: { phase: Phase | string; retrying?: boolean; title?: string }) {
  const shown = phase === 'Failed' && retrying ? 'Retrying' : phase;
  return (
    <span className={`phase phase-${shown}`} data-phase={phase} data-retrying={shown === 'Retrying' ? 'true' : undefined} title={title}>
      {shown}
    </span>
  );
}

/** The badge's `retrying` and `title` for a list row or a resource read. */
export function failureOf(r: { phase: string; failure_terminal: boolean; failure_attempts: number; failure_message?: string | null }) {
  if (r.phase !== 'Failed') return {};
  const how = r.failure_terminal ? 'terminal' : `retrying after ${r.failure_attempts} failed attempt${r.failure_attempts === 1 ? '' : 's'}`;
  return { retrying: !r.failure_terminal, title: r.failure_message ? `${how}: ${r.failure_message}` : how };
}
