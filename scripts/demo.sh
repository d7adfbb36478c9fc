#!/usr/bin/env bash
# The demo: builds converge and the hello worker, starts `converge dev` (a private PostgreSQL
# from the system binaries plus every duty), starts the hello worker, applies the example
# kind and resource, and prints the resource going Reconciling -> Ready. Then it keeps
# running so you can explore http://127.0.0.1:8080/api/v1/resources (Ctrl-C stops all).
#
#   ./scripts/demo.sh            # DEMO_EXIT=1 stops as soon as the resource is Ready
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}"
HTTP_ADDR="${LISTEN_ADDR:-127.0.0.1:8080}"
BROKER_ADDR_LISTEN="${BROKER_LISTEN_ADDR:-127.0.0.1:9090}"
API="http://${HTTP_ADDR}"
DATA_DIR="${CONVERGE_DEV_DIR:-$PWD/.converge}"

command -v cargo >/dev/null || { echo "demo: cargo is required (https://rustup.rs)" >&2; exit 1; }
command -v curl >/dev/null || { echo "demo: curl is required" >&2; exit 1; }
# `converge dev` runs PostgreSQL from the system's server binaries: install them if absent.
scripts/ensure-postgres.sh

if command -v npm >/dev/null 2>&1; then
    echo "==> building the web UI (ui/, embedded into converge)"
    (cd ui && npm ci --no-audit --no-fund --silent && npx --no-install vite build --logLevel warn)
else
    echo "==> npm not found: converge will serve a page saying how to build the UI" >&2
fi
echo "==> building converge and the hello worker (release)"
cargo build --locked --release --quiet -p converge -p hello-worker
BIN="$CARGO_TARGET_DIR/release"
mkdir -p "$DATA_DIR"

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
echo "    API $API  broker http://$BROKER_ADDR_LISTEN"

echo "==> applying the hello kind manifest"
curl -fsS -X PUT "$API/api/v1/kinds/hello/manifest" -H 'content-type: application/json' \
    --data-binary @examples/hello/kind-hello.json; echo

echo "==> starting the hello worker"
BROKER_ADDR="http://$BROKER_ADDR_LISTEN" WORKER_NAME=demo-worker LOG_LEVEL=warn "$BIN/hello-worker" &
pids+=($!)

echo "==> applying examples/hello/hello.json"
curl -fsS -X POST "$API/api/v1/resources" -H 'content-type: application/json' \
    --data-binary @examples/hello/hello.json -D - -o /dev/null | grep -i '^x-apply-result' || true

name=$(sed -n 's/.*"name" *: *"\([^"]*\)".*/\1/p' examples/hello/hello.json | head -1)
last=""
for _ in $(seq 1 600); do
    body=$(curl -fsS "$API/api/v1/resources/hello/$name")
    phase=$(printf '%s' "$body" | sed -n 's/.*"phase":"\([A-Za-z]*\)".*/\1/p')
    if [ "$phase" != "$last" ]; then
        echo "    hello/$name: $phase"
        last="$phase"
    fi
    [ "$phase" = "Ready" ] && break
    sleep 0.05
done
echo "==> hello/$name"
printf '%s' "$body" | python3 -m json.tool 2>/dev/null || printf '%s\n' "$body"
[ "$last" = "Ready" ] || { echo "demo: the resource did not become Ready" >&2; exit 1; }

if [ "${DEMO_EXIT:-0}" = "1" ]; then
    exit 0
fi
echo "==> converge is running; try: curl $API/api/v1/resources   (Ctrl-C to stop)"
wait "${pids[0]}"
