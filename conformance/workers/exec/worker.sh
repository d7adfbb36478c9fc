#!/usr/bin/env bash
# The exec form's worker for the conformance suite: stdworker serving every conformance kind
# with the exec provider. What each kind runs (handler.py) comes from the kinds' default
# provider configs, which the suite builds from base-config.json (see README.md).
#
# STDWORKER_BIN: the stdworker binary (default: the Cargo target dir's debug build).
# WORKER_MAX_PARALLEL defaults to 4 here: each task starts a Python interpreter, and 16 at
# once on a 2-core machine eat the 1 s deadlines of the restart scenario (README.md).
set -euo pipefail
STDWORKER_BIN="${STDWORKER_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}/debug/stdworker}"
export STDWORKER_EXEC_KINDS="${STDWORKER_EXEC_KINDS:-conf-leaf,conf-composite,conf-final,conf-fail,conf-slow,conf-hold,conf-react,conf-ready,conf-config}"
# stdworker serves exec kinds only with an allowlist: the handlers run under python3.
STDWORKER_EXEC_ALLOW="${STDWORKER_EXEC_ALLOW:-$(command -v python3)}"
export STDWORKER_EXEC_ALLOW
export WORKER_MAX_PARALLEL="${WORKER_MAX_PARALLEL:-4}"
# exec: signals from the suite reach stdworker itself.
exec "$STDWORKER_BIN"
