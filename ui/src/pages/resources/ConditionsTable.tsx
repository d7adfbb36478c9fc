import type { Condition } from '../../api/types';
import { age } from '../../lib/time';

export function ConditionsTable({ conditions }: { conditions: Condition[] }) {
  if (conditions.length === 0) return <p className="muted">No conditions reported.</p>;
  return (
    <div className="table-wrap">
      <table className="table conditions" aria-label="Conditions">
        <thead>
          <tr>
            <th>Type</th>
            <th>Status</th>
            <th>Reason</th>
            <th>Message</th>
            <th>Since</th>
          </tr>
        </thead>
        <tbody>
          {conditions.map((c) => (
            <tr key={c.type}>
              <td>{c.type}</td>
              <td className={`cond-${c.status}`}>{c.status}</td>
              <td>{c.reason ?? '—'}</td>
              <td className="message">{c.message ?? ''}</td>
              <td title={c.last_transition_at}>{age(c.last_transition_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
