"""Shared pytest fixtures: a real converge per test (skipped, or failed when
CONVERGE_E2E_REQUIRED=1, if the database or the binary is missing)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import Converge, converge_bin  # noqa: E402


def _unavailable(reason: str) -> None:
    if os.environ.get("CONVERGE_E2E_REQUIRED") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
async def converge() -> AsyncIterator[Converge]:
    """A fresh database and a running converge with the conformance kinds applied."""
    url = os.environ.get("CONVERGE_TEST_DATABASE_URL")
    if not url:
        _unavailable(
            "CONVERGE_TEST_DATABASE_URL is not set; run sdk-python/scripts/test.sh or "
            'eval "$(scripts/pg-test-cluster.sh start /tmp/pytest-pg)"'
        )
    binary = converge_bin()
    if not binary.exists():
        _unavailable(f"converge binary not found at {binary}; set CONVERGE_BIN")
    c = Converge(url or "", binary)
    try:
        await c.wait_ready()
        await c.apply_conformance_kinds()
        yield c
    finally:
        c.stop()
