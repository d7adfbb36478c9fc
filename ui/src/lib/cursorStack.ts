// Keyset pagination state: the cursors of the pages before the current one, so Prev can go
// back without a total count. Page 1 is the empty cursor.

export interface CursorStack {
  /** Cursors of pages 1..K; the last one is the current page's. */
  stack: string[];
}

export const initialStack = (): CursorStack => ({ stack: [''] });

export const currentCursor = (s: CursorStack) => s.stack[s.stack.length - 1];

export const pageNumber = (s: CursorStack) => s.stack.length;

/** Goes to the page after the current one, whose cursor is the server's `X-Next-Cursor`. */
export function next(s: CursorStack, nextCursor: string): CursorStack {
  if (!nextCursor) return s;
  return { stack: [...s.stack, nextCursor] };
}

export function prev(s: CursorStack): CursorStack {
  if (s.stack.length <= 1) return s;
  return { stack: s.stack.slice(0, -1) };
}

export const canPrev = (s: CursorStack) => s.stack.length > 1;
