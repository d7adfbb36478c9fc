#!/usr/bin/env bash
# The one command that runs every converge test: ./scripts/test.sh [--newest]
#
# Starts a private, throwaway PostgreSQL cluster (scripts/pg-test-cluster.sh; never a server that
# happens to be running), exports CONVERGE_TEST_DATABASE_URL for the Rust DB tests, runs every
# step below, always stops the cluster and deletes its directory on exit, and ends with one
# summary line. Every step runs even if an earlier one failed, so one run reports everything;
# the exit status is non-zero if any step failed.
#
# CARGO_TARGET_DIR defaults to $HOME/.cache/converge-target (outside the clone, so warm runs
# are cheap).
#
# Every tool and test dependency comes at an exact version (Cargo.lock with --locked, Python
# locks with hashes from scripts/pylock.sh, npm ci from committed lockfiles, Go tools at exact
# versions; the first step, scripts/check-pins.py, fails on an install line that is not), so a
# new release anywhere cannot change a run. --newest runs the SDKs' tests against the newest
# releases their runtime ranges allow instead (pyproject.toml, package.json, go.mod: what a
# user installing an SDK today gets), to see breakage in the wild early; it is not the default.
# scripts/test-fresh.sh runs this with empty tool caches, as a new machine would.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}"
# Incremental caches in a target dir shared by every checkout grew to 15 GB and filled the
# disk; a test run recompiles the workspace crates once anyway, so they buy little here.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# Line tables only, not full debug info: a panic's backtrace still names file and line, and
# rustc and the linker skip the type and variable info no test reads (the full kind made
# every test binary about 0.5 GB and was most of each link; see the commit for the timings).
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}"

PASSED=()
FAILED=()
PG_DIR=""

die() {
    echo "test.sh: error: $*" >&2
    exit 1
}

# step NAME CMD...: runs one step, recording whether it passed.
step() {
    local name="$1"
    shift
    echo
    echo "==> $name: $*"
    local start=$SECONDS
    if "$@"; then
        echo "==> $name: ok ($((SECONDS - start))s)"
        PASSED+=("$name")
    else
        echo "==> $name: FAILED ($((SECONDS - start))s)" >&2
        FAILED+=("$name")
    fi
}

# Prepares a fresh machine for what can be installed without asking: the pinned Rust toolchain
# with rustfmt and clippy (rustup), and PostgreSQL's server binaries (apt, when none are found).
# Both README commands then need nothing installed by hand; .ci/run relies on this too.
prepare_machine() {
    # cargo may live in ~/.cargo/bin without being on PATH yet.
    if ! command -v cargo >/dev/null 2>&1 && [[ -x "$HOME/.cargo/bin/cargo" ]]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    fi
    if command -v rustup >/dev/null 2>&1; then
        rustup show active-toolchain >/dev/null
        rustup component add rustfmt clippy >/dev/null 2>&1 || true
        # The WASM guest's target comes from the Rust dist server, not a package registry:
        # try, and let build-rust.sh skip its reproducibility check when it is refused.
        timeout 300 rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
    fi
    "$ROOT/scripts/ensure-postgres.sh"
}

check_toolchains() {
    command -v cargo >/dev/null 2>&1 ||
        die "cargo not found; install Rust with rustup (https://rustup.rs); rust-toolchain.toml pins the version"
    cargo fmt --version >/dev/null 2>&1 || die "rustfmt missing; run: rustup component add rustfmt"
    cargo clippy --version >/dev/null 2>&1 || die "clippy missing; run: rustup component add clippy"
    if [[ -d "$ROOT/sdk-python" ]]; then
        command -v python3 >/dev/null 2>&1 || die "python3 not found; install Python >= 3.11 (the Python SDK's tests need it)"
    fi
    if [[ -d "$ROOT/ui" ]]; then
        command -v npm >/dev/null 2>&1 || die "npm not found; install Node.js >= 20 with npm (the UI's tests need it)"
    fi
    if [[ -d "$ROOT/sdk-ts" ]]; then
        command -v npm >/dev/null 2>&1 || die "npm not found; install Node.js >= 20 with npm (the TypeScript SDK's tests need it)"
    fi
    if [[ -d "$ROOT/sdk-go" ]]; then
        command -v go >/dev/null 2>&1 || die "go not found; install Go >= 1.26 (https://go.dev/dl) for the Go SDK's tests"
    fi
    "$ROOT/scripts/pg-test-cluster.sh" bindir >/dev/null ||
        die "PostgreSQL server binaries not found; install PostgreSQL (apt-get install postgresql) or set PG_BIN_DIR"
}

start_postgres() {
    PG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/converge-test-pg.XXXXXX")"
    trap stop_postgres EXIT
    local env
    env="$("$ROOT/scripts/pg-test-cluster.sh" start "$PG_DIR")" || die "could not start the test PostgreSQL cluster"
    eval "$env"
    # Every SDK's end-to-end tests fail, rather than skip, without a database or binary.
    export CONVERGE_E2E_REQUIRED=1
    echo "test.sh: CONVERGE_TEST_DATABASE_URL=$CONVERGE_TEST_DATABASE_URL"
}

stop_postgres() {
    if [[ -n "${CONVERGE_NEWEST_DIR:-}" ]]; then
        rm -rf "$CONVERGE_NEWEST_DIR"
    fi
    if [[ -n "$PG_DIR" ]]; then
        "$ROOT/scripts/pg-test-cluster.sh" stop "$PG_DIR" || true
        PG_DIR=""
    fi
}

rust_steps() {
    step "rust fmt" cargo fmt --all -- --check
    step "rust clippy" cargo clippy --locked --workspace --all-targets --all-features -- -D warnings
    # Tests spawn the real binaries from the target dir, so build them first, and with the
    # features `cargo test` resolves: it unifies the dev-dependencies' features (test-util),
    # so a plain `cargo build --bins` is another build of every workspace crate that the test
    # step then redoes. `--all-targets` builds the tests too, and every bin as an executable.
    step "rust build" cargo build --locked --workspace --all-targets --all-features
    # The Starlark sample compose the API runs at provider-config apply (its own workspace,
    # see compose-dsl/Cargo.toml), built beside `converge` so the tests find it there. Built
    # as its own tests build it (converge-starlark's integration tests build the bin), so the
    # "compose-dsl test" step below compiles nothing again.
    step "starlark compose bin" cargo test --locked --manifest-path "$ROOT/compose-dsl/Cargo.toml" \
        --workspace --no-run
    # Several test binaries at a time (scripts/rust-test.py: they mostly wait, and cargo test
    # runs them one after another), every one even when one fails.
    step "rust test" "$ROOT/scripts/rust-test.py" --locked --workspace --all-features
}

# --- WorkerService contract (proto/) -------------------------------------------------------
# buf lint and buf breaking against the previous commit's proto (scripts/buf.sh installs a
# pinned buf from npm, and fails rather than skips when it cannot).
proto_steps() {
    step "proto (buf lint, buf breaking)" "$ROOT/scripts/buf.sh"
}

# --- Separate Rust workspaces (compose-dsl/, wasm-host/, stdworker/) -------------------------
# Kept out of the main workspace on purpose (starlark turns on serde_json's
# arbitrary_precision for every crate in a build; wasmtime is heavy), so each is checked on
# its own, sharing the target dir. stdworker's e2e tests run the `converge` binary built by
# rust_steps above (CONVERGE_BIN or $CARGO_TARGET_DIR/debug/converge).
side_workspace_steps() {
    local ws
    for ws in compose-dsl wasm-host stdworker; do
        [[ -f "$ROOT/$ws/Cargo.toml" ]] || continue
        step "$ws fmt" cargo fmt --manifest-path "$ROOT/$ws/Cargo.toml" --all -- --check
        step "$ws clippy" cargo clippy --locked --manifest-path "$ROOT/$ws/Cargo.toml" --workspace --all-targets -- -D warnings
        step "$ws test" "$ROOT/scripts/rust-test.py" --locked --manifest-path "$ROOT/$ws/Cargo.toml" --workspace
    done
}

# --- The docs (README.md, examples/*/README.md) ------------------------------------------
# Every shell block, run as pasted and in order against a live converge on a fresh database
# (scripts/docs-run.py; its header has the markers for background, skipped and failing
# blocks), after the runner's own check that it fails where it should. It runs the binaries
# built above: converge, conctl and the example workers by rust_steps, stdworker by
# side_workspace_steps.
docs_run() {
    python3 "$ROOT/scripts/docs-run.py" --self-test && python3 "$ROOT/scripts/docs-run.py"
}

docs_steps() {
    step "docs (README shell blocks)" docs_run
}

# --- WASM guests (wasm-host/guests/) ---------------------------------------------------
# The committed Rust guest fixture must be what its sources build (byte for byte; skipped
# with a message when the wasm32-wasip2 target cannot be had). The Python guest is built
# with a pinned componentize-py from PyPI (not committed: ~18 MB) and tested against the
# host with the python-guest feature, which the side-workspace steps leave off.
python_guest() {
    "$ROOT/wasm-host/guests/build-python.sh" &&
        cargo clippy --locked --manifest-path "$ROOT/wasm-host/Cargo.toml" --all-targets --all-features -- -D warnings &&
        cargo test --locked --manifest-path "$ROOT/wasm-host/Cargo.toml" --features python-guest --test guest_python
}

wasm_guest_steps() {
    [[ -d "$ROOT/wasm-host/guests" ]] || return 0
    step "wasm rust guest reproducible" "$ROOT/wasm-host/guests/build-rust.sh" --check
    step "wasm python guest" python_guest
}

# --- Python SDK (sdk-python/) -------------------------------------------------------------
# mypy, the generated-code drift check and pytest (unit, stream and e2e against the real
# converge built above), in a venv holding exactly scripts/pylock/sdk-test.txt
# (sdk-python/scripts/venv.sh; with --newest, the newest releases pyproject.toml allows).
python_sdk_steps() {
    [[ -d "$ROOT/sdk-python" ]] || return 0
    step "python sdk" "$ROOT/sdk-python/scripts/test.sh"
}

# --- Go SDK (sdk-go/) ---------------------------------------------------------------------
# gofmt, go vet, the generated-code drift check and go test (e2e against the real converge).
go_sdk_steps() {
    [[ -d "$ROOT/sdk-go" ]] || return 0
    step "go sdk" "$ROOT/sdk-go/scripts/test.sh"
}

# --- TypeScript SDK (sdk-ts/) -------------------------------------------------------------
# npm ci, strict tsc, the generated-code drift check, an install from a fresh copy, and
# node:test (e2e against the real converge).
ts_sdk_steps() {
    [[ -d "$ROOT/sdk-ts" ]] || return 0
    step "ts sdk" "$ROOT/sdk-ts/scripts/test.sh"
}

# --- Conformance (conformance/) -----------------------------------------------------------
# The same scenarios against every worker form (Rust, Python, Go, TypeScript, exec, wasm), one table.
conformance_steps() {
    [[ -d "$ROOT/conformance" ]] || return 0
    step "conformance" "$ROOT/conformance/run.sh"
}

# --- HTTP API contract (control/openapi.json) --------------------------------------------
# The committed OpenAPI document and the UI's types generated from it must be what the
# handlers produce now (scripts/gen-api-types.sh --check names the command that fixes a
# drift); then schemathesis fuzzes a live converge against that document and fails on any
# 5xx or answer the document does not describe (scripts/api-fuzz.sh). Both use the binary
# built by rust_steps.
api_contract_steps() {
    [[ -f "$ROOT/control/openapi.json" ]] || return 0
    local bin="${CONVERGE_BIN:-$CARGO_TARGET_DIR/debug/converge}"
    step "api contract drift" env CONVERGE_BIN="$bin" "$ROOT/scripts/gen-api-types.sh" --check
    step "api fuzz (schemathesis)" env CONVERGE_BIN="$bin" "$ROOT/scripts/api-fuzz.sh"
}

# --- Deployment (Containerfile, stdworker/Containerfile, deploy/helm/converge) -------------
# The Containerfiles' paths, packages and users; helm lint and helm template of the chart,
# each rendering validated by kubeconform -strict against Kubernetes' schemas and the
# ServiceMonitor CRD's, offline. Helm, kubeconform and the schemas are installed at pinned
# versions by scripts/deploy-tools.sh (Go module proxy, PyPI); failing to install fails the step.
deploy_steps() {
    [[ -d "$ROOT/deploy" ]] || return 0
    step "deploy (containerfiles, helm chart)" "$ROOT/scripts/deploy-check.sh"
}

# --- UI (ui/) -----------------------------------------------------------------------------
# Typecheck, Vitest, the production build embedded into converge, and the browser tests
# (Playwright + Debian's Chromium, installed when missing) against the real converge.
ui_steps() {
    [[ -d "$ROOT/ui" ]] || return 0
    step "ui" "$ROOT/ui/scripts/test.sh"
}

# --- Pins (scripts/check-pins.py) -----------------------------------------------------------
# Every install line pinned, every lock present and current; after the rules' own check that
# they refuse what they should.
pins() {
    python3 "$ROOT/scripts/check-pins.py" --self-test && python3 "$ROOT/scripts/check-pins.py"
}

pin_steps() {
    step "pins (exact test dependencies)" pins
}

parse_args() {
    while (($# > 0)); do
        case "$1" in
        --newest)
            # Read by sdk-python/scripts/venv.sh, sdk-go/scripts/test.sh, sdk-ts/scripts/test.sh.
            export CONVERGE_DEPS=newest
            CONVERGE_NEWEST_DIR="$(mktemp -d "${TMPDIR:-/tmp}/converge-newest.XXXXXX")"
            export CONVERGE_NEWEST_DIR
            ;;
        -h | --help)
            sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *) die "unknown argument $1 (usage: scripts/test.sh [--newest])" ;;
        esac
        shift
    done
}

main() {
    local start=$SECONDS
    parse_args "$@"
    prepare_machine
    check_toolchains
    start_postgres
    pin_steps
    rust_steps
    proto_steps
    api_contract_steps
    side_workspace_steps
    docs_steps
    wasm_guest_steps
    python_sdk_steps
    go_sdk_steps
    ts_sdk_steps
    conformance_steps
    deploy_steps
    ui_steps
    stop_postgres
    if [[ -n "${CONVERGE_NEWEST_DIR:-}" ]]; then
        echo "test.sh: the SDK steps ran against the newest releases their ranges allow (--newest)"
    fi

    echo
    local total=$((${#PASSED[@]} + ${#FAILED[@]}))
    if ((${#FAILED[@]} > 0)); then
        local IFS=","
        echo "test.sh: FAILED ${#FAILED[@]} of $total steps (${FAILED[*]}) in $((SECONDS - start))s" >&2
        exit 1
    fi
    echo "test.sh: all $total steps passed in $((SECONDS - start))s"
}

main "$@"
