"""Reconnect backoff and failover along the broker list: the backoff's cap and jitter, the
order addresses are dialled in, and (against in-process fake brokers) a dead first broker
skipped without a wait, a refusing one left for the next, streams moving along the list with
kept results following the worker, and a silent (black-holed) connection left by keepalive."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from fake_broker import FakeBroker, work_task

from converge_sdk import (
    DEFAULT_RECONNECT_MAX,
    DEFAULT_RECONNECT_MIN,
    RECONNECT_CAP,
    KindVersion,
    Outcome,
    Provider,
    ReactionRequest,
    WorkerConfig,
    serve,
)
from converge_sdk._proto import worker_pb2 as pb
from converge_sdk.runtime.backoff import Backoff
from converge_sdk.runtime.failover import Failover

MIN, MAX = 1.0, 5.0


def around(d: float, raw: float) -> bool:
    """Whether `d` is a jittered sleep around `raw` (±25 %, never above MAX)."""
    return raw * 0.75 <= d <= min(raw * 1.25, MAX)


def test_backoff_doubles_to_the_ceiling_and_resets() -> None:
    b = Backoff(DEFAULT_RECONNECT_MIN, DEFAULT_RECONNECT_MAX)
    raws = []
    for _ in range(6):
        raw = b.current
        raws.append(raw)
        assert around(b.next_delay(), raw)
    assert raws == [1, 2, 4, 5, 5, 5]
    b.reset()
    assert b.current == 1


def test_backoff_never_sleeps_beyond_the_cap_and_is_jittered() -> None:
    b = Backoff(DEFAULT_RECONNECT_MIN, RECONNECT_CAP)
    sleeps = [b.next_delay() for _ in range(2000)]
    assert max(sleeps) <= RECONNECT_CAP
    assert min(sleeps) >= 0.75
    at_cap = sleeps[4:]
    # At the ceiling the sleeps still spread over [3.75 s, 5 s], not all on 5 s.
    assert min(at_cap) >= 3.75 and min(at_cap) < 4.0 and max(at_cap) > 4.7
    assert len(set(at_cap)) > len(at_cap) // 2, "sleeps repeat: not jittered"


def test_failures_walk_the_list_in_order_and_sleep_once_per_round() -> None:
    f = Failover(3, MIN, MAX)
    order = [f.current]
    sleeps = []
    for _ in range(9):
        sleeps.append(f.failed())
        order.append(f.current)
    assert order == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
    for i, d in enumerate(sleeps):
        if i == 2:
            assert around(d, MIN), d
        elif i == 5:
            assert around(d, 2 * MIN), d
        elif i == 8:
            assert around(d, 4 * MIN), d
        else:
            assert d == 0, (i, d)


def test_an_ended_stream_moves_on_after_a_jittered_wait() -> None:
    f = Failover(2, MIN, MAX)
    d = f.ended(60)
    assert f.current == 1 and around(d, MIN)
    d = f.ended(60)
    assert f.current == 0 and around(d, MIN), "wraps around; a long stream resets the backoff"


def test_a_stream_dropped_at_once_escalates() -> None:
    f = Failover(1, MIN, MAX)
    sleeps = [f.ended(0) for _ in range(5)]
    assert f.current == 0
    assert around(sleeps[0], MIN) and around(sleeps[1], 2 * MIN) and around(sleeps[4], MAX)


def test_a_failover_that_connects_resets_the_backoff() -> None:
    f = Failover(2, MIN, MAX)
    for _ in range(10):
        f.failed()  # both brokers down for a while: the backoff climbs to the ceiling
    assert f.current == 0
    assert f.failed() == 0 and f.current == 1
    d = f.ended(0.01)  # the second answered, then its stream dropped at once
    assert around(d, MIN), f"the recovery reset the backoff: {d}"


def test_a_config_pull_success_counts_as_a_recovery() -> None:
    f = Failover(2, MIN, MAX)
    for _ in range(6):
        f.failed()
    f.succeeded()
    assert f.current == 0, "success does not move"
    assert f.failed() == 0
    assert around(f.failed(), MIN), "the backoff starts over"


class Echo(Provider):
    kind = KindVersion("k", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        return Outcome(status={"name": req.resource.name})


class Refusing(FakeBroker):
    """A broker that answers every call UNAUTHENTICATED (a stream it never takes)."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    async def GetProviderConfig(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.refused += 1
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "no entry")

    async def WorkStream(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:  # noqa: N802
        self.refused += 1
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "no entry")
        yield  # pragma: no cover - makes this an async generator like the real one


def dead_addr() -> str:
    """A loopback address nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


async def started(*brokers: FakeBroker) -> list[FakeBroker]:
    for b in brokers:
        await b.start()
    return list(brokers)


class Running:
    """serve() on `addrs` in the background until close()."""

    def __init__(self, addrs: list[str], **cfg: Any) -> None:
        self.stop = asyncio.Event()
        cfg.setdefault("reconnect_min", 0.05)
        cfg.setdefault("reconnect_max", 0.2)
        config = WorkerConfig(broker_addrs=addrs, worker_name="failover-test", drain_timeout=0.5,
                              **cfg)
        self.task = asyncio.create_task(serve([Echo()], config, shutdown=self.stop.wait()))

    async def close(self) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, 10)


async def test_a_dead_first_broker_is_skipped_without_waiting() -> None:
    (b,) = await started(FakeBroker())
    # A wait after the refused first address would take at least 3.75 s; the second is
    # tried at once because the round of the list is not over.
    w = Running([dead_addr(), b.addr], reconnect_min=5.0, reconnect_max=5.0)
    t0 = time.monotonic()
    try:
        s = await b.next_stream(timeout=3.0)
        assert time.monotonic() - t0 < 3.0
        await s.next("subscribe")
        assert b.config_pulls == 1, "configs were primed from the second broker"
        s.push(task=work_task("t1"))
        c = await s.next("complete")
        assert c.lease_token == "t1" and not c.error_message
    finally:
        await w.close()
        await b.stop()


async def test_a_refusing_broker_is_left_for_the_next_at_once() -> None:
    refusing, good = await started(Refusing(), FakeBroker())
    w = Running([refusing.addr, good.addr], reconnect_min=1.0, reconnect_max=5.0)
    try:
        s = await good.next_stream()
        await s.next("subscribe")
        assert refusing.refused >= 1
        # A stream that ends moves along the list: one jittered wait (0.75..1.25 s), then the
        # refusing broker, whose refused stream is a failure within the round (no wait), then
        # here again. Taking the refusal for an opened stream would add a 1.5..2.5 s wait.
        before = refusing.refused
        t0 = time.monotonic()
        s.end()
        s = await good.next_stream()
        await s.next("subscribe")
        took = time.monotonic() - t0
        assert refusing.refused > before, "the list was walked in order"
        assert 0.7 < took < 2.0, took
    finally:
        await w.close()
        await refusing.stop()
        await good.stop()


async def test_streams_move_along_the_list_and_kept_results_follow() -> None:
    a, b = await started(FakeBroker(), FakeBroker())
    w = Running([a.addr, b.addr])
    try:
        s = await a.next_stream()
        await s.next("subscribe")
        s.push(task=work_task("kept", 7))
        await s.next("complete")
        s.end()  # the first broker goes away before acking: the result is kept

        s = await b.next_stream()
        sub = await s.next("subscribe")
        assert [(r.lease_token, r.claim_epoch) for r in sub.resumed] == [("kept", 7)]
        c = await s.next("complete")
        assert c.lease_token == "kept", "re-sent to the next broker"
        s.push(ack=pb.CompleteAck(lease_token="kept", claim_epoch=7, accepted=True))
        s.push(task=work_task("on-b"))
        assert (await s.next("complete")).lease_token == "on-b"
        s.push(ack=pb.CompleteAck(lease_token="on-b", claim_epoch=1, accepted=True))
        s.end()

        s = await a.next_stream()  # wrapped around
        sub = await s.next("subscribe")
        assert list(sub.resumed) == [], "acked results are forgotten"
    finally:
        await w.close()
        await a.stop()
        await b.stop()


class FrozenRelay:
    """Forwards TCP connections to `target` until `frozen`; from then on it keeps both sides
    open but forwards nothing, as a network partition or a stopped (SIGSTOP) broker looks to
    the worker."""

    def __init__(self, target: str) -> None:
        self.target = target.removeprefix("http://")
        self.frozen = False
        self.addr = ""
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.addr = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _relay(self, r_in: asyncio.StreamReader, w_in: asyncio.StreamWriter) -> None:
        host, port = self.target.rsplit(":", 1)
        r_out, w_out = await asyncio.open_connection(host, int(port))
        self._writers += [w_in, w_out]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(16 * 1024):
                if not self.frozen:
                    dst.write(data)
                    await dst.drain()

        await asyncio.gather(pump(r_in, w_out), pump(r_out, w_in), return_exceptions=True)

    async def stop(self) -> None:
        for w in self._writers:
            w.close()
        if self._server is not None:
            self._server.close()


async def test_a_silent_connection_is_dropped_by_keepalive_and_the_next_broker_taken() -> None:
    a, b = await started(FakeBroker(), FakeBroker())
    relay = FrozenRelay(a.addr)
    await relay.start()
    w = Running([relay.addr, b.addr])
    try:
        await (await a.next_stream()).next("subscribe")
        relay.frozen = True
        t0 = time.monotonic()
        # Keepalive: a PING every 10 s, the connection dropped 10 s later without an answer.
        s = await b.next_stream(timeout=35)
        took = time.monotonic() - t0
        assert took >= 9, f"left after {took:.1f}s: before any keepalive could have failed"
        await s.next("subscribe")
        s.push(task=work_task("after"))
        assert (await s.next("complete")).lease_token == "after"
    finally:
        await w.close()
        await relay.stop()
        await a.stop()
        await b.stop()
