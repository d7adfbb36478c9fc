import { describe, expect, it } from 'vitest';
import { canPrev, currentCursor, initialStack, next, pageNumber, prev } from './cursorStack';

describe('cursor stack', () => {
  it('starts on page 1 with the empty cursor', () => {
    const s = initialStack();
    expect([currentCursor(s), pageNumber(s), canPrev(s)]).toEqual(['', 1, false]);
  });

  it('pushes the server cursor on Next and pops it on Prev', () => {
    let s = next(initialStack(), 'c2');
    s = next(s, 'c3');
    expect([currentCursor(s), pageNumber(s), canPrev(s)]).toEqual(['c3', 3, true]);
    s = prev(s);
    expect([currentCursor(s), pageNumber(s)]).toEqual(['c2', 2]);
    s = prev(prev(s));
    expect([currentCursor(s), pageNumber(s), canPrev(s)]).toEqual(['', 1, false]);
  });

  it('ignores Next on the last page (empty X-Next-Cursor)', () => {
    const s = initialStack();
    expect(next(s, '')).toBe(s);
  });
});
