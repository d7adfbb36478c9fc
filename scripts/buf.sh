#!/usr/bin/env bash
# Checks the WorkerService contract with buf (configuration and lint exceptions in
# proto/buf.yaml): `buf lint`, then `buf breaking` against the proto of an earlier commit
# (HEAD~1 by default: on main that is the state before the last commit or merge; set
# BUF_AGAINST_REF, e.g. to `$(git merge-base main HEAD)`, to check a whole branch).
#
# buf is installed at a pinned version from npm (`@bufbuild/buf`, the vendor's prebuilt
# binaries: about 20 s on a fresh machine, where `go install` built it from source in nearly
# 10 minutes) with `npm ci` from the lockfile in scripts/buf/, into
# ${CONVERGE_TOOLS_DIR:-$HOME/.cache/converge-tools}/buf-<version>-<lockfile digest>, outside
# the clone, so a warm machine reuses it and a lockfile change installs afresh. Nothing is skipped: if buf cannot be installed or
# the base commit cannot be read (a shallow clone), this fails and says why.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUF_VERSION="v1.75.0"
LOCK_DIR="$ROOT/scripts/buf"
BIN_DIR="${CONVERGE_TOOLS_DIR:-$HOME/.cache/converge-tools}/buf-$BUF_VERSION-$(sha256sum <"$LOCK_DIR/package-lock.json" | cut -c1-12)"
BUF="$BIN_DIR/node_modules/.bin/buf"

die() {
    echo "buf.sh: error: $*" >&2
    exit 1
}

if [[ ! -x "$BUF" ]]; then
    command -v npm >/dev/null 2>&1 ||
        die "npm not found; install Node.js >= 20 with npm: buf comes from npm (@bufbuild/buf)"
    echo "buf.sh: installing buf $BUF_VERSION into $BIN_DIR (npm @bufbuild/buf, once)"
    rm -rf "$BIN_DIR"
    mkdir -p "$BIN_DIR"
    cp "$LOCK_DIR/package.json" "$LOCK_DIR/package-lock.json" "$BIN_DIR/"
    (cd "$BIN_DIR" && npm ci --no-audit --no-fund --loglevel=error) ||
        die "npm ci of scripts/buf/package-lock.json (buf ${BUF_VERSION#v}) failed (see above)"
fi
[[ "$("$BUF" --version)" == "${BUF_VERSION#v}" ]] ||
    die "$BUF is not buf $BUF_VERSION; delete $BIN_DIR and run again"

cd "$ROOT/proto"
echo "buf.sh: buf lint proto/"
"$BUF" lint

against="${BUF_AGAINST_REF:-HEAD~1}"
base="$(git -C "$ROOT" rev-parse --verify --quiet "$against^{commit}")" ||
    die "cannot resolve $against to a commit (a shallow clone? fetch at least two commits, or set BUF_AGAINST_REF)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/converge-buf.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# The base's proto/ as files (git archive also works in a worktree, where buf's own
# `.git#ref=` input would look in the wrong place).
git -C "$ROOT" archive "$base" proto | tar -x -C "$tmp"
echo "buf.sh: buf breaking proto/ against $against ($(git -C "$ROOT" rev-parse --short "$base"))"
"$BUF" breaking . --against "$tmp/proto"
echo "buf.sh: the contract is lint-clean and compatible with $against"
