"""Running one task: admission, the concurrency permit, the deadline, exception capture, and
turning the handler's result into a kept StageComplete.

Each handler runs in its own asyncio task owned by the worker, not by the stream, so a stream
drop never cancels a handler; only a CancelTask, the deadline or the end of shutdown does. A
ROLLUP handler that may page through its descendants holds the connection its task arrived on
open until it returns (see `subtree.Connection`).
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
from ..types import CancelReason, KindVersion, ReactionRequest, Stage
from .state import LeaseKey, Running, Shared, abort_after_grace
from .subtree import BrokerSubtree, Connection

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


def accept(shared: Shared, task: Any, refuse: str | None, conn: Connection) -> None:
    """Takes in a task frame that arrived on `conn`. `refuse` (draining or shutting down)
    answers it with a transient failure instead of running it."""
    key = LeaseKey(task.lease_token, task.claim_epoch)
    echo = TaskEcho.of(task)
    if refuse is not None:
        log.debug("task %s refused: %s", key.token, refuse)
        shared.finish_untracked(key, fail_complete(echo, refuse, False))
        return
    running = shared.admit(key)
    if running is None:
        return
    running.runner = asyncio.create_task(_run(shared, key, echo, task, running, conn))


def _no_hold() -> None:
    """The release of a task that holds no connection."""


async def _permit(shared: Shared, deadline: float | None) -> bool:
    """Takes a concurrency permit; False when the deadline passes first."""
    if deadline is None or not shared.permits.locked():
        await shared.permits.acquire()
        return True
    try:
        await asyncio.wait_for(shared.permits.acquire(), max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        return False
    return True


async def _run(
    shared: Shared, key: LeaseKey, echo: TaskEcho, task: Any, running: Running, conn: Connection
) -> None:
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
    req.cancel_reason = running.reason
    running.request = req

    release = _no_hold
    if req.stage is Stage.ROLLUP and not req.descendants_included:
        req.subtree = BrokerSubtree(conn, task)
        release = conn.hold()
    try:
        started = await _permit(shared, deadline)
    except BaseException:  # cancelled (a CancelTask) while waiting for a permit
        release()
        raise
    if not started:
        release()
        shared.finish(
            key, fail_complete(echo, "deadline exceeded before the handler started", False)
        )
        return

    handler = asyncio.ensure_future(invoke(provider, req))
    shared.handler_started()
    handler.add_done_callback(shared.handler_done)
    handler.add_done_callback(_retrieve)
    # Released when the handler is done, even one that outlives this task past its deadline.
    handler.add_done_callback(lambda _: release())
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
        running.cancel(CancelReason.DEADLINE)
        abort_after_grace(handler)
        complete = fail_complete(echo, "deadline exceeded", False)
    shared.finish(key, complete)
