"""Checks the Containerfiles against the repository, without building an image.

No container engine runs in CI, so this reads each Containerfile and fails on what would
break its build or its promises:

- a `COPY` source that does not exist, or one not copied to the same path (the builds keep
  the repository's layout under WORKDIR, so a crate's relative paths still hold);
- a `cargo build` whose package, binary or manifest does not exist, or whose crates reach,
  through workspace membership, path dependencies or `include_str!` / `include_bytes!` /
  `sqlx::migrate!`, a file the stage did not copy or `.dockerignore` keeps out of the
  context (cargo metadata and the crates' sources say what they reach);
- `npm ci` without the lockfile copied first;
- a base image without a tag, or tagged `latest`;
- a final stage that runs as root or without a numeric USER, bakes a secret-looking ENV or
  ARG, or whose ENTRYPOINT names a file no COPY put there;
- a `.dockerignore` that lets build output or dependencies into the context.

    python check_containerfiles.py REPO_ROOT Containerfile stdworker/Containerfile
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

SECRET_NAME = re.compile(r"(TOKEN|PASSWORD|SECRET|DATABASE_URL|PRIVATE|_KEY\b|CREDENTIAL)", re.I)
INCLUDE = re.compile(r'(?:include_str|include_bytes)!\(\s*"([^"]+)"\s*\)')
MIGRATE = re.compile(r'sqlx::migrate!\(\s*"([^"]+)"\s*\)')
IGNORED_MUST = ["**/target", "**/node_modules", ".git", ".converge"]


@dataclass
class Stage:
    name: str
    base: str
    line: int
    workdir: PurePosixPath = PurePosixPath("/")
    copies: list[tuple[str, str, int]] = field(default_factory=list)  # (repo path, image path, line)
    from_copies: list[tuple[str, str, str, int]] = field(default_factory=list)  # (stage, src, dest, line)
    runs: list[tuple[str, int]] = field(default_factory=list)
    env: list[tuple[str, str, int]] = field(default_factory=list)
    user: str | None = None
    entrypoint: list[str] | None = None


def instructions(text: str) -> list[tuple[str, str, int]]:
    """(INSTRUCTION, arguments, first line) with continuations joined and comments dropped."""
    out: list[tuple[str, str, int]] = []
    buf, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.partition(" ")
        out.append((word.upper(), rest.strip(), start))
        buf = ""
    return out


def expand(s: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), s)


def parse(path: Path) -> list[Stage]:
    stages: list[Stage] = []
    args: dict[str, str] = {}
    for word, rest, line in instructions(path.read_text()):
        if word == "ARG":
            name, _, default = rest.partition("=")
            if default or name not in args:
                args[name] = default.strip('"')
            if stages:
                stages[-1].env.append((name, default, line))
        elif word == "FROM":
            parts = rest.split()
            base = expand(parts[0], args)
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(name, base, line))
        elif not stages:
            continue
        elif word == "WORKDIR":
            stages[-1].workdir = stages[-1].workdir / rest
        elif word == "COPY":
            toks = shlex.split(rest)
            flags = [t for t in toks if t.startswith("--")]
            paths = [t for t in toks if not t.startswith("--")]
            src, dest = paths[:-1], paths[-1]
            frm = next((f.split("=", 1)[1] for f in flags if f.startswith("--from=")), None)
            for s in src:
                if frm:
                    stages[-1].from_copies.append((frm, s, dest, line))
                else:
                    stages[-1].copies.append((s, dest, line))
        elif word == "RUN":
            stages[-1].runs.append((rest, line))
        elif word == "ENV":
            for tok in shlex.split(rest):
                k, _, v = tok.partition("=")
                stages[-1].env.append((k, v, line))
        elif word == "USER":
            stages[-1].user = rest
        elif word == "ENTRYPOINT":
            stages[-1].entrypoint = json.loads(rest)
    return stages


def dockerignore_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regex over paths relative to the context (`**` spans
    folders, `*` and `?` stay within one)."""
    out = ""
    i = 0
    pattern = pattern.strip("/")
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def cargo_metadata(manifest: Path) -> dict:
    """The workspace's packages as cargo reads them (no dependency resolution, no network)."""
    out = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--manifest-path", str(manifest)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


class Checker:
    def __init__(self, root: Path, file: Path, ignore: list[str]):
        self.root, self.file = root, file
        self.ignore = [dockerignore_regex(p) for p in ignore]
        self.problems: list[str] = []

    def ignored(self, rel: PurePosixPath) -> bool:
        """Whether .dockerignore keeps `rel` (or a folder above it) out of the build context."""
        return any(p.fullmatch(str(q)) for p in self.ignore for q in [rel, *rel.parents] if str(q) != ".")

    def fail(self, line: int, msg: str) -> None:
        self.problems.append(f"{self.file.relative_to(self.root)}:{line}: {msg}")

    def copied(self, stage: Stage) -> list[PurePosixPath]:
        """Repository paths the stage copied (relative to the repository root), checking that
        each exists and that all of them keep the repository's layout under one directory."""
        out = []
        roots: set[PurePosixPath] = set()
        for src, dest, line in stage.copies:
            p = self.root / src
            if not p.exists():
                self.fail(line, f"COPY source {src} does not exist")
                continue
            target = stage.workdir / dest
            # A directory's contents land in dest; a file lands in dest/ (or is renamed dest).
            if p.is_file() and (dest.endswith("/") or dest in (".", "./")):
                target = target / p.name
            parts = PurePosixPath(src.rstrip("/")).parts
            if parts and target.parts[-len(parts) :] != parts:
                self.fail(line, f"COPY {src} lands at {target}: keep the repository's layout")
                continue
            roots.add(PurePosixPath(*target.parts[: len(target.parts) - len(parts)]))
            out.append(PurePosixPath(src.rstrip("/")))
        if len(roots) > 1:
            self.fail(stage.line, f"stage {stage.name} copies into several roots {sorted(map(str, roots))}")
        for frm, _, dest, _ in stage.from_copies:
            if frm == "ui" and dest.rstrip("/") == "ui/dist":
                out.append(PurePosixPath("ui/dist"))
        return out

    def reaches(self, copied: list[PurePosixPath], cargo_args: list[str], line: int) -> None:

        def is_copied(p: Path) -> bool:
            rel = PurePosixPath(p.resolve().relative_to(self.root.resolve()).as_posix())
            if self.ignored(rel):
                return False
            return any(rel == c or c in rel.parents for c in copied)

        manifest = "Cargo.toml"
        if "--manifest-path" in cargo_args:
            manifest = cargo_args[cargo_args.index("--manifest-path") + 1]
        if not (self.root / manifest).is_file():
            self.fail(line, f"cargo --manifest-path {manifest} does not exist")
            return
        meta = cargo_metadata(self.root / manifest)
        packages = {p["name"]: p for p in meta["packages"]}
        bins = {t["name"] for p in meta["packages"] for t in p["targets"] if "bin" in t["kind"]}
        for flag, names, what in (("-p", packages, "package"), ("--bin", bins, "binary")):
            for i, a in enumerate(cargo_args):
                if a == flag and cargo_args[i + 1] not in names:
                    self.fail(line, f"cargo {flag} {cargo_args[i + 1]}: no such {what} in {manifest}")
        if "--locked" not in cargo_args:
            self.fail(line, "cargo build without --locked: the image would not build what Cargo.lock pins")
        # Every manifest cargo reads: the workspace's members and their path dependencies,
        # transitively, each with the root manifest of its own workspace.
        by_dir: dict[Path, dict] = {}
        todo = [Path(p["manifest_path"]).parent for p in meta["packages"]]
        todo.append((self.root / manifest).parent)
        while todo:
            d = todo.pop().resolve()
            if d in by_dir:
                continue
            by_dir[d] = {}
            if not is_copied(d / "Cargo.toml"):
                self.fail(line, f"cargo reads {d.relative_to(self.root.resolve())}/Cargo.toml, which the stage does not copy")
                continue
            sub = cargo_metadata(d / "Cargo.toml")
            ws_root = Path(sub["workspace_root"])
            if not is_copied(ws_root / "Cargo.toml"):
                self.fail(line, f"cargo reads {ws_root.relative_to(self.root.resolve())}/Cargo.toml, which the stage does not copy")
            for p in sub["packages"]:
                pd = Path(p["manifest_path"]).parent.resolve()
                if pd == d:
                    by_dir[d] = p
                todo.append(pd)
                todo += [Path(dep["path"]) for dep in p["dependencies"] if dep.get("path")]
        # Files the compiled crates (what the build's packages need, dev-dependencies aside)
        # take in from outside their own directory.
        selected = [cargo_args[i + 1] for i, a in enumerate(cargo_args) if a == "-p"]
        start = [d for d, p in by_dir.items() if p.get("name") in selected] or [(self.root / manifest).parent.resolve()]
        compiled: set[Path] = set()
        while start:
            d = start.pop()
            if d in compiled or not by_dir.get(d):
                continue
            compiled.add(d)
            start += [Path(dep["path"]).resolve() for dep in by_dir[d]["dependencies"] if dep.get("path") and dep.get("kind") != "dev"]
        for d in sorted(compiled):
            for rs in [*sorted((d / "src").rglob("*.rs")), d / "build.rs"]:
                if not rs.is_file():
                    continue
                text = rs.read_text()
                for rel in INCLUDE.findall(text):
                    target = (rs.parent / rel).resolve()
                    if target.exists() and not is_copied(target):
                        self.fail(line, f"{rs.relative_to(self.root)} includes {rel}, which the stage does not copy")
                for rel in MIGRATE.findall(text):
                    target = (d / rel).resolve()
                    if not is_copied(target):
                        self.fail(line, f"{rs.relative_to(self.root)} embeds {rel}, which the stage does not copy")

    def check(self) -> None:
        stages = parse(self.file)
        if not stages:
            self.fail(1, "no FROM")
            return
        for st in stages:
            copied = self.copied(st)
            tag = st.base.rsplit("/", 1)[-1]
            if ":" not in tag or tag.endswith(":latest"):
                self.fail(st.line, f"base image {st.base} is not pinned to a tag")
            for cmd, line in st.runs:
                for part in re.split(r"&&|;", cmd):
                    toks = shlex.split(part.strip().replace("\\\n", " ")) if part.strip() else []
                    toks = [t for t in toks if not t.startswith("--mount=")]
                    if toks[:2] == ["cargo", "build"]:
                        self.reaches(copied, toks, line)
                    if toks[:2] == ["npm", "ci"]:
                        srcs = [PurePosixPath(s).name for s, _, _ in st.copies]
                        if "package-lock.json" not in srcs:
                            self.fail(line, "npm ci before package-lock.json is copied")
        final = stages[-1]
        user = (final.user or "").split(":")[0]
        if not user.isdigit() or int(user) == 0:
            self.fail(final.line, f"the final stage must run as a numeric non-root USER (has {final.user!r})")
        for name, value, line in final.env:
            if SECRET_NAME.search(name):
                self.fail(line, f"{name} looks like a secret: pass it at run time, never bake it in")
        if not final.entrypoint:
            self.fail(final.line, "the final stage has no ENTRYPOINT")
        else:
            placed = {str(PurePosixPath(d)) for _, _, d, _ in final.from_copies}
            placed |= {str(final.workdir / d) for _, d, _ in final.copies}
            exe = final.entrypoint[0]
            if exe.startswith("/usr/bin/"):
                # A Debian package's program (tini): the stage must install it.
                name = PurePosixPath(exe).name
                if not any("apt-get install" in cmd and re.search(rf"\b{name}\b", cmd) for cmd, _ in final.runs):
                    self.fail(final.line, f"ENTRYPOINT {exe}: no RUN apt-get install {name} in the final stage")
            elif exe not in placed:
                self.fail(final.line, f"ENTRYPOINT {exe} is not a file a COPY put in the image")
            for arg in final.entrypoint[1:]:
                if arg.startswith("/usr/local/bin/") and arg not in placed:
                    self.fail(final.line, f"ENTRYPOINT runs {arg}, which no COPY put in the image")


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[1]).resolve()
    problems: list[str] = []
    ignore = root / ".dockerignore"
    lines = [ln.strip() for ln in ignore.read_text().splitlines()] if ignore.is_file() else []
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    for must in IGNORED_MUST:
        if must not in lines:
            problems.append(f".dockerignore: {must} is not excluded from the build context")
    for ln in lines:
        if ln.startswith("!"):
            problems.append(f".dockerignore: {ln}: exceptions are not understood by this check")
    for f in argv[2:]:
        c = Checker(root, root / f, lines)
        c.check()
        problems += c.problems
        print(f"check_containerfiles: {f}: {'ok' if not c.problems else f'{len(c.problems)} problem(s)'}", file=sys.stderr)
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
