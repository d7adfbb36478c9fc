import type { LiveWork } from '../../api/types';
import { age, when } from '../../lib/time';

/** The task queued or running for the resource now: attempts, heartbeat age, holder. */
export function LiveClaim({ work }: { work: LiveWork | null }) {
  if (!work) return <p className="muted">No task queued or running.</p>;
  return (
    <dl className="facts" aria-label="Live claim">
      <dt>Task</dt>
      <dd>
        {work.task_type} (trigger {work.trigger}, generation {work.generation})
      </dd>
      <dt>State</dt>
      <dd>{work.claimed ? 'claimed' : work.not_before && Date.parse(work.not_before) > Date.now() ? `backing off until ${when(work.not_before)}` : 'queued'}</dd>
      <dt>Attempt</dt>
      <dd>{work.attempt}</dd>
      <dt>Heartbeat</dt>
      <dd>{work.heartbeat_at ? `${age(work.heartbeat_at)} ago` : '—'}</dd>
      <dt>Claimed</dt>
      <dd>{work.claimed_at ? `${age(work.claimed_at)} ago` : '—'}</dd>
      <dt>Worker (broker)</dt>
      <dd>{work.broker_id ?? '—'}</dd>
    </dl>
  );
}
