// The resource pages' live updates, from one stream per tab: the event log's watch
// (`/events?watch=true`). A browser holds at most six HTTP/1.1 connections to one server, and
// each open stream keeps one, so the lists, summaries, graph and the detail panel share this
// one rather than each opening its own. The views refetch (at most once per `REFRESH_MS`) when
// the log moves; the detail panel refetches its resource when one of its events arrives. While
// the stream is down they poll as before, and they refetch once when it comes (back) up, for
// what they may have missed in between.

import { keepPreviousData, useQuery, useQueryClient } from '@tanstack/react-query';
import { createContext, useCallback, useContext, useEffect, useMemo, useRef } from 'react';
import { api, POLL_MS } from '../api/client';
import type { ResourceEvent } from '../api/types';
import { pollWhileOffline, useEventStream, type OpenStream } from './useEventStream';

/** The query keys the event log refreshes: every list, summary and graph of resources. */
export const LIST_KEYS = [['resources'], ['summary'], ['roots'], ['graph']] as const;

/** Refetches caused by the event log are coalesced to one per this many ms. */
export const REFRESH_MS = 500;

type Listener = (e: ResourceEvent) => void;

/** The tab's event-log stream: whether it is open, and its events for whoever listens. */
export interface EventLog {
  live: boolean;
  subscribe: (l: Listener) => () => void;
}

/** The stream `useEventLog` opened for this part of the page (none: not live). */
export const EventLogContext = createContext<EventLog>({ live: false, subscribe: () => () => {} });

/** Opens the event log's watch, refreshing the resource lists as it moves; provide the result
 * through `EventLogContext`. */
export function useEventLog(open?: OpenStream): EventLog {
  const qc = useQueryClient();
  const listeners = useRef(new Set<Listener>());
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const refresh = useCallback(() => {
    for (const queryKey of LIST_KEYS) void qc.invalidateQueries({ queryKey: [...queryKey] });
  }, [qc]);
  useEffect(() => () => clearTimeout(timer.current), []);
  const live = useEventStream(
    '/events?watch=true',
    (data) => {
      const e = data as ResourceEvent;
      for (const l of listeners.current) l(e);
      if (timer.current !== undefined) return;
      timer.current = setTimeout(() => {
        timer.current = undefined;
        refresh();
      }, REFRESH_MS);
    },
    { open },
  );
  // Up (again): what changed while it was down is not in the stream.
  useEffect(() => {
    if (live) refresh();
  }, [live, refresh]);
  const subscribe = useCallback((l: Listener) => {
    listeners.current.add(l);
    return () => void listeners.current.delete(l);
  }, []);
  return useMemo(() => ({ live, subscribe }), [live, subscribe]);
}

/** Whether the resource lists are kept fresh by the event log, for their `refetchInterval`. */
export function useListsLive(): boolean {
  return useContext(EventLogContext).live;
}

/** Refetches `kind/name`'s detail (and its operations) when one of its events arrives;
 * returns whether the event log is live. */
export function useResourceLive(kind: string, name: string): boolean {
  const { live, subscribe } = useContext(EventLogContext);
  const qc = useQueryClient();
  useEffect(
    () =>
      subscribe((e) => {
        if (e.kind !== kind || e.name !== name) return;
        void qc.invalidateQueries({ queryKey: ['resource', kind, name] });
        if (e.type === 'operation') void qc.invalidateQueries({ queryKey: ['ops', kind, name] });
      }),
    [subscribe, qc, kind, name],
  );
  useEffect(() => {
    if (live) void qc.invalidateQueries({ queryKey: ['resource', kind, name] });
  }, [live, qc, kind, name]);
  return live;
}

/** The first 100 roots (the summary's table), kept fresh like the lists. */
export function useRoots() {
  const live = useListsLive();
  return useQuery({
    queryKey: ['roots'],
    queryFn: () => api.listRoots({}, 100),
    refetchInterval: pollWhileOffline(live, POLL_MS),
    placeholderData: keepPreviousData,
  });
}
