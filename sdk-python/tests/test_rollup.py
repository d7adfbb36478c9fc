"""Rollups: the summary every ROLLUP request carries, and the paged read of the descendants
(ListDescendants), against the in-process fake broker and, without a broker, `Subtree.fixed`."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from fake_broker import FakeBroker, leaf_rows, rollup_task

from converge_sdk import (
    KindVersion,
    Outcome,
    Provider,
    ReactionRequest,
    Resource,
    ResourceRef,
    RollupSummary,
    Stage,
    Subtree,
    TerminalError,
    WorkerConfig,
    serve,
)
from converge_sdk._proto import worker_pb2 as pb
from converge_sdk.testing import execute_task, request, run

ROOT_ID = uuid.uuid4().bytes


class Rollup(Provider):
    """Kind `k`: records each request; with `page_size` > 0 pages through the descendants,
    waiting for `between_pages` (when set) after each page."""

    kind = KindVersion("k", 1)

    def __init__(self, page_size: int = 0) -> None:
        self.page_size = page_size
        self.seen: list[ReactionRequest] = []
        self.pages: list[list[Resource]] = []
        self.paged = asyncio.Event()
        self.between_pages: asyncio.Event | None = None

    async def work(self, req: ReactionRequest) -> Outcome:
        self.seen.append(req)
        if self.page_size:
            async for page in req.descendant_pages(self.page_size):
                self.pages.append(page)
                self.paged.set()
                if self.between_pages is not None:
                    await self.between_pages.wait()
        return Outcome(status={"pages": len(self.pages)})


@pytest.fixture
async def broker() -> AsyncIterator[FakeBroker]:
    b = FakeBroker()
    await b.start()
    yield b
    await b.stop()


@pytest.fixture
async def serving(broker: FakeBroker) -> AsyncIterator[Any]:
    """Starts a worker serving a provider on `broker`; stops it at the end of the test."""
    stops: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    def start(provider: Provider, **cfg: Any) -> None:
        config = WorkerConfig(broker_addrs=[broker.addr], worker_name="rollup-test",
                              reconnect_min=0.05, reconnect_max=0.2, drain_timeout=0.5, **cfg)
        stop = asyncio.Event()
        stops.append((stop, asyncio.create_task(serve([provider], config, shutdown=stop.wait()))))

    yield start
    for stop, task in stops:
        stop.set()
        await asyncio.wait_for(task, 10)


def ids(rows: list[Any]) -> list[uuid.UUID]:
    return [uuid.UUID(bytes=r.id) for r in rows]


async def test_a_rollup_that_reads_nothing_gets_the_summary_and_makes_no_call(
    broker: FakeBroker, serving: Any
) -> None:
    broker.descendants = leaf_rows(5)
    p = Rollup()
    serving(p)
    s = await broker.next_stream()
    await s.next("subscribe")
    summary = pb.RollupSummary(
        total=5, by_phase={"Ready": 3, "Failed": 1, "Reconciling": 1}, by_kind={"conf-leaf": 5},
        failed=[pb.ResourceRef(kind="conf-leaf", name="c3")],
        not_ready=[pb.ResourceRef(kind="conf-leaf", name="c3"),
                   pb.ResourceRef(kind="conf-leaf", name="c4")],
        failed_total=1, not_ready_total=2,
    )
    s.push(task=rollup_task("R", 3, resource_id=ROOT_ID, summary=summary))
    c = await s.next("complete")
    assert (c.lease_token, c.error_message) == ("R", "")
    req = p.seen[0]
    assert req.stage is Stage.ROLLUP
    assert req.summary == RollupSummary(
        total=5, by_phase={"Ready": 3, "Failed": 1, "Reconciling": 1}, by_kind={"conf-leaf": 5},
        failed=[ResourceRef("conf-leaf", "c3")],
        not_ready=[ResourceRef("conf-leaf", "c3"), ResourceRef("conf-leaf", "c4")],
        failed_total=1, not_ready_total=2,
    )
    assert req.summary.ready == 3
    assert req.descendants == [] and req.descendants_included is False
    assert broker.list_calls == [], "a handler that reads nothing makes no ListDescendants call"


async def test_paging_reads_every_descendant_once_under_the_lease_with_the_token(
    broker: FakeBroker, serving: Any
) -> None:
    broker.descendants = leaf_rows(5)
    p = Rollup(page_size=2)
    serving(p, token="rollup-token")
    s = await broker.next_stream()
    await s.next("subscribe")
    s.push(task=rollup_task("P", 7, resource_id=ROOT_ID, summary=pb.RollupSummary(total=5)))
    c = await s.next("complete")
    assert c.error_message == ""
    assert [len(page) for page in p.pages] == [2, 2, 1]
    assert [d.id for page in p.pages for d in page] == ids(broker.descendants)
    calls = [req for req, _ in broker.list_calls]
    assert [bytes(r.page_token) for r in calls] == [b"", b"2", b"4"]
    assert all(
        (r.resource_id, r.lease_token, r.claim_epoch, r.page_size) == (ROOT_ID, "P", 7, 2)
        for r in calls
    ), calls
    assert [a for a in broker.auth if a[0] == "ListDescendants"] == (
        [("ListDescendants", "Bearer rollup-token")] * 3
    )
    assert {peer for _, peer in broker.list_calls} == {s.peer}, "the task's own connection"


async def test_the_full_form_is_one_page_without_a_call(broker: FakeBroker, serving: Any) -> None:
    rows = leaf_rows(3)
    p = Rollup(page_size=2)
    serving(p)
    s = await broker.next_stream()
    await s.next("subscribe")
    s.push(task=rollup_task("F", 1, descendants=rows, included=True,
                            summary=pb.RollupSummary(total=3)))
    c = await s.next("complete")
    assert c.error_message == ""
    assert [[d.id for d in page] for page in p.pages] == [ids(rows)]
    assert p.seen[0].descendants_included is True
    assert broker.list_calls == []


async def test_a_lease_that_is_gone_is_a_transient_failure(broker: FakeBroker, serving: Any) -> None:
    broker.descendants = leaf_rows(5)
    broker.list_error = grpc.StatusCode.FAILED_PRECONDITION
    serving(Rollup(page_size=2))
    s = await broker.next_stream()
    await s.next("subscribe")
    s.push(task=rollup_task("G", 2))
    c = await s.next("complete")
    assert c.terminal is False
    assert "reading descendants failed: the task's lease is gone" in c.error_message, c.error_message
    assert len(broker.list_calls) == 1


async def test_paging_goes_on_over_the_tasks_connection_after_its_stream_drops(
    broker: FakeBroker, serving: Any
) -> None:
    broker.descendants = leaf_rows(5)
    p = Rollup(page_size=2)
    p.between_pages = asyncio.Event()
    serving(p)
    s = await broker.next_stream()
    await s.next("subscribe")
    s.push(task=rollup_task("D", 1))
    await asyncio.wait_for(p.paged.wait(), 5)
    s.end()  # the stream drops with the handler between two pages
    s2 = await broker.next_stream()
    sub = await s2.next("subscribe")
    assert [r.lease_token for r in sub.resumed] == ["D"]
    p.between_pages.set()
    c = await s2.next("complete")
    assert (c.lease_token, c.error_message) == ("D", "")
    assert [len(page) for page in p.pages] == [2, 2, 1]
    # (gRPC shares one connection between channels to the same address, so this cannot tell
    # the two sessions apart; without the hold, the closed channel fails the second page.)
    peers = [peer for _, peer in broker.list_calls]
    assert peers == [s.peer] * 3, f"pages read on {peers}, the task came on {s.peer}"


# --------------------------------------------------------------------------- without a broker


def fixed_rows(n: int) -> list[Resource]:
    return [Resource(id=uuid.uuid4(), kind="conf-leaf", name=f"c{i}") for i in range(n)]


async def test_a_fixed_subtree_pages_like_the_broker() -> None:
    rows = fixed_rows(5)
    req = request("k", reaction="rollup", stage=Stage.ROLLUP, subtree=Subtree.fixed(rows))
    pages = [page async for page in req.descendant_pages(2)]
    assert pages == [rows[0:2], rows[2:4], rows[4:5]]
    assert await req.read_descendants() == rows
    assert [page async for page in req.descendant_pages(0)] == [rows], "0 means the default"


async def test_paging_without_a_subtree_is_terminal_and_a_negative_page_size_is_refused() -> None:
    req = request("k", reaction="rollup", stage=Stage.ROLLUP)
    with pytest.raises(TerminalError, match="no subtree"):
        await req.read_descendants()
    with pytest.raises(ValueError, match="negative"):
        req.descendant_pages(-1)


async def test_execute_task_serves_the_paged_read_from_a_fixed_subtree() -> None:
    rows = fixed_rows(3)
    out = await execute_task(Rollup(page_size=2), rollup_task("T"), subtree=Subtree.fixed(rows))
    assert out.error_message == "" and out.status == b'{"pages":2}'
    p = Rollup(page_size=1)
    outcome = await run(p, request("k", reaction="rollup", stage=Stage.ROLLUP,
                                   subtree=Subtree.fixed(rows)))
    assert outcome.status == {"pages": 3}
