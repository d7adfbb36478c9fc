#!/usr/bin/env bash
# Runs the Python SDK's checks: installs the SDK (editable, with its locked test dependencies)
# into a venv (scripts/venv.sh),
# type-checks it with mypy, runs the generated-code drift check and the whole pytest suite
# (unit, fake-broker stream tests and end-to-end tests against the real converge binary).
#
#   sdk-python/scripts/test.sh [PYTEST ARGS...]
#
# Environment:
#   CONVERGE_DEPS               locked (default: scripts/pylock/sdk-test.txt) or newest (the
#                               newest releases pyproject.toml's ranges allow; scripts/venv.sh)
#   PYTHON                      interpreter that creates the venv (default python3, >= 3.11)
#   CONVERGE_BIN                converge binary for the e2e tests
#                               (default ${CARGO_TARGET_DIR:-~/.cache/converge-target}/debug/converge)
#   CONVERGE_TEST_DATABASE_URL  admin URL (database postgres) of a PostgreSQL the e2e tests may
#                               create databases on; when unset, a private cluster is started
#                               with scripts/pg-test-cluster.sh and stopped at exit.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
sdk="$(dirname "$here")"
repo="$(dirname "$sdk")"
die() { echo "sdk-python/test.sh: error: $*" >&2; exit 1; }

venv="$("$here/venv.sh")"

export CONVERGE_BIN="${CONVERGE_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}/debug/converge}"
[[ -x "$CONVERGE_BIN" ]] || die "converge binary not found at $CONVERGE_BIN (build it or set CONVERGE_BIN)"

if [[ -z "${CONVERGE_TEST_DATABASE_URL:-}" ]]; then
    pgdir="$(mktemp -d -t converge-py-pg.XXXXXX)"
    rmdir "$pgdir"
    trap '"$repo/scripts/pg-test-cluster.sh" stop "$pgdir" >/dev/null 2>&1 || true' EXIT
    eval "$("$repo/scripts/pg-test-cluster.sh" start "$pgdir")"
fi
export CONVERGE_E2E_REQUIRED=1

cd "$sdk"
echo "sdk-python: mypy" >&2
"$venv/bin/python" -m mypy
echo "sdk-python: drift check" >&2
"$venv/bin/python" -m pytest -q tests/test_drift.py
echo "sdk-python: pytest" >&2
"$venv/bin/python" -m pytest -q --ignore=tests/test_drift.py tests "$@"
