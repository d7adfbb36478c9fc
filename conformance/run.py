#!/usr/bin/env python3
"""The converge conformance runner: every scenario against every worker form.

A *form* is a worker program given as a shell command line (Rust SDK, Python SDK, Go SDK,
stdworker exec, ...) that serves the kinds in ``conformance/KINDS.md``. For each form and
each scenario the runner starts a real ``converge`` on a fresh PostgreSQL database, applies
the conformance manifests, starts the form's worker, drives the scenario through the HTTP
API and reads the worker's event log, then tears everything down. It prints a scenario x
form table and the details of every failure, and exits non-zero if anything failed.

Standard library only (Python 3.11), so it runs anywhere the forms run::

    python3 conformance/run.py --form rust='path/to/conformance-worker' \\
        --form python='venv/bin/python conformance/workers/python/worker.py' [--only leaf,compose]

Needs ``CONVERGE_TEST_DATABASE_URL`` (an admin URL, e.g. from ``scripts/pg-test-cluster.sh``),
``psql`` on PATH, and the ``converge`` binary (``--converge`` or ``CONVERGE_BIN``).
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import io
import json
import math
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
KINDS_DIR = HERE / "kinds"
# Kinds only the composer forms serve (their compose-stage variants of the scenarios).
COMPOSER_KINDS_DIR = KINDS_DIR / "composer"

# converge settings that make retries fast enough for a suite (see control/src/config.rs).
CONVERGE_ENV = {
    "RETRY_BASE": "200ms",
    "RETRY_MAX": "2s",
    "SHUTDOWN_DRAIN": "2s",
    "DB_MAX_CONNECTIONS": "10",
    "BROKER_FAILSAFE": "500ms",
    "DRAINER_FAILSAFE": "500ms",
    # A JavaScript guest component is ~12 MB (its engine included), over the 10 MiB default;
    # its base64 upload needs a body of 4/3 of that.
    "MAX_BUNDLE_BYTES": str(32 * 1024 * 1024),
    "MAX_BODY_BYTES": str(48 * 1024 * 1024),
}
# Default deadline of a single wait; scenarios pass longer ones where the contract needs it.
WAIT = 20.0
POLL = 0.05
# Colour codes a logger may still emit despite NO_COLOR; stripped from failure details.
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Failure(Exception):
    """A scenario's expectation did not hold; the message says which and what was seen."""


def check(cond: bool, message: str) -> None:
    """Fails the scenario with ``message`` unless ``cond`` holds."""
    if not cond:
        raise Failure(message)


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    """A free loopback port (bound then released; a race with another process is unlikely)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A child process in its own process group, so teardown reaches its whole tree."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path):
        self.log = log
        self._out = open(log, "ab")
        self.popen = subprocess.Popen(
            argv, env=env, stdout=self._out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, grace: float) -> int | None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; returns the exit code of a clean stop."""
        code = None
        if self.alive():
            self.signal(signal.SIGTERM)
            try:
                code = self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                code = None
        else:
            code = self.popen.returncode
        self.kill()
        return code

    def kill(self) -> None:
        """SIGKILL the whole group (a crash: no drain) and reap the leader."""
        self.signal(signal.SIGKILL)
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._out.close()

    def tail(self, lines: int = 25) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return ANSI.sub("", "\n".join(text[-lines:]))


# --------------------------------------------------------------------------- database


def db_url(admin_url: str, name: str) -> str:
    """The admin URL with its database replaced by ``name``."""
    u = urllib.parse.urlsplit(admin_url)
    return urllib.parse.urlunsplit((u.scheme, u.netloc, "/" + name, u.query, u.fragment))


def psql(admin_url: str, sql: str) -> None:
    r = subprocess.run(["psql", admin_url, "-v", "ON_ERROR_STOP=1", "-qc", sql],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"psql {sql!r} failed: {r.stderr.strip()}")


class Databases:
    """Fresh databases cloned from one migrated template (migrating once per run, not per test)."""

    def __init__(self, admin_url: str, converge: str, workdir: Path):
        self.admin = admin_url
        self.template = f"conf_tmpl_{os.getpid()}"
        self.seq = 0
        psql(admin_url, f"DROP DATABASE IF EXISTS {self.template}")
        psql(admin_url, f"CREATE DATABASE {self.template}")
        env = dict(os.environ, DATABASE_URL=db_url(admin_url, self.template), LOG_LEVEL="warn")
        r = subprocess.run([converge, "migrate", "up"], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"converge migrate up failed: {r.stderr.strip()[-2000:]}")

    def create(self) -> str:
        self.seq += 1
        name = f"conf_{os.getpid()}_{self.seq}"
        psql(self.admin, f"CREATE DATABASE {name} TEMPLATE {self.template}")
        return name

    def drop(self, name: str) -> None:
        # FORCE: a converge killed mid-transaction may leave a backend behind for a moment.
        psql(self.admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def close(self) -> None:
        self.drop(self.template)


# --------------------------------------------------------------------------- HTTP


@dataclass
class Reply:
    """One HTTP answer: status code and decoded JSON body (or the raw text)."""

    status: int
    body: Any


def http(method: str, url: str, body: Any = None, timeout: float = 10.0) -> Reply:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return Reply(r.status, _decode(r.read()))
    except urllib.error.HTTPError as e:
        return Reply(e.code, _decode(e.read()))


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode(errors="replace")


def wait_for(what: str, probe: Callable[[], Any], timeout: float = WAIT) -> Any:
    """Polls ``probe`` until it returns something truthy; fails naming ``what`` and the last
    value seen. Every synchronisation in the suite goes through here (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            got = probe()
        except Failure:
            raise
        except Exception as e:  # noqa: BLE001 - a flaky probe is retried until the deadline
            got, last = None, f"{type(e).__name__}: {e}"
        if got:
            return got
        if time.monotonic() >= deadline:
            raise Failure(f"timed out after {timeout:.0f}s waiting for {what}; last seen: "
                          f"{_short(last if got is None else got)}")
        if got is not None:
            last = got
        time.sleep(POLL)


def _short(v: Any, limit: int = 600) -> str:
    s = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= limit else s[:limit] + "..."


# --------------------------------------------------------------------------- context


@dataclass
class Form:
    """A worker form: a name and the shell command line that starts its worker.

    ``base_config`` is set for forms told what to run by their kinds' default provider
    config (stdworker exec): every kind then gets a default config built from it, and the
    scenarios' configs are mapped onto it (see ``conformance/workers/exec/README.md``).
    """

    name: str
    command: str
    base_config: dict | None = None
    # From --form-profile: the kinds' default bundles ({kind or "*": path}), behaviour traits
    # the scenarios allow for, and scenarios the form cannot run ({scenario: reason}).
    bundles: dict[str, Path | None] = field(default_factory=dict)
    specs: dict[str, dict] = field(default_factory=dict)
    traits: set[str] = field(default_factory=set)
    skip: dict[str, str] = field(default_factory=dict)
    # A composer form's per-kind base config (engine limits), used instead of base_config.
    kind_base: dict[str, dict] = field(default_factory=dict)
    # A composer form's speed: inner spin-loop steps per millisecond (see Ctx.hold_spec).
    spin_rate: float = 0.0

    @property
    def composer(self) -> bool:
        """A form whose sandboxed composer serves the compose-stage kinds (starlark, cel)."""
        return "composer" in self.traits

    def bundle(self, kind: str) -> bytes | None:
        """The bytes a kind's default config carries as its bundle, if the form gives one: a
        file as it is, a directory as a zip of its files (a starlark bundle)."""
        path = self.bundles.get(kind, self.bundles.get("*"))
        if path is None:
            return None
        if path.is_dir():
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
                for f in sorted(p for p in path.rglob("*") if p.is_file()):
                    z.write(f, f.relative_to(path).as_posix())
            return buf.getvalue()
        return path.read_bytes()


@dataclass
class Ctx:
    """Everything a scenario touches: the converge endpoints, the worker, its event log."""

    form: Form
    http_base: str
    broker: str
    workdir: Path
    probe: str
    worker: Proc | None = None
    starts: int = 0
    notes: list[str] = field(default_factory=list)
    # The cell's converge and database, for the scenarios that stop and restart it (drain).
    converge: Proc | None = None
    db_url: str = ""
    restart_converge: Callable[[], None] | None = None

    # ---- worker

    @property
    def event_log(self) -> Path:
        return self.workdir / "events.jsonl"

    def start_worker(self) -> None:
        """Starts the form's worker (again, after a crash) against the broker."""
        self.starts += 1
        env = dict(os.environ,
                   BROKER_ADDR=self.broker,
                   CONFORMANCE_LOG=str(self.event_log),
                   CONFORMANCE_FORM=self.form.name,
                   WORKER_NAME=f"conf-{self.form.name}-{self.starts}",
                   WORKER_DRAIN_TIMEOUT="3s",
                   LOG_LEVEL=os.environ.get("CONFORMANCE_LOG_LEVEL", "info"),
                   NO_COLOR="1")
        # exec: the shell becomes the worker, so signals reach it directly.
        argv = ["bash", "-c", "exec " + self.form.command]
        self.worker = Proc(argv, env, self.workdir / f"worker-{self.starts}.log")

    def crash_worker(self) -> None:
        """SIGKILLs the worker's process group: no drain, no goodbye."""
        assert self.worker is not None
        self.worker.kill()

    # ---- HTTP API

    def url(self, path: str) -> str:
        return self.http_base + "/api/v1" + path

    def apply(self, kind: str, name: str, spec: dict | None = None, **extra: Any) -> Reply:
        body = {"kind": kind, "kind_version": 1, "name": name, "spec": spec or {}, **extra}
        r = http("POST", self.url("/resources"), body)
        check(r.status in (200, 201), f"apply {kind}/{name}: HTTP {r.status} {_short(r.body)}")
        return r

    def get(self, kind: str, name: str) -> dict | None:
        r = http("GET", self.url(f"/resources/{kind}/{name}"))
        if r.status == 404:
            return None
        check(r.status == 200, f"GET {kind}/{name}: HTTP {r.status} {_short(r.body)}")
        return r.body

    def wait_resource(self, kind: str, name: str, what: str, pred: Callable[[dict], bool],
                      timeout: float = WAIT) -> dict:
        """Waits until ``kind/name`` exists and satisfies ``pred``; returns it."""
        def probe() -> Any:
            r = self.get(kind, name)
            if r is None:
                return None
            return r if pred(r) else _Seen(r)
        got = wait_for(f"{kind}/{name} {what}", probe, timeout)
        return got

    def wait_ready(self, kind: str, name: str, timeout: float = WAIT) -> dict:
        """Waits for phase Ready with the current generation synced."""
        return self.wait_resource(
            kind, name, "Ready",
            lambda r: r["phase"] == "Ready" and r["synced_gen"] == r["generation"], timeout)

    def base_config(self, kind: str | None = None) -> dict | None:
        """The form's base config (for ``kind``, if the form has one of its own for it) with
        this cell's placeholders filled in, if it has one."""
        base = self.form.kind_base.get(kind or "", self.form.base_config)
        if base is None:
            return None
        text = json.dumps(base)
        for key, value in (("@CONFORMANCE_LOG@", str(self.event_log)),
                           ("@CONFORMANCE_FORM@", self.form.name),
                           ("@HANDLER@", str(HERE / "workers" / self.form.name / "handler.py"))):
            text = text.replace(key, value)
        return json.loads(text)

    def put_base_configs(self, kinds: list[str]) -> None:
        """A base-config form: every kind gets its default config (else it stays unready)."""
        if self.form.base_config is not None:
            # In parallel: a JavaScript guest's default carries a 12 MB component per kind,
            # and one after another they took 15 s of every cell.
            with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
                for done in [pool.submit(self.put_config, f"conf-{self.form.name}-{kind}",
                                         kind, {}, True) for kind in kinds]:
                    done.result()

    def put_config(self, name: str, kind: str, spec: Any, is_default: bool,
                   program: bool = True) -> Reply:
        """Creates or replaces a provider config (POST by global name; PUT if POST says 409).

        For a base-config form a scenario's default becomes the kind's one default
        ``{...base, settings: S}`` (with S's ``ready`` lifted to the top, where stdworker reads
        readiness) and an override becomes ``{settings: O}``. ``program=False`` leaves out of a
        default what the form's composer runs (its bundle or its fixed graph), which makes
        that composer unready.
        """
        base = self.base_config(kind)
        if is_default and (base is not None or kind in self.form.specs):
            # The kind's one default, under the name put_base_configs gave it.
            name = f"conf-{self.form.name}-{kind}"
        if is_default and program and kind in self.form.specs:
            # The form fixes this kind's default (a CEL graph): scenarios do not configure it.
            spec = self.form.specs[kind]
        elif base is not None:
            if is_default:
                mapped = dict(base, settings=spec)
                if isinstance(spec, dict) and "ready" in spec:
                    mapped["ready"] = spec["ready"]
                spec = mapped
            else:
                spec = {"settings": spec}
        body = {"name": name, "kind": kind, "kind_version": 1, "is_default": is_default,
                "spec": spec}
        bundle = self.form.bundle(kind) if is_default and program else None
        if bundle is not None:
            body["data"] = base64.b64encode(bundle).decode()
        return self._upsert_config(body)

    def put_raw_config(self, name: str, kind: str, spec: Any, is_default: bool) -> Reply:
        """Creates or replaces a provider config with ``spec`` exactly as given and no bundle
        (a CEL graph, whose config is the graph itself)."""
        return self._upsert_config({"name": name, "kind": kind, "kind_version": 1,
                                    "is_default": is_default, "spec": spec})

    def _upsert_config(self, body: dict) -> Reply:
        """POSTs a provider config; if POST says 409, PUTs it by name (POST is create-only)."""
        name = body["name"]
        r = http("POST", self.url("/providerconfigs"), body)
        if r.status == 409:
            r = http("PUT", self.url(f"/providerconfigs/{name}"), body)
        check(r.status in (200, 201),
              f"POST /providerconfigs {name}: HTTP {r.status} {_short(r.body)}")
        return r

    def hold_spec(self, ms: int) -> dict:
        """A spinning compose's spec (conf-cslow, conf-chold) that keeps a composer form busy
        for about ``ms`` milliseconds: the compose takes len(spin)^2 loop steps, sized by the
        form's measured ``spin_rate`` (a sandboxed composer has no clock to sleep on)."""
        return {"spin": list(range(max(1, math.isqrt(int(ms * self.form.spin_rate)))))}

    # ---- event log

    def events(self, name: str | None = None, event: str | None = None,
               kind: str | None = None) -> list[dict]:
        """The worker's event lines, filtered; a torn last line (being written) is skipped."""
        try:
            lines = self.event_log.read_text().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if ((name is None or e.get("name") == name) and (event is None or e.get("event") == event)
                    and (kind is None or e.get("kind") == kind)):
                out.append(e)
        return out


class _Seen(dict):
    """A resource that did not match yet: falsy for ``wait_for`` but kept as 'last seen'."""

    def __bool__(self) -> bool:
        return False


def observe_for(seconds: float, probe: Callable[[], str | None]) -> None:
    """Proves a negative over a window: ``probe`` returns a complaint (failing at once) or
    None, and is re-run until the window closes. The window is an observation period, not a
    synchronisation: nothing is expected to happen during it."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        complaint = probe()
        if complaint:
            raise Failure(complaint)
        time.sleep(0.1)


# --------------------------------------------------------------------------- scenarios

# Scenarios about an SDK's own API, which stdworker's forms (a kind's default config or bundle
# says what runs) cannot express: their plugins get what stdworker reads for them.
STDWORKER_NA: dict[str, str] = {
    "rollup_summary": "an SDK's paged read; stdworker's providers read the subtree for their "
                      "plugin (covered by the rust form stdworker is built on)",
}

SCENARIOS: dict[str, Callable[[Ctx], None]] = {}


def scenario(fn: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
    """Registers a scenario under its function name (in definition order)."""
    SCENARIOS[fn.__name__] = fn
    return fn


def manual_worker(fn: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
    """Marks a scenario that starts the worker itself (it must set state up first)."""
    fn.manual_worker = True  # type: ignore[attr-defined]
    return fn


def converge_env(**env: str) -> Callable[[Callable[[Ctx], None]], Callable[[Ctx], None]]:
    """Marks a scenario whose converge runs with these settings on top of the suite's."""
    def mark(fn: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
        fn.converge_env = env  # type: ignore[attr-defined]
        return fn
    return mark


def worker_connected(ctx: Ctx, name: str = "connected") -> None:
    """Proves the worker has subscribed: a conf-leaf resource gets reconciled."""
    ctx.apply("conf-leaf", name, {"probe": True})
    ctx.wait_ready("conf-leaf", name)


@scenario
def leaf(ctx: Ctx) -> None:
    """A leaf's work reaction sees the spec, generation, attempt and trigger, and its status
    is applied; a spec edit reaches the handler as a new generation."""
    ctx.apply("conf-leaf", "leaf-a", {"v": 1})
    r = ctx.wait_resource("conf-leaf", "leaf-a", "Ready at generation 1",
                          lambda r: r["phase"] == "Ready" and (r["status"] or {}).get("generation") == 1)
    want = {"echo": {"v": 1}, "form": ctx.form.name, "generation": 1, "attempt": 1,
            "trigger": "specChange"}
    check(r["status"] == want, f"status {_short(r['status'])} != {_short(want)}")
    ctx.apply("conf-leaf", "leaf-a", {"v": 2})
    r = ctx.wait_resource("conf-leaf", "leaf-a", "Ready at generation 2",
                          lambda r: r["phase"] == "Ready" and (r["status"] or {}).get("generation") == 2)
    check(r["status"]["echo"] == {"v": 2}, f"echo after edit: {_short(r['status'])}")
    check(r["generation"] == 2, f"resource generation {r['generation']} != 2")
    works = ctx.events(name="leaf-a", event="work")
    check([e["generation"] for e in works] == [1, 2], f"work events: {_short(works)}")
    check(all(e["stage"] == "STAGE_WORK" and e["reaction"] == "work" for e in works),
          f"work events carry the wrong stage/reaction: {_short(works)}")


@scenario
def compose(ctx: Ctx) -> None:
    """A composer's children, edges and value flows are applied in order, and the rollup sees
    the settled subtree."""
    ctx.apply("conf-composite", "comp", {"children": 3})
    if "builtin-rollup" in ctx.form.traits:
        # stdworker's composers roll up with their built-in descendant summary.
        root = ctx.wait_resource(
            "conf-composite", "comp", "Ready with a rollup of 3 ready descendants",
            lambda r: r["phase"] == "Ready"
            and ((r["status"] or {}).get("descendants") or {}).get("ready") == 3, timeout=40)
        want_desc = {"total": 3, "ready": 3, "failed": 0, "by_kind": {"conf-leaf": 3}}
        check(root["status"]["descendants"] == want_desc,
              f"root rollup {_short(root['status'])} != descendants {_short(want_desc)}")
        check(root["status"].get("composed", 3) == 3, f"root status {_short(root['status'])}")
    else:
        root = ctx.wait_resource(
            "conf-composite", "comp", "Ready with a rollup of 3 ready descendants",
            lambda r: r["phase"] == "Ready" and (r["status"] or {}).get("ready") == 3, timeout=40)
        want = {"composed": 3, "descendants": 3, "ready": 3}
        check(root["status"] == want, f"root status {_short(root['status'])} != {_short(want)}")
    for i in range(3):
        child = ctx.wait_ready("conf-leaf", f"comp-{i}")
        spec = child["spec"]
        check(spec.get("index") == i, f"comp-{i} spec {_short(spec)} lacks index {i}")
        if i >= 1:
            check(spec.get("upstream_index") == i - 1,
                  f"comp-{i} spec.upstream_index = {spec.get('upstream_index')!r}, want {i - 1} "
                  f"(value flow from comp-{i - 1} status /echo/index)")
        check((child.get("owner") or {}).get("name") == "comp", f"comp-{i} owner: {child.get('owner')}")
    check(len(ctx.events(name="comp", event="compose")) >= 1, "no compose event logged")
    check(len(ctx.events(name="comp", event="rollup")) >= 1, "no rollup event logged")


@scenario
def rollup_summary(ctx: Ctx) -> None:
    """A rollup that reads nothing gets the subtree's summary and no descendant; one that pages
    (ListDescendants) reads every descendant exactly once."""
    ctx.apply("conf-summary", "sum-none", {"children": 4, "page_size": 0})
    ctx.apply("conf-summary", "sum-paged", {"children": 5, "page_size": 2})
    for name, n, pages in (("sum-none", 4, 0), ("sum-paged", 5, 3)):
        root = ctx.wait_resource(
            "conf-summary", name, f"Ready with a summary of {n} ready descendants",
            lambda r, n=n: r["phase"] == "Ready"
            and ((r["status"] or {}).get("by_phase") or {}).get("Ready") == n, timeout=40)
        read = n if pages else 0
        want = {"sent": 0, "included": False, "total": n, "by_kind": {"conf-leaf": n},
                "by_phase": {"Ready": n}, "not_ready": 0, "pages": pages, "read": read,
                "distinct": read}
        check(root["status"] == want, f"{name} status {_short(root['status'])} != {_short(want)}")


@scenario
def terminal_transient(ctx: Ctx) -> None:
    """A terminal error fails the resource without retries; a transient error is retried with
    the attempt counting up; a handler panic/exception is a transient failure, not a crash."""
    ctx.apply("conf-fail", "term", {"mode": "terminal"})
    ctx.apply("conf-fail", "trans", {"mode": "transient", "times": 2})
    ctx.apply("conf-fail", "boom", {"mode": "panic"})

    r = ctx.wait_resource("conf-fail", "term", "Failed", lambda r: r["phase"] == "Failed")
    failed_at = time.monotonic()
    check("conformance terminal" in (r.get("failure_message") or ""),
          f"term failure_message {r.get('failure_message')!r}")

    r = ctx.wait_ready("conf-fail", "trans")
    check(r["status"] == {"ok": True, "attempt": 3}, f"trans status {_short(r['status'])}")
    attempts = [e["attempt"] for e in ctx.events(name="trans", event="work")]
    check(attempts == [1, 2, 3], f"trans attempts {attempts}, want [1, 2, 3]")

    if "trap-is-terminal" in ctx.form.traits:
        # A sandboxed guest's panic is a trap: deterministic, so terminal (wasm-host).
        r = ctx.wait_resource("conf-fail", "boom", "Failed terminally by its trap",
                              lambda r: r["phase"] == "Failed")
        check(bool(r.get("failure_terminal")) and "Trap" in (r.get("failure_message") or ""),
              f"boom failure is not a terminal trap: {_short(r)}")
    else:
        wait_for("boom to be retried after its panic",
                 lambda: len(ctx.events(name="boom", event="work")) >= 2 or None)
        r = ctx.get("conf-fail", "boom")
        check(r is not None and not r.get("failure_terminal"),
              f"boom failure is terminal: {_short(r)}")
    check(ctx.worker is not None and ctx.worker.alive(), "the worker died on a handler panic")
    ctx.apply("conf-fail", "boom", {"mode": "ok"})
    r = ctx.wait_resource("conf-fail", "boom", "Ready after the spec fix",
                          lambda r: r["phase"] == "Ready" and r["synced_gen"] == 2)

    # A terminal failure must not be retried: watch for at least 2 s past the failure (many
    # retry periods at RETRY_BASE=200ms).
    observe_for(max(0.0, 2.0 - (time.monotonic() - failed_at)),
                lambda: None if len(ctx.events(name="term")) == 1 else
                f"terminal failure was retried: {_short(ctx.events(name='term'))}")
    e = ctx.events(name="term")
    check(len(e) == 1 and e[0]["attempt"] == 1, f"term events {_short(e)}")


@scenario
def deadline(ctx: Ctx) -> None:
    """Past the kind's 1 s task deadline the handler is cancelled (it sees its cancellation)
    and the resource records a failure naming the deadline; a fixed spec then succeeds."""
    ctx.apply("conf-slow", "slow", {"sleep_ms": 5000})
    wait_for("the handler to log `cancelled`",
             lambda: ctx.events(name="slow", event="cancelled"), timeout=15)
    r = ctx.wait_resource("conf-slow", "slow", "a failure naming the deadline",
                          lambda r: "deadline" in (r.get("failure_message") or "").lower())
    check(r["phase"] != "Ready", f"slow is Ready after its deadline: {_short(r)}")
    ctx.apply("conf-slow", "slow", {"sleep_ms": 10})
    r = ctx.wait_resource("conf-slow", "slow", "Ready after the spec fix",
                          lambda r: r["phase"] == "Ready" and r["synced_gen"] == 2)
    check((r["status"] or {}).get("slept_ms") == 10, f"slow status {_short(r['status'])}")


@scenario
def restart(ctx: Ctx) -> None:
    """A worker SIGKILLed with tasks in flight loses nothing: its leases are released, a
    restarted worker finishes every task, and each resource is synced exactly at its
    generation."""
    _restart(ctx, "conf-slow", "work", 20, {"sleep_ms": 600}, 4,
             lambda st: (st or {}).get("slept_ms") == 600, timeout=40)


def _restart(ctx: Ctx, kind: str, event: str, count: int, spec: dict, running: int,
             status_ok: Callable[[Any], bool] | None, timeout: float) -> None:
    """restart for ``count`` resources of ``kind`` whose ``spec`` keeps each task (journaled
    as ``event``) busy for a while; the crash comes once ``running`` tasks have started;
    ``status_ok`` accepts each final status (None: not checked)."""
    names = [f"r-{i:02d}" for i in range(count)]
    for n in names:
        ctx.apply(kind, n, spec)
    wait_for("tasks to be running in the worker",
             lambda: len(ctx.events(kind=kind, event=event)) >= running or None)
    ctx.crash_worker()
    ctx.start_worker()
    for n in names:
        r = ctx.wait_ready(kind, n, timeout=timeout)
        check(r["generation"] == 1 and r["synced_gen"] == 1,
              f"{n}: generation {r['generation']} synced_gen {r['synced_gen']}")
        check(status_ok is None or status_ok(r["status"]), f"{n} status {_short(r['status'])}")
        check(r.get("failure_gen", 0) in (0, 1), f"{n} failure_gen {r.get('failure_gen')}")
    works = ctx.events(kind=kind, event=event)
    check({e["name"] for e in works} == set(names), "not every resource reached a handler")
    rerun = {e["name"] for e in works if sum(w["name"] == e["name"] for w in works) > 1}
    # Otherwise the crash hit an idle worker and the scenario proved nothing.
    check(bool(rerun), "no task was running when the worker was killed")
    ctx.notes.append(f"restart: {len(rerun)} task(s) interrupted by the crash were re-run")


@scenario
@manual_worker
def readiness(ctx: Ctx) -> None:
    """A provider that reports itself unready (its default config says ready=false) gets no
    tasks, and its resources wait (Reconciling, never Failed); when the config flips ready
    the waiting work runs."""
    _readiness(ctx, "conf-ready", lambda ready: ctx.put_config(
        "conf-ready-default", "conf-ready", {"ready": ready}, True))


def _readiness(ctx: Ctx, kind: str, set_ready: Callable[[bool], Any],
               echoes: bool = True) -> None:
    """readiness for ``kind``, whose provider ``set_ready`` makes ready or unready (through
    its default config); ``echoes``: the ready provider's status echoes the spec."""
    set_ready(False)
    ctx.start_worker()
    worker_connected(ctx)
    ctx.apply(kind, "gated", {"x": 1})

    def still_waiting() -> str | None:
        r = ctx.get(kind, "gated")
        if r is None or r["phase"] != "Reconciling":
            return f"gated left Reconciling while unready: {_short(r)}"
        if ctx.events(name="gated"):
            return f"an unready provider ran a task: {_short(ctx.events(name='gated'))}"
        return None
    observe_for(2.5, still_waiting)

    set_ready(True)
    r = ctx.wait_ready(kind, "gated", timeout=15)
    if echoes:
        check((r["status"] or {}).get("echo") == {"x": 1}, f"gated status {_short(r['status'])}")


@scenario
def config(ctx: Ctx) -> None:
    """The task carries the effective config: the kind default deep-merged with a resource's
    override (override wins per key); without a ref the default alone; an edited default
    reaches new work."""
    _config(ctx, "conf-config", lambda r: r["status"]["config"])


def _config(ctx: Ctx, kind: str, seen: Callable[[dict], Any],
            configs: tuple[Any, Any, Any, Any] | None = None,
            put: Callable[[str, Any, bool], Any] | None = None) -> None:
    """config for ``kind``: ``seen`` reads what a Ready resource shows of the config it was
    given; ``configs`` are the (default, override, merged, edited) observations expected, and
    ``put(name, observation, is_default)`` puts the config that produces one (default: the
    observations are the configs, put with the form's put_config)."""
    default, override, want, edited = configs or (
        {"a": 1, "b": {"c": 2}}, {"b": {"d": 3}}, {"a": 1, "b": {"c": 2, "d": 3}},
        {"a": 5, "b": {"c": 2}})
    put = put or (lambda name, spec, is_default: ctx.put_config(name, kind, spec, is_default))
    put(f"{kind}-default", default, True)
    put(f"{kind}-override", override, False)
    ctx.apply(kind, "with-ref", {}, provider_config_ref=f"{kind}-override")
    ctx.apply(kind, "no-ref", {})
    r = ctx.wait_ready(kind, "with-ref")
    check(seen(r) == want, f"with-ref config {_short(r['status'])} != {_short(want)}")
    r = ctx.wait_ready(kind, "no-ref")
    check(seen(r) == default,
          f"no-ref config {_short(r['status'])} != {_short(default)}")
    if "no-bundle-len" not in ctx.form.traits:
        check(r["status"].get("bundle_len") == 0, f"no-ref bundle_len {_short(r['status'])}")

    put(f"{kind}-default", edited, True)
    # The push is asynchronous (NOTIFY, within a second): new work may race it, so each
    # stale answer is followed by a fresh generation until the deadline.
    state = {"n": 0}

    def sees_edit() -> Any:
        r = ctx.get(kind, "after-edit")
        if r is not None and r["phase"] == "Ready" and r["synced_gen"] == r["generation"]:
            if seen(r) == edited:
                return r
            if seen(r) != default:
                raise Failure(f"after-edit config is neither old nor new: {_short(r['status'])}")
        if r is None or (r["phase"] == "Ready" and r["synced_gen"] == r["generation"]):
            state["n"] += 1
            ctx.apply(kind, "after-edit", {"n": state["n"]})
        return _Seen(r or {})
    wait_for("a new resource to see the edited default", sees_edit, timeout=10)
    if state["n"] > 1:
        ctx.notes.append(f"config: the edited default was seen at generation {state['n']}")


@scenario
def finalizer(ctx: Ctx) -> None:
    """DELETE of a finalizer-bearing resource runs its teardown reaction (phase Deleting)
    before the row goes; a transiently failing teardown is retried until it succeeds."""
    ctx.apply("conf-final", "fin-a", {})
    ctx.apply("conf-final", "fin-b", {"delete_failures": 2})
    ctx.wait_ready("conf-final", "fin-a")
    ctx.wait_ready("conf-final", "fin-b")

    r = http("DELETE", ctx.url("/resources/conf-final/fin-a"))
    check(r.status in (200, 202, 204), f"DELETE fin-a: HTTP {r.status} {_short(r.body)}")
    r = ctx.get("conf-final", "fin-a")
    check(r is None or r["phase"] == "Deleting", f"fin-a right after DELETE: {_short(r)}")
    wait_for("fin-a to be gone", lambda: ctx.get("conf-final", "fin-a") is None)
    dels = ctx.events(name="fin-a", event="delete")
    check(len(dels) == 1 and dels[0]["stage"] == "STAGE_DELETE", f"fin-a delete events {_short(dels)}")

    r = http("DELETE", ctx.url("/resources/conf-final/fin-b"))
    check(r.status in (200, 202, 204), f"DELETE fin-b: HTTP {r.status} {_short(r.body)}")
    wait_for("fin-b's first teardown", lambda: ctx.events(name="fin-b", event="delete"))
    # Two failing teardowns mean the row must outlive the first one, in phase Deleting.
    r = ctx.get("conf-final", "fin-b")
    check(r is not None and r["phase"] == "Deleting", f"fin-b after a failed teardown: {_short(r)}")
    wait_for("fin-b to be gone", lambda: ctx.get("conf-final", "fin-b") is None)
    attempts = [e["attempt"] for e in ctx.events(name="fin-b", event="delete")]
    check(attempts == [1, 2, 3], f"fin-b teardown attempts {attempts}, want [1, 2, 3]")


@scenario
def operate(ctx: Ctx) -> None:
    """An operation runs the kind's verb reaction once with its input and records the output;
    a verb the kind does not declare is refused with 422."""
    ctx.apply("conf-leaf", "op-a", {})
    ctx.wait_ready("conf-leaf", "op-a")
    r = http("POST", ctx.url("/resources/conf-leaf/op-a/ops"), {"verb": "ping", "input": {"x": 1}})
    check(r.status in (200, 201, 202) and isinstance(r.body, dict) and r.body.get("uid"),
          f"POST ops: HTTP {r.status} {_short(r.body)}")
    uid = r.body["uid"]

    def finished() -> Any:
        op = http("GET", ctx.url(f"/resources/conf-leaf/op-a/ops/{uid}"))
        check(op.status == 200, f"GET op: HTTP {op.status} {_short(op.body)}")
        if op.body.get("state") in ("failed", "cancelled"):
            raise Failure(f"operation ended {op.body.get('state')}: {_short(op.body)}")
        return op.body if op.body.get("state") == "succeeded" else _Seen(op.body)
    op = wait_for("the operation to succeed", finished)
    want = {"pong": {"x": 1}, "name": "op-a"}
    check(op.get("output") == want, f"output {_short(op.get('output'))} != {_short(want)}")
    ops = ctx.events(name="op-a", event="operate")
    check(len(ops) == 1 and ops[0]["stage"] == "STAGE_OPERATE", f"operate events {_short(ops)}")
    r = http("POST", ctx.url("/resources/conf-leaf/op-a/ops"), {"verb": "nope", "input": None})
    check(r.status == 422, f"unknown verb: HTTP {r.status} {_short(r.body)}, want 422")


@scenario
def cancel(ctx: Ctx) -> None:
    """A spec change, a quarantine and a delete under a running task each send CancelTask with
    that reason (superseded, quarantined, deleted); the handler observes its cancellation;
    the cancelled task's result is never taken (the superseded resource ends Ready with the
    new generation's status, the quarantined one keeps none)."""
    # conf-hold is conf-slow under a 600 s deadline: nothing but the action cancels it.
    _cancel(ctx, "conf-hold", "work", {"sleep_ms": 600_000}, {"sleep_ms": 10},
            lambda st: st == {"slept_ms": 10, "attempt": 1})


def _cancel(ctx: Ctx, kind: str, event: str, hold: dict, quick: dict,
            quick_status: Callable[[Any], bool] | None) -> None:
    """cancel for a ``kind`` whose ``hold`` spec keeps its task (journaled as ``event``)
    running until cancelled and whose ``quick`` spec ends at once with a status that
    ``quick_status`` accepts (None: not checked)."""
    names = {"cx-sup": "superseded", "cx-quar": "quarantined", "cx-del": "deleted"}
    for n in names:
        ctx.apply(kind, n, hold)
    for n in names:
        wait_for(f"{n}'s handler to start", lambda n=n: ctx.events(name=n, event=event))

    ctx.apply(kind, "cx-sup", quick)
    r = http("POST", ctx.url(f"/resources/{kind}/cx-quar/quarantine"))
    check(r.status == 200, f"quarantine cx-quar: HTTP {r.status} {_short(r.body)}")
    r = http("DELETE", ctx.url(f"/resources/{kind}/cx-del"))
    check(r.status in (200, 202, 204), f"DELETE cx-del: HTTP {r.status} {_short(r.body)}")

    for n, reason in names.items():
        got = wait_for(f"{n}'s handler to log `cancelled` ({reason})",
                       lambda n=n: ctx.events(name=n, event="cancelled"), timeout=15)
        e = got[0]
        check(e["generation"] == 1 and e["attempt"] == 1, f"{n} cancelled event {_short(e)}")
        if "no-cancel-reason" not in ctx.form.traits:
            check(e.get("reason") == reason,
                  f"{n} was cancelled with reason {e.get('reason')!r}, want {reason!r}")

    r = ctx.wait_resource(kind, "cx-sup", "Ready at generation 2",
                          lambda r: r["phase"] == "Ready" and r["synced_gen"] == 2)
    check(quick_status is None or quick_status(r["status"]),
          f"cx-sup status {_short(r['status'])}: not the new generation's")
    wait_for("cx-del to be gone", lambda: ctx.get(kind, "cx-del") is None)
    r = ctx.get(kind, "cx-quar")
    check(r is not None and r["phase"] == "Quarantined" and not r["status"],
          f"cx-quar after its cancellation: {_short(r)}")
    works = ctx.events(name="cx-sup", event=event)
    check([e["generation"] for e in works] == [1, 2], f"cx-sup {event} events {_short(works)}")
    for n in ("cx-quar", "cx-del"):
        check(len(ctx.events(name=n, event=event)) == 1,
              f"{n} ran again after its cancellation: {_short(ctx.events(name=n))}")


@scenario
def react(ctx: Ctx) -> None:
    """A reactor binding fires STAGE_REACT with the transition and a dedup token that is stable
    across redeliveries and distinct per resource and generation; a failed reaction is
    redelivered with the same token until it succeeds, and then no more."""
    binding = {"name": "leaf-synced", "watch_kind": "conf-leaf", "transition": "synced",
               "reactor": "conf-react", "enabled": True}
    r = http("POST", ctx.url("/reactor-bindings"), binding)
    check(r.status in (200, 201), f"POST reactor-bindings: HTTP {r.status} {_short(r.body)}")
    ctx.apply("conf-leaf", "rx-ok", {"v": 1})
    ctx.apply("conf-leaf", "rx-retry", {"react_failures": 2})

    def reacts(name: str) -> list[dict]:
        return ctx.events(name=name, event="react")

    ok = wait_for("rx-ok's delivery", lambda: reacts("rx-ok"))
    retry = wait_for("rx-retry's third delivery",
                     lambda: (lambda e: e if len(e) >= 3 else None)(reacts("rx-retry")))
    for e in ok + retry:
        check(e["kind"] == "conf-react" and e["reaction"] == "react"
              and e["stage"] == "STAGE_REACT" and e["transition"] == "TRANSITION_SYNCED"
              and e["generation"] == 1, f"react event {_short(e)}")
    token = ok[0]["dedup_token"]
    check(isinstance(token, str) and token != "", f"rx-ok dedup token {token!r}")
    check([e["attempt"] for e in retry] == [1, 2, 3], f"rx-retry attempts {_short(retry)}")
    tokens = {e["dedup_token"] for e in retry}
    check(len(tokens) == 1, f"rx-retry redelivered with other tokens: {sorted(tokens)}")
    check(token not in tokens, f"rx-ok and rx-retry share the dedup token {token!r}")

    # A new generation is a new transition: a new token. The old deliveries were acked, so
    # nothing repeats meanwhile (a short observation, not a synchronisation).
    ctx.apply("conf-leaf", "rx-ok", {"v": 2})
    got = wait_for("rx-ok's generation-2 delivery",
                   lambda: [e for e in reacts("rx-ok") if e["generation"] == 2])
    check(got[0]["dedup_token"] not in (token, *tokens),
          f"generation 2 reuses a dedup token: {got[0]['dedup_token']!r}")
    observe_for(1.0, lambda: None if len(reacts("rx-retry")) == 3 and len(reacts("rx-ok")) == 2
                else f"a delivery repeated after success: {_short(reacts('rx-retry') + reacts('rx-ok'))}")


@scenario
@converge_env(SHUTDOWN_DRAIN="15s")
def drain(ctx: Ctx) -> None:
    """SIGTERM on converge with a task in flight: the broker sends Drain and waits; the worker
    finishes the task and delivers its result, which is accepted before converge exits 0;
    restarted on the same ports and database, converge gets the worker back and new work
    runs."""
    # conf-hold: no deadline in reach, so only the drain decides when the task may end.
    _drain(ctx, "conf-hold", {"sleep_ms": 1500}, "work", "phase || '|' || synced_gen", "Ready|1",
           lambda st: st == {"slept_ms": 1500, "attempt": 1})


def _drain(ctx: Ctx, kind: str, spec: dict, event: str, column: str, taken: str,
           status_ok: Callable[[Any], bool] | None) -> None:
    """drain for a ``kind`` whose ``spec`` holds its task (journaled as ``event``) in flight
    for a while: SQL ``column`` reads ``taken`` once its result was accepted; ``status_ok``
    accepts its status once Ready (None: not checked)."""
    worker_connected(ctx)
    ctx.apply(kind, "dr-a", spec)
    wait_for("dr-a's handler to start", lambda: ctx.events(name="dr-a", event=event))
    assert ctx.converge is not None and ctx.restart_converge is not None
    stopped = time.monotonic()
    code = ctx.converge.stop(grace=30)
    check(code == 0, f"converge did not exit 0 on SIGTERM (exit {code}):\n{ctx.converge.tail()}")
    took = time.monotonic() - stopped
    # Read while converge is down: the result was taken during the drain, not after it.
    r = subprocess.run(["psql", ctx.db_url, "-Atc",
                        f"SELECT {column} FROM resources WHERE kind = '{kind}' AND name = 'dr-a'"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"psql: {r.stderr.strip()}")
    check(r.stdout.strip() == taken,
          f"dr-a after the drain (converge down): {column} = {r.stdout.strip()!r}, want "
          f"{taken!r} (the in-flight result accepted during the drain)")
    check(ctx.worker is not None and ctx.worker.alive(), "the worker exited on Drain")
    ctx.notes.append(f"drain: converge stopped {took:.1f}s after SIGTERM")

    ctx.restart_converge()
    r2 = ctx.wait_ready(kind, "dr-a")
    check(status_ok is None or status_ok(r2["status"]), f"dr-a status {_short(r2['status'])}")
    works = ctx.events(name="dr-a", event=event)
    check(len(works) == 1, f"dr-a ran again after the drain: {_short(works)}")
    ctx.apply("conf-leaf", "dr-after", {"v": 1})
    ctx.wait_ready("conf-leaf", "dr-after", timeout=60)


@scenario
# The workers' reconnect backoff (up to 5 s) plus a debug converge's boot can outlast the
# default 6 s after which a silent broker's leases are released for others to re-run; the
# scenario is about the resume, so the crashed broker's leases are kept for 20 s, four times
# the backoff's cap. Not longer: the crashed member's shards count as its own for as long,
# and the scenario's last resource may wait that long for the new process to take them over
# (a minute made this cell 62 s in every form).
@converge_env(MEMBER_DEAD_AFTER="20s")
def reconnect(ctx: Ctx) -> None:
    """converge is SIGKILLed while the worker runs a task: the worker finishes it with no
    broker there and holds the result; restarted on the same ports and database, the broker
    gets it back on the worker's new stream (listed in Subscribe's `resumed`, the lease
    adopted) and accepts it exactly once: the task is not run again and new work flows."""
    # conf-hold: no deadline in reach, so the crash decides nothing about the task.
    _reconnect(ctx, "conf-hold", "work", {"sleep_ms": 800},
               lambda st: st == {"slept_ms": 800, "attempt": 1})


def _reconnect(ctx: Ctx, kind: str, event: str, spec: dict,
               status_ok: Callable[[Any], bool] | None) -> None:
    """reconnect for a ``kind`` whose ``spec`` holds its task (journaled as ``event``) for
    under a second; ``status_ok`` accepts its status once Ready (None: not checked)."""
    worker_connected(ctx)
    ctx.apply(kind, "rc-a", spec)
    wait_for("rc-a's handler to start", lambda: ctx.events(name="rc-a", event=event))
    assert ctx.converge is not None and ctx.restart_converge is not None
    ctx.converge.kill()
    # Setup, not an assertion: the handler ends within a second of its start, so by now the
    # worker holds a finished result that no broker has acknowledged.
    time.sleep(2.0)
    check(ctx.worker is not None and ctx.worker.alive(), "the worker exited when its broker died")
    ctx.restart_converge()
    r = ctx.wait_ready(kind, "rc-a", timeout=60)
    check(status_ok is None or status_ok(r["status"]), f"rc-a status {_short(r['status'])}")
    adopted = re.findall(r"adopting resumed leases.*?adopted=(\d+)",
                         ANSI.sub("", ctx.converge.log.read_text(errors="replace")))
    check(any(int(n) >= 1 for n in adopted),
          f"the restarted broker adopted no resumed lease (log lines: {adopted}); the result "
          f"came back some other way")
    works = ctx.events(name="rc-a", event=event)
    check(len(works) == 1, f"rc-a ran again after the reconnect: {_short(works)}")
    ctx.apply("conf-leaf", "rc-after", {"v": 1})
    ctx.wait_ready("conf-leaf", "rc-after", timeout=60)


@scenario
def malformed(ctx: Ctx) -> None:
    """Malformed clients (no Subscribe first, no kinds, unknown or garbage lease tokens, an
    oversized frame) get clean gRPC answers, and the broker keeps serving the form's worker."""
    worker_connected(ctx, "before-probe")
    env = dict(os.environ, BROKER_ADDR=ctx.broker)
    p = subprocess.run(shlex.split(ctx.probe), env=env, capture_output=True, text=True, timeout=120)
    ctx.notes.append("probe: " + "; ".join(p.stdout.split("\n")).strip("; "))
    check(p.returncode == 0, f"conformance-probe exited {p.returncode}:\n{p.stdout}{p.stderr[-1500:]}")
    check(ctx.worker is not None and ctx.worker.alive(), "the form's worker died during the probe")
    ctx.apply("conf-leaf", "after-probe", {"still": "served"})
    ctx.wait_ready("conf-leaf", "after-probe")


def _stored(ctx: Ctx) -> str:
    """Per table that an apply or a compose writes, its row count and the sum of its rows'
    xmin (a row rewritten with the same content still moves it), and the plan requests left."""
    tables = ["resources", "resource_deps", "resource_events", "work_queue", "work_outbox",
              "plan_requests"]
    sql = " || ' ' || ".join(
        f"(SELECT count(*) || ':' || coalesce(sum(xmin::text::numeric), 0) FROM {t})"
        for t in tables)
    r = subprocess.run(["psql", ctx.db_url, "-Atc", f"SELECT {sql}"], capture_output=True,
                       text=True)
    check(r.returncode == 0, f"psql: {r.stderr.strip()}")
    return r.stdout.strip()


def _children(ctx: Ctx, root: str) -> dict[str, dict]:
    """The live children of conf-composite ``root`` (not orphaned, not being deleted): name ->
    spec."""
    r = http("GET", ctx.url(f"/resources/conf-composite/{root}/children?limit=100"))
    check(r.status == 200, f"children of {root}: HTTP {r.status} {_short(r.body)}")
    out = {}
    for c in r.body["resources"]:
        if c.get("phase") in ("Orphaned", "Deleting"):
            continue
        full = ctx.get(c["kind"], c["name"])
        if full is not None:
            out[c["name"]] = full["spec"]
    return out


def _quiet(ctx: Ctx) -> bool:
    """Whether the engine has nothing queued, in flight or waiting to drain."""
    r = subprocess.run(["psql", ctx.db_url, "-Atc",
                        "SELECT (SELECT count(*) FROM work_queue) + (SELECT count(*) FROM "
                        "work_outbox) + (SELECT count(*) FROM rollup_recheck)"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"psql: {r.stderr.strip()}")
    return r.stdout.strip() == "0"


def _plan(ctx: Ctx, root: str, spec: dict) -> dict:
    """POST /resources:plan of conf-composite ``root`` with ``spec``: its one item, checked to
    be a composed update (no warning, no compose error)."""
    body = {"kind": "conf-composite", "kind_version": 1, "name": root, "spec": spec}
    r = http("POST", ctx.url("/resources:plan"), body, timeout=30)
    check(r.status == 200, f"plan: HTTP {r.status} {_short(r.body)}")
    item = r.body["results"][0]
    check(item.get("action") == "update" and item.get("error") is None,
          f"plan of {spec}: not an update: {_short(item)}")
    check(not item.get("warnings") and item.get("compose_error") is None
          and item.get("children") is not None,
          f"plan of {spec}: the composer was not planned: {_short(item)}")
    return item["children"]


@scenario
def plan(ctx: Ctx) -> None:
    """POST /resources:plan of a spec change on a composite asks the form's composer (a dry
    run on its worker; Starlark and CEL too run there, as their manifests name no provider)
    and reports the children it would add, change and remove: exactly what the apply then
    stores; the plan itself stores nothing."""
    ctx.apply("conf-composite", "pl", {"children": 2})
    ctx.wait_ready("conf-leaf", "pl-1", timeout=40)
    ctx.wait_resource("conf-composite", "pl", "Ready", lambda r: r["phase"] == "Ready", timeout=40)
    wait_for("the engine idle", lambda: _quiet(ctx))
    before_children = _children(ctx, "pl")
    before = _stored(ctx)

    grow = _plan(ctx, "pl", {"children": 3})
    shrink = _plan(ctx, "pl", {"children": 1})
    check(_stored(ctx) == before, f"a plan stored something: {before} -> {_stored(ctx)}")
    check(_children(ctx, "pl") == before_children, "a plan changed the children")
    r = ctx.get("conf-composite", "pl")
    check(r is not None and r["spec"] == {"children": 2} and r["generation"] == 1,
          f"a plan changed the composite: {_short(r)}")

    added = {c["name"]: c["spec"] for c in grow["add"]}
    check(set(added) == {"pl-2"} and not grow["change"] and not grow["remove"]
          and grow["unchanged"] == 2, f"plan of 3 children: {_short(grow)}")
    check({c["name"] for c in shrink["remove"]} == {"pl-1"} and not shrink["add"]
          and not shrink["change"] and shrink["unchanged"] == 1,
          f"plan of 1 child: {_short(shrink)}")

    # What the apply stores is what the plan said.
    ctx.apply("conf-composite", "pl", {"children": 3})
    child = ctx.wait_ready("conf-leaf", "pl-2", timeout=40)
    check(child["spec"] == added["pl-2"],
          f"pl-2 stored {_short(child['spec'])}, planned {_short(added['pl-2'])}")
    after = wait_for("the composite's three children", lambda: (
        c := _children(ctx, "pl")) and len(c) == 3 and c)
    check({n: after[n] for n in before_children} == before_children,
          f"the unchanged children changed: {_short(after)}")
    ctx.apply("conf-composite", "pl", {"children": 1})
    wait_for("pl-1 and pl-2 removed", lambda: set(_children(ctx, "pl")) == {"pl-0"} or None)


# --------------------------------------------------------------------------- composer forms

# A composer form (trait `composer`: stdworker's starlark and cel providers) serves the
# compose stage only. The scenarios a composer can serve run against the compose-stage kinds
# of `kinds/composer/` through these variants, in the same cells of the table; the others
# are marked n/a by the form's profile. A composer's engine errors are all terminal by
# design (compose-dsl/README.md: the same input gives the same error), so its transient
# failures are the host's: a compose cut off by its deadline or by a crash, run again.
COMPOSER: dict[str, Callable[[Ctx], None]] = {}


def composer_variant(of: str) -> Callable[[Callable[[Ctx], None]], Callable[[Ctx], None]]:
    """Registers a function as scenario ``of`` for composer forms."""
    def register(fn: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
        check(of in SCENARIOS, f"composer variant of unknown scenario {of}")
        COMPOSER[of] = fn
        return fn
    return register


def composes_status(ctx: Ctx) -> bool:
    """Whether the form's compose reports a status of its own (a CEL graph has none: its
    composite's status is the built-in rollup)."""
    return "statusless-compose" not in ctx.form.traits


@composer_variant("terminal_transient")
def composer_terminal_transient(ctx: Ctx) -> None:
    """A compose that fails on purpose and one that hits a runtime error each fail the
    composite terminally, naming the error, with no retry; the worker survives, and a fixed
    spec composes."""
    ctx.apply("conf-cfail", "term", {"mode": "terminal"})
    ctx.apply("conf-cfail", "boom", {"mode": "error"})
    r = ctx.wait_resource("conf-cfail", "term", "Failed", lambda r: r["phase"] == "Failed")
    failed_at = time.monotonic()
    check(bool(r.get("failure_terminal")) and "conformance" in (r.get("failure_message") or ""),
          f"term failure is not the compose's terminal error: {_short(r)}")
    r = ctx.wait_resource("conf-cfail", "boom", "Failed", lambda r: r["phase"] == "Failed")
    check(bool(r.get("failure_terminal")) and "compose" in (r.get("failure_message") or "").lower(),
          f"boom failure is not the compose's terminal runtime error: {_short(r)}")
    check(ctx.worker is not None and ctx.worker.alive(), "the worker died on a compose error")
    ctx.apply("conf-cfail", "boom", {"mode": "ok"})
    ctx.wait_resource("conf-cfail", "boom", "Ready after the spec fix",
                      lambda r: r["phase"] == "Ready" and r["synced_gen"] == 2)
    # Not retried: watched for 2 s past the failure (many retry periods at RETRY_BASE=200ms).
    observe_for(max(0.0, 2.0 - (time.monotonic() - failed_at)),
                lambda: None if len(ctx.events(name="term")) == 1 else
                f"a terminal compose failure was retried: {_short(ctx.events(name='term'))}")
    e = ctx.events(name="term")
    check(len(e) == 1 and e[0]["attempt"] == 1 and e[0]["event"] == "compose",
          f"term events {_short(e)}")


@composer_variant("deadline")
def composer_deadline(ctx: Ctx) -> None:
    """A compose that would run past the kind's 1 s deadline is stopped (its sandbox child
    killed) and the composite records a failure naming the deadline; the worker survives,
    and a fixed spec composes."""
    ctx.apply("conf-cslow", "slow", ctx.hold_spec(10_000))
    r = ctx.wait_resource("conf-cslow", "slow", "a failure naming the deadline",
                          lambda r: "deadline" in (r.get("failure_message") or "").lower(),
                          timeout=15)
    check(r["phase"] != "Ready", f"slow is Ready after its deadline: {_short(r)}")
    check(ctx.worker is not None and ctx.worker.alive(), "the worker died on a runaway compose")
    ctx.notes.append(f"deadline: {r.get('failure_message')}")
    ctx.apply("conf-cslow", "slow", {"spin": [0]})
    r = ctx.wait_resource("conf-cslow", "slow", "Ready after the spec fix",
                          lambda r: r["phase"] == "Ready" and r["synced_gen"] == 2)
    if composes_status(ctx):
        check((r["status"] or {}).get("spun") == 1, f"slow status {_short(r['status'])}")


@composer_variant("restart")
def composer_restart(ctx: Ctx) -> None:
    """A worker SIGKILLed with composes in flight loses nothing: a restarted worker composes
    every composite, each synced exactly at its generation."""
    spec = ctx.hold_spec(800)
    _restart(ctx, "conf-chold", "compose", 6, spec, 2, spun(ctx, spec), timeout=60)


@composer_variant("readiness")
@manual_worker
def composer_readiness(ctx: Ctx) -> None:
    """A composer whose default config lacks its program (no bundle, no graph) reports itself
    unready and gets no compose; its composites wait (Reconciling, never Failed) until the
    program arrives, then compose."""
    _readiness(ctx, "conf-cready", lambda ready: ctx.put_config(
        "conf-cready-default", "conf-cready", {}, True, program=ready),
        echoes=composes_status(ctx))


def _cel_child_graph(label: str) -> dict:
    """A CEL graph composing one conf-leaf child named after ``label``."""
    return {"resources": [{"id": "c", "template": {
        "kind": "conf-leaf", "kind_version": 1, "name": "${root.name}-" + label, "spec": {}}}]}


@composer_variant("config")
def composer_config(ctx: Ctx) -> None:
    """The compose is given the effective config (the kind default deep-merged with the
    resource's override); an edited default reaches new composes. A CEL composer's config is
    its graph: an override's `resources` replace the default's (arrays are replaced whole),
    which shows in the children it composes."""
    if composes_status(ctx):
        _config(ctx, "conf-cconfig", lambda r: r["status"]["config"])
        return
    labels = ("edited", "override", "default")

    def seen(r: dict) -> str | None:
        return next((lb for lb in labels
                     if ctx.get("conf-leaf", f"{r['name']}-{lb}") is not None), None)

    def put(name: str, label: str, is_default: bool) -> None:
        # The kind's one default keeps the name the cell's base config gave it.
        name = f"conf-{ctx.form.name}-conf-cconfig" if is_default else name
        ctx.put_raw_config(name, "conf-cconfig", _cel_child_graph(label), is_default)
    _config(ctx, "conf-cconfig", seen, ("default", "override", "override", "edited"), put)


@composer_variant("drain")
@converge_env(SHUTDOWN_DRAIN="15s")
def composer_drain(ctx: Ctx) -> None:
    """SIGTERM on converge with a compose in flight: the worker receives Drain, finishes the
    compose and delivers it, and it is accepted before converge exits 0; restarted, converge
    gets the worker back, the composite settles without composing again, and new work runs."""
    spec = ctx.hold_spec(1500)
    _drain(ctx, "conf-chold", spec, "compose", "composed_gen", "1", spun(ctx, spec))


def spun(ctx: Ctx, spec: dict) -> Callable[[Any], bool] | None:
    """Accepts the status of a spinning compose of ``spec`` that ran to its end (None when
    the form's compose reports no status)."""
    if not composes_status(ctx):
        return None
    return lambda st: (st or {}).get("spun") == len(spec["spin"]) ** 2


@composer_variant("cancel")
def composer_cancel(ctx: Ctx) -> None:
    """A spec change, a quarantine and a delete under a running compose each send CancelTask
    with that reason; the composer stops the evaluation (its sandbox child killed) and the
    journal records the cancellation; no cancelled compose's result is taken."""
    quick = {"spin": [0]}
    _cancel(ctx, "conf-chold", "compose", ctx.hold_spec(60_000), quick, spun(ctx, quick))


@composer_variant("reconnect")
@converge_env(MEMBER_DEAD_AFTER="20s")  # as reconnect's
def composer_reconnect(ctx: Ctx) -> None:
    """converge is SIGKILLed while a compose runs: the worker finishes it with no broker there
    and resubscribes listing it in `resumed`. A composite's stage result cannot end its task
    without the pipeline that sent it (its children applied, its rollup run), so the restarted
    broker releases that lease instead of adopting it: the held result is refused, the task
    runs again from its compose, and the composite ends Ready with the compose's status."""
    worker_connected(ctx)
    spec = ctx.hold_spec(500)
    ctx.apply("conf-chold", "rc-a", spec)
    wait_for("rc-a's compose to start", lambda: ctx.events(name="rc-a", event="compose"))
    assert ctx.converge is not None and ctx.restart_converge is not None
    ctx.converge.kill()
    # Setup, not an assertion: the compose ends within a second of its start, so by now the
    # worker holds a finished result that no broker has acknowledged.
    time.sleep(2.0)
    check(ctx.worker is not None and ctx.worker.alive(), "the worker exited when its broker died")
    ctx.restart_converge()
    r = ctx.wait_ready("conf-chold", "rc-a", timeout=60)
    ok = spun(ctx, spec)
    check(ok is None or ok(r["status"]), f"rc-a status {_short(r['status'])}")
    log = ANSI.sub("", ctx.converge.log.read_text(errors="replace"))
    rerun = [int(n) for n in re.findall(r"adopting resumed leases.*?rerun=(\d+)", log)]
    check(any(n >= 1 for n in rerun),
          f"the restarted broker did not release the resumed composite lease (rerun counts "
          f"{rerun}); the held compose result came back some other way")
    composes = ctx.events(name="rc-a", event="compose")
    check(len(composes) == 2, f"rc-a composed {len(composes)} time(s), want 2 (the held "
                              f"result refused, the task run again): {_short(composes)}")
    check(len(ctx.events(name="rc-a", event="rollup")) >= 1, "rc-a's rollup never ran")
    ctx.apply("conf-leaf", "rc-after", {"v": 1})
    ctx.wait_ready("conf-leaf", "rc-after", timeout=60)


@composer_variant("malformed")
def composer_malformed(ctx: Ctx) -> None:
    """malformed, then a composite still composes: the composer shares the worker's stream."""
    malformed(ctx)
    ctx.apply("conf-composite", "after-probe-comp", {"children": 1})
    ctx.wait_ready("conf-composite", "after-probe-comp", timeout=40)


# --------------------------------------------------------------------------- running


@dataclass
class Result:
    """One cell of the table."""

    scenario: str
    form: str
    ok: bool
    seconds: float
    detail: str = ""
    skipped: bool = False


class Runner:
    """Runs scenarios for forms, one environment (database + converge + worker) per cell."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.admin = os.environ.get("CONVERGE_TEST_DATABASE_URL", "")
        if not self.admin:
            sys.exit("CONVERGE_TEST_DATABASE_URL is not set "
                     "(eval \"$(scripts/pg-test-cluster.sh start DIR)\")")
        self.converge = args.converge
        if not os.access(self.converge, os.X_OK):
            sys.exit(f"converge binary not found: {self.converge} (--converge or CONVERGE_BIN)")
        self.manifests = [json.loads(p.read_text()) for p in sorted(KINDS_DIR.glob("*.json"))]
        self.composer_manifests = [json.loads(p.read_text())
                                   for p in sorted(COMPOSER_KINDS_DIR.glob("*.json"))]
        self.root = Path(tempfile.mkdtemp(prefix="conformance-", dir=args.workdir))

    def run(self, forms: list[Form], scenarios: list[str]) -> list[Result]:
        dbs = Databases(self.admin, self.converge, self.root)
        results = []
        try:
            for form in forms:
                for name in scenarios:
                    res = self.cell(dbs, form, name)
                    status = "n/a " if res.skipped else "PASS" if res.ok else "FAIL"
                    print(f"  {status} {name:<20} {form.name:<8} {res.seconds:6.1f}s", flush=True)
                    results.append(res)
        finally:
            dbs.close()
        return results

    def cell(self, dbs: Databases, form: Form, name: str) -> Result:
        skip = form.skip.get(name)
        if skip is None and (form.base_config is not None or form.bundles):
            skip = STDWORKER_NA.get(name)
        if skip is not None:
            return Result(name, form.name, True, 0.0, f"n/a: {skip}", skipped=True)
        fn = (COMPOSER.get(name) if form.composer else None) or SCENARIOS[name]
        manifests = self.manifests + (self.composer_manifests if form.composer else [])
        workdir = self.root / f"{form.name}-{name}"
        workdir.mkdir()
        db = dbs.create()
        started = time.monotonic()
        converge = None
        ctx = None
        env = getattr(fn, "converge_env", {})
        try:
            converge, http_base, broker = self.start_converge(db, workdir, env)
            self.apply_manifests(http_base, manifests)
            ctx = Ctx(form, http_base, broker, workdir, self.args.probe, converge=converge,
                      db_url=db_url(self.admin, db))

            def restart(ctx: Ctx = ctx) -> None:
                # The same ports and database: the worker must find it where it was.
                ports = (urllib.parse.urlsplit(ctx.http_base).port,
                         urllib.parse.urlsplit(ctx.broker).port)
                ctx.converge = self.start_converge(db, workdir, env, ports)[0]
            ctx.restart_converge = restart
            ctx.put_base_configs([m["kind"] for m in manifests])
            if not getattr(fn, "manual_worker", False):
                ctx.start_worker()
            fn(ctx)
            self.stop_worker(ctx)
            ok, detail = True, "\n".join(ctx.notes)
        except Failure as e:
            ok, detail = False, str(e) + self.logs(ctx, ctx.converge if ctx else converge)
        except Exception as e:  # noqa: BLE001 - a broken environment is this cell's failure
            ok, detail = False, f"{type(e).__name__}: {e}" + self.logs(ctx, ctx.converge if ctx else converge)
        finally:
            if ctx is not None and ctx.worker is not None:
                ctx.worker.kill()
            if ctx is not None:
                converge = ctx.converge
            if converge is not None:
                converge.stop(grace=5)
            dbs.drop(db)
        return Result(name, form.name, ok, time.monotonic() - started, detail)

    def start_converge(self, db: str, workdir: Path, extra: dict[str, str] | None = None,
                       ports: tuple[int | None, int | None] | None = None) -> tuple[Proc, str, str]:
        """Starts ``converge serve`` on ``db`` (on ``ports`` (HTTP, gRPC) if given, else free
        ones) with the suite's settings and a scenario's ``extra``; waits for /readyz."""
        hp, gp = ports if ports is not None else (free_port(), free_port())
        env = {"PATH": os.environ.get("PATH", ""), "DATABASE_URL": db_url(self.admin, db),
               "LISTEN_ADDR": f"127.0.0.1:{hp}", "BROKER_LISTEN_ADDR": f"127.0.0.1:{gp}",
               "LOG_LEVEL": os.environ.get("CONVERGE_LOG_LEVEL", "info"), "NO_COLOR": "1",
               **CONVERGE_ENV, **(extra or {})}
        proc = Proc([self.converge, "serve"], env, workdir / "converge.log")
        base = f"http://127.0.0.1:{hp}"

        def ready() -> bool:
            check(proc.alive(), f"converge exited during boot:\n{proc.tail()}")
            return http("GET", base + "/readyz", timeout=2).status == 200
        wait_for("converge /readyz", ready, timeout=30)
        return proc, base, f"http://127.0.0.1:{gp}"

    @staticmethod
    def apply_manifests(base: str, manifests: list[dict]) -> None:
        for m in manifests:
            r = http("PUT", f"{base}/api/v1/kinds/{m['kind']}/manifest", m)
            check(r.status in (200, 201), f"manifest {m['kind']}: HTTP {r.status} {_short(r.body)}")

    @staticmethod
    def stop_worker(ctx: Ctx) -> None:
        """The contract's last rule: SIGTERM drains and exits 0."""
        if ctx.worker is None:
            return
        code = ctx.worker.stop(grace=10)
        check(code == 0, f"worker did not exit 0 on SIGTERM (exit {code}):\n{ctx.worker.tail()}")

    @staticmethod
    def logs(ctx: Ctx | None, converge: Proc | None) -> str:
        parts = []
        if ctx is not None and ctx.worker is not None:
            parts.append(f"--- worker log tail ({ctx.worker.log})\n{ctx.worker.tail()}")
        if converge is not None:
            parts.append(f"--- converge log tail ({converge.log})\n{converge.tail(15)}")
        return ("\n" + "\n".join(parts)) if parts else ""


def print_table(results: list[Result], forms: list[Form], scenarios: list[str]) -> None:
    cells = {(r.scenario, r.form): r for r in results}
    width = 16
    print()
    print(f"{'scenario':<20}" + "".join(f"{f.name:<{width}}" for f in forms))
    for s in scenarios:
        row = f"{s:<20}"
        for f in forms:
            r = cells.get((s, f.name))
            if r is None:
                row += f"{'-':<{width}}"
            elif r.skipped:
                row += f"{'n/a':<{width}}"
            else:
                row += f"{('PASS' if r.ok else 'FAIL') + f' {r.seconds:5.1f}s':<{width}}"
        print(row)
    failed = [r for r in results if not r.ok]
    skipped = [r for r in results if r.skipped]
    passed = len(results) - len(failed) - len(skipped)
    print(f"\n{passed}/{len(results) - len(skipped)} passed"
          + (f" ({len(skipped)} n/a: not supported by the form)" if skipped else ""))
    if failed:
        print("\nFailures\n========")
        for r in failed:
            print(f"\n[{r.form}] {r.scenario}:\n{r.detail}")
    reasons: dict[tuple[str, str], list[str]] = {}
    for r in skipped:
        reasons.setdefault((r.form, r.detail), []).append(r.scenario)
    if reasons:
        print("\nNot applicable\n==============")
        for (form, why), names in reasons.items():
            print(f"[{form}] {', '.join(names)}: {why.removeprefix('n/a: ')}")
    notes = [r for r in results if r.ok and r.detail and not r.skipped]
    if notes:
        print("\nNotes\n=====")
        for r in notes:
            print(f"[{r.form}] {r.scenario}: {r.detail}")


def parse_form(spec: str) -> Form:
    name, sep, command = spec.partition("=")
    if not sep or not name or not command.strip():
        raise argparse.ArgumentTypeError(f"--form wants NAME='command line', got {spec!r}")
    return Form(name, command)


def parse_form_config(spec: str) -> tuple[str, dict]:
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--form-config wants NAME=path.json, got {spec!r}")
    try:
        return name, json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise argparse.ArgumentTypeError(f"--form-config {name}: {e}") from e


def parse_form_profile(spec: str) -> tuple[str, dict]:
    """NAME=profile.json: ``{"base_config", "bundles", "traits", "skip"}`` (conformance/README.md);
    bundle paths are relative to the profile's directory, after expanding variables and ``~``."""
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--form-profile wants NAME=profile.json, got {spec!r}")
    try:
        profile = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise argparse.ArgumentTypeError(f"--form-profile {name}: {e}") from e
    unknown = set(profile) - {"base_config", "bundles", "specs", "traits", "skip", "about",
                              "kind_base_config", "spin_rate"}
    if unknown:
        raise argparse.ArgumentTypeError(f"--form-profile {name}: unknown keys {sorted(unknown)}")
    here = Path(path).parent
    bundles: dict[str, Path | None] = {}
    for kind, rel in (profile.get("bundles") or {}).items():
        if rel is None:  # this kind's default carries no bundle
            bundles[kind] = None
            continue
        # `$VAR`/`${VAR}` and `~` expand first: a built artefact outside the tree (the JS
        # guest) is named by the variable its build script writes it to.
        p = (here / os.path.expanduser(os.path.expandvars(rel))).resolve()
        if not p.exists():
            raise argparse.ArgumentTypeError(f"--form-profile {name}: bundle {p} does not exist")
        bundles[kind] = p
    profile["bundles"] = bundles
    specs = {}
    for kind, rel in (profile.get("specs") or {}).items():
        try:
            specs[kind] = json.loads((here / rel).read_text())
        except (OSError, ValueError) as e:
            raise argparse.ArgumentTypeError(f"--form-profile {name}: spec {rel}: {e}") from e
    profile["specs"] = specs
    return name, profile


def default_converge() -> str:
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/converge-target"))
    return os.environ.get("CONVERGE_BIN", os.path.join(target, "debug", "converge"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--form", action="append", type=parse_form, required=True,
                    help="NAME='worker command line' (repeatable)")
    ap.add_argument("--form-config", action="append", type=parse_form_config, default=[],
                    help="NAME=base-config.json: the form runs what its kinds' default provider "
                         "config says (stdworker exec)")
    ap.add_argument("--form-profile", action="append", type=parse_form_profile, default=[],
                    help="NAME=profile.json: base config, bundles, traits and skipped scenarios "
                         "of a form (stdworker wasm)")
    ap.add_argument("--only", default="", help="comma-separated scenarios (default: all)")
    ap.add_argument("--converge", default=default_converge(), help="the converge binary")
    ap.add_argument("--probe", default=os.environ.get("CONFORMANCE_PROBE", ""),
                    help="the conformance-probe command (the malformed scenario needs it)")
    ap.add_argument("--workdir", default=None, help="where logs go (default: a temp dir)")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = ap.parse_args()
    if args.list:
        for name, fn in SCENARIOS.items():
            print(f"{name}: {(fn.__doc__ or '').split(chr(10))[0]}")
        return 0
    scenarios = [s for s in args.only.split(",") if s] or list(SCENARIOS)
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenarios: {', '.join(unknown)} (have: {', '.join(SCENARIOS)})")
    if "malformed" in scenarios and not args.probe:
        ap.error("the malformed scenario needs --probe (or CONFORMANCE_PROBE)")
    names = [f.name for f in args.form]
    for name, base in args.form_config:
        if name not in names:
            ap.error(f"--form-config {name}: no such --form")
        next(f for f in args.form if f.name == name).base_config = base
    for name, profile in args.form_profile:
        if name not in names:
            ap.error(f"--form-profile {name}: no such --form")
        form = next(f for f in args.form if f.name == name)
        if "base_config" in profile:
            form.base_config = profile["base_config"]
        form.bundles = profile["bundles"]
        form.specs = profile["specs"]
        form.traits = set(profile.get("traits") or [])
        form.skip = dict(profile.get("skip") or {})
        form.kind_base = dict(profile.get("kind_base_config") or {})
        form.spin_rate = float(profile.get("spin_rate") or 0.0)
        if form.composer and form.spin_rate <= 0:
            ap.error(f"--form-profile {name}: a composer form needs a positive spin_rate")
        bad = set(form.skip) - set(SCENARIOS)
        if bad:
            ap.error(f"--form-profile {name}: skip names unknown scenarios {sorted(bad)}")
    if len(set(names)) != len(names):
        ap.error("form names must be unique")
    runner = Runner(args)
    print(f"conformance: {len(args.form)} form(s) x {len(scenarios)} scenario(s); logs in {runner.root}")
    results = runner.run(args.form, scenarios)
    print_table(results, args.form, scenarios)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
