#!/usr/bin/env python3
"""Fails when a tool or dependency that the tests install is not pinned to an exact version.

    scripts/check-pins.py               check the tree (scripts/test.sh runs it first)
    scripts/check-pins.py --self-test   check that the rules refuse what they should

An unpinned install line is a green run waiting to turn red with no commit: the next release
of a package changes what the tests run against (issue 40: `cryptography>=42` resolved to a
release that refused a certificate the tests made). So every install line in the scripts the
tests run must name exact versions, from a committed lock where the tool has one:

- pip: only `--require-hashes -r LOCK` (scripts/pylock.sh writes the locks, and
  `scripts/pylock.sh check` runs here: each lock pinned, hashed and newer than its inputs),
  or `--no-deps` for this tree's own package;
- npm: only `npm ci` (a committed package-lock.json beside every package.json), and `npx`
  only with `--no-install` (it would otherwise download whatever is newest);
- go: `go install`/`go run` of a module only at an exact `vX.Y.Z` (never `@latest`), and a
  go.sum beside every go.mod;
- cargo: `--locked` (or `--frozen`) on every build, test, clippy, run and install.

A line that deliberately resolves ranges afresh (`scripts/test.sh --newest`) carries the
comment `pins: newest` on it or on the line above; a line whose version is a parameter that the
code just above refuses unless exact carries `pins: checked`. System packages from apt are the OS's
(PostgreSQL, Chromium) and are not checked.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `pins: newest`: resolves ranges afresh on purpose (scripts/test.sh --newest only).
# `pins: checked`: the version is a parameter that the code just above refuses unless exact.
MARKERS = ("pins: newest", "pins: checked")


@dataclass
class Problem:
    path: str
    line: int
    text: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.why}\n    {self.text.strip()}"


def logical_lines(text: str) -> list[tuple[int, str, bool]]:
    """(first line number, the line with backslash continuations joined, marked) for each
    shell line that is not a comment; `marked` when it or the line above says `pins: newest`."""
    out: list[tuple[int, str, bool]] = []
    raw = text.split("\n")
    i = 0
    while i < len(raw):
        start = i
        line = raw[i]
        while line.rstrip().endswith("\\") and i + 1 < len(raw):
            i += 1
            line = line.rstrip()[:-1] + " " + raw[i].strip()
        i += 1
        if line.lstrip().startswith("#"):
            continue
        above = raw[start - 1] if start > 0 else ""
        marked = any(m in line or (above.lstrip().startswith("#") and m in above) for m in MARKERS)
        out.append((start + 1, line, marked))
    return out


def assignments(text: str) -> dict[str, str]:
    """Shell variables assigned a literal in the file (`X=v1.2.3`, `readonly X="v1.2.3"`)."""
    found: dict[str, str] = {}
    for m in re.finditer(r'^\s*(?:readonly\s+|export\s+|local\s+)?([A-Z_][A-Z0-9_]*)="?([^"\s$]+)"?\s*$',
                         text, re.M):
        found[m.group(1)] = m.group(2)
    return found


EXACT_GO = re.compile(r"v\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?")


def resolve(token: str, variables: dict[str, str]) -> str:
    m = re.fullmatch(r'"?\$\{?([A-Z_][A-Z0-9_]*)(?:#v)?\}?"?', token)
    if m:
        return variables.get(m.group(1), token)
    return token


def without_messages(line: str) -> str:
    """The line with every quoted string that holds whitespace replaced by an empty one."""
    out: list[str] = []
    i = 0
    while i < len(line):
        c = line[i]
        if c in "\"'":
            j = i + 1
            while j < len(line) and line[j] != c:
                j += 2 if (c == '"' and line[j] == "\\") else 1
            quoted = line[i:j + 1]
            out.append(c + c if re.search(r"\s", quoted) else quoted)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check_line(line: str, variables: dict[str, str]) -> list[str]:
    """Why this logical shell line installs something unpinned (empty: it does not)."""
    why: list[str] = []
    # Quoted text with a space in it is a message (`echo "run: pip install x"`, `step "npm
    # install ..."`), not a command; quoted words without one are arguments and stay.
    line = without_messages(line)
    # Each command of a pipeline or list on its own.
    for cmd in re.split(r"&&|\|\||;|\||\(|\)|\$\(", line):
        words = cmd.split()
        if not words:
            continue
        text = " ".join(words)
        # pip (python -m pip, pip3, $venv/bin/pip ...)
        if re.search(r"(^|[/\s])pip3?\"?\s+(install|download)\b", text) or re.search(
                r"-m\s+pip\s+(install|download)\b", text):
            if "--require-hashes" in words and re.search(r"(^|\s)(-r|--requirement)\s", text):
                pass
            elif "--no-deps" in words and re.search(r"\s-e\s", text) and "--require-hashes" not in words \
                    and not re.search(r"\[[a-z,]+\]", text):
                pass  # this tree's own package, its dependencies already from a lock
            else:
                why.append("pip installs without a lock: use --require-hashes -r a lock from "
                           "scripts/pylock.sh (or --no-deps -e for this tree's package)")
        if re.search(r"\buv\s+pip\s+install\b", text) or re.search(r"\bpipx\s+install\b", text):
            why.append("install from a lock with scripts/pylock.sh instead")
        # npm / npx
        m = re.search(r"\bnpm\s+(install|i|update|add|exec)\b", text)
        if m:
            why.append(f"npm {m.group(1)} resolves versions: use npm ci with a committed package-lock.json")
        if re.search(r"(^|\s)npx\s", " " + text) and "--no-install" not in words and "--no" not in words:
            why.append("npx downloads what is missing: use npx --no-install after npm ci")
        if re.search(r"\b(yarn|pnpm)\s+(add|install)\b", text):
            why.append("use npm ci with a committed package-lock.json")
        # go
        m = re.search(r"\bgo\s+(install|run|get)\s+(.*)", text)
        if m:
            verb, rest = m.group(1), m.group(2)
            if verb == "get":
                why.append("go get changes go.mod: only in a `pins: newest` run")
            for tok in rest.split():
                if tok.startswith("-"):
                    continue
                if "@" in tok:
                    version = resolve(tok.split("@", 1)[1], variables)
                    if not EXACT_GO.fullmatch(version.strip('"')):
                        why.append(f"go {verb} of {tok.split('@')[0]} at {version}: pin an exact vX.Y.Z")
                elif verb == "install" and not tok.startswith((".", "/", "$")):
                    why.append(f"go install {tok} without @vX.Y.Z")
        # cargo
        m = re.search(r"\bcargo\s+(?:\+\S+\s+)?(build|test|clippy|run|install|check|doc|bench)\b", text)
        if m and text[m.end():].split()[:1] != ["--version"]:
            if "--locked" not in words and "--frozen" not in words:
                why.append(f"cargo {m.group(1)} without --locked: Cargo.lock must be what is built")
            if m.group(1) == "install" and not re.search(r"(--version\s+=?\d|@\d)", text):
                why.append("cargo install without an exact --version")
    return why


SCANNED_SUFFIXES = (".sh",)
SCANNED_NAMES = ("run", "Containerfile")


def scanned_files() -> list[Path]:
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True,
                           capture_output=True).stdout.decode().split("\0")
    out = []
    for f in files:
        if not f or "node_modules/" in f or f.startswith("scripts/check-pins"):
            continue
        p = Path(f)
        if p.suffix in SCANNED_SUFFIXES or p.name in SCANNED_NAMES or f == ".ci/run":
            out.append(ROOT / f)
    return out


def check_scripts() -> list[Problem]:
    problems: list[Problem] = []
    for path in scanned_files():
        text = path.read_text(errors="replace")
        variables = assignments(text)
        # Containerfiles: RUN lines are shell; the rest is not.
        for number, line, marked in logical_lines(text):
            if path.name == "Containerfile" and not line.lstrip().startswith("RUN"):
                continue
            if marked:
                continue
            for why in check_line(line, variables):
                problems.append(Problem(str(path.relative_to(ROOT)), number, line, why))
    return problems


def check_lockfiles() -> list[Problem]:
    """Every package.json has its package-lock.json, every go.mod its go.sum, every Cargo.toml
    that is a workspace root its Cargo.lock."""
    problems: list[Problem] = []
    tracked = set(subprocess.run(["git", "-C", str(ROOT), "ls-files"], check=True,
                                 capture_output=True, text=True).stdout.split())
    for f in sorted(tracked):
        p = Path(f)
        if "node_modules" in p.parts:
            continue
        lock = None
        if p.name == "package.json":
            lock = p.with_name("package-lock.json")
        elif p.name == "go.mod":
            lock = p.with_name("go.sum")
        elif p.name == "Cargo.toml" and "[workspace]" in (ROOT / f).read_text():
            lock = p.with_name("Cargo.lock")
        if lock is not None and str(lock) not in tracked:
            problems.append(Problem(f, 1, "", f"no committed {lock.name} beside it"))
    return problems


def check_python_locks() -> list[Problem]:
    r = subprocess.run([str(ROOT / "scripts" / "pylock.sh"), "check"], capture_output=True, text=True)
    if r.returncode != 0:
        return [Problem("scripts/pylock", 1, "", r.stderr.strip() or "scripts/pylock.sh check failed")]
    return []


def self_test() -> int:
    """The rules refuse each unpinned form and accept each pinned one."""
    variables = {"PROTOC_GEN_GO_VERSION": "v1.36.12", "LATEST": "latest"}
    refused = [
        'pip install -q cryptography',
        '"$venv/bin/pip" install -q "schemathesis==4.32.5"',
        '"$venv/bin/python" -m pip install -q -e "$sdk[test]"',
        'python3 -m pip download -d w "kubernetes-validate==1.37.0"',
        'npm install --no-audit ./sdk-ts',
        'npm i left-pad',
        '(cd ui && npx vite build)',
        'GOBIN="$bin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@latest"',
        'go install example.com/tool@$LATEST',
        'go install example.com/tool',
        'go run example.com/tool@v1',
        'cargo build --workspace --bins',
        'step "rust test" cargo test --workspace --all-features',
        'cargo install --locked wasm-tools',
        'uv pip install ruff',
    ]
    accepted = [
        '"$dir/bin/python" -m pip install --quiet --no-deps --require-hashes -r "$lock"',
        '"$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$sdk"',
        'npm ci --no-audit --no-fund',
        'npx --no-install tsc -p tsconfig.json',
        'GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"',
        'go install example.com/tool@v0.8.0',
        'cargo build --locked --workspace --bins',
        'cargo fmt --all -- --check',
        'cargo clippy --version >/dev/null',
        'cargo install --locked --version 1.2.3 wasm-tools',
        'go build -o out ./cmd/x',
        'echo "run: pip install grpcio-tools==1.85.1"',
    ]
    failures = []
    for line in refused:
        if not check_line(line, variables):
            failures.append(f"accepted but must be refused: {line}")
    for line in accepted:
        why = check_line(line, variables)
        if why:
            failures.append(f"refused but must be accepted: {line}: {why}")
    marked = logical_lines("# pins: newest -- the ranges users get\nnpm install --no-package-lock\n")
    if not marked or not marked[0][2]:
        failures.append("a `pins: newest` comment above a line does not mark it")
    for f in failures:
        print(f"check-pins self-test: {f}", file=sys.stderr)
    if failures:
        return 1
    print(f"check-pins self-test: {len(refused)} unpinned lines refused, {len(accepted)} pinned accepted")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    problems = check_scripts() + check_lockfiles() + check_python_locks()
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check-pins: {len(problems)} unpinned install(s); see the rules in "
              "scripts/check-pins.py", file=sys.stderr)
        return 1
    print(f"check-pins: every install line in {len(scanned_files())} scripts is pinned; "
          "locks present and current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
