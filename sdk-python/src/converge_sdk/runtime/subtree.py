"""The broker side of the paged descendant read: a session's connection, kept open while a
ROLLUP handler whose task arrived on it may still page, and the `Subtree` that calls
ListDescendants on it under the task's lease."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc

from .._proto import worker_pb2 as pb
from .._proto import worker_pb2_grpc as pb_grpc
from ..convert import MalformedTask, resource_from_pb
from ..descendants import Subtree
from ..errors import TransientError
from ..types import Resource

PAGE_TIMEOUT = 30.0
"""Bound on one ListDescendants call, seconds."""

Metadata = tuple[tuple[str, str], ...]

_closing: set[asyncio.Task[None]] = set()
"""Deferred channel closes in flight (a strong reference, so none is collected midway)."""


class Connection:
    """One session's channel and the metadata its calls carry (the bearer token read at
    connect).

    Guarantees: the channel is closed once, after the session has ended (`end`) and every
    `hold` has been released, so a ROLLUP handler paging through its descendants keeps the
    connection its task arrived on when the stream drops (handlers outlive their session).
    Assumptions: everything runs on one event loop; each release is called once its handler
    is done (a second call is a no-op).
    """

    def __init__(self, channel: grpc.aio.Channel, metadata: Metadata) -> None:
        self.channel = channel
        self.metadata = metadata
        self._holds = 0
        self._ended = False

    def hold(self) -> Callable[[], None]:
        """Keeps the channel open until the returned release is called."""
        self._holds += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._holds -= 1
            if self._ended and self._holds == 0:
                task = asyncio.ensure_future(self._close())
                _closing.add(task)
                task.add_done_callback(_closing.discard)

        return release

    async def end(self) -> None:
        """The session is over: closes the channel now, or at the last release."""
        self._ended = True
        if self._holds == 0:
            await self._close()

    async def _close(self) -> None:
        await self.channel.close(grace=None)


class BrokerSubtree(Subtree):
    """A ROLLUP task's descendants, paged with ListDescendants on the connection the task
    arrived on, under its lease (resource_id, lease_token, claim_epoch)."""

    def __init__(self, conn: Connection, task: Any) -> None:
        self._conn = conn
        self._resource_id = bytes(task.resource_id)
        self._lease_token: str = task.lease_token
        self._claim_epoch: int = task.claim_epoch

    async def page(self, token: bytes, page_size: int) -> tuple[list[Resource], bytes]:
        """One ListDescendants call; any failure is a TransientError (the task is retried)."""
        req = pb.ListDescendantsRequest(
            resource_id=self._resource_id,
            lease_token=self._lease_token,
            claim_epoch=self._claim_epoch,
            page_token=token,
            page_size=page_size,
        )
        stub = pb_grpc.WorkerServiceStub(self._conn.channel)  # type: ignore[no-untyped-call]
        try:
            resp = await stub.ListDescendants(
                req, timeout=PAGE_TIMEOUT, metadata=self._conn.metadata
            )
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.FAILED_PRECONDITION:
                why = "the task's lease is gone (cancelled, superseded or expired)"
            else:
                why = f"the broker answered {e.code().name}"
            raise TransientError(f"reading descendants failed: {why}: {e.details()}") from e
        try:
            rows = [resource_from_pb(d, "descendant") for d in resp.descendants]
        except MalformedTask as e:
            raise TransientError(f"reading descendants failed: {e}") from e
        return rows, bytes(resp.next_page_token)

    def __repr__(self) -> str:
        return f"Subtree(broker, lease {self._lease_token})"
