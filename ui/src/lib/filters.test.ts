import { describe, expect, it } from 'vitest';
import { filterQuery, readFilter, togglePhase, writeFilter } from './filters';

describe('filters in the URL', () => {
  it('round-trips repeated parameters and keeps unrelated ones', () => {
    const p = new URLSearchParams('phase=Ready&phase=Failed&kind=route&owner=classicbom/b&label=team:a&label=fd:x&name=al&limit=25&phase=Bogus');
    const f = readFilter(p);
    expect(f).toEqual({ phases: ['Ready', 'Failed'], kinds: ['route'], owners: ['classicbom/b'], labels: ['team:a', 'fd:x'], name: 'al' });
    const out = writeFilter(p, { ...f, phases: ['Degraded'] });
    expect(out.getAll('phase')).toEqual(['Degraded']);
    expect(out.get('limit')).toBe('25');
    expect(readFilter(out).labels).toEqual(['team:a', 'fd:x']);
  });

  it('builds the API query with one parameter per value', () => {
    const q = filterQuery({ phases: ['Ready', 'Failed'], kinds: [], owners: ['a/b'], labels: [], name: '' }, { limit: '50', cursor: '' });
    expect(q).toBe('phase=Ready&phase=Failed&owner=a%2Fb&limit=50');
  });

  it('keeps toggled phases in canonical order', () => {
    expect(togglePhase(['Failed'], 'Ready')).toEqual(['Ready', 'Failed']);
    expect(togglePhase(['Ready', 'Failed'], 'Ready')).toEqual(['Failed']);
  });
});
