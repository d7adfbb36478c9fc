"""The `converge_sdk.testing` helper: run a provider with no broker."""

import asyncio
from dataclasses import dataclass

import pytest

from converge_sdk import KindVersion, Outcome, Provider, ReactionRequest, TerminalError, TransientError
from converge_sdk._proto import worker_pb2 as pb
from converge_sdk.testing import execute_task, request, run, run_sync


@dataclass
class Spec:
    greeting: str = "hello"


class Hello(Provider):
    kind = KindVersion("hello", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        spec: Spec = req.spec(Spec)
        if spec.greeting == "boom":
            raise TransientError("try later")
        if spec.greeting == "sleep":
            await req.cancellation.wait()
            raise TransientError("cancelled")
        return Outcome(status={"message": f"{spec.greeting}, {req.resource.name}!"})


def test_request_defaults() -> None:
    req = request("hello", {"greeting": "hi"})
    assert (req.reaction, req.stage.proto_name, req.trigger, req.generation, req.attempt) == (
        "work", "STAGE_WORK", "specChange", 1, 1)
    assert req.resource.name == "test" and req.deadline is None and not req.cancelled


def test_run_returns_the_outcome() -> None:
    out = run_sync(Hello(), request("hello", {"greeting": "hi"}, name="world"))
    assert out.status == {"message": "hi, world!"}


async def test_run_raises_handler_errors() -> None:
    with pytest.raises(TransientError):
        await run(Hello(), request("hello", {"greeting": "boom"}))
    with pytest.raises(TerminalError, match="invalid spec"):
        await run(Hello(), request("hello", ["not", "an", "object"]))


async def test_run_enforces_the_deadline() -> None:
    req = request("hello", {"greeting": "sleep"}, timeout=0.05)
    with pytest.raises(TransientError, match="deadline exceeded"):
        await run(Hello(), req)
    assert req.cancelled


async def test_execute_task_runs_the_wire_path() -> None:
    task = pb.StageTask(stage=pb.STAGE_WORK, kind="hello", kind_version=1, reaction="work",
                        lease_token="L", claim_epoch=2,
                        work_req=pb.WorkRequest(resource=pb.Resource(kind="hello", name="n", spec=b"{}")))
    c = await execute_task([Hello()], task)
    assert (c.lease_token, c.claim_epoch, c.error_message) == ("L", 2, "")
    task.kind = "other"
    c = await execute_task(Hello(), task)
    assert c.terminal and "no provider" in c.error_message
    task.kind = "hello"
    task.work_req.resource.spec = b'{"greeting": "sleep"}'
    task.task_deadline_ms = 30
    c = await asyncio.wait_for(execute_task(Hello(), task), 5)
    assert (c.error_message, c.terminal) == ("deadline exceeded", False)
