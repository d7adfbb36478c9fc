#!/usr/bin/env bash
# The starlark form's worker for the conformance suite: stdworker serving conf-composite with its
# starlark provider and every other conformance kind with the wasm provider (the Rust guest), so
# the compose scenario exercises the starlark composer against real leaves. profile.json says
# which scenarios the form runs.
#
# STDWORKER_BIN: the stdworker binary (default: the Cargo target dir's debug build).
set -euo pipefail
STDWORKER_BIN="${STDWORKER_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}/debug/stdworker}"
export STDWORKER_STARLARK_KINDS=conf-composite
export STDWORKER_WASM_KINDS=conf-leaf,conf-final,conf-fail,conf-slow,conf-ready,conf-config
export STDWORKER_TASK_JOURNAL="${CONFORMANCE_LOG:?CONFORMANCE_LOG must name the event log}"
export STDWORKER_WASM_CACHE_DIR="${STDWORKER_WASM_CACHE_DIR:-${TMPDIR:-/tmp}/converge-conformance-wasm-cache}"
exec "$STDWORKER_BIN"
