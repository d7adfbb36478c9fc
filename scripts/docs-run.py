#!/usr/bin/env python3
"""Runs every shell block of the READMEs against a live converge, as a reader would paste them.

    scripts/docs-run.py [FILE.md ...]    # default: README.md and examples/*/README.md
    scripts/docs-run.py --list [FILE...] # print the blocks and their markers, run nothing
    scripts/docs-run.py --self-test      # check the runner itself on sample documents

Every fenced block labelled sh, bash, shell or console (console: the `$ ` lines) runs, in
document order, from the repository root, with $CARGO_TARGET_DIR/debug first on PATH (so a
block says `converge`, `conctl`, `stdworker`, `hello-worker` as a reader would) and a fresh
converge per file: `converge dev` on its usual addresses (API 127.0.0.1:8080, broker
127.0.0.1:9090) over a fresh database. Each block is one bash script; the block fails at the
first command that fails (errexit, pipefail, and an `a && b` whose `a` fails), and the step
fails with the file, line, command and output. A file stops at its first failure (later
blocks build on earlier ones); the other files still run. Every process a block leaves
running (`cmd &`) is killed, by its process group, when its file is done.

Markers: an HTML comment directly before a block's fence (blank lines allowed), invisible on
GitHub, changes how that block runs:

    <!-- docs-run: background [wait="CMD"] [timeout=SECS] [env="K=V ..."] -->
        The block starts a long-running process (a server, a worker, a watch): it is started and
        left running; the next block starts at once, or, with `wait`, once CMD succeeds (retried
        every 0.25 s for up to `timeout`, default 60 s). It must still be running, or have
        exited 0, when its file is done; then it is killed.
    <!-- docs-run: starts-converge -->
        The block is the reader's `converge dev`: it runs in the background with DATABASE_URL
        set to the file's fresh database, and the runner waits for /readyz. A file without
        one gets a `converge dev` started by the runner before its first block.
    <!-- docs-run: skip reason="WHY" -->
        Not run (only checked by `bash -n`); the reason is printed. Skips must be rare: a
        release build, a benchmark, a Kubernetes cluster. Lines after the first line of the
        comment, if any, are run instead of the block (same rules as a block): the cheap
        state the skipped commands would have left, e.g. what demo.sh sets up.
    <!-- docs-run: expect-fail -->
        The block must fail (a documented error).
    <!-- docs-run: fetch -->
        The block installs what later blocks need from a package registry (`npm ci`, a Go
        build, a Python venv from a lock): it runs before everything else, before the runner
        enters its network namespace (which has no route to a registry), with no converge;
        every file's fetch blocks in order, each with a 600 s limit unless it says otherwise.
        Later blocks then find the packages in the caches and trees it filled. A file whose
        fetch block fails is reported as failed and not run.
    Any marker may add `timeout=SECS` (a foreground block's limit, default 120 s) and
    `env="K=V ..."`: variables the runner adds to that block's environment ($VARS expanded),
    for a knob the docs describe (e.g. a prebuilt binary instead of a release build); a
    marker of options alone (`<!-- docs-run: timeout=300 -->`) runs the block as usual.

The environment of a block is the runner's, less what would point it elsewhere (DATABASE_URL,
CONVERGE_*, BROKER_*, WORKER_*, ...). `curl` runs with --fail-with-body unless the command
already says -f: an HTTP error (a 415, a 404) fails the block, as it would fail the reader.

When it can, the runner moves itself into a private network namespace (unshare -n, or -rn
without root) with only a loopback interface, so the fixed ports of the docs never collide
with anything else on the machine; otherwise it refuses to start while they are in use. The
database is CONVERGE_TEST_DATABASE_URL (+ CONVERGE_TEST_PG_DIR, its socket directory, which
reaches it from inside the namespace); without it the runner starts its own cluster with
scripts/pg-test-cluster.sh. Each file gets a fresh database, dropped afterwards.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import os
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHELL_LANGS = {"sh", "bash", "shell", "console"}
FENCE_RE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([A-Za-z0-9_+-]*)")
MARKER_START = "<!-- docs-run:"
KINDS = {"run", "background", "starts-converge", "skip", "expect-fail", "fetch"}
API = "http://127.0.0.1:8080"
PORTS = (8080, 9090, 8081)
FOREGROUND_TIMEOUT = 120.0
FETCH_TIMEOUT = 600.0
WAIT_TIMEOUT = 60.0
OUTPUT_TAIL = 60
LINE_MAX = 300
# Variables a fresh shell would not have: they would point a block at something else.
DROP_ENV_PREFIXES = (
    "CONVERGE_",
    "BROKER_",
    "WORKER_",
    "STDWORKER_",
    "CLASSIC_",
    "DEMO_",
    "TLS_",
    "AUTH",
    "GRPC_",
)
DROP_ENV = {"DATABASE_URL", "ROLE", "LISTEN_ADDR", "HEALTH_ADDR", "LOG_LEVEL", "LOG_FORMAT", "RUST_LOG"}


class DocsError(Exception):
    """A problem with a document itself (a stray marker, an unclosed fence)."""


@dataclasses.dataclass
class Marker:
    kind: str  # "run" when there is none
    line: int = 0
    reason: str = ""
    wait: str = ""
    timeout: float | None = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    instead: list[tuple[int, str]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Block:
    path: str  # relative to ROOT
    line: int  # the fence's line, 1-based
    lang: str
    lines: list[tuple[int, str]]  # (file line, text) of the script
    marker: Marker


def parse_marker(text: str, line: int, path: str) -> Marker:
    body = text.split(MARKER_START, 1)[1].rsplit("-->", 1)[0]
    first, _, rest = body.partition("\n")
    try:
        words = shlex.split(first)
    except ValueError as e:
        raise DocsError(f"{path}:{line}: marker does not parse: {e}") from None
    if words and "=" in words[0]:
        words.insert(0, "run")  # options only: an ordinary block with, say, a longer timeout
    if not words or words[0] not in KINDS:
        raise DocsError(f"{path}:{line}: marker must start with one of {sorted(KINDS)}: {first.strip()!r}")
    m = Marker(kind=words[0], line=line)
    for w in words[1:]:
        key, eq, value = w.partition("=")
        if not eq:
            raise DocsError(f"{path}:{line}: marker option {w!r} is not KEY=VALUE")
        if key == "reason":
            m.reason = value
        elif key == "wait":
            m.wait = value
        elif key == "timeout":
            m.timeout = float(value)
        elif key == "env":
            for pair in shlex.split(value):
                k, _, v = pair.partition("=")
                m.env[k] = v
        else:
            raise DocsError(f"{path}:{line}: unknown marker option {key!r}")
    if m.kind == "skip" and not m.reason:
        raise DocsError(f"{path}:{line}: a skip needs reason=\"...\"")
    if rest.strip():
        if m.kind != "skip":
            raise DocsError(f"{path}:{line}: only a skip marker may carry commands to run instead")
        lines = rest.split("\n")
        dedented = textwrap.dedent("\n".join(lines)).split("\n")
        m.instead = [(line + 1 + i, t) for i, t in enumerate(dedented)]
    return m


def parse(path: str) -> list[Block]:
    """The shell blocks of one Markdown file, each with its marker (kind "run" if none)."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks: list[Block] = []
    pending: Marker | None = None
    i = 0
    while i < len(lines):
        text = lines[i]
        stripped = text.strip()
        if stripped.startswith(MARKER_START):
            start = i
            while "-->" not in lines[i]:
                i += 1
                if i >= len(lines):
                    raise DocsError(f"{path}:{start + 1}: marker comment never closes")
            if pending is not None:
                raise DocsError(f"{path}:{pending.line}: marker not followed by a shell block")
            pending = parse_marker("\n".join(lines[start : i + 1]), start + 1, path)
            i += 1
            continue
        fence = FENCE_RE.match(text)
        if fence:
            indent, ticks, lang = fence.group(1), fence.group(2), fence.group(3).lower()
            start = i
            body: list[tuple[int, str]] = []
            i += 1
            while True:
                if i >= len(lines):
                    raise DocsError(f"{path}:{start + 1}: code fence never closes")
                t = lines[i]
                if t.strip().startswith(ticks[0] * len(ticks)) and t.strip().strip(ticks[0]) == "":
                    break
                body.append((i + 1, t[len(indent) :] if t.startswith(indent) else t.lstrip()))
                i += 1
            i += 1
            if lang in SHELL_LANGS:
                if lang == "console":
                    body = console_commands(body)
                blocks.append(Block(path, start + 1, lang, body, pending or Marker("run")))
            elif pending is not None:
                raise DocsError(f"{path}:{pending.line}: marker before a {lang or 'plain'} block, not a shell one")
            pending = None
            continue
        if stripped and pending is not None:
            raise DocsError(f"{path}:{pending.line}: marker not directly before a shell block")
        i += 1
    if pending is not None:
        raise DocsError(f"{path}:{pending.line}: marker not followed by a shell block")
    return blocks


def console_commands(body: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """A console block's commands: `$ ` lines and their backslash continuations."""
    out: list[tuple[int, str]] = []
    cont = False
    for n, t in body:
        if cont:
            out.append((n, t))
        elif t.startswith("$ "):
            out.append((n, t[2:]))
        else:
            continue
        cont = t.rstrip().endswith("\\")
    return out


def syntax_ok(text: str) -> tuple[bool, str]:
    r = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
    return r.returncode == 0, r.stderr.strip()


def split_commands(lines: list[tuple[int, str]], where: str) -> list[tuple[int, str]]:
    """Top-level commands of a script: (first line, text), a multi-line one whole."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    first = 0
    for n, t in lines:
        if not buf:
            if not t.strip() or t.strip().startswith("#"):
                continue
            first = n
        buf.append(t)
        text = "\n".join(buf)
        if text.rstrip().endswith("\\"):
            continue
        ok, _ = syntax_ok(text)
        if ok:
            out.append((first, text))
            buf = []
    if buf:
        _, err = syntax_ok("\n".join(buf))
        raise DocsError(f"{where}:{first}: shell syntax error: {err}")
    return out


def script_for(commands: list[tuple[int, str]]) -> str:
    """The bash script of a block: errexit, and each command's line recorded before it runs."""
    parts = [
        "set -eE -o pipefail",
        'trap \'__docs_rc=$?; printf "%s %s\\n" "$__docs_line" "$__docs_rc" >"$DOCS_RUN_FAIL"; exit "$__docs_rc"\' ERR',
    ]
    for n, text in commands:
        parts.append(f"__docs_line={n}; printf '%s\\n' {n} >\"$DOCS_RUN_AT\"")
        parts.append(text)
        # `a && b` whose `a` fails is not an errexit failure; a pasted block stops there too.
        parts.append(
            f'__docs_rc=$?; if [ "$__docs_rc" -ne 0 ]; then printf "%s %s\\n" {n} "$__docs_rc" >"$DOCS_RUN_FAIL"; exit "$__docs_rc"; fi'
        )
    return "\n".join(parts) + "\n"


# --- processes ----------------------------------------------------------------------------


class Proc:
    """A block's bash, in a session of its own (its `&` children share its process group)."""

    def __init__(self, name: str, script: str, env: dict[str, str], workdir: str):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix="blk-", dir=workdir)
        self.log = os.path.join(self.dir, "output")
        self.at = os.path.join(self.dir, "at")
        self.fail = os.path.join(self.dir, "fail")
        with open(os.path.join(self.dir, "script.sh"), "w") as f:
            f.write(script)
        env = dict(env, DOCS_RUN_AT=self.at, DOCS_RUN_FAIL=self.fail)
        with open(self.log, "wb") as out:
            self.p = subprocess.Popen(
                ["bash", os.path.join(self.dir, "script.sh")],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started = time.monotonic()

    def failed_line(self) -> int | None:
        for f in (self.fail, self.at):
            try:
                with open(f) as fh:
                    return int(fh.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        return None

    def output(self, tail: int = OUTPUT_TAIL) -> str:
        try:
            with open(self.log, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        cut = [line if len(line) <= LINE_MAX else line[:LINE_MAX] + " ..." for line in lines[-tail:]]
        more = f"    ... ({len(lines) - tail} earlier lines)\n" if len(lines) > tail else ""
        return more + "\n".join("    | " + line for line in cut)

    def kill(self) -> None:
        kill_all([self])


def kill_all(procs: list[Proc], grace: float = 5.0) -> None:
    """SIGTERM to each one's whole process group at once, SIGKILL to what is left after `grace`."""

    def alive(p: Proc) -> bool:
        p.p.poll()
        reap_orphans()
        try:
            os.killpg(p.p.pid, 0)
            return True
        except ProcessLookupError:
            return False

    for p in procs:
        try:
            os.killpg(p.p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    left = [p for p in procs if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if alive(p)]
    for p in left:
        try:
            os.killpg(p.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in procs:
        try:
            p.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def become_subreaper() -> None:
    """Orphans of the blocks (`cmd &` whose shell has exited) become our children, not init's,
    so a killed one is reaped at once instead of lingering as a zombie of its group."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def reap_orphans() -> None:
    """Reaps exited children nobody waits for (only called while stopping a file's processes)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# Straight to the address: an http_proxy in the environment must not answer for converge.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_ok(url: str) -> bool:
    try:
        with DIRECT.open(url, timeout=2) as r:
            return 200 <= r.status < 300
    except OSError:
        return False


# --- the environment ----------------------------------------------------------------------


def loopback_up() -> None:
    """Brings `lo` up in a fresh network namespace (SIOCGIFFLAGS / SIOCSIFFLAGS)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(s, 0x8913, ifr))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sh", b"lo", flags | 0x1))
    finally:
        s.close()


def enter_netns() -> None:
    """Re-executes this script in a private network namespace when unshare allows it."""
    if os.environ.get("DOCS_RUN_NETNS") or not shutil.which("unshare"):
        return
    if not os.environ.get("CONVERGE_TEST_PG_DIR") and os.environ.get("CONVERGE_TEST_DATABASE_URL"):
        return  # a database reachable only over TCP: stay in the host's network
    if os.getuid() != 0 and not os.environ.get("CONVERGE_TEST_DATABASE_URL"):
        return  # as root of a user namespace, pg-test-cluster.sh could not switch users
    for flags in (["-n"], ["-rn"]):
        if subprocess.run(["unshare", *flags, "true"], capture_output=True).returncode == 0:
            env = dict(os.environ, DOCS_RUN_NETNS="1")
            os.execvpe("unshare", ["unshare", *flags, sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env)
    print("docs-run: no private network namespace (unshare refused); using the host's ports", flush=True)


def ports_free() -> list[int]:
    busy = []
    for p in PORTS:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", p)) == 0:
                busy.append(p)
    return busy


class Database:
    """The PostgreSQL server: the test one (CONVERGE_TEST_*) or a cluster started here."""

    def __init__(self, workdir: str):
        self.own_dir = ""
        url = os.environ.get("CONVERGE_TEST_DATABASE_URL", "")
        sockdir = os.environ.get("CONVERGE_TEST_PG_DIR", "")
        if not url:
            self.own_dir = os.path.join(workdir, "pg")
            out = subprocess.run(
                [os.path.join(ROOT, "scripts/pg-test-cluster.sh"), "start", self.own_dir],
                check=True,
                text=True,
                stdout=subprocess.PIPE,
            ).stdout
            for m in re.finditer(r"export (\w+)='([^']*)'", out):
                if m.group(1) == "CONVERGE_TEST_DATABASE_URL":
                    url = m.group(2)
                elif m.group(1) == "CONVERGE_TEST_PG_DIR":
                    sockdir = m.group(2)
        u = urllib.parse.urlsplit(url)
        self.user = u.username or "postgres"
        self.port = u.port or 5432
        # Over the socket when known: it reaches the server from a private network namespace.
        self.host = sockdir or u.hostname or "127.0.0.1"
        bindir = subprocess.run(
            [os.path.join(ROOT, "scripts/pg-test-cluster.sh"), "bindir"], check=True, text=True, stdout=subprocess.PIPE
        ).stdout.strip()
        self.psql = [os.path.join(bindir, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1"]

    def sql(self, statement: str) -> None:
        subprocess.run(
            [*self.psql, "-h", self.host, "-p", str(self.port), "-U", self.user, "-d", "postgres", "-c", statement],
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def url(self, db: str) -> str:
        if self.host.startswith("/"):
            return f"postgres://{self.user}@localhost:{self.port}/{db}?host={urllib.parse.quote(self.host)}"
        return f"postgres://{self.user}@{self.host}:{self.port}/{db}"

    def close(self) -> None:
        if self.own_dir:
            subprocess.run([os.path.join(ROOT, "scripts/pg-test-cluster.sh"), "stop", self.own_dir])


def block_env(bindir: str, shim: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in DROP_ENV and not k.startswith(DROP_ENV_PREFIXES) and not k.startswith("DOCS_RUN")
    }
    env["PATH"] = f"{shim}:{bindir}:{env.get('PATH', '/usr/bin:/bin')}"
    env["CARGO_TARGET_DIR"] = os.path.dirname(bindir)
    return env


def write_curl_shim(shim: str) -> None:
    real = shutil.which("curl")
    if not real:
        return
    os.makedirs(shim, exist_ok=True)
    path = os.path.join(shim, "curl")
    with open(path, "w") as f:
        q = shlex.quote(real)
        f.write(
            "#!/bin/sh\n"
            "# docs-run: an HTTP error fails the command, unless it already chose -f.\n"
            'for a in "$@"; do\n'
            '    case "$a" in\n'
            f'    --fail | --fail-with-body) exec {q} "$@" ;;\n'
            "    --*) ;;\n"
            f'    -*f*) exec {q} "$@" ;;\n'
            "    esac\n"
            "done\n"
            f'exec {q} --fail-with-body "$@"\n'
        )
    os.chmod(path, 0o755)


# --- running ------------------------------------------------------------------------------


class Failure(Exception):
    pass


class FileRun:
    def __init__(
        self,
        path: str,
        blocks: list[Block],
        db: Database | None,
        env: dict[str, str],
        workdir: str,
        n: int,
        fetch: bool = False,
    ):
        """`fetch`: run only the file's fetch blocks (the pass before the network namespace)."""
        self.path = path
        self.fetch = fetch
        self.blocks = [b for b in blocks if b.marker.kind == "fetch"] if fetch else blocks
        self.db = db
        self.env = env
        self.workdir = workdir
        self.dbname = f"docs_run_{os.getpid()}_{n}"
        self.procs: list[Proc] = []
        self.background: list[tuple[Block, Proc]] = []
        self.converge: Proc | None = None
        self.ran = 0
        self.skipped = 0

    def run(self) -> bool:
        busy = [] if os.environ.get("DOCS_RUN_NETNS") or self.db is None else ports_free()
        if busy:
            print(f"docs-run: {self.path}: ports {busy} are in use; the docs need them free", flush=True)
            return False
        if self.db is not None:
            self.db.sql(f"CREATE DATABASE {self.dbname}")
        try:
            if self.db is not None and not any(b.marker.kind == "starts-converge" for b in self.blocks):
                self.start_converge(None)
            for i, b in enumerate(self.blocks):
                try:
                    self.check_background()
                    self.run_block(b)
                except Failure as e:
                    print(str(e), flush=True)
                    self.converge_log()
                    left = len(self.blocks) - i - 1
                    if left:
                        print(f"docs-run: {self.path}: the {left} later block(s) were not run", flush=True)
                    return False
            try:
                self.check_background()
            except Failure as e:
                print(str(e), flush=True)
                return False
            return True
        finally:
            self.stop()

    def where(self, b: Block, line: int | None = None) -> str:
        return f"{self.path}:{line or b.line}"

    def start_converge(self, b: Block | None) -> None:
        assert self.db is not None, "the self-test starts no converge"
        env = dict(self.env, DATABASE_URL=self.db.url(self.dbname), SHUTDOWN_DRAIN="200ms")
        if b is None:
            print(f"docs-run: {self.path}: converge dev (fresh database {self.dbname})", flush=True)
            env["LOG_LEVEL"] = "warn"
            proc = Proc("converge", "exec converge dev\n", env, self.workdir)
        else:
            env.update(self.expand(b.marker.env))
            proc = self.spawn(b, b.lines, env)
            self.background.append((b, proc))
        self.converge = proc
        deadline = time.monotonic() + (b.marker.timeout if b and b.marker.timeout else WAIT_TIMEOUT)
        while not http_ok(f"{API}/readyz"):
            if proc.p.poll() is not None:
                raise Failure(self.report(b, proc, f"converge exited ({proc.p.returncode}) before it was ready"))
            if time.monotonic() > deadline:
                raise Failure(self.report(b, proc, "converge was not ready in time"))
            time.sleep(0.1)
        if b is None:
            self.procs.append(proc)

    def expand(self, env: dict[str, str]) -> dict[str, str]:
        """A marker's env values with $VAR / ${VAR} taken from the blocks' environment."""

        def var(m: re.Match[str]) -> str:
            return self.env.get(m.group(1) or m.group(2), "")

        return {k: re.sub(r"\$(?:(\w+)|\{(\w+)\})", var, v) for k, v in env.items()}

    def spawn(self, b: Block, lines: list[tuple[int, str]], env: dict[str, str]) -> Proc:
        script = script_for(split_commands(lines, self.path))
        proc = Proc(f"{self.path}:{b.line}", script, env, self.workdir)
        self.procs.append(proc)
        return proc

    def run_block(self, b: Block) -> None:
        m = b.marker
        start = time.monotonic()
        label = f"docs-run: {self.where(b)}"
        if m.kind == "skip":
            ok, err = syntax_ok("\n".join(t for _, t in b.lines))
            if not ok:
                raise Failure(f"{label}: FAILED: shell syntax error in a skipped block: {err}")
            self.skipped += 1
            print(f"{label} skipped: {m.reason}", flush=True)
            if not m.instead:
                return
            lines = m.instead
            print(f"{label} running instead the commands of its marker (line {m.line})", flush=True)
        elif m.kind == "fetch" and not self.fetch:
            self.ran += 1
            print(f"{label} ran in the fetch pass, before the network namespace", flush=True)
            return
        else:
            lines = b.lines
        env = dict(self.env, **self.expand(m.env))
        if m.kind == "starts-converge":
            self.start_converge(b)
            self.ran += 1
            print(f"{label} converge ready ({time.monotonic() - start:.1f}s)", flush=True)
            return
        proc = self.spawn(b, lines, env)
        if m.kind == "background":
            self.background.append((b, proc))
            if m.wait:
                self.wait_for(b, proc, m.wait, m.timeout or WAIT_TIMEOUT, env)
            self.ran += 1
            print(f"{label} started in the background ({time.monotonic() - start:.1f}s)", flush=True)
            return
        limit = m.timeout or (FETCH_TIMEOUT if m.kind == "fetch" else FOREGROUND_TIMEOUT)
        try:
            rc = proc.p.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise Failure(self.report(b, proc, f"still running after {limit:.0f}s (timeout)", lines)) from None
        self.ran += 1
        if m.kind == "expect-fail":
            if rc == 0:
                raise Failure(self.report(b, proc, "succeeded, but is marked expect-fail", lines))
        elif rc != 0:
            raise Failure(self.report(b, proc, f"exit status {rc}", lines))
        print(f"{label} ok ({time.monotonic() - start:.1f}s)", flush=True)

    def wait_for(self, b: Block, proc: Proc, cmd: str, limit: float, env: dict[str, str]) -> None:
        deadline = time.monotonic() + limit
        last = ""
        while True:
            r = subprocess.run(
                ["bash", "-c", cmd], cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True
            )
            if r.returncode == 0:
                return
            last = (r.stdout + r.stderr).strip()
            if proc.p.poll() is not None:
                raise Failure(self.report(b, proc, f"exited ({proc.p.returncode}) before `{cmd}` succeeded"))
            if time.monotonic() > deadline:
                raise Failure(
                    self.report(b, proc, f"`{cmd}` did not succeed within {limit:.0f}s; its last output:\n    {last}")
                )
            time.sleep(0.25)

    def check_background(self) -> None:
        for b, proc in self.background:
            rc = proc.p.poll()
            if rc is not None and rc != 0:
                self.background.remove((b, proc))
                raise Failure(self.report(b, proc, f"background block exited with status {rc}"))

    def report(self, b: Block | None, proc: Proc, what: str, lines: list[tuple[int, str]] | None = None) -> str:
        if b is None:
            return f"docs-run: {self.path}: FAILED: the runner's {what}\n{proc.output()}"
        lines = lines if lines is not None else b.lines
        n = proc.failed_line()
        cmd = ""
        if n is not None:
            for first, text in split_commands(lines, self.path):
                if first == n:
                    cmd = text
        head = f"docs-run: {self.where(b, n)}: FAILED (block at line {b.line}): {what}"
        if cmd:
            head += "\n  command:\n" + textwrap.indent(cmd, "    $ ")
        return f"{head}\n  output:\n{proc.output()}"

    def converge_log(self) -> None:
        if self.converge is not None and self.converge.name == "converge":
            log = self.converge.output(20)
            if log:
                print(f"  converge's log (last 20 lines):\n{log}", flush=True)

    def stop(self) -> None:
        # Workers and watches first, then converge, then the database.
        t = time.monotonic()
        kill_all([p for p in self.procs if p is not self.converge])
        if self.converge is not None:
            kill_all([self.converge])
        print(f"docs-run: {self.path}: stopped its processes ({time.monotonic() - t:.1f}s)", flush=True)
        if self.db is None:
            return
        try:
            self.db.sql(f"DROP DATABASE IF EXISTS {self.dbname} WITH (FORCE)")
        except subprocess.CalledProcessError:
            print(f"docs-run: could not drop database {self.dbname}", flush=True)


# --- the runner's own test ----------------------------------------------------------------

# (name, document, the line its failure must name, or None when it must pass). {port} is a
# free port for a local HTTP server, {dir} a scratch directory.
SELF_TESTS: list[tuple[str, str, int | None]] = [
    ("an a && b whose a fails", "```sh\necho one\nfalse && echo never\necho after\n```\n", 3),
    ("a failure inside a loop", '```bash\nfor x in 1 2; do\n  test "$x" = 1\ndone\n```\n', 2),
    ("pipefail", "```sh\ntrue\nfalse | cat\n```\n", 3),
    ("continuation lines", "```sh\necho a \\\n  b\nexit 5\n```\n", 4),
    ("a console block's $ lines", "```console\n$ true\nsome output\n$ false\n```\n", 4),
    ("expect-fail that fails", "<!-- docs-run: expect-fail -->\n```sh\nexit 3\n```\n", None),
    ("expect-fail that succeeds", "<!-- docs-run: expect-fail -->\n```sh\ntrue\n```\n", 3),
    ("a background block that dies", "<!-- docs-run: background -->\n```sh\nexit 3\n```\n\n```sh\nsleep 0.3\n```\n", 3),
    (
        "a background block that lives, and a wait",
        '<!-- docs-run: background wait="test -e {dir}/up" -->\n```sh\nsleep 0.5\ntouch {dir}/up\nsleep 100\n```\n'
        "```sh\ntest -e {dir}/up\nsleep 100 &\n```\n",
        None,
    ),
    ("a timeout", "<!-- docs-run: skip reason=none -->\n```sh\ntrue\n```\n<!-- docs-run: timeout=1 -->\n```sh\nsleep 30\n```\n", 7),
    ("a skip's substitute", '<!-- docs-run: skip reason="test"\ntrue\nexit 4\n-->\n```sh\nexit 0\n```\n', 3),
    ("a skip with a syntax error", '<!-- docs-run: skip reason="test" -->\n```sh\nif then\n```\n', 2),
    ("a fetch block is not run again", "<!-- docs-run: fetch -->\n```sh\nexit 3\n```\n```sh\ntrue\n```\n", None),
    (
        "curl fails on an HTTP error",
        '<!-- docs-run: background wait="curl -s -o /dev/null 127.0.0.1:{port}/" -->\n```sh\n'
        "python3 -m http.server {port} --bind 127.0.0.1\n```\n\n```sh\ncurl -sS -o /dev/null 127.0.0.1:{port}/\n"
        "curl -sS 127.0.0.1:{port}/no-such-file\n```\n",
        8,
    ),
]
SELF_TEST_BAD_DOCS = [
    ("a marker before prose", "<!-- docs-run: background -->\ntext\n```sh\ntrue\n```\n"),
    ("a marker before a json block", "<!-- docs-run: background -->\n```json\n{}\n```\n"),
    ("an unknown marker", "<!-- docs-run: sometimes -->\n```sh\ntrue\n```\n"),
    ("a skip without a reason", "<!-- docs-run: skip -->\n```sh\ntrue\n```\n"),
    ("an unclosed fence", "```sh\ntrue\n"),
]


def self_test() -> int:
    """Runs sample documents through the runner (no converge) and checks each verdict."""
    import contextlib
    import io

    become_subreaper()
    workdir = tempfile.mkdtemp(prefix="docs-run-test-")
    shim = os.path.join(workdir, "shim")
    write_curl_shim(shim)
    env = block_env(os.path.join(workdir, "nobin"), shim)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    bad = []
    try:
        for i, (name, doc, want) in enumerate(SELF_TESTS):
            path = os.path.join(workdir, f"t{i}.md")
            with open(path, "w") as f:
                f.write(doc.replace("{port}", str(port)).replace("{dir}", workdir))
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                ok = FileRun(path, parse(path), None, env, workdir, i).run()
            text = out.getvalue()
            if want is None and not ok:
                bad.append(f"{name}: failed, should pass:\n{text}")
            elif want is not None and (ok or f"{path}:{want}: FAILED" not in text):
                bad.append(f"{name}: should fail naming line {want}:\n{text}")
        # The fetch pass runs only the fetch blocks: one that fails is reported with its line.
        path = os.path.join(workdir, "fetch.md")
        with open(path, "w") as f:
            f.write("```sh\nexit 9\n```\n<!-- docs-run: fetch -->\n```sh\ntrue\nfalse\n```\n")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            ok = FileRun(path, parse(path), None, env, workdir, 99, fetch=True).run()
        if ok or f"{path}:7: FAILED" not in out.getvalue() or ":2: FAILED" in out.getvalue():
            bad.append(f"the fetch pass: should run only the fetch block and fail at line 7:\n{out.getvalue()}")
        for i, (name, doc) in enumerate(SELF_TEST_BAD_DOCS):
            path = os.path.join(workdir, f"bad{i}.md")
            with open(path, "w") as f:
                f.write(doc)
            try:
                parse(path)
                bad.append(f"{name}: accepted")
            except DocsError:
                pass
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for b in bad:
        print(f"docs-run: self-test FAILED: {b}", flush=True)
    total = len(SELF_TESTS) + len(SELF_TEST_BAD_DOCS) + 1
    if not bad:
        print(f"docs-run: self-test: {total} cases pass", flush=True)
    return 1 if bad else 0


def fetch_pass(parsed: list[tuple[str, list[Block]]], bindir: str) -> list[str]:
    """Runs every file's fetch blocks, in order, with the host's network; returns the files
    whose fetch failed (each failure reported as any block's is)."""
    todo = [(f, blocks) for f, blocks in parsed if any(b.marker.kind == "fetch" for b in blocks)]
    if not todo:
        return []
    workdir = tempfile.mkdtemp(prefix="docs-run-fetch-")
    env = block_env(bindir, os.path.join(workdir, "no-shim"))
    failed = []
    try:
        for n, (f, blocks) in enumerate(todo):
            if not FileRun(f, blocks, None, env, workdir, n, fetch=True).run():
                failed.append(f)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", help="Markdown files, relative to the repository root")
    ap.add_argument("--list", action="store_true", help="print the blocks and their markers; run nothing")
    ap.add_argument("--self-test", action="store_true", help="check the runner on sample documents, then exit")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    files = args.files or ["README.md"] + sorted(
        os.path.relpath(os.path.join(ROOT, "examples", d, "README.md"), ROOT)
        for d in os.listdir(os.path.join(ROOT, "examples"))
        if os.path.isfile(os.path.join(ROOT, "examples", d, "README.md"))
    )
    try:
        parsed = [(f, parse(f)) for f in files]
        for f, blocks in parsed:
            for b in blocks:
                if b.marker.kind != "skip":
                    split_commands(b.lines, f)
                split_commands(b.marker.instead, f)
    except DocsError as e:
        print(f"docs-run: {e}", file=sys.stderr)
        return 1
    if args.list:
        for f, blocks in parsed:
            for b in blocks:
                extra = f" ({b.marker.reason})" if b.marker.reason else ""
                print(f"{f}:{b.line} {b.lang} {b.marker.kind}{extra}")
                for _, t in b.lines:
                    print(f"    {t}")
                if b.marker.instead:
                    print("  instead:")
                    for _, t in b.marker.instead:
                        print(f"    {t}")
        return 0

    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(os.path.expanduser("~"), ".cache/converge-target")
    bindir = os.path.join(target, "debug")
    missing = [b for b in ("converge", "conctl") if not os.access(os.path.join(bindir, b), os.X_OK)]
    if missing:
        print(f"docs-run: {', '.join(missing)} not in {bindir}: run cargo build --workspace --bins", file=sys.stderr)
        return 1

    # The fetch pass needs the registries, so it runs before the network namespace; the
    # re-executed runner inside it learns from the environment what failed (and runs no fetch).
    if not os.environ.get("DOCS_RUN_FETCHED"):
        os.environ["DOCS_RUN_FETCH_FAILED"] = ",".join(fetch_pass(parsed, bindir))
        os.environ["DOCS_RUN_FETCHED"] = "1"
    fetch_failed = {f for f in os.environ.get("DOCS_RUN_FETCH_FAILED", "").split(",") if f}
    enter_netns()
    if os.environ.get("DOCS_RUN_NETNS"):
        loopback_up()
    # A CI timeout's SIGTERM unwinds like ^C: every file's processes are killed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(129))
    become_subreaper()
    start = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="docs-run-")
    os.chmod(workdir, 0o755)  # a cluster started here runs as an unprivileged user
    shim = os.path.join(workdir, "shim")
    write_curl_shim(shim)
    env = block_env(bindir, shim)
    db = Database(workdir)
    failed: list[str] = []
    ran = skipped = 0
    try:
        for n, (f, blocks) in enumerate(parsed):
            if not blocks:
                continue
            if f in fetch_failed:
                print(f"docs-run: {f}: not run, its fetch block failed (above)", flush=True)
                failed.append(f)
                continue
            fr = FileRun(f, blocks, db, env, workdir, n)
            if not fr.run():
                failed.append(f)
            ran += fr.ran
            skipped += fr.skipped
    finally:
        db.close()
        shutil.rmtree(workdir, ignore_errors=True)
    took = time.monotonic() - start
    if failed:
        print(f"docs-run: FAILED in {', '.join(failed)} ({ran} blocks run, {skipped} skipped, {took:.0f}s)", flush=True)
        return 1
    print(f"docs-run: {ran} blocks run, {skipped} skipped, in {len(parsed)} files ({took:.0f}s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
