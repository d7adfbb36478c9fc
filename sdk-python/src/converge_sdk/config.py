"""`WorkerConfig`: the worker's typed configuration, parsed once from the environment.

Reads the same variables as the Rust SDK: `BROKER_ADDR` (required), `WORKER_MAX_PARALLEL`,
`WORKER_DRAIN_TIMEOUT`, `WORKER_KINDS` and `WORKER_NAME`. A malformed value is a
`ConfigError` naming the variable, never a silent default; an empty variable counts as unset.
"""

from __future__ import annotations

import math
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import ConfigError

DEFAULT_MAX_PARALLEL = 16
"""Default number of tasks run at once."""
DEFAULT_DRAIN_TIMEOUT = 50.0
"""Default seconds allowed for in-flight work at shutdown."""
DEFAULT_HEARTBEAT_EVERY = 5.0
"""Default seconds between coalesced task heartbeats."""
DEFAULT_READINESS_POLL = 2.0
"""Default seconds between readiness polls."""
DEFAULT_RECONNECT_MIN = 1.0
"""Default first reconnect (and config-prime) backoff, seconds."""
DEFAULT_RECONNECT_MAX = 30.0
"""Default reconnect (and config-prime) backoff ceiling, seconds."""

MAX_PARALLEL_LIMIT = 1 << 20
"""Upper bound of `max_parallel` (it travels as a uint32)."""

_DURATION = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ms|s|m|h)?$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: str) -> float:
    """Parses "45s", "500ms", "2m", "1h" or a bare number of seconds into seconds.

    Raises ValueError with a reason on anything else (negative, unknown unit, out of range).
    """
    s = value.strip()
    m = _DURATION.match(s)
    if m is None:
        if re.match(r"^[0-9.]+[a-zA-Z]+$", s):
            raise ValueError(f"{s!r} has an unknown unit (use ms, s, m or h)")
        raise ValueError(f"{s!r} is not a duration (e.g. 30s, 500ms, 2m)")
    secs = float(m.group(1)) * _UNIT_SECONDS[m.group(2) or "s"]
    if not math.isfinite(secs) or secs > 1e9:
        raise ValueError(f"{s!r} is out of range")
    return secs


def default_worker_name() -> str:
    """`<hostname>-<pid>`, the default display name of a worker."""
    host = os.environ.get("HOSTNAME", "").strip() or socket.gethostname().strip() or "worker"
    return f"{host}-{os.getpid()}"


def _broker_target(var: str, addr: str) -> str:
    """Checks a broker address and returns its gRPC target (`host:port`)."""
    if addr.startswith("https://"):
        raise ConfigError.invalid(
            var, addr, "TLS is not supported by this SDK build; use an http:// (h2c) address"
        )
    rest = addr.removeprefix("http://")
    if "://" in rest:
        raise ConfigError.invalid(var, addr, "expected http://host:port or host:port")
    rest = rest.rstrip("/")
    if not rest or rest.startswith("/") or "/" in rest:
        raise ConfigError.invalid(var, addr, "expected http://host:port or host:port")
    host, sep, port = rest.rpartition(":")
    if not sep or not host:
        raise ConfigError.invalid(var, addr, "missing port, e.g. http://127.0.0.1:9090")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError.invalid(var, addr, f"port {port!r} is not a number in 1..65535")
    return rest


@dataclass
class WorkerConfig:
    """How a worker connects and how much work it takes (durations in seconds)."""

    broker_addr: str
    """The broker: `http://host:port` or `host:port` (`BROKER_ADDR`)."""
    max_parallel: int = DEFAULT_MAX_PARALLEL
    """Most tasks run at once (`WORKER_MAX_PARALLEL`)."""
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT
    """How long shutdown waits for in-flight work (`WORKER_DRAIN_TIMEOUT`)."""
    kinds: list[str] | None = None
    """Serve only these kinds of the registered providers (`WORKER_KINDS`)."""
    worker_name: str = field(default_factory=default_worker_name)
    """Advisory display name (`WORKER_NAME`, default `<hostname>-<pid>`)."""
    heartbeat_every: float = DEFAULT_HEARTBEAT_EVERY
    readiness_poll: float = DEFAULT_READINESS_POLL
    reconnect_min: float = DEFAULT_RECONNECT_MIN
    reconnect_max: float = DEFAULT_RECONNECT_MAX

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WorkerConfig:
        """Reads the worker variables from `environ` (default: the process environment)."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            v = env.get(name)
            return v.strip() if v is not None and v.strip() else None

        addr = get("BROKER_ADDR")
        if addr is None:
            raise ConfigError.missing("BROKER_ADDR")
        _broker_target("BROKER_ADDR", addr)
        cfg = cls(broker_addr=addr)
        if (v := get("WORKER_MAX_PARALLEL")) is not None:
            cfg.max_parallel = _parse_max_parallel("WORKER_MAX_PARALLEL", v)
        if (v := get("WORKER_DRAIN_TIMEOUT")) is not None:
            try:
                cfg.drain_timeout = parse_duration(v)
            except ValueError as e:
                raise ConfigError.invalid("WORKER_DRAIN_TIMEOUT", v, str(e)) from None
        if (v := get("WORKER_KINDS")) is not None:
            kinds = [k.strip() for k in v.split(",") if k.strip()]
            if not kinds:
                raise ConfigError.invalid(
                    "WORKER_KINDS", v, "expected a comma-separated list of kinds"
                )
            cfg.kinds = kinds
        if (v := get("WORKER_NAME")) is not None:
            cfg.worker_name = v
        return cfg

    @property
    def target(self) -> str:
        """The gRPC target (`host:port`) of the broker."""
        return _broker_target("broker_addr", self.broker_addr.strip())

    def validate(self) -> None:
        """Checks the values the runtime relies on; raises ConfigError naming the field."""
        _ = self.target
        if not 1 <= self.max_parallel <= MAX_PARALLEL_LIMIT:
            raise ConfigError.invalid(
                "max_parallel", self.max_parallel, f"must be between 1 and {MAX_PARALLEL_LIMIT}"
            )
        for name in ("heartbeat_every", "readiness_poll", "reconnect_min"):
            if not getattr(self, name) > 0:
                raise ConfigError.invalid(name, getattr(self, name), "must be positive")
        if self.drain_timeout < 0:
            raise ConfigError.invalid("drain_timeout", self.drain_timeout, "must not be negative")
        if self.reconnect_max < self.reconnect_min:
            raise ConfigError.invalid(
                "reconnect_max", self.reconnect_max, "must not be below reconnect_min"
            )


def _parse_max_parallel(var: str, v: str) -> int:
    if not v.isdigit():
        raise ConfigError.invalid(var, v, "expected a positive integer")
    n = int(v)
    if not 1 <= n <= MAX_PARALLEL_LIMIT:
        raise ConfigError.invalid(var, v, f"must be between 1 and {MAX_PARALLEL_LIMIT}")
    return n
