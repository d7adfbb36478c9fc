// Live updates from the API's watches (`?watch=true`, Server-Sent Events).
//
// `useEventStream` keeps one stream open while a component is mounted and reports whether it
// is live; the pages poll only while it is not (`pollWhileOffline`), so a failed stream
// (an old server, a proxy that buffers, a refused watch) falls back to the polling they did
// before. Without a token the browser's own EventSource is used; with one, the `eventsource`
// package's, since the browser's cannot send an `Authorization` header.

import { EventSource as FetchEventSource } from 'eventsource';
import { useEffect, useRef, useState } from 'react';
import { getToken, useAuth } from '../api/auth';
import { API_BASE } from '../api/client';

/** What the hook needs of an EventSource (the browser's, the package's, or a test's). */
export interface StreamSource {
  onopen: ((ev: Event) => unknown) | null;
  onmessage: ((ev: MessageEvent) => unknown) | null;
  onerror: ((ev: Event) => unknown) | null;
  readonly readyState: number;
  close(): void;
}

/** Opens a stream at `url`. */
export type OpenStream = (url: string) => StreamSource;

/** EventSource.CLOSED: the source gave up (an HTTP error answer) and will not reconnect. */
const CLOSED = 2;

/** How long after a stream gave up it is opened again. */
export const REOPEN_MS = 10_000;

/** The default opener: the browser's EventSource, or with a token one that sends it. */
export const openStream: OpenStream = (url) => {
  const token = getToken();
  if (!token && typeof EventSource !== 'undefined') return new EventSource(url);
  return new FetchEventSource(url, {
    fetch: (input, init) => fetch(input, { ...init, headers: { ...init.headers, Authorization: `Bearer ${token}` } }),
  });
};

/**
 * Follows the stream at `/api/v1{path}` (none when `path` is null), calling `onMessage` with
 * each message's parsed data. Returns whether the stream is open now. A stream that errors
 * reconnects by itself (the browser resends `Last-Event-ID`); one that gave up is reopened
 * after `reopenMs`.
 */
export function useEventStream(
  path: string | null,
  onMessage: (data: unknown) => void,
  { open = openStream, reopenMs = REOPEN_MS }: { open?: OpenStream; reopenMs?: number } = {},
): boolean {
  const [live, setLive] = useState(false);
  const handler = useRef(onMessage);
  handler.current = onMessage;
  // A sign-in or sign-out changes the token the stream must carry.
  const { signedIn } = useAuth();

  useEffect(() => {
    if (path === null) return;
    let source: StreamSource | null = null;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    const connect = () => {
      let s: StreamSource;
      try {
        s = open(API_BASE + path);
      } catch {
        // No way to open one here: the page polls.
        return;
      }
      source = s;
      s.onopen = () => setLive(true);
      s.onmessage = (ev) => {
        let data: unknown;
        try {
          data = JSON.parse(ev.data as string);
        } catch {
          return;
        }
        handler.current(data);
      };
      s.onerror = () => {
        setLive(false);
        if (s.readyState === CLOSED && !stopped) {
          s.close();
          timer = setTimeout(connect, reopenMs);
        }
      };
    };
    connect();
    return () => {
      stopped = true;
      clearTimeout(timer);
      source?.close();
      setLive(false);
    };
  }, [path, open, reopenMs, signedIn]);

  return live;
}

/** `refetchInterval` for a query kept fresh by a stream: poll only while it is not live. */
export function pollWhileOffline(live: boolean, ms: number): number | false {
  return live ? false : ms;
}
