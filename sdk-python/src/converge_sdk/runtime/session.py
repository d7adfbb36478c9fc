"""One WorkStream session, the reconnect loop around it (walking the broker list, see
`failover`), and the provider-config prime."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc

from .._proto import worker_pb2 as pb
from .._proto import worker_pb2_grpc as pb_grpc
from ..config import WorkerConfig
from ..convert import wire_version
from ..errors import ConfigError
from ..types import KindVersion
from .failover import Failover
from .state import LeaseKey, Shared, poll_readiness, provider_config
from .subtree import Connection, Metadata
from .task import accept

log = logging.getLogger("converge_sdk")

CONFIG_PULL_TIMEOUT = 10.0
"""Bound on one GetProviderConfig call, seconds."""

KEEPALIVE_TIME_MS = 10_000
"""How often an HTTP/2 PING goes out (the broker does not limit pings)."""
KEEPALIVE_TIMEOUT_MS = 10_000
"""How long a PING may wait for its answer before the connection is dropped: a dead or
black-holed broker is left within about 20 s instead of at the TCP timeout. gRPC core also
waits `grpc.http2.ping_timeout_ms` for any PING's answer (1 min by default once keepalive is
on, which measured ~70 s against a frozen relay), so that is set to the same value."""
CONNECT_TIMEOUT_MS = 5_000
"""Bound on one connect attempt (gRPC core's minimum connect timeout, 20 s by default), so a
black-holed address fails over in seconds."""

CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.http2.ping_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.min_reconnect_backoff_ms", CONNECT_TIMEOUT_MS),
    ("grpc.enable_retries", 0),
]


def channel_options(cfg: WorkerConfig) -> list[tuple[str, Any]]:
    """`CHANNEL_OPTIONS` plus the configured message limit (`GRPC_MAX_MESSAGE_BYTES`) both
    ways."""
    return [
        ("grpc.max_send_message_length", cfg.max_message_bytes),
        ("grpc.max_receive_message_length", cfg.max_message_bytes),
        *CHANNEL_OPTIONS,
    ]


def _compression(cfg: WorkerConfig) -> grpc.Compression:
    """The channel's compression of sent messages (`GRPC_COMPRESSION`); the broker answers
    gzip only to a worker that sends gzip."""
    return grpc.Compression.Gzip if cfg.compression == "gzip" else grpc.Compression.NoCompression


def _stub(channel: grpc.aio.Channel) -> Any:
    return pb_grpc.WorkerServiceStub(channel)  # type: ignore[no-untyped-call]


def open_channel(shared: Shared, index: int) -> tuple[grpc.aio.Channel, Metadata]:
    """A fresh channel per session to broker `index` of the list, so that after a drain a
    load balancer (or the next entry) can give the next session another broker, and the
    metadata its calls carry. The TLS server name is that entry's host; a host name with
    several DNS records is tried record by record by gRPC's resolver and pick_first. The
    token file and the TLS files are read here, at every connect, so rotated ones are picked
    up without a restart; an unreadable one raises ConfigError (retried like an unreachable
    broker)."""
    cfg = shared.cfg
    target = cfg.targets[index]
    metadata = cfg.call_metadata()
    options, compression = channel_options(cfg), _compression(cfg)
    if cfg.tls:
        roots, key, chain = cfg.tls_material()
        creds = grpc.ssl_channel_credentials(
            root_certificates=roots, private_key=key, certificate_chain=chain
        )
        channel = grpc.aio.secure_channel(target, creds, options=options, compression=compression)
        return channel, metadata
    return grpc.aio.insecure_channel(target, options=options, compression=compression), metadata


async def pull_configs(channel: grpc.aio.Channel, metadata: Metadata, shared: Shared) -> list[Any]:
    """One GetProviderConfig call per registered pair: one call for all of them would put
    every pair's bundle into one answer, which many kinds sharing a large WASM component
    push past the message cap (the worker would never start). Per pair, an answer carries
    at most one bundle."""
    stub = _stub(channel)
    entries: list[Any] = []
    for kv in shared.registry.kinds():
        req = pb.GetProviderConfigRequest(kinds=[kv.kind], kind_versions=[kv.version])
        resp = await stub.GetProviderConfig(req, timeout=CONFIG_PULL_TIMEOUT, metadata=metadata)
        entries.extend(resp.entries)
    return entries


async def _pull_once(shared: Shared, index: int) -> list[Any]:
    channel, metadata = open_channel(shared, index)
    try:
        return await pull_configs(channel, metadata, shared)
    finally:
        await channel.close()


def _describe(e: BaseException) -> str:
    if isinstance(e, grpc.aio.AioRpcError):
        return f"{e.code().name}: {e.details()}"
    return f"{type(e).__name__}: {e}"


async def prime(shared: Shared) -> Failover:
    """Loads every registered pair's default config from the first broker of the list that
    answers (retrying along the list with jittered backoff until one does), and calls
    `on_config` for each before any task can arrive. Returns the failover position, on the
    broker that answered, for the connection loop to start from."""
    addrs = shared.cfg.broker_addrs
    failover = Failover(len(addrs), shared.cfg.reconnect_min, shared.cfg.reconnect_max)
    while True:
        addr = addrs[failover.current]
        try:
            entries = await _pull_once(shared, failover.current)
        except (grpc.aio.AioRpcError, OSError, ConfigError) as e:
            delay = failover.failed()
            log.warning(
                "cannot load provider configs from %s (%s); trying %s in %.1fs",
                addr, _describe(e), addrs[failover.current], delay,
            )
            await asyncio.sleep(delay)
            continue
        log.info("provider configs loaded from %s (%d)", addr, len(entries))
        shared.apply_pulled(entries, True)
        failover.succeeded()
        return failover


async def _frames(queue: asyncio.Queue[Any]) -> AsyncIterator[Any]:
    """The request iterator of a stream: every frame the one sender queued, until None."""
    while True:
        frame = await queue.get()
        if frame is None:
            return
        yield frame


def _dispatch(shared: Shared, conn: Connection, msg: Any, draining: bool) -> bool:
    """Handles one server frame that arrived on `conn`; returns whether the session is now
    draining."""
    which = msg.WhichOneof("body")
    if which == "task":
        refuse = None
        if draining:
            refuse = "worker stream is draining; task refused"
        elif shared.shutting_down:
            refuse = "worker is shutting down; task refused"
        accept(shared, msg.task, refuse, conn)
    elif which == "ack":
        a = msg.ack
        shared.ack(LeaseKey(a.lease_token, a.claim_epoch), a.accepted)
    elif which == "config":
        u = msg.config
        kv = KindVersion(u.kind, wire_version(u.kind_version))
        provider = shared.registry.find(kv.kind, kv.version)
        if provider is None:
            log.debug("config for unserved pair %s ignored", kv)
        else:
            shared.apply_config(kv, provider, provider_config(kv, u.config, u.bundle), True)
    elif which == "cancel":
        c = msg.cancel
        known = shared.cancel_task(LeaseKey(c.lease_token, c.claim_epoch), c.reason)
        log.info("task %s cancelled by the broker (%s, known=%s)", c.lease_token, c.reason, known)
    elif which == "drain":
        log.info(
            "broker is draining (%s); finishing %d running and %d unacked before reconnecting",
            msg.drain.reason, len(shared.running), len(shared.unacked),
        )
        return True
    else:
        log.debug("empty frame ignored")
    return draining


class Attempt:
    """What one session got to, for the failover decision after it ends."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.opened = False
        """Whether the broker took the Subscribe (answered the stream with headers)."""


async def run_session(shared: Shared, attempt: Attempt, reconnect: bool) -> str:
    """Runs one stream to its end on broker `attempt.index`; returns "drained" or "closed",
    raises on a stream error (`attempt.opened` says whether the stream had opened)."""
    channel, metadata = open_channel(shared, attempt.index)
    conn = Connection(channel, metadata)
    sid = None
    try:
        if reconnect:
            # Pulled before the stream opens, so the broker's own push at subscribe time
            # (newer) is applied after it.
            try:
                shared.apply_pulled(await pull_configs(channel, metadata, shared), False)
            except grpc.aio.AioRpcError as e:
                log.warning("config re-pull after reconnect failed: %s", _describe(e))
        queue: asyncio.Queue[Any] = asyncio.Queue()
        sid = shared.open_session(queue, poll_readiness(shared))
        call = _stub(channel).WorkStream(_frames(queue), metadata=metadata)
        # Headers come once the broker has taken the Subscribe; a refusal (or no connection)
        # ends the call instead, with no headers.
        await call.initial_metadata()
        attempt.opened = not call.done()
        if attempt.opened:
            log.info(
                "work stream open (session %d, broker %s)",
                sid, shared.cfg.broker_addrs[attempt.index],
            )
        draining = False
        while True:
            msg = await call.read()
            if msg is grpc.aio.EOF:
                return "closed"
            draining = _dispatch(shared, conn, msg, draining)
            if draining and shared.outstanding == 0:
                log.info("drained: in-flight work delivered; closing the stream")
                call.cancel()
                return "drained"
    finally:
        if sid is not None:
            shared.close_session(sid)
        # Closes the channel, or leaves that to the last ROLLUP handler still paging on it.
        await conn.end()


async def connection_loop(shared: Shared, stop: asyncio.Event, failover: Failover) -> None:
    """Runs sessions until `stop`, starting on the broker `failover` points at and moving
    along the list on every failure or stream end (see `failover` for the waits and the
    backoff). Handlers survive reconnects."""
    addrs = shared.cfg.broker_addrs
    reconnect = False
    stopper = asyncio.ensure_future(stop.wait())
    try:
        while True:
            started = time.monotonic()
            attempt = Attempt(failover.current)
            addr = addrs[attempt.index]
            session = asyncio.ensure_future(run_session(shared, attempt, reconnect))
            await asyncio.wait((session, stopper), return_when=asyncio.FIRST_COMPLETED)
            if stopper.done():
                session.cancel()
                await asyncio.gather(session, return_exceptions=True)
                return
            reconnect = True
            exc = session.exception()
            if exc is None:
                if session.result() == "drained":
                    log.info("session with %s drained", addr)
                else:
                    log.warning("broker %s closed the work stream", addr)
            elif attempt.opened:
                log.warning("work stream to %s lost: %s", addr, _describe(exc))
            else:
                log.warning("no work stream from %s: %s", addr, _describe(exc))
            if attempt.opened:
                delay = failover.ended(time.monotonic() - started)
            else:
                delay = failover.failed()
            log.info("reconnecting to %s in %.2fs", addrs[failover.current], delay)
            try:
                await asyncio.wait_for(asyncio.shield(stopper), delay)
                return
            except TimeoutError:
                pass
    finally:
        stopper.cancel()
