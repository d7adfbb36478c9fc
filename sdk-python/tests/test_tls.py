"""The SDK over TLS against an in-process fake broker: the broker is verified against
BROKER_CA_FILE (by IP SAN), the client certificate is presented to a broker that requires
one, and the token travels as metadata; a broker from another CA is refused before any RPC."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from certs import CA, write
from fake_broker import FakeBroker
from harness import wait_for

from converge_sdk import KindVersion, Outcome, Provider, ReactionRequest, WorkerConfig, serve


class Noop(Provider):
    kind = KindVersion("k", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        return Outcome()


@pytest.fixture
def ca() -> CA:
    return CA()


@pytest.fixture
async def tls_broker(ca: CA) -> AsyncIterator[FakeBroker]:
    """A fake broker serving a 127.0.0.1 certificate of `ca` and requiring a client
    certificate from the same CA."""
    cert, key = ca.issue("broker", hosts=("127.0.0.1", "localhost"))
    creds = grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca.pem, require_client_auth=True
    )
    b = FakeBroker()
    await b.start(creds)
    yield b
    await b.stop()


async def _serve_until(cfg: WorkerConfig, done: asyncio.Future[object]) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(serve([Noop()], cfg, shutdown=stop.wait()))
    try:
        await done
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


def _config(broker: FakeBroker, **kw: object) -> WorkerConfig:
    cfg = WorkerConfig(broker_addrs=[broker.addr], worker_name="tls-test", reconnect_min=0.05,
                       reconnect_max=0.2, drain_timeout=0.5)
    for k, v in kw.items():
        setattr(cfg, k, v)
    return cfg


async def test_tls_with_a_client_certificate_and_a_token(
    tls_broker: FakeBroker, ca: CA, tmp_path: Path
) -> None:
    cert, key = ca.issue("w", uris=("spiffe://test/worker",), client=True)
    cfg = _config(
        tls_broker,
        ca_file=write(tmp_path, "ca.pem", ca.pem),
        cert_file=write(tmp_path, "cert.pem", cert),
        key_file=write(tmp_path, "key.pem", key),
        token="tls-token",
    )
    cfg.validate()

    async def opened() -> None:
        s = await tls_broker.next_stream()
        assert (await s.first()).WhichOneof("body") == "subscribe"

    await _serve_until(cfg, asyncio.ensure_future(opened()))
    assert tls_broker.auth[:2] == [("GetProviderConfig", "Bearer tls-token"),
                                   ("WorkStream", "Bearer tls-token")]


async def test_a_broker_from_another_ca_is_refused_before_any_rpc(
    tls_broker: FakeBroker, ca: CA, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cert, key = ca.issue("w", client=True)
    cfg = _config(
        tls_broker,
        ca_file=write(tmp_path, "other-ca.pem", CA("another CA").pem),
        cert_file=write(tmp_path, "cert.pem", cert),
        key_file=write(tmp_path, "key.pem", key),
        token="tls-token",
    )
    caplog.set_level(logging.WARNING, logger="converge_sdk")

    async def refused() -> str:
        async def probe() -> str | None:
            msgs = [r.getMessage() for r in caplog.records if "provider configs" in r.getMessage()]
            return msgs[0] if msgs else None

        return await wait_for(10, "the worker's failed config load", probe)

    pending = asyncio.ensure_future(refused())
    await _serve_until(cfg, pending)
    assert "UNAVAILABLE" in pending.result()
    assert tls_broker.auth == [], "no RPC may reach a broker whose certificate is not trusted"
