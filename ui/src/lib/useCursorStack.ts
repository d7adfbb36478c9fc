import { useState } from 'react';
import * as cs from './cursorStack';

/** Cursor stack state for one filter; pass a changing `resetKey` to restart at page 1. */
export function useCursorStack(resetKey: string) {
  const [state, setState] = useState<{ key: string; s: cs.CursorStack }>({ key: resetKey, s: cs.initialStack() });
  const s = state.key === resetKey ? state.s : cs.initialStack();
  return {
    cursor: cs.currentCursor(s),
    page: cs.pageNumber(s),
    canPrev: cs.canPrev(s),
    next: (c: string) => setState({ key: resetKey, s: cs.next(s, c) }),
    prev: () => setState({ key: resetKey, s: cs.prev(s) }),
  };
}
