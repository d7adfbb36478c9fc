#!/usr/bin/env bash
# Every check of the Go SDK: gofmt, go vet, the generated-code drift check, and go test
# (unit tests plus the end-to-end tests against the real converge binary).
#
#   CONVERGE_BIN                 the converge binary (default
#                                ${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}/debug/converge)
#   CONVERGE_TEST_DATABASE_URL   admin URL to database `postgres`; without it the end-to-end
#                                tests are skipped (scripts/pg-test-cluster.sh provides one),
#                                or fail when CONVERGE_E2E_REQUIRED=1 (scripts/test.sh)
#   CONVERGE_DEPS                locked (default: go.mod and go.sum as committed) or newest
#                                (every module upgraded to its newest release, `go get -u`, in
#                                a copy of go.mod under CONVERGE_NEWEST_DIR: what a user whose
#                                build resolves newer versions gets; scripts/test.sh --newest)
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

# The module file the build uses: the committed one, or an upgraded copy (-modfile), so the
# tree is never changed.
modfile=()
case "${CONVERGE_DEPS:-locked}" in
locked) ;;
newest)
    [[ -n "${CONVERGE_NEWEST_DIR:-}" ]] || { echo "test.sh: CONVERGE_DEPS=newest needs CONVERGE_NEWEST_DIR" >&2; exit 1; }
    cp go.mod "$CONVERGE_NEWEST_DIR/go.newest.mod"
    cp go.sum "$CONVERGE_NEWEST_DIR/go.newest.sum"
    modfile=(-modfile="$CONVERGE_NEWEST_DIR/go.newest.mod")
    echo "== go get -u (newest releases)" >&2
    # pins: newest -- deliberately the newest releases, into a copy of go.mod
    go get "${modfile[@]}" -u -t ./...
    diff <(grep -E '^\s+\S+ v' go.mod) <(grep -E '^\s+\S+ v' "$CONVERGE_NEWEST_DIR/go.newest.mod") |
        sed -n 's/^> */sdk-go: newest: /p' >&2 || true
    ;;
*) echo "test.sh: CONVERGE_DEPS must be 'locked' or 'newest'" >&2; exit 1 ;;
esac

echo "== go vet" >&2
go vet "${modfile[@]}" ./...

echo "== generated code drift check" >&2
"$here/check-gen.sh"

echo "== go test" >&2
go test "${modfile[@]}" -count=1 ./...
