"""Keep-until-ack bookkeeping of the runtime state, without a network."""

import asyncio
from typing import Any

from converge_sdk import KindVersion, Outcome, Provider, ReactionRequest, WorkerConfig
from converge_sdk._proto import worker_pb2 as pb
from converge_sdk.provider import Registry
from converge_sdk.runtime.state import LeaseKey, Shared, Unacked


class Noop(Provider):
    kind = KindVersion("k", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        return Outcome()


def drain(q: "asyncio.Queue[Any]") -> list[Any]:
    out = []
    while not q.empty():
        out.append(q.get_nowait())
    return out


def complete(token: str, epoch: int = 1) -> Any:
    return pb.StageComplete(lease_token=token, claim_epoch=epoch)


async def test_results_are_kept_until_acked_and_resent_on_reconnect() -> None:
    shared = Shared(WorkerConfig(broker_addrs=["h:1"]), Registry([Noop()]))
    q1: asyncio.Queue[Any] = asyncio.Queue()
    s1 = shared.open_session(q1, [(KindVersion("k", 1), True)])
    assert [f.WhichOneof("body") for f in drain(q1)] == ["subscribe"]
    a, b, c = LeaseKey("a", 1), LeaseKey("b", 2), LeaseKey("c", 3)
    for k in (a, b, c):
        assert shared.admit(k) is not None
    assert shared.admit(a) is None, "a duplicate delivery is ignored"
    shared.finish(a, complete("a"))
    shared.finish(b, complete("b", 2))
    assert [f.complete.lease_token for f in drain(q1)] == ["a", "b"]
    assert shared.outstanding == 3
    shared.ack(a, True)
    shared.close_session(s1)
    assert drain(q1) == [None], "closing ends the request iterator"
    shared.finish(LeaseKey("gone", 1), complete("gone"))
    assert "gone" not in [k.token for k in shared.unacked.keys()], "untracked results are dropped"

    q2: asyncio.Queue[Any] = asyncio.Queue()
    shared.open_session(q2, [(KindVersion("k", 1), False)])
    frames = drain(q2)
    sub = frames[0].subscribe
    assert sorted((r.lease_token, r.claim_epoch) for r in sub.resumed) == [("b", 2), ("c", 3)]
    assert frames[1].interest.has_worker is False
    assert [f.complete.lease_token for f in frames[2:]] == ["b"]
    assert shared.admit(b) is None and drain(q2)[0].complete.lease_token == "b", "kept result re-sent"
    shared.ack(b, False)
    assert b not in shared.unacked, "a refused result is dropped, not retried"
    assert shared.cancel_task(c) is True
    assert shared.outstanding == 0


async def test_heartbeat_lists_running_tasks_only() -> None:
    shared = Shared(WorkerConfig(broker_addrs=["h:1"]), Registry([Noop()]))
    q: asyncio.Queue[Any] = asyncio.Queue()
    shared.open_session(q, [])
    drain(q)
    assert shared.heartbeat() == 0
    shared.admit(LeaseKey("x", 7))
    shared.admit(LeaseKey("y", 8))
    shared.finish(LeaseKey("y", 8), complete("y", 8))
    drain(q)
    assert shared.heartbeat() == 1
    hb = drain(q)[0].heartbeat
    assert (list(hb.lease_token), list(hb.claim_epoch)) == (["x"], [7])


def test_unacked_cap_drops_the_oldest() -> None:
    u = Unacked(cap=3)
    for i in range(3):
        assert u.push(LeaseKey(f"t{i}", 1), i) is None
    assert u.push(LeaseKey("new", 1), 9) == LeaseKey("t0", 1)
    assert len(u) == 3 and u.get(LeaseKey("t0", 1)) is None
    assert u.push(LeaseKey("new", 1), 10) is None and len(u) == 3, "re-keeping replaces"
    assert u.get(LeaseKey("t1", 2)) is None, "another epoch is another lease"
