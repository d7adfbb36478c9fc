/**
 * A rollup's view of the composite's subtree: the `RollupSummary` every ROLLUP request
 * carries, and the paged read of the descendants themselves
 * (`ReactionRequest.descendantPages`, `ReactionRequest.readDescendants`), which calls the
 * broker's ListDescendants only when a handler asks, so a rollup that needs only counts
 * costs the same whatever the subtree's size.
 *
 * A kind whose rollup reaction declares `"descendants": "full"` gets every descendant in the
 * request instead (`descendants`, `descendantsIncluded`); the paged read then hands those
 * over without a call, so a handler written against the paged read works with either form.
 *
 * @module
 */
import { TerminalError } from "./errors.js";
/** Descendants a page holds when the handler does not say (the broker's default too). */
export const DEFAULT_PAGE_SIZE = 500;
/** The most descendants the broker puts in one page; a larger page size is read as this. */
export const MAX_PAGE_SIZE = 2000;
/** The composite's live subtree in numbers, sent with every ROLLUP task. */
export class RollupSummary {
    /** Live descendants. */
    total = 0;
    /** Live descendants per phase (`Ready`, `Reconciling`, `Degraded`, `Failed`, ...). */
    byPhase = {};
    /** Live descendants per kind. */
    byKind = {};
    /** The first failed descendants in (kind, name) order, at most 100. */
    failed = [];
    /** The first descendants that are not ready, same order, at most 100. */
    notReady = [];
    /** How many are failed (`failed` may list fewer). */
    failedTotal = 0;
    /** How many are not ready (`notReady` may list fewer). */
    notReadyTotal = 0;
    constructor(init = {}) {
        Object.assign(this, init);
    }
    /** Live descendants that are ready (`total - notReadyTotal`). */
    get ready() {
        return this.total - this.notReadyTotal;
    }
}
/**
 * Where a request's descendants are paged from.
 *
 * This base reads nothing (the request is not a ROLLUP task): paging throws
 * `TerminalError`. The runtime gives each ROLLUP task one that calls the broker the task
 * came from; a test passes `Subtree.fixed(rows)`.
 */
export class Subtree {
    /**
     * One page of at most `pageSize` descendants starting at `token` (empty for the first),
     * and the next page's token (empty after the last page).
     */
    async page(_token, _pageSize) {
        throw new TerminalError("this request has no subtree to page through (not a ROLLUP task; in a test, " +
            "pass subtree: Subtree.fixed(rows))");
    }
    /** A subtree served from `descendants` in memory: for testing a rollup handler that pages. */
    static fixed(descendants) {
        return new FixedSubtree([...descendants]);
    }
    toString() {
        return "Subtree(none)";
    }
}
/** In-memory rows; a page token is the decimal offset of the page's first row. */
class FixedSubtree extends Subtree {
    rows;
    constructor(rows) {
        super();
        this.rows = rows;
    }
    async page(token, pageSize) {
        const start = token.length > 0 ? Number(new TextDecoder().decode(token)) : 0;
        const end = Math.min(start + pageSize, this.rows.length);
        const next = end < this.rows.length ? new TextEncoder().encode(String(end)) : new Uint8Array();
        return { rows: this.rows.slice(start, end), next };
    }
    toString() {
        return `Subtree(fixed, ${this.rows.length} descendants)`;
    }
}
/**
 * `pageSize` as sent: 0 means `DEFAULT_PAGE_SIZE` and more than `MAX_PAGE_SIZE` is capped
 * (as the broker does); a negative or fractional one is a RangeError.
 */
export function checkedPageSize(pageSize) {
    if (!Number.isInteger(pageSize) || pageSize < 0) {
        throw new RangeError(`pageSize must be a non-negative integer, got ${pageSize}`);
    }
    return Math.min(pageSize || DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
}
/** Every page of `subtree` in order, until the one that names no next page. */
export async function* subtreePages(subtree, pageSize) {
    let token = new Uint8Array();
    for (;;) {
        const page = await subtree.page(token, pageSize);
        yield page.rows;
        if (page.next.length === 0) {
            return;
        }
        token = page.next;
    }
}
/** The full form's descendants as the one page. */
export async function* includedPage(rows) {
    yield rows;
}
//# sourceMappingURL=descendants.js.map