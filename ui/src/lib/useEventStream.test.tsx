// The live-update hooks against a scripted event source: a stream that opens turns polling
// off, its events refetch the lists (coalesced) and the detail panel's resource (its own
// events only), an error turns polling back on, a source that gave up is reopened, and
// unmounting closes it.

import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { act, renderHook } from '@testing-library/react';
import { useContext, type ReactNode } from 'react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { EventLogContext, LIST_KEYS, REFRESH_MS, useEventLog, useResourceLive } from './liveResources';
import { pollWhileOffline, useEventStream, type StreamSource } from './useEventStream';

/** An EventSource the test drives. */
class FakeSource implements StreamSource {
  onopen: ((ev: Event) => unknown) | null = null;
  onmessage: ((ev: MessageEvent) => unknown) | null = null;
  onerror: ((ev: Event) => unknown) | null = null;
  readyState = 0;
  closed = false;
  constructor(readonly url: string) {}
  open() {
    this.readyState = 1;
    this.onopen?.(new Event('open'));
  }
  send(data: unknown, id = '1') {
    this.onmessage?.(new MessageEvent('message', { data: JSON.stringify(data), lastEventId: id }));
  }
  fail(gaveUp: boolean) {
    this.readyState = gaveUp ? 2 : 0;
    this.onerror?.(new Event('error'));
  }
  close() {
    this.closed = true;
    this.readyState = 2;
  }
}

let sources: FakeSource[] = [];
const open = (url: string) => {
  const s = new FakeSource(url);
  sources.push(s);
  return s;
};
const last = () => sources[sources.length - 1];

beforeEach(() => {
  sources = [];
  vi.useFakeTimers();
});
afterEach(() => vi.useRealTimers());

describe('useEventStream', () => {
  it('is live while the stream is open, hands over parsed messages, and polls while it is not', () => {
    const got: unknown[] = [];
    const { result, unmount } = renderHook(() => useEventStream('/events?watch=true', (d) => got.push(d), { open, reopenMs: 1000 }));
    expect(last().url).toBe('/api/v1/events?watch=true');
    expect(result.current).toBe(false);
    expect(pollWhileOffline(result.current, 2000)).toBe(2000);

    act(() => last().open());
    expect(result.current).toBe(true);
    expect(pollWhileOffline(result.current, 2000)).toBe(false);
    act(() => last().send({ id: 7, type: 'phase' }));
    expect(got).toEqual([{ id: 7, type: 'phase' }]);

    // A dropped connection: the browser reconnects by itself (same source), polling resumes.
    act(() => last().fail(false));
    expect(result.current).toBe(false);
    expect(sources).toHaveLength(1);
    act(() => last().open());
    expect(result.current).toBe(true);

    // A refused stream (e.g. 503): the source gives up; a new one is opened later.
    act(() => last().fail(true));
    expect(result.current).toBe(false);
    expect(sources[0].closed).toBe(true);
    act(() => vi.advanceTimersByTime(1000));
    expect(sources).toHaveLength(2);
    act(() => last().open());
    expect(result.current).toBe(true);

    unmount();
    expect(last().closed).toBe(true);
  });

  it('opens nothing without a path', () => {
    const { result } = renderHook(() => useEventStream(null, () => {}, { open }));
    expect(sources).toHaveLength(0);
    expect(result.current).toBe(false);
  });
});

/** The page's event log, provided as ResourcesPage does. */
function ProvideLog({ children }: { children: ReactNode }) {
  const log = useEventLog(open);
  return <EventLogContext.Provider value={log}>{children}</EventLogContext.Provider>;
}

/** Renders `useResourceLive(kind, name)` under a provided event log. */
function renderLive(qc: QueryClient, kind: string, name: string) {
  return renderHook(() => ({ log: useContext(EventLogContext), panel: useResourceLive(kind, name) }), {
    wrapper: ({ children }) => (
      <QueryClientProvider client={qc}>
        <ProvideLog>{children}</ProvideLog>
      </QueryClientProvider>
    ),
  });
}

const event = (id: number, kind: string, name: string, type = 'phase') => ({ id, kind, name, type, from_phase: 'Reconciling', to_phase: 'Ready' });

describe('useEventLog', () => {
  it('refetches every resource list once per burst of events, and once when it comes up', () => {
    const qc = new QueryClient();
    const invalidate = vi.spyOn(qc, 'invalidateQueries');
    const { result } = renderLive(qc, 'hello', 'a');
    expect(last().url).toBe('/api/v1/events?watch=true');
    expect(sources).toHaveLength(1);
    act(() => last().open());
    expect(result.current.log.live).toBe(true);
    // Up: a catch-up refresh of the lists and of the panel's resource.
    for (const key of LIST_KEYS) expect(invalidate).toHaveBeenCalledWith({ queryKey: [...key] });
    expect(invalidate).toHaveBeenCalledWith({ queryKey: ['resource', 'hello', 'a'] });
    invalidate.mockClear();

    act(() => {
      for (let i = 0; i < 50; i++) last().send(event(i, 'hello', 'other'), String(i));
    });
    expect(invalidate).not.toHaveBeenCalled();
    act(() => vi.advanceTimersByTime(REFRESH_MS));
    expect(invalidate).toHaveBeenCalledTimes(LIST_KEYS.length);
    for (const key of LIST_KEYS) expect(invalidate).toHaveBeenCalledWith({ queryKey: [...key] });
  });

  it("refetches the panel's resource on its own events only", () => {
    const qc = new QueryClient();
    const invalidate = vi.spyOn(qc, 'invalidateQueries');
    const { result } = renderLive(qc, 'hello', 'a b');
    act(() => last().open());
    expect(result.current.panel).toBe(true);
    invalidate.mockClear();
    act(() => last().send(event(1, 'hello', 'other'), '1'));
    act(() => last().send(event(2, 'other', 'a b'), '2'));
    expect(invalidate).not.toHaveBeenCalledWith({ queryKey: ['resource', 'hello', 'a b'] });
    act(() => last().send(event(3, 'hello', 'a b'), '3'));
    expect(invalidate).toHaveBeenCalledWith({ queryKey: ['resource', 'hello', 'a b'] });
    expect(invalidate).not.toHaveBeenCalledWith({ queryKey: ['ops', 'hello', 'a b'] });
    act(() => last().send(event(4, 'hello', 'a b', 'operation'), '4'));
    expect(invalidate).toHaveBeenCalledWith({ queryKey: ['ops', 'hello', 'a b'] });

    // Down: the panel polls again.
    act(() => last().fail(false));
    expect(result.current.panel).toBe(false);
  });
});
