"""A subprocess worker for the kill test: serves conf-leaf, sleeping `spec.sleep_ms` first and
appending `start <name>` / `done <name>` lines to $SLOW_LOG."""

from __future__ import annotations

import asyncio
import os

from converge_sdk import KindVersion, Outcome, Provider, ReactionRequest, run_worker


def _log(line: str) -> None:
    fd = os.open(os.environ["SLOW_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


class SlowLeaf(Provider):
    kind = KindVersion("conf-leaf", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        _log(f"start {req.resource.name}")
        await asyncio.sleep(req.resource.spec.get("sleep_ms", 0) / 1000)
        _log(f"done {req.resource.name}")
        return Outcome(status={"worker": "slow"})


if __name__ == "__main__":
    run_worker([SlowLeaf()])
