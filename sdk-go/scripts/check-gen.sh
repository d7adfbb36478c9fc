#!/usr/bin/env bash
# Drift check: regenerates converge.worker.v1 into a temp dir with the pinned tools of
# gen.sh and fails if the committed gen/workerv1 differs (the proto changed, or someone
# edited generated code by hand).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
sdk="$(dirname "$here")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

"$here/gen.sh" "$tmp"
status=0
for f in worker.pb.go worker_grpc.pb.go; do
    if ! diff -u "$sdk/gen/workerv1/$f" "$tmp/$f"; then
        status=1
    fi
done
if [[ $status -ne 0 ]]; then
    echo "check-gen.sh: gen/workerv1 is stale; run sdk-go/scripts/gen.sh" >&2
    exit 1
fi
echo "check-gen.sh: generated code is up to date" >&2
