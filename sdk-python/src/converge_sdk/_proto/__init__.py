"""Generated protobuf and gRPC code of converge.worker.v1 (do not edit; see scripts/gen.sh)."""
