#!/usr/bin/env bash
# Regenerates the committed protobuf code (src/gen/) from proto/converge/worker/v1/worker.proto
# with the pinned generator: buf and protoc-gen-es from package.json (npm ci first).
#
#   sdk-ts/scripts/gen.sh [OUT_DIR]     (default: sdk-ts/src/gen)
set -euo pipefail

sdk="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$sdk/src/gen}"
cd "$sdk"
[[ -x node_modules/.bin/buf && -x node_modules/.bin/protoc-gen-es ]] ||
    { echo "gen.sh: run 'npm ci' in sdk-ts first (buf and protoc-gen-es come from npm)" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Generate into a scratch dir, then replace OUT_DIR whole, so a removed file does not linger.
sed "s#out: src/gen#out: $tmp/gen#" buf.gen.yaml >"$tmp/buf.gen.yaml"
node_modules/.bin/buf generate ../proto --template "$tmp/buf.gen.yaml"
rm -rf "$out"
mkdir -p "$(dirname "$out")"
cp -r "$tmp/gen" "$out"
