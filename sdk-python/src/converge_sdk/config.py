"""`WorkerConfig`: the worker's typed configuration, parsed once from the environment.

Reads the same variables as the Rust SDK: `BROKER_ADDR` (required: one broker or a
comma-separated list, dialled in order with failover), `WORKER_MAX_PARALLEL`,
`WORKER_DRAIN_TIMEOUT`, `WORKER_KINDS` and `WORKER_NAME`, and the transport-security ones:
`WORKER_TOKEN` or `WORKER_TOKEN_FILE` (a bearer token sent on every RPC), `BROKER_CA_FILE`
(roots to trust for an `https://` broker) and `WORKER_CERT_FILE` + `WORKER_KEY_FILE` (a client
certificate for mutual TLS), and the gRPC transport's: `GRPC_MAX_MESSAGE_BYTES` (the largest
message sent or accepted, as the broker reads it) and `GRPC_COMPRESSION` (`gzip` or `none`).
A malformed value is a `ConfigError` naming the variable, never a
silent default; an empty variable counts as unset. The token never appears in a repr, a log
line or an error message.
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
RECONNECT_CAP = 5.0
"""The longest wait between reconnect (or config-prime) attempts, jitter included, and the
most `reconnect_max` may be, seconds: a broker that comes back, or another broker of the
list, is found within seconds rather than after a long sleep."""
DEFAULT_RECONNECT_MAX = RECONNECT_CAP
"""Default reconnect (and config-prime) backoff ceiling, seconds: `RECONNECT_CAP`."""

MAX_PARALLEL_LIMIT = 1 << 20
"""Upper bound of `max_parallel` (it travels as a uint32)."""

DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""Default largest message either side sends or accepts, decompressed (the broker's too)."""
MAX_MESSAGE_BYTES_FLOOR = 4 * 1024 * 1024
"""The least `GRPC_MAX_MESSAGE_BYTES` may be (gRPC's own default receive limit)."""
MAX_MESSAGE_BYTES_CEILING = 512 * 1024 * 1024
"""The most `GRPC_MAX_MESSAGE_BYTES` may be (the broker's ceiling: room for a compose of
about a million small children, ~280 MB)."""
COMPRESSIONS = ("none", "gzip")
"""The values of `GRPC_COMPRESSION` / `WorkerConfig.compression`."""

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


_ADDR_FORMS = "expected https://host:port, http://host:port or host:port"


def _broker_target(var: str, addr: str) -> str:
    """Checks a broker address and returns its gRPC target (`host:port`)."""
    reason = _target_problem(addr)
    if reason is not None:
        raise ConfigError.invalid(var, addr, reason)
    return addr.removeprefix("https://").removeprefix("http://").rstrip("/")


def _target_problem(addr: str) -> str | None:
    """Why `addr` is not a usable broker address, or None."""
    rest = addr.removeprefix("https://").removeprefix("http://")
    if "://" in rest:
        return _ADDR_FORMS
    rest = rest.rstrip("/")
    if not rest or rest.startswith("/") or "/" in rest:
        return _ADDR_FORMS
    host, sep, port = rest.rpartition(":")
    if not sep or not host:
        return "missing port, e.g. http://127.0.0.1:9090"
    if not port.isdigit() or not 0 < int(port) < 65536:
        return f"port {port!r} is not a number in 1..65535"
    return None


def parse_broker_addrs(var: str, raw: str) -> list[str]:
    """Splits a comma-separated broker list (`BROKER_ADDR`) into its addresses, in order.

    A bare `host:port` becomes `http://host:port` (plaintext h2c). An empty entry is an
    error rather than skipped (`a:1,,b:1` usually means a templated address came out empty),
    and TLS (`https://`) and plaintext entries cannot be mixed: one set of TLS files and one
    token policy serve the whole list. Raises ConfigError naming `var`.
    """
    raw = raw.strip()
    entries = [e.strip() for e in raw.split(",")]
    addrs = []
    for i, entry in enumerate(entries):
        if not entry:
            raise ConfigError.invalid(
                var, raw, _entry_reason(i, len(entries), entry,
                                        "is empty: separate broker addresses with single commas")
            )
        addr = entry if "://" in entry else f"http://{entry}"
        reason = _target_problem(addr)
        if reason is not None:
            raise ConfigError.invalid(var, raw, _entry_reason(i, len(entries), entry, reason))
        addrs.append(addr)
    _check_one_scheme(var, raw, addrs)
    return addrs


def _entry_reason(i: int, n: int, entry: str, reason: str) -> str:
    """A list entry's problem, numbered (and quoted) when the list has more than one."""
    if n == 1:
        return reason
    where = f"entry {i + 1} of {n}" + (f" ({entry!r})" if entry else "")
    return f"{where}: {reason}"


def _check_one_scheme(var: str, shown: str, addrs: list[str]) -> None:
    tls = sum(1 for a in addrs if a.startswith("https://"))
    if 0 < tls < len(addrs):
        raise ConfigError.invalid(
            var, shown,
            "mixes https:// (TLS) and plaintext (http:// or bare host:port) brokers: use one "
            "scheme for every entry",
        )


@dataclass
class WorkerConfig:
    """How a worker connects and how much work it takes (durations in seconds)."""

    broker_addrs: list[str]
    """The brokers (`BROKER_ADDR`, comma-separated), dialled in order: the worker moves on to
    the next on a connect failure and whenever a stream ends, wrapping around. Each is
    `https://host:port` (TLS, server name = that entry's host), `http://host:port` or
    `host:port` (h2c); TLS and plaintext entries cannot be mixed. A host name with several
    DNS records is tried record by record at each connect (gRPC's resolver and pick_first)."""
    max_parallel: int = DEFAULT_MAX_PARALLEL
    """Most tasks run at once (`WORKER_MAX_PARALLEL`)."""
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT
    """How long shutdown waits for in-flight work (`WORKER_DRAIN_TIMEOUT`)."""
    kinds: list[str] | None = None
    """Serve only these kinds of the registered providers (`WORKER_KINDS`)."""
    worker_name: str = field(default_factory=default_worker_name)
    """Advisory display name (`WORKER_NAME`, default `<hostname>-<pid>`)."""
    heartbeat_every: float = DEFAULT_HEARTBEAT_EVERY
    """Seconds between coalesced heartbeats of running tasks."""
    readiness_poll: float = DEFAULT_READINESS_POLL
    """Seconds between `Provider.ready` polls."""
    reconnect_min: float = DEFAULT_RECONNECT_MIN
    """First reconnect backoff (1 s); it doubles after each failed round of the broker list
    up to `reconnect_max`, and every wait is jittered ±25 %."""
    reconnect_max: float = DEFAULT_RECONNECT_MAX
    """Reconnect backoff ceiling (5 s); at most `RECONNECT_CAP`, which no jittered wait
    exceeds either."""
    token: str | None = field(default=None, repr=False)
    """Bearer token sent as `authorization` metadata on every RPC (`WORKER_TOKEN`); kept
    out of the repr."""
    token_file: str | None = None
    """File holding the token, re-read at every (re)connect so that a rotated token is
    picked up (`WORKER_TOKEN_FILE`, whitespace-trimmed). Exclusive with `token`."""
    ca_file: str | None = None
    """PEM roots to trust for an `https://` broker (`BROKER_CA_FILE`; default: gRPC's
    bundled roots)."""
    cert_file: str | None = None
    """PEM client certificate chain for mutual TLS (`WORKER_CERT_FILE`; needs `key_file`)."""
    key_file: str | None = None
    """PEM private key of `cert_file` (`WORKER_KEY_FILE`)."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """Largest message sent or accepted, decompressed (`GRPC_MAX_MESSAGE_BYTES`, 4 MiB to
    512 MiB). Raise it together with the broker's for compose results past 64 MiB."""
    compression: str = "none"
    """`gzip` compresses what the worker sends, and the broker then answers in gzip too;
    `none` sends plain frames (`GRPC_COMPRESSION`)."""

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
        cfg = cls(broker_addrs=parse_broker_addrs("BROKER_ADDR", addr))
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
        cfg.token = get("WORKER_TOKEN")
        cfg.token_file = get("WORKER_TOKEN_FILE")
        cfg.ca_file = get("BROKER_CA_FILE")
        cfg.cert_file = get("WORKER_CERT_FILE")
        cfg.key_file = get("WORKER_KEY_FILE")
        if (v := get("GRPC_MAX_MESSAGE_BYTES")) is not None:
            cfg.max_message_bytes = _parse_max_message_bytes("GRPC_MAX_MESSAGE_BYTES", v)
        if (v := get("GRPC_COMPRESSION")) is not None:
            cfg.compression = v.lower()
            if cfg.compression == "identity":
                cfg.compression = "none"
            _check_compression("GRPC_COMPRESSION", cfg.compression)
        cfg._check_transport()
        return cfg

    @property
    def targets(self) -> list[str]:
        """The gRPC targets (`host:port`) of the brokers, in dialling order."""
        return [_broker_target("broker_addrs", a.strip()) for a in self.broker_addrs]

    @property
    def tls(self) -> bool:
        """Whether the brokers are dialled over TLS (`https://` addresses; `validate` refuses
        a list mixing TLS and plaintext)."""
        return bool(self.broker_addrs) and self.broker_addrs[0].strip().startswith("https://")

    def read_token(self) -> str | None:
        """The bearer token: `token`, or `token_file` read now (the runtime calls this at
        every connect). Raises ConfigError naming the variable, never showing the token."""
        if self.token is not None:
            _check_token("WORKER_TOKEN", "WORKER_TOKEN", self.token)
            return self.token
        if self.token_file is None:
            return None
        var = "WORKER_TOKEN_FILE"
        try:
            token = _read_file(var, self.token_file).decode("utf-8").strip()
        except UnicodeDecodeError:
            raise ConfigError.invalid(var, self.token_file, "the file is not UTF-8 text") from None
        _check_token(var, f"{var}={self.token_file!r}", token)
        return token

    def call_metadata(self) -> tuple[tuple[str, str], ...]:
        """The metadata every RPC carries: `authorization: Bearer <token>` when a token is
        configured (the file read now), else none."""
        token = self.read_token()
        return () if token is None else (("authorization", f"Bearer {token}"),)

    def tls_material(self) -> tuple[bytes | None, bytes | None, bytes | None]:
        """`(root_certificates, private_key, certificate_chain)` read now from `ca_file`,
        `key_file` and `cert_file` (None where unset), for `grpc.ssl_channel_credentials`."""
        roots = None if self.ca_file is None else _read_pem(
            "BROKER_CA_FILE", self.ca_file, b"-----BEGIN CERTIFICATE-----", "CERTIFICATE"
        )
        key = None if self.key_file is None else _read_pem(
            "WORKER_KEY_FILE", self.key_file, b"PRIVATE KEY-----", "PRIVATE KEY"
        )
        chain = None if self.cert_file is None else _read_pem(
            "WORKER_CERT_FILE", self.cert_file, b"-----BEGIN CERTIFICATE-----", "CERTIFICATE"
        )
        return roots, key, chain

    def _check_transport(self) -> None:
        """Checks the token and TLS settings and reads their files once, so a mistake is a
        loud error at start rather than an endless reconnect loop. Errors name the
        environment variables (each field's doc says which)."""
        if self.token is not None and self.token_file is not None:
            raise ConfigError(
                "WORKER_TOKEN", "WORKER_TOKEN and WORKER_TOKEN_FILE are both set; set only one"
            )
        if (self.cert_file is None) != (self.key_file is None):
            have, lack = (
                ("WORKER_CERT_FILE", "WORKER_KEY_FILE")
                if self.cert_file is not None
                else ("WORKER_KEY_FILE", "WORKER_CERT_FILE")
            )
            raise ConfigError(
                lack, f"{have} is set but {lack} is not; a client certificate needs both"
            )
        if not self.tls:
            for var, value in (
                ("BROKER_CA_FILE", self.ca_file),
                ("WORKER_CERT_FILE", self.cert_file),
                ("WORKER_KEY_FILE", self.key_file),
            ):
                if value is not None:
                    raise ConfigError(
                        var,
                        f"{var} is set but BROKER_ADDR={','.join(self.broker_addrs)!r} is "
                        "plaintext; TLS files need BROKER_ADDR=https://host:port brokers",
                    )
        self.read_token()
        self.tls_material()

    def validate(self) -> None:
        """Checks the values the runtime relies on; raises ConfigError naming the field
        (or, for the token and TLS settings, the variable)."""
        if isinstance(self.broker_addrs, str) or not self.broker_addrs:
            raise ConfigError.invalid(
                "broker_addrs", self.broker_addrs,
                "expected a non-empty list of broker addresses",
            )
        shown = ",".join(self.broker_addrs)
        for i, addr in enumerate(self.broker_addrs):
            reason = _target_problem(addr.strip())
            if reason is not None:
                raise ConfigError.invalid(
                    "broker_addrs", shown, _entry_reason(i, len(self.broker_addrs), addr, reason)
                )
        _check_one_scheme("broker_addrs", shown, [a.strip() for a in self.broker_addrs])
        self._check_transport()
        if not 1 <= self.max_parallel <= MAX_PARALLEL_LIMIT:
            raise ConfigError.invalid(
                "max_parallel", self.max_parallel, f"must be between 1 and {MAX_PARALLEL_LIMIT}"
            )
        _parse_max_message_bytes("max_message_bytes", str(self.max_message_bytes))
        _check_compression("compression", self.compression)
        for name in ("heartbeat_every", "readiness_poll", "reconnect_min"):
            if not getattr(self, name) > 0:
                raise ConfigError.invalid(name, getattr(self, name), "must be positive")
        if self.drain_timeout < 0:
            raise ConfigError.invalid("drain_timeout", self.drain_timeout, "must not be negative")
        if self.reconnect_max < self.reconnect_min:
            raise ConfigError.invalid(
                "reconnect_max", self.reconnect_max, "must not be below reconnect_min"
            )
        if self.reconnect_max > RECONNECT_CAP:
            raise ConfigError.invalid(
                "reconnect_max", self.reconnect_max,
                f"must not exceed {RECONNECT_CAP:g}s, so an outage is noticed to be over "
                "within seconds",
            )


def _parse_max_parallel(var: str, v: str) -> int:
    if not v.isdigit():
        raise ConfigError.invalid(var, v, "expected a positive integer")
    n = int(v)
    if not 1 <= n <= MAX_PARALLEL_LIMIT:
        raise ConfigError.invalid(var, v, f"must be between 1 and {MAX_PARALLEL_LIMIT}")
    return n


def _parse_max_message_bytes(var: str, v: str) -> int:
    """A whole number of bytes in the broker's accepted range, as the broker parses it."""
    if not v.strip().isdigit():
        raise ConfigError.invalid(
            var, v, "expected a whole number of bytes (e.g. 536870912 for 512 MiB)"
        )
    n = int(v)
    if not MAX_MESSAGE_BYTES_FLOOR <= n <= MAX_MESSAGE_BYTES_CEILING:
        raise ConfigError.invalid(
            var, v,
            f"must be within {MAX_MESSAGE_BYTES_FLOOR}..={MAX_MESSAGE_BYTES_CEILING} "
            "(4 MiB to 512 MiB)",
        )
    return n


def _check_compression(var: str, v: str) -> None:
    if v not in COMPRESSIONS:
        raise ConfigError.invalid(var, v, "expected gzip or none")


def _read_file(var: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ConfigError.invalid(var, path, f"cannot read the file: {e.strerror or e}") from None


def _read_pem(var: str, path: str, marker: bytes, label: str) -> bytes:
    data = _read_file(var, path)
    if marker not in data:
        raise ConfigError.invalid(var, path, f"the file holds no PEM {label} block")
    return data


def _check_token(var: str, where: str, token: str) -> None:
    """Rejects a token that cannot travel in a header; `where` names its source (the
    variable, or the variable and file path) and the message never shows the token."""
    if not token:
        raise ConfigError(var, f"{where} is empty")
    if not all(0x21 <= ord(c) <= 0x7E for c in token):
        raise ConfigError(
            var,
            f"{where}: the token holds a space, a control or a non-ASCII character "
            "(a bearer token is printable ASCII)",
        )
