"""An in-process fake broker (a grpc.aio WorkerService server) that records every client
frame and lets a test push server frames, to check the SDK's stream rules precisely. It also
pages through a scripted subtree for ListDescendants, recording every call."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc

from converge_sdk._proto import worker_pb2 as pb
from converge_sdk._proto import worker_pb2_grpc as pb_grpc


class Stream:
    """One WorkStream as the broker sees it."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        """The client's address: which connection the stream runs on."""
        self.inbox: asyncio.Queue[Any] = asyncio.Queue()
        self.outbox: asyncio.Queue[Any] = asyncio.Queue()
        self.closed = asyncio.Event()

    def push(self, **body: Any) -> None:
        """Sends one server frame (`task=...`, `ack=...`, ...)."""
        self.outbox.put_nowait(pb.WorkStreamServerMsg(**body))

    def end(self) -> None:
        """Ends the stream from the broker side."""
        self.outbox.put_nowait(None)

    async def next(self, body: str, timeout: float = 5.0) -> Any:
        """The next client frame whose body is `body`, skipping others (e.g. heartbeats)."""
        async def find() -> Any:
            while True:
                m = await self.inbox.get()
                if m is None:
                    raise AssertionError(f"stream ended before a {body} frame")
                if m.WhichOneof("body") == body:
                    return getattr(m, body)

        return await asyncio.wait_for(find(), timeout)

    async def first(self, timeout: float = 5.0) -> Any:
        """The next client frame of any kind."""
        m = await asyncio.wait_for(self.inbox.get(), timeout)
        assert m is not None, "stream ended"
        return m


class FakeBroker(pb_grpc.WorkerServiceServicer):  # type: ignore[misc]
    """Serves WorkerService on a loopback port; each new stream lands in `streams`."""

    def __init__(self) -> None:
        self.streams: asyncio.Queue[Stream] = asyncio.Queue()
        self.entries: list[Any] = []
        self.config_pulls = 0
        self.auth: list[tuple[str, str | None]] = []
        """(rpc, authorization metadata or None) of every call, in arrival order."""
        self.server: grpc.aio.Server | None = None
        self.addr = ""
        self.descendants: list[Any] = []
        """The subtree ListDescendants pages through (wire Resources, in order)."""
        self.list_error: grpc.StatusCode | None = None
        """When set, every ListDescendants call fails with this code."""
        self.list_calls: list[tuple[Any, str]] = []
        """(ListDescendantsRequest, client address) of every call, in arrival order."""

    async def start(self, credentials: grpc.ServerCredentials | None = None) -> None:
        """Listens on a loopback port: h2c, or TLS with `credentials`."""
        self.server = grpc.aio.server()
        pb_grpc.add_WorkerServiceServicer_to_server(self, self.server)
        if credentials is None:
            port = self.server.add_insecure_port("127.0.0.1:0")
            self.addr = f"http://127.0.0.1:{port}"
        else:
            port = self.server.add_secure_port("127.0.0.1:0", credentials)
            self.addr = f"https://127.0.0.1:{port}"
        await self.server.start()

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(grace=None)

    async def next_stream(self, timeout: float = 5.0) -> Stream:
        return await asyncio.wait_for(self.streams.get(), timeout)

    def _record_auth(self, rpc: str, context: Any) -> None:
        values = [v for k, v in context.invocation_metadata() if k == "authorization"]
        self.auth.append((rpc, values[0] if values else None))

    async def GetProviderConfig(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.config_pulls += 1
        self._record_auth("GetProviderConfig", context)
        return pb.GetProviderConfigResponse(entries=self.entries)

    async def ListDescendants(self, request: Any, context: Any) -> Any:  # noqa: N802
        """Pages through `descendants`; a page token is the decimal offset of its first row."""
        self.list_calls.append((request, context.peer()))
        self._record_auth("ListDescendants", context)
        if self.list_error is not None:
            await context.abort(self.list_error, "lease is no longer current")
        start = int(request.page_token) if request.page_token else 0
        end = min(start + (request.page_size or 500), len(self.descendants))
        more = end < len(self.descendants)
        return pb.ListDescendantsResponse(
            descendants=self.descendants[start:end],
            next_page_token=str(end).encode() if more else b"",
        )

    async def WorkStream(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:  # noqa: N802
        self._record_auth("WorkStream", context)
        s = Stream(context.peer())
        await self.streams.put(s)

        async def read() -> None:
            try:
                async for m in request_iterator:
                    await s.inbox.put(m)
            except Exception:  # noqa: BLE001 - the client went away
                pass
            await s.inbox.put(None)
            s.closed.set()

        reader = asyncio.create_task(read())
        try:
            while True:
                out_task = asyncio.ensure_future(s.outbox.get())
                closed_task = asyncio.ensure_future(s.closed.wait())
                await asyncio.wait((out_task, closed_task), return_when=asyncio.FIRST_COMPLETED)
                if not out_task.done():
                    out_task.cancel()
                    closed_task.cancel()
                    return
                closed_task.cancel()
                m = out_task.result()
                if m is None:
                    return
                yield m
        finally:
            reader.cancel()


def work_task(lease: str, epoch: int = 1, *, kind: str = "k", name: str = "r",
              spec: bytes = b"{}", deadline_ms: int = 0, attempt: int = 1) -> Any:
    """A STAGE_WORK task frame body."""
    return pb.StageTask(
        stage=pb.STAGE_WORK, kind=kind, kind_version=1, generation=1, reaction="work",
        lease_token=lease, claim_epoch=epoch, task_deadline_ms=deadline_ms, trigger="specChange",
        attempt=attempt,
        work_req=pb.WorkRequest(resource=pb.Resource(kind=kind, name=name, spec=spec, generation=1)),
    )


def leaf_rows(n: int) -> list[Any]:
    """`n` ready conf-leaf descendants `c0`..`c{n-1}` with fresh ids (wire Resources)."""
    return [
        pb.Resource(id=uuid.uuid4().bytes, kind="conf-leaf", kind_version=1, name=f"c{i}",
                    spec=b"{}", is_ready=True, phase="Ready")
        for i in range(n)
    ]


def rollup_task(lease: str, epoch: int = 1, *, resource_id: bytes = b"\x01" * 16,
                summary: Any = None, descendants: Sequence[Any] = (),
                included: bool = False) -> Any:
    """A STAGE_ROLLUP task frame body for root `k/root` (kind `k`)."""
    return pb.StageTask(
        stage=pb.STAGE_ROLLUP, kind="k", kind_version=1, generation=1, reaction="rollup",
        lease_token=lease, claim_epoch=epoch, resource_id=resource_id,
        trigger="childrenSettled", attempt=1,
        rollup_req=pb.RollupRequest(
            root=pb.Resource(id=resource_id, kind="k", name="root", spec=b"{}", generation=1),
            descendants=list(descendants), summary=summary, descendants_included=included,
        ),
    )
