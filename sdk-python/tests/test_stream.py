"""The SDK's stream behaviour against an in-process fake broker: Subscribe first, readiness
Interest, config prime and push, bounded concurrency, heartbeats, keep-until-ack and resend
after reconnect, stale acks, CancelTask, deadlines, Drain, unknown kinds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fake_broker import FakeBroker, Stream, work_task

from converge_sdk import (
    SDK,
    CancelReason,
    KindVersion,
    Outcome,
    Provider,
    ProviderConfig,
    ReactionRequest,
    WorkerConfig,
    serve,
)
from converge_sdk._proto import worker_pb2 as pb


class Gate(Provider):
    """Kind `k`: each handler waits for `release` (or its cancellation) before answering."""

    kind = KindVersion("k", 1)

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.reasons: list[str | None] = []
        self.configs: list[ProviderConfig] = []
        self.is_ready = True
        self.forced_unready = False

    def on_config(self, cfg: ProviderConfig) -> None:
        self.configs.append(cfg)
        self.is_ready = not (isinstance(cfg.spec, dict) and cfg.spec.get("ready") is False)

    def ready(self) -> bool:
        return self.is_ready and not self.forced_unready

    async def work(self, req: ReactionRequest) -> Outcome:
        self.started.append(req.resource.name)
        rel = asyncio.ensure_future(self.release.wait())
        can = asyncio.ensure_future(req.cancellation.wait())
        await asyncio.wait((rel, can), return_when=asyncio.FIRST_COMPLETED)
        rel.cancel()
        can.cancel()
        if req.cancelled:
            self.reasons.append(req.cancel_reason)
            self.cancelled.append(req.resource.name)
            raise RuntimeError("cancelled")
        return Outcome(status={"name": req.resource.name})


@pytest.fixture
async def broker() -> AsyncIterator[FakeBroker]:
    b = FakeBroker()
    await b.start()
    yield b
    await b.stop()


class Running:
    def __init__(self, broker: FakeBroker, provider: Provider, **cfg: Any) -> None:
        self.stop = asyncio.Event()
        cfg.setdefault("drain_timeout", 0.5)
        config = WorkerConfig(broker_addrs=[broker.addr], worker_name="fake-test",
                              reconnect_min=0.05, reconnect_max=0.2, **cfg)
        self.task = asyncio.create_task(serve([provider], config, shutdown=self.stop.wait()))

    async def close(self) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, 10)


@pytest.fixture
async def gate() -> Gate:
    return Gate()


async def start(broker: FakeBroker, gate: Gate, **cfg: Any) -> tuple[Running, Stream]:
    w = Running(broker, gate, **cfg)
    s = await broker.next_stream()
    return w, s


async def test_subscribe_is_first_then_interest_for_unready_kinds(broker: FakeBroker, gate: Gate) -> None:
    gate.forced_unready = True
    w, s = await start(broker, gate, max_parallel=7)
    first = await s.first()
    assert first.WhichOneof("body") == "subscribe"
    sub = first.subscribe
    assert list(sub.kinds) == ["k"] and list(sub.kind_versions) == [1]
    assert sub.max_inflight == 7 and sub.sdk == SDK and sub.worker_name == "fake-test"
    assert sub.dry_runs, "the SDK answers dry runs"
    assert SDK.startswith("python/")
    i = await s.next("interest")
    assert (i.kind, i.kind_version, i.has_worker) == ("k", 1, False)
    await w.close()


async def test_config_is_primed_before_the_stream_and_pushes_flip_readiness(
    broker: FakeBroker, gate: Gate
) -> None:
    broker.entries = [pb.ProviderConfigEntry(kind="k", kind_version=1, config=b'{"ready": true}', bundle=b"xy")]
    w, s = await start(broker, gate)
    assert broker.config_pulls == 1
    assert gate.configs[0] == ProviderConfig(spec={"ready": True}, bundle=b"xy")
    await s.next("subscribe")
    s.push(config=pb.ProviderConfigUpdate(kind="k", kind_version=1, config=b'{"ready": false}'))
    i = await s.next("interest")
    assert i.has_worker is False, "a push re-evaluates readiness at once"
    assert gate.configs[-1].spec == {"ready": False}
    s.push(config=pb.ProviderConfigUpdate(kind="k", kind_version=1, config=b"{}"))
    assert (await s.next("interest")).has_worker is True
    await w.close()


async def test_result_is_kept_until_acked_and_resent_after_reconnect(broker: FakeBroker, gate: Gate) -> None:
    gate.release.set()
    w, s = await start(broker, gate)
    await s.next("subscribe")
    s.push(task=work_task("L1", 4, name="one"))
    c = await s.next("complete")
    assert (c.lease_token, c.claim_epoch, c.stage, c.error_message) == ("L1", 4, pb.STAGE_WORK, "")
    assert json.loads(c.status) == {"name": "one"}
    s.end()  # the stream drops before the ack
    s2 = await broker.next_stream()
    sub = await s2.next("subscribe")
    assert [(r.lease_token, r.claim_epoch) for r in sub.resumed] == [("L1", 4)]
    again = await s2.next("complete")
    assert again.lease_token == "L1"
    s2.push(ack=pb.CompleteAck(lease_token="L1", claim_epoch=4, accepted=True))
    # A duplicate delivery after the ack runs the task again instead of re-sending.
    s2.push(task=work_task("L2", 1, name="two"))
    assert (await s2.next("complete")).lease_token == "L2"
    s2.push(ack=pb.CompleteAck(lease_token="L2", claim_epoch=1, accepted=False))
    await asyncio.sleep(0)  # let the ack land before the stream ends
    s2.push(task=work_task("L3", 1, name="three"))
    await s2.next("complete")
    s2.end()
    s3 = await broker.next_stream()
    sub = await s3.next("subscribe")
    assert [r.lease_token for r in sub.resumed] == ["L3"], "acked and refused results are dropped"
    await w.close()


async def test_duplicate_task_while_unacked_resends_the_kept_result(broker: FakeBroker, gate: Gate) -> None:
    gate.release.set()
    w, s = await start(broker, gate)
    await s.next("subscribe")
    s.push(task=work_task("D", 1, name="dup"))
    await s.next("complete")
    s.push(task=work_task("D", 1, name="dup"))
    assert (await s.next("complete")).lease_token == "D"
    assert gate.started == ["dup"], "the handler ran once"
    await w.close()


async def test_bounded_concurrency_and_coalesced_heartbeat(broker: FakeBroker, gate: Gate) -> None:
    w, s = await start(broker, gate, max_parallel=2, heartbeat_every=0.1)
    await s.next("subscribe")
    for i in range(4):
        s.push(task=work_task(f"T{i}", i + 1, name=f"n{i}"))
    # One heartbeat carries every held task. Under load the first beat can come before all
    # four pushes reached the worker, so read beats until one holds four (bounded).
    want = [(f"T{i}", i + 1) for i in range(4)]
    for _ in range(50):
        hb = await s.next("heartbeat")
        if len(hb.lease_token) == 4:
            break
    assert sorted(zip(hb.lease_token, hb.claim_epoch)) == want
    assert len(gate.started) == 2, "max_parallel bounds running handlers"
    gate.release.set()
    done = {(await s.next("complete")).lease_token for _ in range(4)}
    assert done == {"T0", "T1", "T2", "T3"}
    await w.close()


async def test_cancel_task_cancels_the_handler_and_drops_its_result(broker: FakeBroker, gate: Gate) -> None:
    w, s = await start(broker, gate)
    await s.next("subscribe")
    s.push(task=work_task("C", 2, name="cancelme"))
    while not gate.started:
        await asyncio.sleep(0.01)
    s.push(cancel=pb.CancelTask(lease_token="C", claim_epoch=2, reason="superseded"))
    while not gate.cancelled:
        await asyncio.sleep(0.01)
    assert gate.reasons == [CancelReason.SUPERSEDED], "the handler is told the broker's reason"
    gate.release.set()
    s.push(task=work_task("N", 1, name="next"))
    c = await s.next("complete")
    assert c.lease_token == "N", "no result is sent for a cancelled task"
    await w.close()


async def test_deadline_fails_transiently_and_cancels_the_handler(broker: FakeBroker, gate: Gate) -> None:
    w, s = await start(broker, gate)
    await s.next("subscribe")
    s.push(task=work_task("DL", 1, name="slow", deadline_ms=100))
    c = await s.next("complete")
    assert (c.error_message, c.terminal) == ("deadline exceeded", False)
    for _ in range(100):
        if gate.cancelled:
            break
        await asyncio.sleep(0.01)
    assert gate.cancelled == ["slow"]
    assert gate.reasons == [CancelReason.DEADLINE]
    await w.close()


async def test_handler_errors_and_unknown_kinds(broker: FakeBroker) -> None:
    class Errs(Provider):
        kind = KindVersion("k", 1)

        async def work(self, req: ReactionRequest) -> Outcome:
            raise ValueError("kaput")

    w = Running(broker, Errs())
    s = await broker.next_stream()
    await s.next("subscribe")
    s.push(task=work_task("E", 1))
    c = await s.next("complete")
    assert c.terminal is False and "kaput" in c.error_message
    s.push(task=work_task("U", 1, kind="other"))
    c = await s.next("complete")
    assert c.terminal is True and "no provider" in c.error_message
    bad = work_task("M", 1)
    bad.reaction = ""
    s.push(task=bad)
    c = await s.next("complete")
    assert c.terminal is True and "reaction" in c.error_message
    await w.close()


async def test_drain_finishes_in_flight_work_then_reconnects(broker: FakeBroker, gate: Gate) -> None:
    w, s = await start(broker, gate)
    await s.next("subscribe")
    s.push(task=work_task("R", 1, name="inflight"))
    while not gate.started:
        await asyncio.sleep(0.01)
    s.push(drain=pb.Drain(reason="shutdown", deadline_ms=0))
    s.push(task=work_task("X", 1, name="late"))
    refused = await s.next("complete")
    assert refused.lease_token == "X" and refused.terminal is False and "draining" in refused.error_message
    s.push(ack=pb.CompleteAck(lease_token="X", claim_epoch=1, accepted=True))
    gate.release.set()
    c = await s.next("complete")
    assert c.lease_token == "R" and c.error_message == ""
    s.push(ack=pb.CompleteAck(lease_token="R", claim_epoch=1, accepted=True))
    await asyncio.wait_for(s.closed.wait(), 5)
    s2 = await broker.next_stream()
    sub = await s2.next("subscribe")
    assert list(sub.resumed) == []
    await w.close()


async def test_shutdown_reports_unready_and_waits_for_acks(broker: FakeBroker, gate: Gate) -> None:
    w, s = await start(broker, gate, drain_timeout=30.0)
    await s.next("subscribe")
    s.push(task=work_task("S", 1, name="s"))
    while not gate.started:
        await asyncio.sleep(0.01)
    w.stop.set()
    i = await s.next("interest")
    assert i.has_worker is False
    gate.release.set()
    c = await s.next("complete")
    assert c.lease_token == "S"
    assert not w.task.done(), "shutdown waits for the ack"
    s.push(ack=pb.CompleteAck(lease_token="S", claim_epoch=1, accepted=True))
    await asyncio.wait_for(w.task, 5)


async def test_no_token_sends_no_authorization(broker: FakeBroker, gate: Gate) -> None:
    w, s = await start(broker, gate)
    await s.next("subscribe")
    assert broker.auth == [("GetProviderConfig", None), ("WorkStream", None)]
    await w.close()


async def test_token_file_is_sent_on_both_rpcs_and_reread_at_reconnect(
    broker: FakeBroker, gate: Gate, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("first-token\n")
    w, s = await start(broker, gate, token_file=str(token))
    await s.next("subscribe")
    assert broker.auth == [("GetProviderConfig", "Bearer first-token"),
                           ("WorkStream", "Bearer first-token")]
    token.write_text("  rotated-token ")
    s.end()
    s2 = await broker.next_stream()
    await s2.next("subscribe")
    # The reconnect re-pulls the configs, then reopens the stream, both with the new token.
    assert broker.auth[2:] == [("GetProviderConfig", "Bearer rotated-token"),
                               ("WorkStream", "Bearer rotated-token")]
    await w.close()
