#!/usr/bin/env bash
# The demo: builds converge and the hello worker, starts `converge dev` (a private PostgreSQL
# from the system binaries plus every duty), starts the hello worker, applies the example
# kind and resource, and prints the resource going Reconciling -> Ready. Then it keeps
# running so you can explore http://127.0.0.1:8080/api/v1/resources (Ctrl-C stops all).
#
#   ./scripts/demo.sh            # DEMO_EXIT=1 stops as soon as the resource is Ready
#   ./scripts/demo.sh EXAMPLE    # the same for one of examples/ (release builds of what it needs):
#       classic      examples/classic: a BOM of 24 leaves composed by classic-worker
#       datadriven   examples/datadriven: the BOM as a Starlark bundle and as CEL graphs (stdworker)
#       exec         examples/exec-hello: a Python script run by stdworker's exec provider
#       python       examples/python-worker (a venv from scripts/pylock/python-worker.txt)
#       go           examples/go-worker (go build)
#       ts           examples/ts-worker (npm ci, tsc)
#
# DEMO_PREBUILT=DIR runs the Rust binaries already in DIR (converge, conctl, the workers,
# stdworker, converge-starlark-compose; e.g. $CARGO_TARGET_DIR/debug) instead of building them
# in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}"
HTTP_ADDR="${LISTEN_ADDR:-127.0.0.1:8080}"
BROKER_ADDR_LISTEN="${BROKER_LISTEN_ADDR:-127.0.0.1:9090}"
API="http://${HTTP_ADDR}"
BROKER="http://${BROKER_ADDR_LISTEN}"
DATA_DIR="${CONVERGE_DEV_DIR:-$PWD/.converge}"
BIN="${DEMO_PREBUILT:-$CARGO_TARGET_DIR/release}"

EXAMPLE="${1:-hello}"
case "$EXAMPLE" in
hello | classic | datadriven | exec | python | go | ts) ;;
-h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
*) echo "demo: unknown example '$EXAMPLE' (classic, datadriven, exec, python, go or ts; none for hello)" >&2; exit 2 ;;
esac
(($# <= 1)) || { echo "demo: one example at most" >&2; exit 2; }

need() { command -v "$1" >/dev/null || { echo "demo: $1 is required${2:+ ($2)}" >&2; exit 1; }; }
need cargo "https://rustup.rs"
need curl
# `converge dev` runs PostgreSQL from the system's server binaries: install them if absent.
scripts/ensure-postgres.sh

# --- build (release) ------------------------------------------------------------------------
if command -v npm >/dev/null 2>&1; then
    echo "==> building the web UI (ui/, embedded into converge)"
    (cd ui && npm ci --no-audit --no-fund --silent && npx --no-install vite build --logLevel warn)
else
    echo "==> npm not found: converge will serve a page saying how to build the UI" >&2
fi
if [[ -n "${DEMO_PREBUILT:-}" ]]; then
    echo "==> using the binaries in $BIN (DEMO_PREBUILT)"
    [[ -x "$BIN/converge" ]] || { echo "demo: no converge in $BIN" >&2; exit 1; }
fi
if [[ -z "${DEMO_PREBUILT:-}" ]]; then
    packages=(-p converge)
    case "$EXAMPLE" in
    hello) packages+=(-p hello-worker) ;;
    classic | datadriven) packages+=(-p classic-worker) ;;
    esac
    echo "==> building converge${packages[2]:+ and ${packages[3]}} (release)"
    cargo build --locked --release --quiet "${packages[@]}"
    if [[ "$EXAMPLE" == datadriven ]]; then
        # converge runs a Starlark bundle on its config's sample_spec at apply with this
        # program, found beside itself; its own workspace keeps starlark out of converge's build.
        echo "==> building converge-starlark-compose (release)"
        cargo build --locked --release --quiet --manifest-path compose-dsl/Cargo.toml -p converge-starlark \
            --bin converge-starlark-compose
    fi
    if [[ "$EXAMPLE" == datadriven || "$EXAMPLE" == exec ]]; then
        echo "==> building stdworker (release; its own workspace, the longest build)"
        cargo build --locked --release --quiet --manifest-path stdworker/Cargo.toml --bin stdworker
    fi
fi
case "$EXAMPLE" in
python)
    need python3 "Python >= 3.11"
    echo "==> a venv for examples/python-worker from scripts/pylock/python-worker.txt"
    venv=examples/python-worker/.venv
    [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r scripts/pylock/python-worker.txt
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e sdk-python
    ;;
go)
    need go "Go >= 1.26"
    echo "==> building examples/go-worker"
    go -C examples/go-worker build -o go-worker .
    ;;
ts)
    need npm "Node.js >= 20 with npm"
    echo "==> installing and building examples/ts-worker (npm ci, tsc)"
    npm ci --prefix examples/ts-worker --no-audit --no-fund --silent
    npm run --prefix examples/ts-worker --silent build
    ;;
esac
mkdir -p "$DATA_DIR"

# --- run ------------------------------------------------------------------------------------
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

echo "==> starting converge dev (data in $DATA_DIR, log in $DATA_DIR/converge.log)"
LISTEN_ADDR="$HTTP_ADDR" BROKER_LISTEN_ADDR="$BROKER_ADDR_LISTEN" CONVERGE_DEV_DIR="$DATA_DIR" \
    "$BIN/converge" dev >"$DATA_DIR/converge.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 600); do
    curl -fsS "$API/readyz" >/dev/null 2>&1 && break
    kill -0 "${pids[0]}" 2>/dev/null || { echo "demo: converge exited; see $DATA_DIR/converge.log" >&2; tail -20 "$DATA_DIR/converge.log" >&2; exit 1; }
    sleep 0.1
done
curl -fsS "$API/readyz" >/dev/null || { echo "demo: converge did not become ready" >&2; exit 1; }
echo "    API $API  broker $BROKER"

# apply_manifest FILE, apply_config FILE (a provider config document on stdin when FILE is -),
# apply FILE: the API calls every example makes.
apply_manifest() {
    local kind
    kind=$(sed -n 's/^ *"kind" *: *"\([^"]*\)".*/\1/p' "$1" | head -1)
    echo "    manifest $kind: $(curl -fsS -X PUT "$API/api/v1/kinds/$kind/manifest" \
        -H 'content-type: application/json' --data-binary @"$1" -o /dev/null -w '%{http_code}')"
}
apply_config() {
    # POST creates; an existing config (a second run on the same .converge) is replaced by name.
    local body name code
    body=$(cat "$1")
    name=$(printf '%s' "$body" | sed -n 's/^[{ ]*"name" *: *"\([^"]*\)".*/\1/p' | head -1)
    code=$(printf '%s' "$body" | curl -sS -X POST "$API/api/v1/providerconfigs" \
        -H 'content-type: application/json' --data-binary @- -o /dev/null -w '%{http_code}')
    if [[ "$code" == 409 ]]; then
        code=$(printf '%s' "$body" | curl -sS -X PUT "$API/api/v1/providerconfigs/$name" \
            -H 'content-type: application/json' --data-binary @- -o /dev/null -w '%{http_code}')
    fi
    echo "    provider config $name: $code"
    [[ "$code" == 20? ]] || { echo "demo: the provider config $name was refused (HTTP $code)" >&2; exit 1; }
}
apply() {
    curl -fsS -X POST "$API/api/v1/resources" -H 'content-type: application/json' \
        --data-binary @"$1" -D - -o /dev/null | grep -i '^x-apply-result' | sed 's/^/    /' || true
}
# start NAME CMD...: a worker in the background, stopped with the demo.
start() {
    local name="$1"
    shift
    echo "==> starting $name"
    WORKER_NAME="demo-$name" LOG_LEVEL="${LOG_LEVEL:-warn}" "$@" &
    pids+=($!)
}
# watch KIND NAME: prints the resource's phase changes until it is Ready, then the resource.
watch() {
    local kind="$1" name="$2" last="" body="" phase
    for _ in $(seq 1 2400); do
        body=$(curl -fsS "$API/api/v1/resources/$kind/$name" 2>/dev/null || true)
        phase=$(printf '%s' "$body" | sed -n 's/.*"phase":"\([A-Za-z]*\)".*/\1/p')
        if [[ -n "$phase" && "$phase" != "$last" ]]; then
            echo "    $kind/$name: $phase"
            last="$phase"
        fi
        [[ "$phase" == Ready ]] && break
        sleep 0.05
    done
    echo "==> $kind/$name"
    printf '%s' "$body" | python3 -m json.tool 2>/dev/null || printf '%s\n' "$body"
    [[ "$last" == Ready ]] || { echo "demo: $kind/$name did not become Ready" >&2; exit 1; }
}

case "$EXAMPLE" in
hello)
    echo "==> applying the hello kind manifest"
    apply_manifest examples/hello/kind-hello.json
    start worker env BROKER_ADDR="$BROKER" WORKER_NAME=demo-worker "$BIN/hello-worker"
    echo "==> applying examples/hello/hello.json"
    apply examples/hello/hello.json
    watch hello "$(sed -n 's/.*"name" *: *"\([^"]*\)".*/\1/p' examples/hello/hello.json | head -1)"
    ;;
classic)
    echo "==> applying the classic kinds"
    for k in account vpc tgw route classicbom statussink; do apply_manifest "examples/classic/manifests/$k.json"; done
    start classic-worker env BROKER_ADDR="$BROKER" "$BIN/classic-worker"
    echo "==> applying examples/classic/bom.json (2 domains x 3 teams = 24 leaves)"
    apply examples/classic/bom.json
    watch classicbom demo-bom
    ;;
datadriven)
    echo "==> applying the leaf kinds and the data-driven composite kinds"
    for k in account vpc tgw route; do apply_manifest "examples/classic/manifests/$k.json"; done
    for m in examples/datadriven/manifests/*.json; do apply_manifest "$m"; done
    start classic-worker env BROKER_ADDR="$BROKER" WORKER_KINDS=account,vpc,tgw,route "$BIN/classic-worker"
    start stdworker env BROKER_ADDR="$BROKER" STDWORKER_STARLARK_KINDS=starbom \
        STDWORKER_CEL_KINDS=celbom,celteam "$BIN/stdworker"
    echo "==> the composers as provider configs: the Starlark bundle, the CEL graphs"
    python3 examples/datadriven/bundle.py examples/datadriven/starlark-providerconfig.json \
        examples/datadriven/starlark | apply_config -
    for c in celbom celteam; do apply_config "examples/datadriven/cel/$c-providerconfig.json"; done
    echo "==> applying examples/datadriven/star-bom.json and cel-bom.json"
    apply examples/datadriven/star-bom.json
    apply examples/datadriven/cel-bom.json
    watch starbom star-bom
    watch celbom cel-bom
    ;;
exec)
    echo "==> applying the exec-hello kind and its provider config (the program stdworker runs)"
    apply_manifest examples/exec-hello/kind-exec-hello.json
    apply_config examples/exec-hello/providerconfig.json
    # The handler runs under python3: the one program this demo's stdworker may start.
    start stdworker env BROKER_ADDR="$BROKER" STDWORKER_EXEC_KINDS=exec-hello \
        STDWORKER_EXEC_ALLOW="$(command -v python3)" "$BIN/stdworker"
    apply examples/exec-hello/world.json
    watch exec-hello world
    ;;
python | go | ts)
    case "$EXAMPLE" in
    python) kind=pynote; dir=examples/python-worker; cmd=("$dir/.venv/bin/python" "$dir/worker.py") ;;
    go) kind=gonote; dir=examples/go-worker; cmd=("$dir/go-worker") ;;
    ts) kind=tsnote; dir=examples/ts-worker; cmd=(node "$dir/dist/worker.js") ;;
    esac
    echo "==> applying the $kind manifest the worker generates from its types"
    manifest="$DATA_DIR/$kind.json"
    "${cmd[@]}" manifest >"$manifest"
    apply_manifest "$manifest"
    # Logged at info: the worker says what it serves and every file it writes.
    LOG_LEVEL="${LOG_LEVEL:-info}" start "$kind-worker" env BROKER_ADDR="$BROKER" "${cmd[@]}"
    echo "==> applying $dir/note.json"
    apply "$dir/note.json"
    watch "$kind" hello
    note=$(curl -fsS "$API/api/v1/resources/$kind/hello" | sed -n 's/.*"path":"\([^"]*\)".*/\1/p')
    echo "==> the note it wrote, $note:"
    cat "$note"
    ;;
esac

if [ "${DEMO_EXIT:-0}" = "1" ]; then
    exit 0
fi
echo "==> converge is running; try: curl $API/api/v1/resources   (Ctrl-C to stop)"
wait "${pids[0]}"
