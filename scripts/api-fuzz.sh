#!/usr/bin/env bash
# Fuzzes the HTTP API against its own OpenAPI document: starts a real `converge` (ROLE=control)
# on a fresh database, seeds a kind and a resource, and runs schemathesis (locked with its
# dependencies in scripts/pylock/schemathesis.txt, in a venv made by scripts/pylock.sh) on every operation of GET /openapi.json. Fails on any 5xx,
# an undocumented status, a wrong content type, or a body that violates its schema.
#
#   CONVERGE_TEST_DATABASE_URL   admin URL of a throwaway server (scripts/pg-test-cluster.sh)
#   CONVERGE_BIN                 the binary (default: built into CARGO_TARGET_DIR)
#   API_FUZZ_MAX_EXAMPLES        examples per operation and phase (default 200)
#   API_FUZZ_SEED                hypothesis seed (default 1: a run is reproducible)
#
# Bounded: examples per operation (no --max-time, which would repeat fuzzing until it is
# spent), a 10 s request timeout (2 s for the two reads that can stream, see
# scripts/api_fuzz.toml), and the whole run under `timeout` (API_FUZZ_TIMEOUT, 900 s).
# A `watch=true` stream never ends by itself: scripts/api_fuzz_hooks.py drops that value.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

: "${CONVERGE_TEST_DATABASE_URL:?set it (eval \"\$(scripts/pg-test-cluster.sh start DIR)\")}"
max_examples="${API_FUZZ_MAX_EXAMPLES:-200}"
seed="${API_FUZZ_SEED:-1}"

venv="$(scripts/pylock.sh venv schemathesis)"

target="${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}"
bin="${CONVERGE_BIN:-}"
if [[ -z "$bin" ]]; then
    CARGO_TARGET_DIR="$target" cargo build --locked -q -p converge --bin converge
    bin="$target/debug/converge"
fi

psql=("$(scripts/pg-test-cluster.sh bindir)/psql" -X -q -v ON_ERROR_STOP=1)
db="api_fuzz_$$"
db_url="${CONVERGE_TEST_DATABASE_URL%/*}/$db"
work="$(mktemp -d)"
pid=""
cleanup() {
    if [[ -n "$pid" ]]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    "${psql[@]}" "$CONVERGE_TEST_DATABASE_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
    rm -rf "$work"
}
trap cleanup EXIT
"${psql[@]}" "$CONVERGE_TEST_DATABASE_URL" -c "CREATE DATABASE $db"

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:$port"
env -i PATH="$PATH" HOME="$HOME" ROLE=control DATABASE_URL="$db_url" LISTEN_ADDR="127.0.0.1:$port" \
    RUST_LOG="${RUST_LOG:-warn}" "$bin" serve >"$work/converge.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
    curl -fsS "$base/readyz" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/converge.log" >&2; exit 1; }
    sleep 0.1
done
curl -fsS "$base/readyz" >/dev/null

# Something to find: a kind, a resource of it, a provider config.
curl -fsS -X PUT -H 'content-type: application/json' --data @examples/hello/kind-hello.json \
    "$base/api/v1/kinds/hello/manifest" >/dev/null
curl -fsS -H 'content-type: application/json' \
    --data '{"kind":"hello","kind_version":1,"name":"app","spec":{"greeting":"hi"}}' \
    "$base/api/v1/resources" >/dev/null
curl -fsS -H 'content-type: application/json' \
    --data '{"name":"hello-default","kind":"hello","kind_version":1,"is_default":true,"spec":{}}' \
    "$base/api/v1/providerconfigs" >/dev/null

status=0
# From the work dir: hypothesis keeps its example database there, not in the repository.
(cd "$work" && PYTHONPATH="$ROOT/scripts" SCHEMATHESIS_HOOKS=api_fuzz_hooks \
    timeout "${API_FUZZ_TIMEOUT:-900}" "$venv/bin/schemathesis" \
    --config-file "$ROOT/scripts/api_fuzz.toml" run "$base/openapi.json" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --max-examples "$max_examples" \
    --seed "$seed" \
    --workers 1 \
    --generation-database none \
    --suppress-health-check all \
    --no-color) || status=$?
if ((status != 0)); then
    echo "api fuzz: converge's log (last 50 lines):" >&2
    tail -n 50 "$work/converge.log" >&2
fi
exit "$status"
