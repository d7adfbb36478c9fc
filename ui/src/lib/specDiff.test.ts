import { describe, expect, it } from 'vitest';
import { changes, specDiff } from './specDiff';

describe('specDiff', () => {
  it('marks the changed lines of two specs and keeps the rest as context', () => {
    const d = specDiff({ region: 'us-east-1', team: 'alpha' }, { team: 'alpha', region: 'eu-west-1' });
    expect(d).toEqual([
      { op: ' ', text: '{' },
      { op: '-', text: '  "region": "us-east-1",' },
      { op: '+', text: '  "region": "eu-west-1",' },
      { op: ' ', text: '  "team": "alpha"' },
      { op: ' ', text: '}' },
    ]);
    expect(changes(d)).toBe(true);
  });

  it('sees no change when only the key order differs', () => {
    const d = specDiff({ a: 1, b: { c: [1, 2], d: null } }, { b: { d: null, c: [1, 2] }, a: 1 });
    expect(changes(d)).toBe(false);
    expect(d.every((l) => l.op === ' ')).toBe(true);
  });

  it('diffs against nothing as null', () => {
    expect(specDiff(null, { a: 1 }).filter((l) => l.op !== ' ')).toEqual([
      { op: '-', text: 'null' },
      { op: '+', text: '{' },
      { op: '+', text: '  "a": 1' },
      { op: '+', text: '}' },
    ]);
  });
});
