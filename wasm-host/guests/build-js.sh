#!/usr/bin/env bash
# build-js.sh: builds the JavaScript guest (wasm-host/guests/js/src/app.js) into a
# `converge:handler@0.1.0` component with componentize-js from npm.
#
# Output: $CONVERGE_JS_GUEST, by default $HOME/.cache/converge-wasm/js-guest.wasm. It is
# not committed: it is ~12 MB (the StarlingMonkey JavaScript engine with the module
# pre-initialised into its memory). The conformance suite's `wasm-js` form reads it from
# the same place (conformance/run.sh builds it).
#
# Idempotent: the output has a stamp beside it (sha256 over the guest's sources, its WIT,
# the handler WIT, the lockfile and this script); when the stamp matches, nothing is
# rebuilt. FORCE=1 rebuilds anyway. npm ci runs when node_modules does not match the
# lockfile (about 20 s from the registry, 390 MB: componentize-js pulls jco and wizer).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/js"
handler_wit="$here/../wit"
out="${CONVERGE_JS_GUEST:-$HOME/.cache/converge-wasm/js-guest.wasm}"
stamp="$out.stamp"

die() {
    echo "build-js.sh: $*" >&2
    exit 1
}

command -v node >/dev/null || die "node is not installed (Node >= 20)"
command -v npm >/dev/null || die "npm is not installed"

want="$(cat "$src/src/app.js" "$src/build.mjs" "$src/wit/guest.wit" "$src/package-lock.json" \
    "$handler_wit"/*.wit "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
if [[ "${FORCE:-0}" != 1 && -f "$out" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "build-js.sh: $out is up to date"
    exit 0
fi

# --- the toolchain: exactly the lockfile's packages -----------------------------------------
if ! cmp -s "$src/package-lock.json" "$src/node_modules/.converge-lock" 2>/dev/null; then
    echo "build-js.sh: npm ci in $src"
    (cd "$src" && npm ci --no-audit --no-fund --loglevel=error) ||
        die "npm ci failed in $src: the npm registry may be unreachable. Nothing was built."
    cp "$src/package-lock.json" "$src/node_modules/.converge-lock"
fi

# --- one WIT directory: the guest's world, the handler package, the WASI packages -----------
# The WASI 0.2.10 WIT comes with jco (a dependency of componentize-js, pinned by the lock).
wasi="$src/node_modules/@bytecodealliance/jco/lib/wit/builtin/0.2.10"
[[ -d "$wasi/wasi-clocks" && -d "$wasi/wasi-io" ]] || die "no WASI 0.2.10 WIT under $wasi"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
wit="$work/wit"
mkdir -p "$wit/deps/converge-handler"
cp "$src/wit/guest.wit" "$wit/"
cp "$handler_wit"/*.wit "$wit/deps/converge-handler/"
cp -r "$wasi/wasi-clocks" "$wasi/wasi-io" "$wit/deps/"

mkdir -p "$(dirname "$out")"
# componentize-js's wasm-tools (itself a WASI program) sees only the working directory, so
# the WIT directory is given relative to it.
(cd "$work" && node "$src/build.mjs" wit "$out.tmp") || die "componentize-js failed"
mv "$out.tmp" "$out"
echo "$want" >"$stamp"
