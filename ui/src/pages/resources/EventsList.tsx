import type { ResourceEvent } from '../../api/types';
import { when } from '../../lib/time';

export function EventsList({ events }: { events: ResourceEvent[] }) {
  if (events.length === 0) return <p className="muted">No events.</p>;
  return (
    <ol className="events" aria-label="Recent events">
      {events.map((e) => (
        <li key={e.id}>
          <time dateTime={e.at}>{when(e.at)}</time> <strong>{e.type}</strong>
          {e.from_phase || e.to_phase ? (
            <span>
              {' '}
              {e.from_phase ?? '∅'} → {e.to_phase ?? '∅'}
            </span>
          ) : null}
          {e.generation != null && <span className="muted"> gen {e.generation}</span>}
          {e.message && <div className="message">{e.message}</div>}
        </li>
      ))}
    </ol>
  );
}
