"""converge_sdk: write converge providers in Python.

Subclass `Provider` for each (kind, kind_version) you serve and call `run_worker` (blocking,
configuration from the environment, SIGTERM/SIGINT drain) or `await serve(...)`. The runtime
dials the broker's WorkerService over grpc.aio, subscribes, runs tasks with bounded
concurrency, keeps results until the broker acks them, heartbeats running tasks, reports
readiness flips, applies provider-config pushes and reconnects with backoff and jitter,
failing over along a list of brokers (`BROKER_ADDR=a:9090,b:9090`).

    from converge_sdk import KindVersion, Outcome, Provider, ReactionRequest, run_worker

    class Hello(Provider):
        kind = KindVersion("hello", 1)

        async def work(self, req: ReactionRequest) -> Outcome:
            return Outcome(status={"message": f"hello, {req.resource.name}!"})

    run_worker([Hello()])
"""

from ._version import SDK, __version__
from .config import (
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_HEARTBEAT_EVERY,
    DEFAULT_MAX_PARALLEL,
    DEFAULT_READINESS_POLL,
    DEFAULT_RECONNECT_MAX,
    DEFAULT_RECONNECT_MIN,
    RECONNECT_CAP,
    WorkerConfig,
    parse_duration,
)
from .descendants import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, RollupSummary, Subtree
from .errors import ConfigError, HandlerError, RegistryError, TerminalError, TransientError
from .logs import init_logging
from .manifest import Reaction, kind_manifest, schema_of
from .merge import effective_bundle, effective_config
from .provider import Provider, Registry
from .runtime.worker import run_worker, serve
from .types import (
    CONDITION_READY,
    CONDITION_SYNCED,
    JSON,
    CancelReason,
    ChildSpec,
    Condition,
    DepEdge,
    KindVersion,
    Operation,
    Outcome,
    ProviderConfig,
    ProviderConfigSpec,
    ReactionRequest,
    Resource,
    ResourceRef,
    Stage,
    Transition,
    Trigger,
    ValueFlow,
)

__all__ = [
    "CONDITION_READY",
    "CONDITION_SYNCED",
    "DEFAULT_DRAIN_TIMEOUT",
    "DEFAULT_HEARTBEAT_EVERY",
    "DEFAULT_MAX_PARALLEL",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_READINESS_POLL",
    "DEFAULT_RECONNECT_MAX",
    "DEFAULT_RECONNECT_MIN",
    "JSON",
    "MAX_PAGE_SIZE",
    "RECONNECT_CAP",
    "SDK",
    "CancelReason",
    "ChildSpec",
    "Condition",
    "ConfigError",
    "DepEdge",
    "HandlerError",
    "KindVersion",
    "Operation",
    "Outcome",
    "Provider",
    "ProviderConfig",
    "ProviderConfigSpec",
    "Reaction",
    "ReactionRequest",
    "Registry",
    "RegistryError",
    "Resource",
    "ResourceRef",
    "RollupSummary",
    "Stage",
    "Subtree",
    "TerminalError",
    "TransientError",
    "Transition",
    "Trigger",
    "ValueFlow",
    "WorkerConfig",
    "__version__",
    "effective_bundle",
    "effective_config",
    "init_logging",
    "kind_manifest",
    "parse_duration",
    "run_worker",
    "schema_of",
    "serve",
]
