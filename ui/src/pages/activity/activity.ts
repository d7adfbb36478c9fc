// The activity feed's list: events kept newest first, one per id, at most a bound.

import type { ResourceEvent } from '../../api/types';

/** How many events the feed holds (older ones are dropped as new ones arrive). */
export const FEED_CAP = 1000;

/** `a` and `b` merged newest first (by log position), each id once, at most `cap`. */
export function mergeNewestFirst(a: ResourceEvent[], b: ResourceEvent[], cap = FEED_CAP): ResourceEvent[] {
  const byId = new Map<number, ResourceEvent>();
  for (const e of [...a, ...b]) byId.set(e.id, e);
  return [...byId.values()].sort((x, y) => y.id - x.id).slice(0, cap);
}

/** Who did it: the principal of the API call, or the engine's own work. */
export const actorOf = (e: ResourceEvent) => e.actor ?? 'engine';
