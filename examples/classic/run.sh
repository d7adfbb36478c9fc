#!/usr/bin/env bash
# The classic demo against a running converge: applies the five kind manifests, starts the
# classic worker, applies the sample BOM (2 functional domains × 3 teams = 24 children) and
# prints the BOM's phase changes until it is Ready, then its rolled-up status.
#
#   converge dev &                 # or ./scripts/demo.sh in another terminal
#   ./examples/classic/run.sh
#
# Environment: CONVERGE_SERVER (http://127.0.0.1:8080), BROKER_ADDR (http://127.0.0.1:9090),
# CLASSIC_LATENCY_MS (0; e.g. 500 to watch the DAG unfold), CLASSIC_TIMEOUT_SECS (120),
# CLASSIC_WORKER (path to a prebuilt classic-worker; built with cargo otherwise),
# CLASSIC_EXIT=1 stops the worker and exits once the BOM is Ready (otherwise the worker keeps
# serving until Ctrl-C, so you can edit the BOM and watch it reconcile).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

API="${CONVERGE_SERVER:-http://127.0.0.1:8080}"
API="${API%/}"
export BROKER_ADDR="${BROKER_ADDR:-http://127.0.0.1:9090}"
export CLASSIC_LATENCY_MS="${CLASSIC_LATENCY_MS:-0}"
TIMEOUT="${CLASSIC_TIMEOUT_SECS:-120}"
BOM_NAME=demo-bom

command -v curl >/dev/null || { echo "classic: curl is required" >&2; exit 1; }

phase_of() { sed -n 's/.*"phase" *: *"\([A-Za-z]*\)".*/\1/p' | head -1; }

curl -fsS "$API/readyz" >/dev/null 2>&1 || {
    echo "classic: no converge answering at $API (start one with 'converge dev' or set CONVERGE_SERVER)" >&2
    exit 1
}

echo "==> applying the kind manifests to $API"
for kind in account vpc tgw route classicbom; do
    printf '    %-10s ' "$kind"
    curl -fsS -X PUT "$API/api/v1/kinds/$kind/manifest" -H 'content-type: application/json' \
        --data-binary @"$here/manifests/$kind.json" -o /dev/null -w '%{http_code}\n'
done

worker="${CLASSIC_WORKER:-}"
if [ -z "$worker" ]; then
    command -v cargo >/dev/null || { echo "classic: cargo is required (or set CLASSIC_WORKER)" >&2; exit 1; }
    echo "==> building the classic worker"
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}"
    (cd "$root" && cargo build --locked --release --quiet -p classic-worker)
    worker="$CARGO_TARGET_DIR/release/classic-worker"
fi

worker_pid=""
cleanup() {
    if [ -n "$worker_pid" ]; then
        kill -TERM "$worker_pid" 2>/dev/null || true
        wait "$worker_pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT INT TERM

echo "==> starting the classic worker (broker $BROKER_ADDR, latency ${CLASSIC_LATENCY_MS}ms)"
WORKER_NAME="${WORKER_NAME:-classic-demo}" LOG_LEVEL="${LOG_LEVEL:-warn}" "$worker" &
worker_pid=$!

echo "==> applying the BOM $BOM_NAME (examples/classic/bom.json)"
curl -fsS -X POST "$API/api/v1/resources" -H 'content-type: application/json' \
    --data-binary @"$here/bom.json" -o /dev/null -w '    HTTP %{http_code}\n'

last=""
body=""
deadline=$((SECONDS + TIMEOUT))
while [ "$SECONDS" -lt "$deadline" ]; do
    kill -0 "$worker_pid" 2>/dev/null || { echo "classic: the worker exited" >&2; worker_pid=""; exit 1; }
    body="$(curl -fsS "$API/api/v1/resources/classicbom/$BOM_NAME" || true)"
    phase="$(printf '%s' "$body" | phase_of)"
    if [ -n "$phase" ] && [ "$phase" != "$last" ]; then
        echo "    classicbom/$BOM_NAME: $phase"
        last="$phase"
    fi
    [ "$phase" = "Ready" ] && break
    sleep 0.2
done

echo "==> classicbom/$BOM_NAME"
printf '%s' "$body" | python3 -m json.tool 2>/dev/null || printf '%s\n' "$body"
[ "$last" = "Ready" ] || { echo "classic: $BOM_NAME is $last, not Ready, after ${TIMEOUT}s" >&2; exit 1; }

echo "==> children: curl $API/api/v1/resources/classicbom/$BOM_NAME/children"
if [ "${CLASSIC_EXIT:-0}" = "1" ]; then
    exit 0
fi
echo "==> the worker keeps serving; edit examples/classic/bom.json and re-POST it to watch a recompose (Ctrl-C stops)"
wait "$worker_pid"
