#!/usr/bin/env bash
# Every check of the Go SDK: gofmt, go vet, the generated-code drift check, and go test
# (unit tests plus the end-to-end tests against the real converge binary).
#
#   CONVERGE_BIN                 the converge binary (default
#                                ${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}/debug/converge)
#   CONVERGE_TEST_DATABASE_URL   admin URL to database `postgres`; without it the end-to-end
#                                tests are skipped (scripts/pg-test-cluster.sh provides one)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$(dirname "$here")"

command -v go >/dev/null || { echo "test.sh: go is not installed" >&2; exit 1; }

export CONVERGE_BIN="${CONVERGE_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}/debug/converge}"
if [[ -z "${CONVERGE_TEST_DATABASE_URL:-}" ]]; then
    echo "test.sh: CONVERGE_TEST_DATABASE_URL is unset; the end-to-end tests will be skipped" >&2
elif [[ ! -x "$CONVERGE_BIN" ]]; then
    echo "test.sh: the converge binary $CONVERGE_BIN is missing (set CONVERGE_BIN or build it)" >&2
    exit 1
fi

echo "== gofmt" >&2
unformatted="$(gofmt -l .)"
if [[ -n "$unformatted" ]]; then
    echo "test.sh: not gofmt-clean:" >&2
    echo "$unformatted" >&2
    exit 1
fi

echo "== go vet" >&2
go vet ./...

echo "== generated code drift check" >&2
"$here/check-gen.sh"

echo "== go test" >&2
go test -count=1 ./...
