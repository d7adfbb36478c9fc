#!/usr/bin/env bash
# Runs the test command (./scripts/test.sh, with any of its arguments) as a new machine would:
# every tool cache empty, so nothing a warm machine has downloaded or built before can be what
# makes the run green.
#
#   ./scripts/test-fresh.sh [--newest]
#
# Empty for the run, in a scratch directory deleted afterwards (KEEP_FRESH=1 keeps it):
# HOME (so every ~/.cache: the Python venvs, buf, the Go SDK's generators, the deploy tools,
# the WASM guest), the cargo target dir and cargo's registry (CARGO_HOME), the npm cache, the
# Go module and build caches. Kept, because a new machine has them too: the installed
# toolchains (rustup's toolchains, pyenv's Pythons, Go, Node.js, system packages) and the
# machine's configuration files (~/.npmrc, ~/.gitconfig, go's env file).
#
# Needs about 25 GB free on FRESH_DIR's disk (default TMPDIR or /tmp) and, on 2 cores, about
# an hour: a clean debug build of every workspace comes first.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
real_home="$HOME"
fresh="$(mktemp -d "${FRESH_DIR:-${TMPDIR:-/tmp}}/converge-fresh.XXXXXX")"

cleanup() {
    if [[ "${KEEP_FRESH:-0}" == 1 ]]; then
        echo "test-fresh.sh: kept $fresh" >&2
    else
        rm -rf "$fresh"
    fi
}
trap cleanup EXIT

mkdir -p "$fresh/home/.config"
for f in .npmrc .gitconfig .config/go; do
    if [[ -e "$real_home/$f" ]]; then cp -r "$real_home/$f" "$fresh/home/$f"; fi
done
rm -rf "$fresh/home/.config/go/telemetry"

export HOME="$fresh/home"
export XDG_CACHE_HOME="$HOME/.cache"
export CARGO_TARGET_DIR="$fresh/target"
export CARGO_HOME="$fresh/cargo"
export RUSTUP_HOME="${RUSTUP_HOME:-$real_home/.rustup}"
export PYENV_ROOT="${PYENV_ROOT:-$real_home/.pyenv}"
export npm_config_cache="$fresh/npm-cache"
export GOPATH="$fresh/go"
export GOMODCACHE="$fresh/go/pkg/mod"
export GOCACHE="$fresh/go-build"
# rustup's proxies (cargo, rustc) stay where the machine installed them.
export PATH="$real_home/.cargo/bin:$PATH"

echo "test-fresh.sh: running ./scripts/test.sh $* with empty caches under $fresh" >&2
start=$SECONDS
status=0
"$ROOT/scripts/test.sh" "$@" || status=$?
elapsed=$((SECONDS - start))
echo "test-fresh.sh: ./scripts/test.sh $* exited $status after ${elapsed}s ($((elapsed / 60)) min) from empty caches" >&2
exit "$status"
