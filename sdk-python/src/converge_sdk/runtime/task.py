"""Running one task: admission, the concurrency permit, the deadline, exception capture, and
turning the handler's result into a kept StageComplete.

Each handler runs in its own asyncio task owned by the worker, not by the stream, so a stream
drop never cancels a handler; only a CancelTask, the deadline or the end of shutdown does.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import Any

from ..convert import (
    MalformedTask,
    TaskEcho,
    fail_complete,
    request_from_task,
    result_complete,
    wire_version,
)
from ..provider import Provider
from ..types import KindVersion, ReactionRequest
from .state import LeaseKey, Running, Shared, abort_after_grace

log = logging.getLogger("converge_sdk")


async def invoke(provider: Provider, req: ReactionRequest) -> Any:
    """Calls `provider.work(req)`, awaiting it when it returns an awaitable."""
    result: Any = provider.work(req)
    if inspect.isawaitable(result):
        result = await result
    return result


def _retrieve(fut: asyncio.Future[Any]) -> None:
    """Marks a finished handler's exception as retrieved (no 'never retrieved' warning)."""
    if not fut.cancelled():
        fut.exception()


def accept(shared: Shared, task: Any, refuse: str | None) -> None:
    """Takes in a task frame. `refuse` (draining or shutting down) answers it with a
    transient failure instead of running it."""
    key = LeaseKey(task.lease_token, task.claim_epoch)
    echo = TaskEcho.of(task)
    if refuse is not None:
        log.debug("task %s refused: %s", key.token, refuse)
        shared.finish_untracked(key, fail_complete(echo, refuse, False))
        return
    running = shared.admit(key)
    if running is None:
        return
    running.runner = asyncio.create_task(_run(shared, key, echo, task, running))


async def _run(shared: Shared, key: LeaseKey, echo: TaskEcho, task: Any, running: Running) -> None:
    deadline = time.monotonic() + task.task_deadline_ms / 1000 if task.task_deadline_ms > 0 else None
    kv = KindVersion(task.kind, wire_version(task.kind_version))
    provider = shared.registry.find(kv.kind, kv.version)
    if provider is None:
        shared.finish(key, fail_complete(echo, f"no provider for {kv} on this worker", True))
        return
    try:
        req = request_from_task(task, shared.config_for(kv), running.cancellation, deadline)
    except MalformedTask as e:
        shared.finish(key, fail_complete(echo, str(e), True))
        return

    if shared.permits.locked():
        try:
            if deadline is None:
                await shared.permits.acquire()
            else:
                await asyncio.wait_for(shared.permits.acquire(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            shared.finish(
                key, fail_complete(echo, "deadline exceeded before the handler started", False)
            )
            return
    else:
        await shared.permits.acquire()

    handler = asyncio.ensure_future(invoke(provider, req))
    shared.handler_started()
    handler.add_done_callback(shared.handler_done)
    handler.add_done_callback(_retrieve)
    running.handler = handler

    timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
    await asyncio.wait((handler,), timeout=timeout)
    if handler.done():
        if handler.cancelled():
            return
        exc = handler.exception()
        complete = result_complete(echo, exc if exc is not None else handler.result())
    else:
        log.warning("task %s passed its deadline; cancelling the handler", key.token)
        running.cancellation.set()
        abort_after_grace(handler)
        complete = fail_complete(echo, "deadline exceeded", False)
    shared.finish(key, complete)
