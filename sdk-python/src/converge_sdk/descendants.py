"""A rollup's view of the composite's subtree: the `RollupSummary` every ROLLUP request carries,
and the paged read of the descendants themselves (`ReactionRequest.descendant_pages`,
`ReactionRequest.read_descendants`), which calls the broker's ListDescendants only when a
handler asks, so a rollup that needs only counts costs the same whatever the subtree's size.

A kind whose rollup reaction declares `"descendants": "full"` gets every descendant in the
request instead (`descendants`, `descendants_included`); the paged read then hands those over
without a call, so a handler written against the paged read works with either form.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from .errors import TerminalError

if TYPE_CHECKING:
    # Annotations only: `types` imports this module for ReactionRequest's fields.
    from .types import Resource, ResourceRef

DEFAULT_PAGE_SIZE: Final = 500
"""Descendants a page holds when the handler does not say (the broker's default too)."""
MAX_PAGE_SIZE: Final = 2000
"""The most descendants the broker puts in one page; a larger page size is read as this."""


@dataclass
class RollupSummary:
    """The composite's live subtree in numbers, sent with every ROLLUP task."""

    total: int = 0
    """Live descendants."""
    by_phase: dict[str, int] = field(default_factory=dict)
    """Live descendants per phase (`Ready`, `Reconciling`, `Degraded`, `Failed`, ...)."""
    by_kind: dict[str, int] = field(default_factory=dict)
    """Live descendants per kind."""
    failed: list[ResourceRef] = field(default_factory=list)
    """The first failed descendants in (kind, name) order, at most 100."""
    not_ready: list[ResourceRef] = field(default_factory=list)
    """The first descendants that are not ready, same order, at most 100."""
    failed_total: int = 0
    """How many are failed (`failed` may list fewer)."""
    not_ready_total: int = 0
    """How many are not ready (`not_ready` may list fewer)."""

    @property
    def ready(self) -> int:
        """Live descendants that are ready (`total - not_ready_total`)."""
        return self.total - self.not_ready_total


class Subtree:
    """Where a request's descendants are paged from.

    This base reads nothing (the request is not a ROLLUP task): paging raises TerminalError.
    The runtime gives each ROLLUP task one that calls the broker the task came from; a test
    passes `Subtree.fixed(rows)`.
    """

    async def page(self, token: bytes, page_size: int) -> tuple[list[Resource], bytes]:
        """One page of at most `page_size` descendants starting at `token` (b"" for the
        first), and the next page's token (b"" after the last page)."""
        raise TerminalError(
            "this request has no subtree to page through (not a ROLLUP task; in a test, "
            "pass subtree=Subtree.fixed(rows))"
        )

    @staticmethod
    def fixed(descendants: Sequence[Resource]) -> Subtree:
        """A subtree served from `descendants` in memory: for testing a rollup handler that
        pages, without a broker."""
        return _FixedSubtree(list(descendants))

    def __repr__(self) -> str:
        return "Subtree(none)"


class _FixedSubtree(Subtree):
    """In-memory rows; a page token is the decimal offset of the page's first row."""

    def __init__(self, rows: list[Resource]) -> None:
        self._rows = rows

    async def page(self, token: bytes, page_size: int) -> tuple[list[Resource], bytes]:
        start = int(token) if token else 0
        end = min(start + page_size, len(self._rows))
        return self._rows[start:end], str(end).encode() if end < len(self._rows) else b""

    def __repr__(self) -> str:
        return f"Subtree(fixed, {len(self._rows)} descendants)"


def checked_page_size(page_size: int) -> int:
    """`page_size` as sent: 0 means `DEFAULT_PAGE_SIZE` and more than `MAX_PAGE_SIZE` is
    capped (as the broker does); a negative one is a ValueError."""
    if page_size < 0:
        raise ValueError(f"page_size must not be negative, got {page_size}")
    return min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


async def included_page(rows: list[Resource]) -> AsyncIterator[list[Resource]]:
    """The full form's descendants as the one page."""
    yield rows


async def subtree_pages(subtree: Subtree, page_size: int) -> AsyncIterator[list[Resource]]:
    """Every page of `subtree` in order, until the one that names no next page."""
    token = b""
    while True:
        rows, token = await subtree.page(token, page_size)
        yield rows
        if not token:
            return
