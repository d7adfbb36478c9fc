"""End to end with the broker secured: a real `converge serve` with TLS on both listeners
(a CA and a 127.0.0.1 certificate made in the test) and an AUTH_FILE; the Python worker
connects over https:// with BROKER_CA_FILE and a worker token and reconciles a resource,
while a worker with a wrong token is refused (UNAUTHENTICATED) and gets no work. With
TLS_CLIENT_CA_FILE, a worker identified only by its client certificate's SPIFFE ID does
the same."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from certs import CA, write
from harness import KINDS_DIR, Converge, converge_bin, wait_for

from converge_sdk import (
    Condition,
    KindVersion,
    Outcome,
    Provider,
    ReactionRequest,
    WorkerConfig,
    serve,
)

KIND = "conf-leaf"
SPIFFE_ID = "spiffe://converge.test/worker/m"


def _token() -> str:
    return "cvg_" + secrets.token_urlsafe(32)


def _sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Greeter(Provider):
    kind = KindVersion(KIND, 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        return Outcome(status={"hello": req.resource.name}).with_condition(
            Condition.ready(True, "Greeted", "over TLS")
        )


class Secured:
    """A TLS + AUTH_FILE converge and what a worker needs to reach it."""

    def __init__(self, server: Converge, ca: CA, ca_file: str, worker_token: str) -> None:
        self.server = server
        self.ca = ca
        self.ca_file = ca_file
        self.worker_token = worker_token


SecureServer = Callable[[bool], Awaitable[Secured]]


@pytest.fixture
async def secure_server(tmp_path: Path) -> AsyncIterator[SecureServer]:
    """Starts converge with TLS and an AUTH_FILE (an admin, a token worker and a SPIFFE
    worker for KIND); with `client_ca`, the broker also requires client certificates."""
    url = os.environ.get("CONVERGE_TEST_DATABASE_URL")
    binary = converge_bin()
    if not url or not binary.exists():
        reason = f"needs CONVERGE_TEST_DATABASE_URL and the converge binary ({binary})"
        if os.environ.get("CONVERGE_E2E_REQUIRED") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    started: list[Converge] = []

    async def start(client_ca: bool) -> Secured:
        ca = CA()
        cert, key = ca.issue("converge", hosts=("127.0.0.1", "localhost"))
        admin, worker = _token(), _token()
        principals = {"principals": [
            {"name": "ops", "role": "admin", "token_sha256": _sha256(admin)},
            {"name": "w", "role": "worker", "token_sha256": _sha256(worker), "kinds": [KIND]},
            {"name": "m", "role": "worker", "spiffe_id": SPIFFE_ID, "kinds": [KIND]},
        ]}
        ca_file = write(tmp_path, "ca.pem", ca.pem)
        env = {
            "TLS_CERT_FILE": write(tmp_path, "server.pem", cert),
            "TLS_KEY_FILE": write(tmp_path, "server-key.pem", key),
            "AUTH_FILE": write(tmp_path, "auth.json", json.dumps(principals).encode()),
        }
        if client_ca:
            env["TLS_CLIENT_CA_FILE"] = ca_file
        server = Converge(url or "", binary, env, tls_ca=ca.pem, token=admin)
        started.append(server)
        await server.wait_ready()
        return Secured(server, ca, ca_file, worker)

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@contextlib.asynccontextmanager
async def running(cfg: WorkerConfig) -> AsyncIterator[asyncio.Task[None]]:
    cfg.reconnect_min, cfg.reconnect_max, cfg.drain_timeout = 0.1, 0.5, 2.0
    stop = asyncio.Event()
    task = asyncio.create_task(serve([Greeter()], cfg, shutdown=stop.wait()))
    try:
        yield task
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def test_worker_reconciles_over_tls_with_a_token_and_a_wrong_token_gets_nothing(
    secure_server: SecureServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secured = await secure_server(False)
    c = secured.server
    status, body = await c.call("GET", "/api/v1/resources", token="")
    assert status == 401, f"the API must want a token: {status} {body}"
    await c.apply_manifest(json.loads((KINDS_DIR / f"{KIND}.json").read_text()))
    await c.apply(KIND, "secure", {"greeting": "hi"})

    # A wrong token: the broker answers UNAUTHENTICATED, the SDK logs it and retries, and
    # nothing reaches the resource.
    caplog.set_level(logging.WARNING, logger="converge_sdk")
    wrong = WorkerConfig.from_env({
        "BROKER_ADDR": c.broker, "BROKER_CA_FILE": secured.ca_file,
        "WORKER_TOKEN": _token(), "WORKER_NAME": "wrong-token",
    })
    async with running(wrong):
        async def refused() -> str | None:
            for r in caplog.records:
                if "UNAUTHENTICATED" in r.getMessage():
                    return r.getMessage()
            return None

        msg = await wait_for(30, "the wrong token's UNAUTHENTICATED", refused)
        assert wrong.token is not None and wrong.token not in msg
    r: Any = await c.get(KIND, "secure")
    assert r["phase"] != "Ready" and not r["status"], r

    # The right token, from a file as a deployment mounts it.
    good = WorkerConfig.from_env({
        "BROKER_ADDR": c.broker, "BROKER_CA_FILE": secured.ca_file,
        "WORKER_TOKEN_FILE": write(tmp_path, "token", f"{secured.worker_token}\n".encode()),
        "WORKER_NAME": "right-token",
    })
    async with running(good):
        r = await c.wait_resource(KIND, "secure", "Ready", lambda v: v["phase"] == "Ready")
    assert r["status"] == {"hello": "secure"}


async def test_worker_reconciles_over_mtls_identified_by_its_spiffe_id(
    secure_server: SecureServer, tmp_path: Path
) -> None:
    secured = await secure_server(True)
    c = secured.server
    await c.apply_manifest(json.loads((KINDS_DIR / f"{KIND}.json").read_text()))
    await c.apply(KIND, "mutual", {})
    cert, key = secured.ca.issue("m", uris=(SPIFFE_ID,), client=True)
    cfg = WorkerConfig.from_env({
        "BROKER_ADDR": c.broker, "BROKER_CA_FILE": secured.ca_file,
        "WORKER_CERT_FILE": write(tmp_path, "client.pem", cert),
        "WORKER_KEY_FILE": write(tmp_path, "client-key.pem", key),
        "WORKER_NAME": "mtls",
    })
    async with running(cfg):
        r = await c.wait_resource(KIND, "mutual", "Ready", lambda v: v["phase"] == "Ready")
    assert r["status"] == {"hello": "mutual"}
