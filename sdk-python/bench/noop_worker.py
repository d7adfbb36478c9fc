"""A no-op leaf worker for throughput benchmarks of the Python SDK.

Serves kind `$BENCH_KIND` (default `benchleaf`, the Rust bench harness's kind) at version
`$BENCH_KIND_VERSION` (default 1) and answers every task at once with a tiny status. The usual
worker environment applies (BROKER_ADDR, WORKER_MAX_PARALLEL, WORKER_NAME, ...). Runs until
SIGTERM/SIGINT. Uses uvloop when it is installed.
"""

from __future__ import annotations

import asyncio
import os

from converge_sdk import KindVersion, Outcome, Provider, ReactionRequest, init_logging, serve


class Noop(Provider):
    """Reports `{"ok": true, "generation": n}` for every task."""

    def __init__(self, kind: str, version: int) -> None:
        self._kind = KindVersion(kind, version)

    @property
    def kind(self) -> KindVersion:
        return self._kind

    async def work(self, req: ReactionRequest) -> Outcome:
        return Outcome(status={"ok": True, "generation": req.generation})


def main() -> None:
    init_logging()
    provider = Noop(os.environ.get("BENCH_KIND") or "benchleaf",
                    int(os.environ.get("BENCH_KIND_VERSION") or "1"))
    try:
        import uvloop  # type: ignore[import-not-found]

        uvloop.run(serve([provider]))
    except ImportError:
        asyncio.run(serve([provider]))


if __name__ == "__main__":
    main()
