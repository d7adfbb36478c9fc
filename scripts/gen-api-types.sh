#!/usr/bin/env bash
# Rewrites the HTTP API's committed contract and the UI's types made from it:
#   control/openapi.json       what `converge openapi` prints (= GET /openapi.json)
#   ui/src/api/schema.gen.ts   openapi-typescript's types of that document
#
#   scripts/gen-api-types.sh           # regenerate both
#   scripts/gen-api-types.sh --check   # exit 1 with the diff when either is stale
#
# The document comes from the binary (CONVERGE_BIN, else a `cargo build -p converge` into
# CARGO_TARGET_DIR, default $HOME/.cache/converge-target); the generator is the version pinned
# in ui/package.json (devDependency, installed by `npm ci` when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

check=false
case "${1:-}" in
    --check) check=true ;;
    "") ;;
    *)
        echo "usage: $0 [--check]" >&2
        exit 2
        ;;
esac

target="${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}"
bin="${CONVERGE_BIN:-}"
if [[ -z "$bin" ]]; then
    CARGO_TARGET_DIR="$target" cargo build --locked -q -p converge --bin converge
    bin="$target/debug/converge"
fi
if [[ ! -x ui/node_modules/.bin/openapi-typescript ]]; then
    (cd ui && npm ci --no-audit --no-fund >/dev/null)
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$bin" openapi >"$out/openapi.json"
# --root-types-no-schema-prefix: `components['schemas']['X']` is also exported as `X`.
(cd ui && npx --no-install openapi-typescript "$out/openapi.json" \
    --root-types --root-types-no-schema-prefix \
    -o "$out/schema.gen.ts" >/dev/null)

if ! $check; then
    cp "$out/openapi.json" control/openapi.json
    cp "$out/schema.gen.ts" ui/src/api/schema.gen.ts
    echo "wrote control/openapi.json and ui/src/api/schema.gen.ts"
    exit 0
fi
stale=0
diff -u control/openapi.json "$out/openapi.json" || stale=1
diff -u ui/src/api/schema.gen.ts "$out/schema.gen.ts" || stale=1
if ((stale)); then
    echo "the API contract or the UI's API types are stale; run scripts/gen-api-types.sh and commit the result" >&2
    exit 1
fi
