"""End-to-end harness: a real `converge serve` on a fresh database, an HTTP client, and
polling waits with deadlines (never sleeps as synchronisation).

Needs `CONVERGE_TEST_DATABASE_URL` (an admin URL to database `postgres`) and the converge
binary at `CONVERGE_BIN` (default `${CARGO_TARGET_DIR:-~/.cache/converge-target}/debug/converge`).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
KINDS_DIR = REPO / "conformance" / "kinds"


def converge_bin() -> Path:
    """The converge binary the e2e tests run."""
    env = os.environ.get("CONVERGE_BIN")
    if env:
        return Path(env)
    target = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache" / "converge-target")
    return Path(target) / "debug" / "converge"


def free_port() -> int:
    """A free loopback port (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(
    method: str, url: str, body: Any = None, *, token: str | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, Any]:
    """One HTTP call with a JSON body (a bearer token and a TLS context when given);
    returns (status, decoded JSON body or None)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("content-type", "application/json")
    if token is not None:
        req.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as r:
            raw = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        raw = e.read()
        status = e.code
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


async def wait_for(timeout: float, what: str, probe: Callable[[], Awaitable[T | None]]) -> T:
    """Polls `probe` until it returns a non-None value; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        v = await probe()
        if v is not None:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.2)


def _psql(admin_url: str, sql: str) -> None:
    subprocess.run(["psql", admin_url, "-qXc", sql], check=True, capture_output=True)


def _with_database(admin_url: str, name: str) -> str:
    base, sep, query = admin_url.partition("?")
    head, _, _ = base.rpartition("/")
    return f"{head}/{name}{sep}{query}"


class Converge:
    """A running `converge serve` (ROLE=all) on its own fresh database.

    With `tls_ca` (the PEM roots its certificate chains to; `env` then names the
    certificate files) both listeners speak TLS and the URLs are https://; with `token`
    every API call carries it."""

    def __init__(
        self, admin_url: str, binary: Path, env: dict[str, str] | None = None, *,
        tls_ca: bytes | None = None, token: str | None = None,
    ) -> None:
        self.admin_url = admin_url
        self.db = f"pytest_{uuid.uuid4().hex}"
        _psql(admin_url, f"CREATE DATABASE {self.db}")
        hp, gp = free_port(), free_port()
        scheme = "http" if tls_ca is None else "https"
        self.http = f"{scheme}://127.0.0.1:{hp}"
        self.broker = f"{scheme}://127.0.0.1:{gp}"
        self.tls = None if tls_ca is None else ssl.create_default_context(cadata=tls_ca.decode())
        self.token = token
        self.database_url = _with_database(admin_url, self.db)
        full_env = {
            "PATH": os.environ.get("PATH", ""),
            "DATABASE_URL": self.database_url,
            "LISTEN_ADDR": f"127.0.0.1:{hp}",
            "BROKER_LISTEN_ADDR": f"127.0.0.1:{gp}",
            "RETRY_BASE": "200ms",
            "RETRY_MAX": "1s",
            "SHUTDOWN_DRAIN": "2s",
            "DB_MAX_CONNECTIONS": "10",
            "LOG_LEVEL": os.environ.get("TEST_LOG_LEVEL", "warn"),
        }
        full_env.update(env or {})
        self.proc = subprocess.Popen([str(binary), "serve"], env=full_env)

    async def wait_ready(self) -> None:
        async def probe() -> bool | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"converge exited with {self.proc.returncode}")
            try:
                status, _ = await asyncio.to_thread(
                    http, "GET", f"{self.http}/readyz", context=self.tls
                )
            except OSError:
                return None
            return True if status == 200 else None

        await wait_for(30, "converge /readyz", probe)

    async def call(
        self, method: str, path: str, body: Any = None, *, token: str | None = None
    ) -> tuple[int, Any]:
        """One API call with `token`, else the server's token (none for "")."""
        tok = self.token if token is None else token or None
        return await asyncio.to_thread(
            http, method, f"{self.http}{path}", body, token=tok, context=self.tls
        )

    async def apply_manifest(self, manifest: dict[str, Any]) -> None:
        status, body = await self.call("PUT", f"/api/v1/kinds/{manifest['kind']}/manifest", manifest)
        assert 200 <= status < 300, f"manifest apply failed: {status} {body}"

    async def apply_conformance_kinds(self) -> None:
        for f in sorted(KINDS_DIR.glob("*.json")):
            await self.apply_manifest(json.loads(f.read_text()))

    async def apply(self, kind: str, name: str, spec: Any, **extra: Any) -> Any:
        body = {"kind": kind, "kind_version": 1, "name": name, "spec": spec, **extra}
        status, out = await self.call("POST", "/api/v1/resources", body)
        assert status in (200, 201), f"apply {kind}/{name} failed: {status} {out}"
        return out

    async def get(self, kind: str, name: str) -> Any | None:
        status, body = await self.call("GET", f"/api/v1/resources/{kind}/{name}")
        if status == 404:
            return None
        assert status == 200, f"GET {kind}/{name}: {status} {body}"
        return body

    async def wait_resource(
        self, kind: str, name: str, what: str, pred: Callable[[Any], bool], timeout: float = 30
    ) -> Any:
        async def probe() -> Any | None:
            r = await self.get(kind, name)
            return r if r is not None and pred(r) else None

        return await wait_for(timeout, f"{kind}/{name} {what}", probe)

    def stop(self) -> None:
        """SIGTERM, wait, then drop the database."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        try:
            _psql(self.admin_url, f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)")
        except subprocess.CalledProcessError:
            pass


class Broker:
    """A broker-only `converge serve` (`ROLE=broker`) on the database of a running
    `Converge`: a second broker pod. It serves WorkerService on `broker` and its probes on
    its own HEALTH_ADDR."""

    def __init__(self, converge: Converge, binary: Path) -> None:
        hp, gp = free_port(), free_port()
        self.health = f"http://127.0.0.1:{hp}"
        self.broker = f"http://127.0.0.1:{gp}"
        env = {
            "PATH": os.environ.get("PATH", ""),
            "ROLE": "broker",
            "DATABASE_URL": converge.database_url,
            "HEALTH_ADDR": f"127.0.0.1:{hp}",
            "BROKER_LISTEN_ADDR": f"127.0.0.1:{gp}",
            "SHUTDOWN_DRAIN": "2s",
            "DB_MAX_CONNECTIONS": "10",
            "LOG_LEVEL": os.environ.get("TEST_LOG_LEVEL", "warn"),
        }
        self.proc = subprocess.Popen([str(binary), "serve"], env=env)

    async def wait_ready(self) -> None:
        async def probe() -> bool | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"the broker exited with {self.proc.returncode}")
            try:
                status, _ = await asyncio.to_thread(http, "GET", f"{self.health}/readyz")
            except OSError:
                return None
            return True if status == 200 else None

        await wait_for(30, "broker /readyz", probe)

    def kill(self) -> None:
        """SIGKILL (a crash: no drain), then reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
