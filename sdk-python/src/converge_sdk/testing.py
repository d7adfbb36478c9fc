"""Run a provider with no broker: build a request, call the handler, inspect the outcome.

`run` calls `provider.work` directly (raising what it raises); `execute_task` runs the real
wire path (StageTask decode → work → StageComplete encode) that the worker runtime uses. A
rollup handler that pages through its descendants reads them from `Subtree.fixed(rows)`
(`request(..., subtree=...)` or `execute_task(..., subtree=...)`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from .convert import (
    MalformedTask,
    TaskEcho,
    fail_complete,
    request_from_task,
    result_complete,
    wire_version,
)
from .descendants import Subtree
from .errors import TransientError
from .provider import Provider, Registry, as_registry
from .runtime.task import invoke
from .types import (
    JSON,
    CancelReason,
    Outcome,
    ProviderConfig,
    ReactionRequest,
    Resource,
    Stage,
    Trigger,
)


def request(
    kind: str,
    spec: JSON | None = None,
    *,
    reaction: str = "work",
    stage: Stage = Stage.WORK,
    name: str = "test",
    kind_version: int = 1,
    generation: int = 1,
    attempt: int = 1,
    **fields: Any,
) -> ReactionRequest:
    """A request for a fresh resource of `kind` named `name` with `spec`: by default reaction
    `work`, stage WORK, trigger specChange, generation 1, attempt 1, no deadline and no
    config. Any other ReactionRequest field can be given as a keyword (e.g. `config=`,
    `config_override=`, `operation=`, `timeout=` seconds for a deadline)."""
    timeout = fields.pop("timeout", None)
    if timeout is not None:
        fields["deadline"] = time.monotonic() + float(timeout)
    resource = Resource(
        id=uuid.uuid4(),
        kind=kind,
        kind_version=kind_version,
        name=name,
        spec={} if spec is None else spec,
        generation=generation,
        phase="Reconciling",
    )
    fields.setdefault("trigger", Trigger.SPEC_CHANGE)
    return ReactionRequest(
        reaction=reaction,
        stage=stage,
        kind=kind,
        kind_version=kind_version,
        resource=resource,
        generation=generation,
        attempt=attempt,
        **fields,
    )


async def run(provider: Provider, req: ReactionRequest) -> Outcome:
    """Runs `provider.work(req)` and returns its Outcome, raising what the handler raises.

    With `req.deadline` set, `req.cancellation` is set when it passes and TransientError
    ("deadline exceeded") is raised, as in the runtime. A None result is an empty Outcome.
    """
    if req.deadline is None:
        result = await invoke(provider, req)
    else:
        handler = asyncio.ensure_future(invoke(provider, req))
        await asyncio.wait((handler,), timeout=max(0.0, req.deadline - time.monotonic()))
        if not handler.done():
            req.cancel_reason = req.cancel_reason or CancelReason.DEADLINE
            req.cancellation.set()
            try:
                await asyncio.wait_for(handler, 1.0)
            except BaseException:  # noqa: BLE001 - the handler's fate no longer matters
                pass
            raise TransientError("deadline exceeded")
        result = handler.result()
    if result is None:
        return Outcome()
    if not isinstance(result, Outcome):
        raise TypeError(f"handler returned {type(result).__name__}, expected an Outcome")
    return result


def run_sync(provider: Provider, req: ReactionRequest) -> Outcome:
    """`run` on a fresh event loop, for plain (non-async) tests."""
    return asyncio.run(run(provider, req))


async def execute_task(
    providers: Registry | Provider | list[Provider],
    task: Any,
    config: ProviderConfig | None = None,
    *,
    subtree: Subtree | None = None,
) -> Any:
    """Runs one wire StageTask through the providers exactly as the runtime does (dispatch by
    (kind, kind_version), decode, handler with exception capture and deadline, encode), with
    `config` as the kind's cached default; returns the StageComplete the worker would send.
    `subtree` serves a ROLLUP handler's paged read (none: paging fails terminally)."""
    registry = as_registry(providers)
    echo = TaskEcho.of(task)
    version = wire_version(task.kind_version)
    provider = registry.find(task.kind, version)
    if provider is None:
        return fail_complete(echo, f"no provider for {task.kind}@v{version} on this worker", True)
    deadline = time.monotonic() + task.task_deadline_ms / 1000 if task.task_deadline_ms > 0 else None
    try:
        req = request_from_task(task, config or ProviderConfig(), asyncio.Event(), deadline)
    except MalformedTask as e:
        return fail_complete(echo, str(e), True)
    if subtree is not None:
        req.subtree = subtree
    handler = asyncio.ensure_future(invoke(provider, req))
    timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
    await asyncio.wait((handler,), timeout=timeout)
    if not handler.done():
        req.cancel_reason = req.cancel_reason or CancelReason.DEADLINE
        req.cancellation.set()
        handler.cancel()
        return fail_complete(echo, "deadline exceeded", False)
    exc = handler.exception()
    return result_complete(echo, exc if exc is not None else handler.result())
