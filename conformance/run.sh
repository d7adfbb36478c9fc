#!/usr/bin/env bash
# Builds (or locates) every worker form present in the tree and runs the conformance suite
# (conformance/run.py) against all of them.
#
#   conformance/run.sh [--forms rust,python,go,ts,exec,wasm,wasm-js,starlark,cel] [--only leaf,compose] [--no-build]
#
# Forms, each included only when its source exists:
#   rust    conformance/workers/rust            (cargo build --workspace --all-targets --all-features)
#   python  conformance/workers/python/worker.py (run with $PYTHON, default the SDK's locked
#                                                venv from sdk-python/scripts/venv.sh)
#   go      sdk-go/cmd/conformance-worker       (go build)
#   ts      conformance/workers/ts/worker.ts    (npm ci + tsc in sdk-ts and there; run with node)
#   exec    conformance/workers/exec/worker.sh  (a launcher that execs stdworker; gets
#                                                STDWORKER_BIN)
#   wasm    conformance/workers/wasm/worker.sh  (stdworker's wasm provider running the Rust
#                                                guest fixture; profile.json)
#   wasm-js wasm-host/guests/js                 (the same worker running the JavaScript guest,
#                                                built by wasm-host/guests/build-js.sh)
#   starlark, cel                                (conf-composite by that composer, the
#                                                 other kinds by the wasm guest)
#
# Environment: CARGO_TARGET_DIR (default ~/.cache/converge-target), CONVERGE_BIN (default
# the target dir's converge, built if missing), CONVERGE_TEST_DATABASE_URL (default: a
# throwaway cluster started here and stopped on exit), PYTHON.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

TARGET="${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}"
export CARGO_TARGET_DIR="$TARGET"
GO_OUT="$TARGET/conformance-go"

want_forms="rust,python,go,ts,exec,wasm,wasm-js,starlark,cel"
only=""
build=1

usage() {
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

while [[ $# -gt 0 ]]; do
    case "$1" in
    --forms) want_forms="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h | --help) usage 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; usage 2 ;;
    esac
done

log() { echo "conformance: $*" >&2; }

wanted() { [[ ",$want_forms," == *",$1,"* ]]; }

# --- converge and the probe (both from the Rust workspace)
CONVERGE_BIN="${CONVERGE_BIN:-$TARGET/debug/converge}"
if [[ ! -x "$CONVERGE_BIN" ]]; then
    [[ $build == 1 ]] || { log "converge not found at $CONVERGE_BIN"; exit 1; }
    log "building converge"
    cargo build --locked -p converge --bin converge
fi
if [[ $build == 1 ]]; then
    # The whole workspace, as scripts/test.sh's "rust build" step builds it: the same feature
    # set, so after that step this is a no-op (`-p` alone, or `--bins` without the tests,
    # resolves features apart and rebuilds workspace crates: 46 s of the CI run).
    log "building the Rust form and the probe"
    cargo build --locked --workspace --all-targets --all-features
fi
PROBE="$TARGET/debug/conformance-probe"
[[ -x "$PROBE" ]] || { log "conformance-probe not found at $PROBE"; exit 1; }

# --- forms
forms=()
if wanted rust; then
    forms+=(--form "rust=$TARGET/debug/conformance-worker")
fi
if wanted python && [[ -f conformance/workers/python/worker.py ]]; then
    PYTHON="${PYTHON:-$(sdk-python/scripts/venv.sh)/bin/python}"
    [[ -x "$PYTHON" ]] || { log "python form present but $PYTHON is missing"; exit 1; }
    forms+=(--form "python=$PYTHON $ROOT/conformance/workers/python/worker.py")
fi
if wanted go && [[ -d sdk-go/cmd/conformance-worker ]] && compgen -G "sdk-go/cmd/conformance-worker/*.go" >/dev/null; then
    # A built binary, not `go run`: signals must reach the worker itself (SIGTERM → exit 0).
    if [[ $build == 1 || ! -x "$GO_OUT/conformance-worker" ]]; then
        log "building the Go form"
        (cd sdk-go && go build -o "$GO_OUT/conformance-worker" ./cmd/conformance-worker)
    fi
    forms+=(--form "go=$GO_OUT/conformance-worker")
fi
if wanted ts && [[ -f conformance/workers/ts/worker.ts && -f sdk-ts/package.json ]]; then
    command -v npm >/dev/null || { log "ts form present but npm is missing"; exit 1; }
    # Compiled first, run with node: signals must reach the worker itself (SIGTERM → exit 0).
    if [[ $build == 1 || ! -f conformance/workers/ts/dist/worker.js ]]; then
        log "building the TypeScript form"
        (cd sdk-ts && npm ci --no-audit --no-fund --loglevel=error && npx --no-install tsc -p tsconfig.json)
        (cd conformance/workers/ts && npm ci --no-audit --no-fund --loglevel=error && npx --no-install tsc -p tsconfig.json)
    fi
    forms+=(--form "ts=node $ROOT/conformance/workers/ts/dist/worker.js")
fi
# stdworker (its own workspace: starlark must not reach the main build). Always an
# incremental build when building: a stale binary would test yesterday's providers.
STDWORKER_BIN="${STDWORKER_BIN:-$TARGET/debug/stdworker}"
export STDWORKER_BIN
stdworker_built=0
need_stdworker() {
    if [[ $build == 1 && $stdworker_built == 0 ]]; then
        # Built as `cargo test` builds it (dev-dependencies unify features: a `cargo build`
        # of the bin alone is another feature set, 119 crates and 4.5 min rebuilt in CI after
        # scripts/test.sh's stdworker test step). The test build puts the same binary at
        # $TARGET/debug/stdworker (its tests run it as CARGO_BIN_EXE_stdworker).
        log "building stdworker"
        cargo test --locked --manifest-path stdworker/Cargo.toml --workspace --no-run
        stdworker_built=1
    fi
    [[ -x "$STDWORKER_BIN" ]] || { log "stdworker not found at $STDWORKER_BIN"; exit 1; }
}
if wanted exec && [[ -x conformance/workers/exec/worker.sh && -f stdworker/Cargo.toml && -f conformance/workers/exec/handler.py ]]; then
    need_stdworker
    forms+=(--form "exec=$ROOT/conformance/workers/exec/worker.sh")
    forms+=(--form-config "exec=$ROOT/conformance/workers/exec/base-config.json")
    forms+=(--form-profile "exec=$ROOT/conformance/workers/exec/profile.json")
fi
if wanted wasm && [[ -x conformance/workers/wasm/worker.sh && -f wasm-host/tests/fixtures/conformance-guest.wasm ]]; then
    need_stdworker
    forms+=(--form "wasm=$ROOT/conformance/workers/wasm/worker.sh")
    forms+=(--form-profile "wasm=$ROOT/conformance/workers/wasm/profile.json")
fi
# The JavaScript guest: the same worker as wasm, the component built from npm (not committed).
if wanted wasm-js && [[ -f wasm-host/guests/js/src/app.js ]]; then
    need_stdworker
    export CONVERGE_JS_GUEST="${CONVERGE_JS_GUEST:-$HOME/.cache/converge-wasm/js-guest.wasm}"
    if [[ $build == 1 ]]; then
        log "building the JavaScript guest"
        wasm-host/guests/build-js.sh
    fi
    [[ -f "$CONVERGE_JS_GUEST" ]] || { log "the JavaScript guest is missing at $CONVERGE_JS_GUEST (wasm-host/guests/build-js.sh)"; exit 1; }
    # Compiled once here into the cache every cell's stdworker reads (worker.sh's default):
    # compiling the 12 MB component takes a minute or more, longer than a scenario waits.
    export STDWORKER_WASM_CACHE_DIR="${STDWORKER_WASM_CACHE_DIR:-${TMPDIR:-/tmp}/converge-conformance-wasm-cache}"
    log "precompiling the JavaScript guest"
    "$STDWORKER_BIN" precompile "$CONVERGE_JS_GUEST"
    forms+=(--form "wasm-js=$ROOT/conformance/workers/wasm/worker.sh")
    forms+=(--form-profile "wasm-js=$ROOT/conformance/workers/wasm-js/profile.json")
fi
# The composer forms: conf-composite by the starlark or cel provider, the leaves by the guest.
for composer in starlark cel; do
    if wanted "$composer" && [[ -f conformance/workers/$composer/profile.json && -f wasm-host/tests/fixtures/conformance-guest.wasm ]]; then
        need_stdworker
        forms+=(--form "$composer=$ROOT/conformance/workers/composer-worker.sh $composer")
        forms+=(--form-profile "$composer=$ROOT/conformance/workers/$composer/profile.json")
    fi
done
[[ ${#forms[@]} -gt 0 ]] || { log "no forms to run (asked for: $want_forms)"; exit 1; }

# --- PostgreSQL
if [[ -z "${CONVERGE_TEST_DATABASE_URL:-}" ]]; then
    PG_DIR="$(mktemp -d /tmp/conformance-pg.XXXXXX)"
    rmdir "$PG_DIR"
    eval "$(scripts/pg-test-cluster.sh start "$PG_DIR")"
    trap 'scripts/pg-test-cluster.sh stop "$PG_DIR" >/dev/null 2>&1 || true' EXIT
fi

args=(--converge "$CONVERGE_BIN" --probe "$PROBE" "${forms[@]}")
[[ -n "$only" ]] && args+=(--only "$only")
python3 conformance/run.py "${args[@]}"
