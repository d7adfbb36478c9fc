"""The worker-lifetime state every loop shares: tracked leases, kept results, the config
cache, advertised readiness and the link to the current stream.

Everything runs on one asyncio event loop, so no lock is needed: each method runs to
completion without awaiting. Every frame goes through the current session's one queue, so
frames built from one consistent view are queued in order (the Subscribe burst cannot
interleave with a result or an Interest).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._proto import worker_pb2 as pb
from .._version import SDK
from ..config import WorkerConfig
from ..convert import wire_version
from ..provider import Provider, Registry
from ..types import CancelReason, KindVersion, ProviderConfig, ReactionRequest

log = logging.getLogger("converge_sdk")

MAX_UNACKED = 1024
"""Most results kept while waiting for their CompleteAck; beyond it the oldest is dropped
(the broker re-runs that task after its lease expires)."""

CANCEL_GRACE = 5.0
"""Seconds a cancelled handler may keep running before its asyncio task is cancelled."""


@dataclass(frozen=True)
class LeaseKey:
    """A lease as the broker fences it: token plus claim epoch."""

    token: str
    epoch: int


class Unacked:
    """Results (as ready-to-send client frames) waiting for an ack, oldest first."""

    def __init__(self, cap: int = MAX_UNACKED) -> None:
        self.cap = cap
        self._items: OrderedDict[LeaseKey, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: LeaseKey) -> bool:
        return key in self._items

    def get(self, key: LeaseKey) -> Any | None:
        return self._items.get(key)

    def remove(self, key: LeaseKey) -> bool:
        return self._items.pop(key, None) is not None

    def keys(self) -> list[LeaseKey]:
        return list(self._items)

    def frames(self) -> list[Any]:
        return list(self._items.values())

    def push(self, key: LeaseKey, frame: Any) -> LeaseKey | None:
        """Keeps `frame`; returns the key of the oldest result dropped to respect the cap."""
        self._items.pop(key, None)
        self._items[key] = frame
        if len(self._items) > self.cap:
            old, _ = self._items.popitem(last=False)
            return old
        return None


@dataclass
class Running:
    """A task accepted from the broker whose handler has not returned (or not started)."""

    cancellation: asyncio.Event = field(default_factory=asyncio.Event)
    runner: asyncio.Task[None] | None = None
    handler: asyncio.Future[Any] | None = None
    # The handler's request, once built: `cancel` records its reason there.
    request: ReactionRequest | None = None
    reason: str | None = None

    def cancel(self, reason: str) -> None:
        """Sets the cancellation, the reason first (the first reason given wins)."""
        if self.reason is None:
            self.reason = reason
        if self.request is not None and self.request.cancel_reason is None:
            self.request.cancel_reason = self.reason
        self.cancellation.set()


@dataclass
class _Link:
    id: int
    queue: asyncio.Queue[Any]


def abort_after_grace(handler: asyncio.Future[Any], grace: float = CANCEL_GRACE) -> None:
    """Cancels `handler`'s asyncio task if it is still running after `grace` seconds."""

    def abort() -> None:
        if not handler.done():
            log.warning("cancelled handler ignored its cancellation for %.1fs; aborting it", grace)
            handler.cancel()

    asyncio.get_running_loop().call_later(grace, abort)


def client_frame(**body: Any) -> Any:
    """A WorkStreamClientMsg with one body field set."""
    return pb.WorkStreamClientMsg(**body)


def interest(kv: KindVersion, has_worker: bool) -> Any:
    """The Interest frame flipping one pair's readiness."""
    return client_frame(
        interest=pb.Interest(kind=kv.kind, credit=0, has_worker=has_worker, kind_version=kv.version)
    )


def provider_config(kv: KindVersion, spec: bytes, bundle: bytes) -> ProviderConfig:
    """A cached config from wire bytes; a malformed spec is logged and treated as absent."""
    value = None
    if spec:
        try:
            value = json.loads(spec)
        except ValueError as e:
            log.warning("provider config of %s is not valid JSON (%s); ignoring its spec", kv, e)
    return ProviderConfig(spec=value, bundle=bytes(bundle))


class Shared:
    """Everything the runtime's loops share, for the worker's whole life."""

    def __init__(self, cfg: WorkerConfig, registry: Registry) -> None:
        self.cfg = cfg
        self.registry = registry
        self.permits = asyncio.Semaphore(cfg.max_parallel)
        self.running: dict[LeaseKey, Running] = {}
        self.unacked = Unacked()
        self.configs: dict[KindVersion, ProviderConfig] = {}
        self.advertised: dict[KindVersion, bool] = {}
        self.shutting_down = False
        self._session: _Link | None = None
        self._next_session = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.live_handlers = 0
        self._no_handlers = asyncio.Event()
        self._no_handlers.set()

    # -- bookkeeping -----------------------------------------------------------------------

    def send(self, frame: Any) -> None:
        """Queues a frame on the current stream (dropped when none is open: kept results
        are re-sent on the next one, so nothing is lost)."""
        if self._session is not None:
            self._session.queue.put_nowait(frame)

    @property
    def outstanding(self) -> int:
        """Tracked leases plus kept results; 0 means nothing is left to finish or deliver."""
        return len(self.running) + len(self.unacked)

    def _publish(self) -> None:
        if self.outstanding == 0:
            self._idle.set()
        else:
            self._idle.clear()

    async def wait_idle(self) -> None:
        """Returns once nothing is running and every result was acked."""
        while self.outstanding:
            self._idle.clear()
            await self._idle.wait()

    def handler_started(self) -> None:
        self.live_handlers += 1
        self._no_handlers.clear()

    def handler_done(self, _fut: asyncio.Future[Any]) -> None:
        """Done-callback of every handler task: frees its permit and counts it out."""
        self.permits.release()
        self.live_handlers -= 1
        if self.live_handlers == 0:
            self._no_handlers.set()

    async def wait_no_handlers(self) -> None:
        await self._no_handlers.wait()

    # -- sessions --------------------------------------------------------------------------

    def open_session(self, queue: asyncio.Queue[Any], readiness: Sequence[tuple[KindVersion, bool]]) -> int:
        """Installs `queue` as the one sender and queues, in order: Subscribe (listing every
        tracked lease and kept result in `resumed`), Interest{has_worker:false} for each pair
        not ready (all of them once shutting down), then every kept result."""
        self._next_session += 1
        sid = self._next_session
        keys = list(self.running) + self.unacked.keys()
        kinds = self.registry.kinds()
        subscribe = pb.Subscribe(
            kinds=[kv.kind for kv in kinds],
            kind_versions=[kv.version for kv in kinds],
            max_inflight=self.cfg.max_parallel,
            resumed=[pb.ResumedTask(lease_token=k.token, claim_epoch=k.epoch) for k in keys],
            worker_name=self.cfg.worker_name,
            sdk=SDK,
            # Compose handlers get `ReactionRequest.dry_run` and answer as usual.
            dry_runs=True,
        )
        log.info(
            "subscribing (session %d, %d kinds, %d resumed, %d unacked)",
            sid, len(kinds), len(keys), len(self.unacked),
        )
        self._session = _Link(sid, queue)
        self.send(client_frame(subscribe=subscribe))
        for kv, ready in readiness:
            ready = ready and not self.shutting_down
            self.advertised[kv] = ready
            if not ready:
                self.send(interest(kv, False))
        for frame in self.unacked.frames():
            self.send(frame)
        return sid

    def close_session(self, sid: int) -> None:
        """Detaches session `sid` if it is still the current one."""
        if self._session is not None and self._session.id == sid:
            self._session.queue.put_nowait(None)
            self._session = None

    # -- tasks -----------------------------------------------------------------------------

    def admit(self, key: LeaseKey) -> Running | None:
        """Tracks a new task; None for a duplicate delivery (already running, or finished
        and waiting for its ack, in which case the kept result is re-sent)."""
        if key in self.running:
            log.debug("duplicate task %s ignored; it is already running", key.token)
            return None
        kept = self.unacked.get(key)
        if kept is not None:
            log.debug("duplicate task %s; its kept result was re-sent", key.token)
            self.send(kept)
            return None
        r = Running()
        self.running[key] = r
        self._publish()
        return r

    def finish(self, key: LeaseKey, complete: Any) -> None:
        """Records a tracked task's result: keeps it until acked and sends it. The result of
        a task no longer tracked (cancelled) is dropped."""
        if self.running.pop(key, None) is None:
            log.debug("result of cancelled task %s dropped", key.token)
            return
        self._keep_and_send(key, complete)

    def finish_untracked(self, key: LeaseKey, complete: Any) -> None:
        """Records a result for a task that was never tracked (refused while draining)."""
        self._keep_and_send(key, complete)

    def _keep_and_send(self, key: LeaseKey, complete: Any) -> None:
        frame = client_frame(complete=complete)
        self.send(frame)
        old = self.unacked.push(key, frame)
        if old is not None:
            log.warning(
                "unacked result buffer full (%d); dropped the oldest result %s "
                "(the broker will re-run it)", MAX_UNACKED, old.token,
            )
        self._publish()

    def ack(self, key: LeaseKey, accepted: bool) -> None:
        """Handles a CompleteAck: the kept result is dropped either way."""
        if self.unacked.remove(key):
            if not accepted:
                log.info("result %s (epoch %d) refused as stale", key.token, key.epoch)
            self._publish()
        else:
            log.debug("ack for an unknown result %s", key.token)

    def cancel_task(self, key: LeaseKey, reason: str = "") -> bool:
        """Handles a CancelTask: cancels the handler (its request's `cancel_reason` says
        `reason`) and forgets the lease and any result."""
        r = self.running.pop(key, None)
        had_result = self.unacked.remove(key)
        if r is not None:
            r.cancel(reason)
            if r.handler is not None:
                abort_after_grace(r.handler)
            elif r.runner is not None:
                r.runner.cancel()
        self._publish()
        return r is not None or had_result

    def cancel_all(self) -> list[asyncio.Future[Any]]:
        """End of shutdown: cancels every task and forgets every lease and kept result;
        returns the handler tasks that had started."""
        handlers: list[asyncio.Future[Any]] = []
        for r in self.running.values():
            r.cancel(CancelReason.SHUTDOWN)
            if r.handler is not None:
                handlers.append(r.handler)
            elif r.runner is not None:
                r.runner.cancel()
        self.running.clear()
        self.unacked = Unacked()
        self._publish()
        return handlers

    def heartbeat(self) -> int:
        """Queues one coalesced heartbeat of every tracked task, if any and a stream is up."""
        if not self.running or self._session is None:
            return 0
        keys = list(self.running)
        self.send(
            client_frame(
                heartbeat=pb.WorkHeartbeat(
                    lease_token=[k.token for k in keys], claim_epoch=[k.epoch for k in keys]
                )
            )
        )
        return len(keys)

    # -- readiness and configs -------------------------------------------------------------

    def update_readiness(self, readiness: Iterable[tuple[KindVersion, bool]]) -> None:
        """Applies a readiness poll: each edge becomes an Interest frame."""
        if self.shutting_down:
            return
        for kv, ready in readiness:
            prev = self.advertised.get(kv)
            self.advertised[kv] = ready
            if prev != ready:
                log.info("provider %s readiness changed: ready=%s", kv, ready)
                self.send(interest(kv, ready))

    def begin_shutdown(self) -> None:
        """Refuse new tasks and tell the broker every pair is unready."""
        self.shutting_down = True
        for kv, ready in list(self.advertised.items()):
            if ready:
                self.advertised[kv] = False
                self.send(interest(kv, False))

    def config_for(self, kv: KindVersion) -> ProviderConfig:
        """The cached default config of a pair."""
        return self.configs.get(kv) or ProviderConfig()

    def apply_config(self, kv: KindVersion, provider: Provider, cfg: ProviderConfig, always: bool) -> None:
        """Stores a pair's default config; calls `on_config` when `always` or when it
        changed, then re-checks the provider's readiness at once."""
        changed = self.configs.get(kv) != cfg
        self.configs[kv] = cfg
        if not (always or changed):
            return
        log.debug("provider config applied for %s (empty=%s)", kv, cfg.is_empty())
        try:
            provider.on_config(cfg)
        except Exception:
            log.exception("on_config of %s raised", kv)
        if kv in self.advertised:
            self.update_readiness([(kv, poll_ready(kv, provider))])

    def apply_pulled(self, entries: Iterable[Any], always: bool) -> None:
        """Applies a pulled set of default configs (pairs without an entry have none)."""
        by_pair = {KindVersion(e.kind, wire_version(e.kind_version)): e for e in entries}
        for kv, provider in self.registry.entries():
            e = by_pair.get(kv)
            cfg = provider_config(kv, e.config, e.bundle) if e is not None else ProviderConfig()
            self.apply_config(kv, provider, cfg, always)


def poll_ready(kv: KindVersion, provider: Provider) -> bool:
    """`provider.ready()`, an exception counting as unready."""
    try:
        return bool(provider.ready())
    except Exception:
        log.exception("ready() of %s raised; treating the provider as unready", kv)
        return False


def poll_readiness(shared: Shared) -> list[tuple[KindVersion, bool]]:
    """Polls every provider's readiness."""
    return [(kv, poll_ready(kv, p)) for kv, p in shared.registry.entries()]
