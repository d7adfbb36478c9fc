"""`serve` / `run_worker`: load provider configs, keep one WorkStream session open to a
broker of the list (failing over along it, with backoff), heartbeat and poll readiness, and
drain on shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Iterable
from typing import Any

from ..config import WorkerConfig
from ..logs import init_logging
from ..provider import Provider, Registry, as_registry
from .failover import Failover
from .session import connection_loop, prime
from .state import Shared, poll_readiness

log = logging.getLogger("converge_sdk")

SHUTDOWN_CANCEL_GRACE = 1.0
"""Seconds cancelled handlers get to return at the end of shutdown before being aborted."""


async def _every(period: float, stop: asyncio.Event, tick: Any) -> None:
    while True:
        try:
            await asyncio.wait_for(stop.wait(), period)
            return
        except TimeoutError:
            tick()


def _signal_event() -> tuple[asyncio.Event, list[signal.Signals]]:
    """An event set on SIGTERM or SIGINT (handlers installed on the running loop)."""
    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    installed: list[signal.Signals] = []

    def on_signal(sig: int) -> None:
        log.info("%s received", signal.Signals(sig).name)
        event.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, on_signal, sig)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            log.warning("cannot install a handler for %s", sig)
    return event, installed


async def serve(
    providers: Registry | Iterable[Provider] | Provider,
    config: WorkerConfig | None = None,
    *,
    shutdown: Awaitable[Any] | None = None,
) -> None:
    """Runs a worker until `shutdown` completes (default: SIGTERM or SIGINT), then drains.

    `config` defaults to `WorkerConfig.from_env()`. On shutdown the worker stops taking
    tasks (every kind is reported unready and stragglers are refused as transient failures),
    waits up to `drain_timeout` for running handlers to finish and their results to be acked,
    then cancels whatever still runs and returns. Broker outages are retried forever; only an
    unusable configuration (ConfigError) or registry (RegistryError) raises.
    """
    cfg = config if config is not None else WorkerConfig.from_env()
    cfg.validate()
    registry = as_registry(providers).validated(cfg.kinds)
    shared = Shared(cfg, registry)
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    if shutdown is None:
        event, installed = _signal_event()
        shutdown = event.wait()
    stopping = asyncio.ensure_future(shutdown)
    log.info(
        "worker %s starting: brokers %s, kinds %s, max_parallel %d",
        cfg.worker_name, ",".join(cfg.broker_addrs), registry, cfg.max_parallel,
    )
    stop = asyncio.Event()
    loops: list[asyncio.Task[None]] = []
    try:
        priming: asyncio.Future[Failover] = asyncio.ensure_future(prime(shared))
        await asyncio.wait((priming, stopping), return_when=asyncio.FIRST_COMPLETED)
        if not priming.done():
            priming.cancel()
            await asyncio.gather(priming, return_exceptions=True)
            log.info("shutdown before the provider configs were loaded")
            return
        failover = priming.result()

        loops = [
            asyncio.create_task(connection_loop(shared, stop, failover)),
            asyncio.create_task(_every(cfg.heartbeat_every, stop, shared.heartbeat)),
            asyncio.create_task(
                _every(cfg.readiness_poll, stop, lambda: shared.update_readiness(poll_readiness(shared)))
            ),
        ]
        await stopping
        log.info(
            "shutdown requested; draining %d running and %d unacked (timeout %.1fs)",
            len(shared.running), len(shared.unacked), cfg.drain_timeout,
        )
        shared.begin_shutdown()
        try:
            await asyncio.wait_for(shared.wait_idle(), cfg.drain_timeout)
        except TimeoutError:
            log.warning(
                "drain timeout passed with %d running and %d unacked; cancelling the rest",
                len(shared.running), len(shared.unacked),
            )
        handlers = shared.cancel_all()
        if handlers:
            try:
                await asyncio.wait_for(shared.wait_no_handlers(), SHUTDOWN_CANCEL_GRACE)
            except TimeoutError:
                log.warning("handlers ignored cancellation; aborting them")
            for h in handlers:
                h.cancel()
        log.info("worker stopped (%d handlers cancelled)", len(handlers))
    finally:
        stop.set()
        if not stopping.done():
            stopping.cancel()
        for h in shared.cancel_all():
            h.cancel()
        if loops:
            await asyncio.gather(*loops, return_exceptions=True)
        for sig in installed:
            loop.remove_signal_handler(sig)


def run_worker(
    providers: Registry | Iterable[Provider] | Provider,
    config: WorkerConfig | None = None,
) -> None:
    """Blocking entry point for a worker program: runs `serve` on a new event loop until
    SIGTERM or SIGINT, drains, and returns (exit code 0 is the caller's).

    When the program has configured no logging (the root logger has no handler), it calls
    `init_logging()` first, so a worker says on stderr that it started, where it connects and
    why it reconnects, instead of running silent."""
    if not logging.getLogger().handlers:
        init_logging()
    asyncio.run(serve(providers, config))
