// The resource filters, kept in the URL's query string. Repeated `phase`, `kind`, `owner`
// and `label` parameters are unions (labels: conjunction) computed by the server.

import { PHASES, type Phase } from '../api/types';

export interface ResourceFilter {
  phases: Phase[];
  kinds: string[];
  owners: string[]; // kind/name
  labels: string[]; // key:value
  name: string;
}

export const EMPTY_FILTER: ResourceFilter = { phases: [], kinds: [], owners: [], labels: [], name: '' };

const isPhase = (p: string): p is Phase => (PHASES as readonly string[]).includes(p);

export function readFilter(params: URLSearchParams): ResourceFilter {
  return {
    phases: params.getAll('phase').filter(isPhase),
    kinds: params.getAll('kind').filter(Boolean),
    owners: params.getAll('owner').filter(Boolean),
    labels: params.getAll('label').filter(Boolean),
    name: params.get('name') ?? '',
  };
}

/** Writes `f` into a copy of `params`, leaving unrelated parameters alone. */
export function writeFilter(params: URLSearchParams, f: ResourceFilter): URLSearchParams {
  const out = new URLSearchParams(params);
  for (const k of ['phase', 'kind', 'owner', 'label', 'name']) out.delete(k);
  f.phases.forEach((p) => out.append('phase', p));
  f.kinds.forEach((k) => out.append('kind', k));
  f.owners.forEach((o) => out.append('owner', o));
  f.labels.forEach((l) => out.append('label', l));
  if (f.name) out.set('name', f.name);
  return out;
}

/** The query string the API takes for `f` (plus a page size and cursor). */
export function filterQuery(f: ResourceFilter, extra: Record<string, string | undefined> = {}): string {
  const q = writeFilter(new URLSearchParams(), f);
  for (const [k, v] of Object.entries(extra)) if (v) q.set(k, v);
  return q.toString();
}

/** A stable key of a filter: the cursor stack restarts whenever it changes. */
export function filterKey(f: ResourceFilter): string {
  return filterQuery(f);
}

export function togglePhase(phases: Phase[], p: Phase): Phase[] {
  return phases.includes(p) ? phases.filter((x) => x !== p) : PHASES.filter((x) => x === p || phases.includes(x));
}

export const isLabelSelector = (s: string) => /^[^:]+:.*$/.test(s);
export const isRef = (s: string) => /^[^/\s]+\/[^/\s]+$/.test(s);
