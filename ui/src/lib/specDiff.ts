// A line diff of two JSON documents, for the spec history: both are pretty-printed with their
// object keys sorted (so a key order change is no change) and compared line by line with
// jsdiff (`diff`, pinned in package.json).

import { diffLines } from 'diff';

export interface DiffLine {
  /** `+` only in `to`, `-` only in `from`, ` ` in both. */
  op: '+' | '-' | ' ';
  text: string;
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.keys(v as Record<string, unknown>)
        .sort()
        .map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]),
    );
  }
  return v;
}

/** `v` as the diff shows it: two-space indented JSON, keys sorted, `null` for nothing. */
export function pretty(v: unknown): string {
  return JSON.stringify(sortKeys(v ?? null), null, 2);
}

/** The lines that turn `from` into `to`. */
export function specDiff(from: unknown, to: unknown): DiffLine[] {
  const out: DiffLine[] = [];
  for (const part of diffLines(pretty(from) + '\n', pretty(to) + '\n')) {
    const op = part.added ? '+' : part.removed ? '-' : ' ';
    const lines = part.value.split('\n');
    // Every part ends with a newline, so the last split element is empty.
    if (lines[lines.length - 1] === '') lines.pop();
    for (const text of lines) out.push({ op, text });
  }
  return out;
}

/** Whether a diff changes anything. */
export const changes = (d: DiffLine[]) => d.some((l) => l.op !== ' ');
