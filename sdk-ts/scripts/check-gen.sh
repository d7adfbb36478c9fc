#!/usr/bin/env bash
# The drift check: regenerates the protobuf code into a temp dir and fails, naming the
# command that fixes it, if the committed src/gen/ differs.
set -euo pipefail

sdk="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$sdk/scripts/gen.sh" "$tmp/gen"
if ! diff -ru "$sdk/src/gen" "$tmp/gen"; then
    echo "check-gen.sh: sdk-ts/src/gen is stale; run sdk-ts/scripts/gen.sh and commit the result" >&2
    exit 1
fi
echo "check-gen.sh: src/gen matches proto/" >&2
