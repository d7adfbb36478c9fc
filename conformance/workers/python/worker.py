"""The Python SDK's conformance worker: serves every kind in conformance/KINDS.md.

Run it as `python conformance/workers/python/worker.py` with the converge SDK installed and
the standard worker environment (BROKER_ADDR, WORKER_MAX_PARALLEL, WORKER_NAME,
WORKER_DRAIN_TIMEOUT). CONFORMANCE_FORM names the form (default `python`); CONFORMANCE_LOG,
when set, receives one JSON line per handler invocation. Exits 0 after draining on
SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid

from converge_sdk import (
    ChildSpec,
    ConfigError,
    DepEdge,
    KindVersion,
    Outcome,
    Provider,
    ProviderConfig,
    ReactionRequest,
    RegistryError,
    ResourceRef,
    RollupSummary,
    TerminalError,
    TransientError,
    ValueFlow,
    init_logging,
    run_worker,
)

FORM = os.environ.get("CONFORMANCE_FORM") or "python"
LOG_PATH = os.environ.get("CONFORMANCE_LOG") or None


def record(req: ReactionRequest, event: str, **extra: object) -> None:
    """Appends one event line (one O_APPEND write of the whole line); `extra` adds keys
    (`reason` on `cancelled`, `transition` and `dedup_token` on `react`)."""
    if LOG_PATH is None:
        return
    line = json.dumps(
        {
            "form": FORM,
            "kind": req.kind,
            "name": req.resource.name,
            "reaction": req.reaction,
            "stage": req.stage.proto_name,
            "generation": req.generation,
            "attempt": req.attempt,
            "event": event,
            **extra,
        }
    ) + "\n"
    fd = os.open(LOG_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def echo_status(req: ReactionRequest) -> Outcome:
    """The status of a `work` reaction shared by conf-leaf, conf-final and conf-ready."""
    return Outcome(
        status={
            "echo": req.resource.spec,
            "form": FORM,
            "generation": req.generation,
            "attempt": req.attempt,
            "trigger": req.trigger,
        }
    )


def unknown(req: ReactionRequest) -> TerminalError:
    return TerminalError(f"{req.kind} has no reaction {req.reaction!r}")


class Leaf(Provider):
    """conf-leaf: echoes its spec; verb ping."""

    kind = KindVersion("conf-leaf", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        if req.reaction == "work":
            record(req, "work")
            return echo_status(req)
        if req.reaction == "ping":
            record(req, "operate")
            op_input = req.operation.input if req.operation is not None else None
            return Outcome(output={"pong": op_input, "name": req.resource.name})
        raise unknown(req)


class Composite(Provider):
    """conf-composite: a chain of conf-leaf children with value flows, and a rollup."""

    kind = KindVersion("conf-composite", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        spec = req.resource.spec if isinstance(req.resource.spec, dict) else {}
        n = spec.get("children", 2)
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 50:
            raise TerminalError(f"children must be an integer in 0..50, got {n!r}")
        name = req.resource.name
        if req.reaction == "compose":
            record(req, "compose")
            out = Outcome(status={"composed": n})
            for i in range(n):
                out.with_child(ChildSpec("conf-leaf", 1, f"{name}-{i}", {"index": i}))
                if i >= 1:
                    out.with_edge(
                        DepEdge(
                            ResourceRef("conf-leaf", f"{name}-{i}"),
                            ResourceRef("conf-leaf", f"{name}-{i - 1}"),
                        ).with_value(ValueFlow("/upstream_index", "/echo/index"))
                    )
            return out
        if req.reaction == "rollup":
            record(req, "rollup")
            return Outcome(
                status={
                    "composed": n,
                    "descendants": len(req.descendants),
                    "ready": sum(1 for d in req.descendants if d.is_ready),
                }
            )
        raise unknown(req)


def spec_int(req: ReactionRequest, key: str, default: int) -> int:
    """`spec[key]` as an integer in 0..50 (`default` when absent); anything else is terminal."""
    spec = req.resource.spec if isinstance(req.resource.spec, dict) else {}
    v = spec.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 50:
        raise TerminalError(f"{key} must be an integer in 0..50, got {v!r}")
    return v


class Summary(Provider):
    """conf-summary: children without edges, and a rollup that reads the subtree's summary and
    pages through the descendants only when the spec's `page_size` asks it to."""

    kind = KindVersion("conf-summary", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        n = spec_int(req, "children", 2)
        name = req.resource.name
        if req.reaction == "compose":
            record(req, "compose")
            out = Outcome(status={"composed": n})
            for i in range(n):
                out.with_child(ChildSpec("conf-leaf", 1, f"{name}-{i}", {"index": i}))
            return out
        if req.reaction == "rollup":
            record(req, "rollup")
            page_size = spec_int(req, "page_size", 0)
            pages, read = 0, 0
            distinct: set[uuid.UUID] = set()
            if page_size > 0:
                async for page in req.descendant_pages(page_size):
                    pages += 1
                    read += len(page)
                    distinct.update(d.id for d in page)
            s = req.summary or RollupSummary()
            return Outcome(
                status={
                    "sent": len(req.descendants),
                    "included": req.descendants_included,
                    "total": s.total,
                    "by_kind": s.by_kind,
                    "by_phase": s.by_phase,
                    "not_ready": s.not_ready_total,
                    "pages": pages,
                    "read": read,
                    "distinct": len(distinct),
                }
            )
        raise unknown(req)


class Final(Provider):
    """conf-final: a leaf with a finalizer whose teardown may fail transiently first."""

    kind = KindVersion("conf-final", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        if req.reaction == "work":
            record(req, "work")
            return echo_status(req)
        if req.reaction == "teardown":
            record(req, "delete")
            spec = req.resource.spec if isinstance(req.resource.spec, dict) else {}
            k = spec.get("delete_failures", 0)
            if isinstance(k, int) and k > 0 and req.attempt <= k:
                raise TransientError(f"teardown failure {req.attempt}")
            return Outcome()
        raise unknown(req)


class Fail(Provider):
    """conf-fail: fails terminally, transiently or by raising, as its spec says."""

    kind = KindVersion("conf-fail", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        if req.reaction != "work":
            raise unknown(req)
        record(req, "work")
        spec = req.resource.spec if isinstance(req.resource.spec, dict) else {}
        mode = spec.get("mode", "ok")
        times = spec.get("times", 0)
        ok = Outcome(status={"ok": True, "attempt": req.attempt})
        if mode == "ok":
            return ok
        if mode == "terminal":
            raise TerminalError("conformance terminal")
        if mode == "transient":
            if not isinstance(times, int) or times <= 0 or req.attempt <= times:
                raise TransientError(f"conformance transient {req.attempt}")
            return ok
        if mode == "panic":
            raise RuntimeError("conformance panic")
        raise TerminalError(f"unknown mode {mode!r}")


class Slow(Provider):
    """conf-slow: sleeps cooperatively-cancellably for spec.sleep_ms."""

    kind = KindVersion("conf-slow", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        if req.reaction != "work":
            raise unknown(req)
        record(req, "work")
        spec = req.resource.spec if isinstance(req.resource.spec, dict) else {}
        n = spec.get("sleep_ms", 0)
        if not isinstance(n, int) or n < 0:
            raise TerminalError(f"sleep_ms must be a non-negative integer, got {n!r}")
        try:
            await asyncio.wait_for(req.cancellation.wait(), n / 1000)
        except TimeoutError:
            return Outcome(status={"slept_ms": n, "attempt": req.attempt})
        record(req, "cancelled", reason=req.cancel_reason or "")
        raise TransientError("cancelled")


class Hold(Slow):
    """conf-hold: conf-slow under a 600 s deadline (cancelled by CancelTask, not the clock)."""

    kind = KindVersion("conf-hold", 1)


class React(Provider):
    """conf-react: logs each delivery's transition and dedup token; fails transiently while
    the attempt is at most the watched resource's `react_failures`."""

    kind = KindVersion("conf-react", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        if req.reaction != "react":
            raise unknown(req)
        transition = req.transition.proto_name if req.transition is not None else None
        record(req, "react", transition=transition, dedup_token=req.dedup_token)
        spec = req.resource.spec if isinstance(req.resource.spec, dict) else {}
        k = spec.get("react_failures", 0)
        if isinstance(k, int) and k > 0 and req.attempt <= k:
            raise TransientError(f"react failure {req.attempt}")
        return Outcome()


class Ready(Provider):
    """conf-ready: ready unless the default provider config says `"ready": false`."""

    kind = KindVersion("conf-ready", 1)

    def __init__(self) -> None:
        self._ready = True

    def on_config(self, cfg: ProviderConfig) -> None:
        spec = cfg.spec if isinstance(cfg.spec, dict) else {}
        self._ready = spec.get("ready") is not False

    def ready(self) -> bool:
        return self._ready

    async def work(self, req: ReactionRequest) -> Outcome:
        if req.reaction != "work":
            raise unknown(req)
        record(req, "work")
        return echo_status(req)


class ConfigEcho(Provider):
    """conf-config: echoes its effective config and the effective bundle's length."""

    kind = KindVersion("conf-config", 1)

    async def work(self, req: ReactionRequest) -> Outcome:
        if req.reaction != "work":
            raise unknown(req)
        record(req, "work")
        return Outcome(
            status={"config": req.effective_config(), "bundle_len": len(req.effective_bundle())}
        )


def providers() -> list[Provider]:
    """Every conformance kind."""
    return [
        Leaf(),
        Composite(),
        Summary(),
        Final(),
        Fail(),
        Slow(),
        Hold(),
        React(),
        Ready(),
        ConfigEcho(),
    ]


def main() -> int:
    try:
        init_logging()
        run_worker(providers())
    except (ConfigError, RegistryError) as e:
        print(f"conformance worker: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
