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
import type { Resource, ResourceRef } from "./types.js";
/** Descendants a page holds when the handler does not say (the broker's default too). */
export declare const DEFAULT_PAGE_SIZE = 500;
/** The most descendants the broker puts in one page; a larger page size is read as this. */
export declare const MAX_PAGE_SIZE = 2000;
/** The composite's live subtree in numbers, sent with every ROLLUP task. */
export declare class RollupSummary {
    /** Live descendants. */
    total: number;
    /** Live descendants per phase (`Ready`, `Reconciling`, `Degraded`, `Failed`, ...). */
    byPhase: Record<string, number>;
    /** Live descendants per kind. */
    byKind: Record<string, number>;
    /** The first failed descendants in (kind, name) order, at most 100. */
    failed: ResourceRef[];
    /** The first descendants that are not ready, same order, at most 100. */
    notReady: ResourceRef[];
    /** How many are failed (`failed` may list fewer). */
    failedTotal: number;
    /** How many are not ready (`notReady` may list fewer). */
    notReadyTotal: number;
    constructor(init?: Partial<RollupSummary>);
    /** Live descendants that are ready (`total - notReadyTotal`). */
    get ready(): number;
}
/** One page of descendants and the token of the next (empty after the last page). */
export interface Page {
    rows: Resource[];
    next: Uint8Array;
}
/**
 * Where a request's descendants are paged from.
 *
 * This base reads nothing (the request is not a ROLLUP task): paging throws
 * `TerminalError`. The runtime gives each ROLLUP task one that calls the broker the task
 * came from; a test passes `Subtree.fixed(rows)`.
 */
export declare class Subtree {
    /**
     * One page of at most `pageSize` descendants starting at `token` (empty for the first),
     * and the next page's token (empty after the last page).
     */
    page(_token: Uint8Array, _pageSize: number): Promise<Page>;
    /** A subtree served from `descendants` in memory: for testing a rollup handler that pages. */
    static fixed(descendants: readonly Resource[]): Subtree;
    toString(): string;
}
/**
 * `pageSize` as sent: 0 means `DEFAULT_PAGE_SIZE` and more than `MAX_PAGE_SIZE` is capped
 * (as the broker does); a negative or fractional one is a RangeError.
 */
export declare function checkedPageSize(pageSize: number): number;
/** Every page of `subtree` in order, until the one that names no next page. */
export declare function subtreePages(subtree: Subtree, pageSize: number): AsyncGenerator<Resource[]>;
/** The full form's descendants as the one page. */
export declare function includedPage(rows: Resource[]): AsyncGenerator<Resource[]>;
