#!/usr/bin/env bash
# Prints the path of a venv in which the Python SDK is installed (editable, from this tree)
# with its test dependencies, creating it when needed.
#
#   sdk-python/scripts/venv.sh
#
# By default the dependencies are exactly scripts/pylock/sdk-test.txt (a venv keyed by that
# lock's digest, scripts/pylock.sh), so every machine tests against the same versions. With
# CONVERGE_DEPS=newest they are the newest releases the ranges in sdk-python/pyproject.toml
# allow, resolved now into a throwaway venv (CONVERGE_NEWEST_DIR, made by scripts/test.sh
# --newest): the check that users installing the SDK today get versions that work.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
sdk="$(dirname "$here")"
repo="$(dirname "$sdk")"

die() { echo "sdk-python/venv.sh: error: $*" >&2; exit 1; }

case "${CONVERGE_DEPS:-locked}" in
locked)
    venv="$("$repo/scripts/pylock.sh" venv sdk-test)"
    # --no-deps --no-build-isolation: the lock holds every dependency and the build backend,
    # so the install fetches nothing. Re-run each time: the venv is shared by every checkout,
    # and this points its `converge_sdk` at this one.
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
        --no-build-isolation -e "$sdk" >&2 || die "could not install the SDK into $venv"
    ;;
newest)
    [[ -n "${CONVERGE_NEWEST_DIR:-}" ]] || die "CONVERGE_DEPS=newest needs CONVERGE_NEWEST_DIR (scripts/test.sh --newest sets it)"
    venv="$CONVERGE_NEWEST_DIR/sdk-python-venv"
    if [[ ! -f "$venv/.complete" ]]; then
        rm -rf "$venv"
        "${PYTHON:-python3}" -m venv "$venv" || die "could not create a venv at $venv"
        # pins: newest -- the ranges users install, deliberately unlocked (scripts/check-pins.py)
        "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade -e "$sdk[test,schema]" >&2 ||
            die "pip could not install the SDK's newest dependencies"
        "$venv/bin/python" -m pip list --format=freeze 2>/dev/null |
            grep -iE '^(grpcio|protobuf|cryptography|pytest|pytest-asyncio|mypy|grpcio-tools|pydantic)==' |
            sed 's/^/sdk-python: newest: /' >&2
        touch "$venv/.complete"
    fi
    ;;
*) die "CONVERGE_DEPS must be 'locked' or 'newest', not '$CONVERGE_DEPS'" ;;
esac
echo "$venv"
