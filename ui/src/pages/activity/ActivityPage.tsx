// `/activity`: every resource's events, newest first (`GET /events/recent`), with who did
// each (the API principal, or "engine"), a link to the resource, the phase change and the
// message. It follows the event log's watch from the horizon the first read answered, so
// nothing between the read and the stream is lost, and polls only while the stream is down.

import { useQuery } from '@tanstack/react-query';
import { useCallback, useEffect, useState } from 'react';
import { Link } from 'react-router-dom';
import { api, POLL_MS } from '../../api/client';
import type { ResourceEvent } from '../../api/types';
import { LiveBadge } from '../../components/LiveBadge';
import { ProblemView, QueryState } from '../../components/QueryState';
import { when } from '../../lib/time';
import { pollWhileOffline, useEventStream } from '../../lib/useEventStream';
import { actorOf, mergeNewestFirst } from './activity';

const PAGE = 100;

export function ActivityPage() {
  const [horizon, setHorizon] = useState<number | null>(null);
  const [live, setLive] = useState(false);
  const q = useQuery({
    queryKey: ['activity'],
    queryFn: () => api.recentEvents(PAGE),
    refetchInterval: pollWhileOffline(live, POLL_MS),
  });
  const [items, setItems] = useState<ResourceEvent[]>([]);
  const [older, setOlder] = useState<{ busy: boolean; error: unknown; done: boolean; paged: boolean }>({
    busy: false,
    error: null,
    done: false,
    paged: false,
  });
  useEffect(() => {
    if (!q.data) return;
    setItems((cur) => mergeNewestFirst(cur, q.data.items));
    // The stream starts at the first horizon and stays open (it resumes by itself).
    setHorizon((h) => h ?? q.data.horizon);
  }, [q.data]);
  const onEvent = useCallback((data: unknown) => {
    const e = data as ResourceEvent;
    if (typeof e?.id === 'number') setItems((cur) => mergeNewestFirst(cur, [e]));
  }, []);
  const streaming = useEventStream(horizon === null ? null : `/events?watch=true&cursor=${horizon}`, onEvent);
  useEffect(() => setLive(streaming), [streaming]);

  // A first page shorter than asked for is the whole log; then each older page says.
  const exhausted = older.done || items.length === 0 || (!older.paged && (q.data?.items.length ?? 0) < PAGE);
  const loadOlder = async () => {
    const last = items[items.length - 1];
    if (!last) return;
    setOlder((o) => ({ ...o, busy: true, error: null }));
    try {
      const page = await api.recentEvents(PAGE, last.id);
      setItems((cur) => mergeNewestFirst(cur, page.items, cur.length + page.items.length));
      setOlder({ busy: false, error: null, done: page.items.length < PAGE, paged: true });
    } catch (e) {
      setOlder((o) => ({ ...o, busy: false, error: e }));
    }
  };

  return (
    <div className="activity-page">
      <div className="page-head">
        <h2>Activity</h2>
        <LiveBadge live={streaming} />
      </div>
      <QueryState what="the activity" data={q.data} error={q.error} isLoading={q.isLoading}>
        {() => (
          <>
            <ActivityTable events={items} />
            <div className="actions">
              <button type="button" disabled={older.busy || exhausted} onClick={() => void loadOlder()}>
                {exhausted ? 'No older events' : 'Older events'}
              </button>
              <ProblemView error={older.error} />
            </div>
          </>
        )}
      </QueryState>
    </div>
  );
}

/** The feed's table: one row per event. */
export function ActivityTable({ events }: { events: ResourceEvent[] }) {
  if (events.length === 0) return <p className="muted">No events yet.</p>;
  return (
    <table className="activity" aria-label="Activity">
      <thead>
        <tr>
          <th>When</th>
          <th>Actor</th>
          <th>Resource</th>
          <th>Event</th>
          <th className="hide-narrow">Message</th>
        </tr>
      </thead>
      <tbody>
        {events.map((e) => (
          <ActivityRow key={e.id} e={e} />
        ))}
      </tbody>
    </table>
  );
}

/** One event: when, who, which resource (a link to its detail), what changed, the message. */
export function ActivityRow({ e }: { e: ResourceEvent }) {
  const ref = `${encodeURIComponent(e.kind)}/${encodeURIComponent(e.name)}`;
  return (
    <tr data-event={e.id}>
      <td>
        <time dateTime={e.at}>{when(e.at)}</time>
      </td>
      <td className={e.actor ? 'actor' : 'actor muted'}>{actorOf(e)}</td>
      <td>
        <Link to={`/resources/list/r/${ref}`}>
          <span className="muted">{e.kind}/</span>
          {e.name}
        </Link>
      </td>
      <td>
        <strong>{e.type}</strong>
        {e.from_phase || e.to_phase ? (
          <span className="phase-change">
            {' '}
            {e.from_phase ?? '∅'} → {e.to_phase ?? '∅'}
          </span>
        ) : null}
        {e.generation != null && <span className="muted"> gen {e.generation}</span>}
      </td>
      <td className="hide-narrow message">{e.message ?? ''}</td>
    </tr>
  );
}
