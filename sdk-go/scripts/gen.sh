#!/usr/bin/env bash
# Regenerates the Go code of converge.worker.v1 into gen/workerv1 (or into $1).
#
#   scripts/gen.sh            # rewrite sdk-go/gen/workerv1/*.go
#   scripts/gen.sh OUT_DIR    # write the two files into OUT_DIR instead (the drift check)
#
# Every tool is pinned, and all of them come from package registries only, so the output is
# byte-for-byte reproducible on any machine:
#   - protoc: the one bundled in grpcio-tools (PyPI), installed with its dependencies from the
#     lock scripts/pylock/grpcio-tools.txt into a venv made by scripts/pylock.sh, so no
#     system protoc is needed;
#   - protoc-gen-go and protoc-gen-go-grpc: `go install`ed at fixed versions into the cache dir.
# The proto's go_package names another import path, so the M option maps the file onto this
# module's gen/workerv1 package without editing the shared proto.
set -euo pipefail

readonly PROTOC_GEN_GO_VERSION="v1.36.12"
readonly PROTOC_GEN_GO_GRPC_VERSION="v1.6.2"
readonly GO_PACKAGE="converge.dev/sdk-go/gen/workerv1;workerv1"
readonly PROTO_FILE="converge/worker/v1/worker.proto"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
sdk="$(dirname "$here")"
proto_root="$(cd "$sdk/../proto" && pwd)"
out="${1:-$sdk/gen/workerv1}"

cache="${CONVERGE_GEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/converge-sdk-go-gen}"
bin="$cache/bin-go-$PROTOC_GEN_GO_VERSION-grpc-$PROTOC_GEN_GO_GRPC_VERSION"

log() { echo "gen.sh: $*" >&2; }

venv="$("$sdk/../scripts/pylock.sh" venv grpcio-tools)"

if [[ ! -x "$bin/protoc-gen-go" || ! -x "$bin/protoc-gen-go-grpc" ]]; then
    log "installing protoc-gen-go@$PROTOC_GEN_GO_VERSION and protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION into $bin"
    mkdir -p "$bin"
    # Outside the module, so the SDK's go.mod never pins generator dependencies.
    (cd "$cache" \
        && GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION" \
        && GOBIN="$bin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION")
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

PATH="$bin:$PATH" "$venv/bin/python" -m grpc_tools.protoc \
    -I "$proto_root" \
    --go_out="$tmp" --go_opt=paths=source_relative \
    --go_opt="M$PROTO_FILE=$GO_PACKAGE" \
    --go-grpc_out="$tmp" --go-grpc_opt=paths=source_relative \
    --go-grpc_opt="M$PROTO_FILE=$GO_PACKAGE" \
    "$PROTO_FILE"

mkdir -p "$out"
cp "$tmp/converge/worker/v1/worker.pb.go" "$tmp/converge/worker/v1/worker_grpc.pb.go" "$out/"
log "wrote $out/worker.pb.go and $out/worker_grpc.pb.go"
