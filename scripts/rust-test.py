#!/usr/bin/env python3
"""Runs a cargo workspace's tests with several test binaries at a time.

    scripts/rust-test.py [--jobs N] CARGO-TEST-ARGS... [-- TEST-BINARY-ARGS...]

`cargo test` runs its test binaries one after another. Ours are mostly waiting (on
PostgreSQL, on a spawned converge, on a lease to lapse): a run of the main workspace used a
third of one core for 6.5 minutes, the sum of its binaries' times. This builds the tests as
`cargo test --no-run` would, runs up to N binaries at once (each with the libtest threads it
would have had), prints each binary's whole output when it ends (never interleaved), then
runs the doc tests with cargo, and ends with a table of the binaries' times, slowest first.

cargo-nextest does this and more, but no registry here serves a built nextest and building it
takes about 10 minutes on 2 cores, more than it saves a cold CI run.

Each binary runs as cargo runs it: from its package's directory, with CARGO_MANIFEST_DIR and
CARGO_PKG_NAME set. The slowest binaries of the last run (a file in the target dir) start
first; without one, integration-test binaries start before unit-test ones. Every binary runs
even when one fails; the exit status is 1 if any failed, 2 if the build failed.

  --jobs N   binaries at a time (default: $CONVERGE_TEST_JOBS, else 2)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Binary:
    """One test executable of the build."""

    package: str
    kind: str  # the cargo target kind: "test" for tests/*.rs, "lib"/"bin" for unit tests
    name: str
    exe: str
    package_dir: str
    seconds: float = 0.0
    status: int | None = None
    summary: str = ""
    output: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.package}/{self.kind}/{self.name}"


def split_args(argv: list[str]) -> tuple[int, list[str], list[str]]:
    jobs = int(os.environ.get("CONVERGE_TEST_JOBS", "2"))
    cargo_args: list[str] = []
    rest = list(argv)
    while rest:
        a = rest.pop(0)
        if a == "--":
            return jobs, cargo_args, rest
        if a == "--jobs":
            if not rest:
                sys.exit("rust-test.py: --jobs needs a number")
            jobs = int(rest.pop(0))
        elif a.startswith("--jobs="):
            jobs = int(a.split("=", 1)[1])
        elif a in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        else:
            cargo_args.append(a)
    if jobs < 1:
        sys.exit("rust-test.py: --jobs must be at least 1")
    return jobs, cargo_args, []


def build(cargo_args: list[str]) -> list[Binary] | None:
    """`cargo test --no-run`: the test executables, or None when the build failed."""
    cmd = ["cargo", "test", *cargo_args, "--no-run", "--message-format=json-render-diagnostics"]
    print("rust-test.py: " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    binaries: list[Binary] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg["profile"]["test"]:
            continue
        target = msg["target"]
        binaries.append(
            Binary(
                package=msg["package_id"],
                kind=target["kind"][0],
                name=target["name"],
                exe=msg["executable"],
                package_dir=str(Path(msg["manifest_path"]).parent),
            )
        )
    if proc.wait() != 0:
        return None
    for b in binaries:
        b.package = package_name(b.package)
    return binaries


def package_name(package_id: str) -> str:
    """The name in a cargo package id: `path+file:///x/engine#converge-engine@0.1.0`, or
    `path+file:///x/converge#0.1.0` when the name is the directory's."""
    url, _, fragment = package_id.rpartition("#")
    if "@" in fragment:
        return fragment.split("@", 1)[0]
    return url.rstrip("/").rsplit("/", 1)[-1]


def durations_file() -> Path:
    target = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache/converge-target")
    return Path(target) / "rust-test-durations.json"


def load_durations() -> dict[str, float]:
    try:
        data = json.loads(durations_file().read_text())
        return {str(k): float(v) for k, v in data.items()}
    except (OSError, ValueError, AttributeError):
        return {}


def save_durations(binaries: list[Binary]) -> None:
    known = load_durations()
    known.update({b.key: round(b.seconds, 2) for b in binaries if b.status == 0})
    try:
        durations_file().parent.mkdir(parents=True, exist_ok=True)
        durations_file().write_text(json.dumps(known, indent=1, sort_keys=True))
    except OSError as e:
        print(f"rust-test.py: cannot keep the binaries' times: {e}", file=sys.stderr)


PRINT_LOCK = threading.Lock()
RUNNING: set[subprocess.Popen] = set()


def run(b: Binary, test_args: list[str]) -> Binary:
    env = dict(os.environ, CARGO_MANIFEST_DIR=b.package_dir, CARGO_PKG_NAME=b.package)
    start = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as out:
        proc = subprocess.Popen(
            [b.exe, *test_args],
            cwd=b.package_dir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        with PRINT_LOCK:
            RUNNING.add(proc)
        b.status = proc.wait()
        with PRINT_LOCK:
            RUNNING.discard(proc)
        b.seconds = time.monotonic() - start
        out.seek(0)
        text = out.read()
    b.summary = next(
        (line.strip() for line in reversed(text.splitlines()) if line.startswith("test result:")),
        "",
    )
    with PRINT_LOCK:
        verdict = "ok" if b.status == 0 else f"FAILED (exit {b.status})"
        print(f"\n     Running {b.key} ({b.exe})", flush=True)
        sys.stdout.write(text)
        print(f"rust-test.py: {b.key}: {verdict} in {b.seconds:.1f}s", flush=True)
    return b


def stop_children(signum: int, _frame: object) -> None:
    with PRINT_LOCK:
        for proc in RUNNING:
            proc.kill()
    sys.exit(128 + signum)


def doc_tests(cargo_args: list[str]) -> int:
    """Cargo's doc tests (they need rustdoc, so cargo runs them)."""
    cmd = ["cargo", "test", *cargo_args, "--doc"]
    print("\nrust-test.py: " + " ".join(cmd), flush=True)
    return subprocess.call(cmd)


def main() -> int:
    jobs, cargo_args, test_args = split_args(sys.argv[1:])
    signal.signal(signal.SIGTERM, stop_children)
    started = time.monotonic()
    binaries = build(cargo_args)
    if binaries is None:
        print("rust-test.py: the build failed", file=sys.stderr)
        return 2
    known = load_durations()
    # Slowest first, so the longest binary does not start last; unknown ones by kind.
    binaries.sort(key=lambda b: (-known.get(b.key, 1e6 if b.kind == "test" else 0.0), b.key))
    print(f"rust-test.py: {len(binaries)} test binaries, {jobs} at a time", flush=True)
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            done = list(pool.map(lambda b: run(b, test_args), binaries))
    except KeyboardInterrupt:
        stop_children(signal.SIGINT, None)
        return 130
    save_durations(done)
    failed = [b for b in done if b.status != 0]
    has_lib = any(b.kind in ("lib", "proc-macro") for b in done)
    doc_status = doc_tests(cargo_args) if has_lib else 0

    print("\nrust-test.py: the binaries, slowest first")
    for b in sorted(done, key=lambda b: -b.seconds)[:15]:
        print(f"  {b.seconds:7.1f}s  {b.key}  {b.summary}")
    wall = time.monotonic() - started
    total = sum(b.seconds for b in done)
    if failed or doc_status != 0:
        names = [b.key for b in failed] + (["doc tests"] if doc_status != 0 else [])
        print(f"rust-test.py: FAILED {', '.join(names)} ({wall:.0f}s)", file=sys.stderr)
        return 1
    print(f"rust-test.py: {len(done)} binaries passed in {wall:.0f}s ({total:.0f}s one after another)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
