#!/usr/bin/env bash
# Regenerates the protobuf/gRPC Python code of converge.worker.v1 from the repo's worker.proto.
#
#   sdk-python/scripts/gen.sh [OUT_DIR]     # default: sdk-python/src/converge_sdk/_proto
#
# The generator is pinned (grpcio-tools==1.85.1) so the committed files are reproducible; the
# drift test (tests/test_drift.py) runs this script into a temp dir and compares. Imports in the
# generated gRPC module are rewritten to be package-relative. Python comes from $PYTHON
# (default python3) and must have the pinned grpcio-tools installed.
set -euo pipefail

readonly PINNED_GRPCIO_TOOLS="1.85.1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
sdk="$(dirname "$here")"
repo="$(dirname "$sdk")"
proto_root="$repo/proto"
proto_rel="converge/worker/v1/worker.proto"
out="${1:-$sdk/src/converge_sdk/_proto}"
py="${PYTHON:-python3}"

have="$("$py" -c 'from importlib.metadata import version; print(version("grpcio-tools"))' 2>/dev/null || true)"
if [[ "$have" != "$PINNED_GRPCIO_TOOLS" ]]; then
    echo "gen.sh: error: need grpcio-tools==$PINNED_GRPCIO_TOOLS in $py (found: ${have:-none});" \
        "run: $py -m pip install grpcio-tools==$PINNED_GRPCIO_TOOLS" >&2
    exit 1
fi
[[ -f "$proto_root/$proto_rel" ]] || { echo "gen.sh: error: $proto_root/$proto_rel not found" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$py" -m grpc_tools.protoc -I "$proto_root" \
    --python_out="$tmp" --pyi_out="$tmp" --grpc_python_out="$tmp" "$proto_root/$proto_rel"

gen="$tmp/converge/worker/v1"
mkdir -p "$out"
cp "$gen/worker_pb2.py" "$gen/worker_pb2.pyi" "$out/"
# The gRPC module imports its messages by their proto path; make that package-relative.
sed -e 's/^from converge\.worker\.v1 import worker_pb2 as /from . import worker_pb2 as /' \
    "$gen/worker_pb2_grpc.py" >"$out/worker_pb2_grpc.py"
if grep -q '^from converge\.' "$out/worker_pb2_grpc.py"; then
    echo "gen.sh: error: an absolute import survived the rewrite" >&2
    exit 1
fi
cat >"$out/__init__.py" <<'PY'
"""Generated protobuf and gRPC code of converge.worker.v1 (do not edit; see scripts/gen.sh)."""
PY
echo "gen.sh: generated into $out" >&2
