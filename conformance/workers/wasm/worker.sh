#!/usr/bin/env bash
# The wasm form's worker for the conformance suite: stdworker serving every conformance kind
# with its wasm provider. The component (the Rust guest, wasm-host/guests/rust) arrives as
# each kind's default provider config bundle, which the suite attaches from profile.json.
#
# The guest cannot write files, so stdworker journals its tasks into the suite's event log
# (STDWORKER_TASK_JOURNAL); compiled components are cached across the suite's cells.
#
# STDWORKER_BIN: the stdworker binary (default: the Cargo target dir's debug build).
set -euo pipefail
STDWORKER_BIN="${STDWORKER_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}/debug/stdworker}"
export STDWORKER_WASM_KINDS="${STDWORKER_WASM_KINDS:-conf-leaf,conf-composite,conf-final,conf-fail,conf-slow,conf-hold,conf-react,conf-ready,conf-config}"
export STDWORKER_TASK_JOURNAL="${CONFORMANCE_LOG:?CONFORMANCE_LOG must name the event log}"
export STDWORKER_WASM_CACHE_DIR="${STDWORKER_WASM_CACHE_DIR:-${TMPDIR:-/tmp}/converge-conformance-wasm-cache}"
# exec: signals from the suite reach stdworker itself.
exec "$STDWORKER_BIN"
