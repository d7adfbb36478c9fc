#!/usr/bin/env bash
# The starlark and cel forms' worker for the conformance suite:
#
#   composer-worker.sh starlark|cel
#
# stdworker serving conf-composite and the compose-stage kinds of conformance/kinds/composer/
# with that composer provider, and every other conformance kind with the wasm provider (the
# Rust guest), so the composer runs against real leaves. <form>/profile.json says which
# scenarios the form runs.
#
# STDWORKER_BIN: the stdworker binary (default: the Cargo target dir's debug build).
set -euo pipefail
COMPOSED=conf-composite,conf-cfail,conf-cslow,conf-chold,conf-cready,conf-cconfig
case "${1:-}" in
    starlark) export STDWORKER_STARLARK_KINDS="$COMPOSED" ;;
    cel) export STDWORKER_CEL_KINDS="$COMPOSED" ;;
    *) echo "usage: $0 starlark|cel" >&2; exit 2 ;;
esac
STDWORKER_BIN="${STDWORKER_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}/debug/stdworker}"
export STDWORKER_WASM_KINDS=conf-leaf,conf-final,conf-fail,conf-slow,conf-ready,conf-config
export STDWORKER_TASK_JOURNAL="${CONFORMANCE_LOG:?CONFORMANCE_LOG must name the event log}"
export STDWORKER_WASM_CACHE_DIR="${STDWORKER_WASM_CACHE_DIR:-${TMPDIR:-/tmp}/converge-conformance-wasm-cache}"
# exec: signals from the suite reach stdworker itself.
exec "$STDWORKER_BIN"
