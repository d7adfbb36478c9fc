#!/usr/bin/env bash
# The Python tools the tests use, installed only from committed locks (exact versions, every
# file's sha256), so a test run resolves the same on every machine and no new release on PyPI
# can change it without a commit.
#
#   scripts/pylock.sh venv NAME     prints the path of a venv holding scripts/pylock/NAME.txt,
#                                   creating it first when missing (pip --require-hashes)
#   scripts/pylock.sh lock [NAME..] re-resolves scripts/pylock/NAME.in (default: every lock)
#                                   to the newest versions its ranges allow, with a pinned uv
#   scripts/pylock.sh check         fails when a lock is missing, unpinned, without hashes or
#                                   older than its inputs (scripts/check-pins.py runs it)
#
# A venv's directory name carries the lock's digest, so a lock change makes a new venv and a
# cached venv can never be what makes a run green; venvs live under
# ${XDG_CACHE_HOME:-$HOME/.cache}/converge/venvs (CONVERGE_VENV_DIR overrides it). Each lock
# records the digest of its inputs (`# inputs-sha256:`): its .in file and the files that file
# names, such as sdk-python/pyproject.toml for the SDK's test extra. The runtime ranges in that
# pyproject stay ranges for users; `scripts/test.sh --newest` tests against the newest release
# those ranges allow instead of the lock.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCKS="$ROOT/scripts/pylock"
VENVS="${CONVERGE_VENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/converge/venvs}"
# The resolver is itself installed from a lock (scripts/pylock/uv.txt; bumping uv.in's pin and
# running `lock uv` re-resolves it with the previous uv).
UV_LOCK=uv
# Every lock is resolved for this Python and newer, on every platform (markers), so the same
# file serves any machine the tests run on.
PY_MIN=3.11

die() {
    echo "pylock.sh: error: $*" >&2
    exit 1
}

# inputs_digest NAME: sha256 over the .in file and the local files it names (`-e PATH[...]`,
# `-r FILE`), so editing a pyproject's ranges makes its lock stale.
inputs_digest() {
    local name="$1" in="$LOCKS/$1.in"
    {
        sha256sum <"$in"
        local path
        while read -r path; do
            if [[ -f "$ROOT/$path/pyproject.toml" ]]; then
                sha256sum <"$ROOT/$path/pyproject.toml"
            elif [[ -f "$ROOT/$path" ]]; then
                sha256sum <"$ROOT/$path"
            else
                die "$in names $path, which does not exist"
            fi
        done < <(sed -n -E 's/^(-e|-r)[[:space:]]+\.?\/?([^[ ]+).*/\2/p' "$in")
    } | sha256sum | cut -c1-64
}

lock_digest() {
    sha256sum <"$LOCKS/$1.txt" | cut -c1-12
}

python_for_venvs() {
    local py="${PYTHON:-python3}"
    command -v "$py" >/dev/null || die "$py not found (Python >= $PY_MIN is required)"
    "$py" -c "import sys; sys.exit(sys.version_info < tuple(map(int, '$PY_MIN'.split('.'))))" ||
        die "$py is older than $PY_MIN"
    echo "$py"
}

# make_venv DIR: a venv at DIR, installing python3-venv on Debian when root and it is missing.
make_venv() {
    local dir="$1" py
    py="$(python_for_venvs)"
    if ! "$py" -m venv "$dir" 2>/dev/null; then
        rm -rf "$dir"
        if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        fi
        "$py" -m venv "$dir" || die "could not create a venv with $py (install python3-venv)"
    fi
}

# venv NAME: prints a venv with exactly the lock's packages, building it when missing. A venv
# is complete only once its stamp is written, so an interrupted build is redone, not reused.
cmd_venv() {
    local name="${1:?usage: pylock.sh venv NAME}"
    local lock="$LOCKS/$name.txt"
    [[ -f "$lock" ]] || die "no lock $lock (locks: $(cd "$LOCKS" && ls ./*.txt | sed 's#^\./##; s#\.txt$##' | tr '\n' ' '))"
    local dir="$VENVS/$name-$(lock_digest "$name")"
    if [[ ! -f "$dir/.pylock-complete" ]]; then
        echo "pylock.sh: creating $dir from scripts/pylock/$name.txt" >&2
        rm -rf "$dir"
        mkdir -p "$VENVS"
        make_venv "$dir"
        # --no-deps: the lock already lists every dependency; pip must not resolve any other.
        "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
            --require-hashes -r "$lock" >&2 ||
            { rm -rf "$dir"; die "pip could not install scripts/pylock/$name.txt (see above)"; }
        touch "$dir/.pylock-complete"
    fi
    echo "$dir"
}

cmd_lock() {
    local names=("$@")
    if ((${#names[@]} == 0)); then
        local f
        for f in "$LOCKS"/*.in; do names+=("$(basename "$f" .in)"); done
    fi
    local uv
    uv="$(cmd_venv "$UV_LOCK")/bin/uv"
    local name
    for name in "${names[@]}"; do
        [[ -f "$LOCKS/$name.in" ]] || die "no input $LOCKS/$name.in"
        echo "pylock.sh: resolving scripts/pylock/$name.in" >&2
        local tmp flags=()
        tmp="$(mktemp)"
        # `# pylock: no-deps` in an .in file: only the packages it names (a wheel fetched for
        # its data, not installed).
        if grep -q '^# pylock: no-deps' "$LOCKS/$name.in"; then flags+=(--no-deps); fi
        # From the root, so the paths in the .in files (and in the lock's notes) are the
        # repository's; the project packages themselves are installed from the tree, not locked.
        (cd "$ROOT" && "$uv" pip compile --quiet --universal --python-version "$PY_MIN" \
            --generate-hashes --no-header --annotation-style line \
            --no-emit-package converge-sdk "${flags[@]}" \
            "scripts/pylock/$name.in" -o "$tmp") || { rm -f "$tmp"; die "uv could not resolve $name.in"; }
        {
            echo "# Locked by scripts/pylock.sh lock $name from scripts/pylock/$name.in; do not edit."
            echo "# inputs-sha256: $(inputs_digest "$name")"
            cat "$tmp"
        } >"$LOCKS/$name.txt"
        rm -f "$tmp"
    done
}

# check: every lock present, in step with its inputs, and every requirement pinned and hashed.
cmd_check() {
    local bad=0 f name
    for f in "$LOCKS"/*.in; do
        name="$(basename "$f" .in)"
        local lock="$LOCKS/$name.txt"
        if [[ ! -f "$lock" ]]; then
            echo "pylock.sh: scripts/pylock/$name.in has no lock; run scripts/pylock.sh lock $name" >&2
            bad=1
            continue
        fi
        local want have
        want="$(inputs_digest "$name")"
        have="$(sed -n 's/^# inputs-sha256: //p' "$lock")"
        if [[ "$want" != "$have" ]]; then
            echo "pylock.sh: scripts/pylock/$name.txt is older than its inputs; run scripts/pylock.sh lock $name" >&2
            bad=1
        fi
        # Requirement lines start in column 0; each must be NAME==VERSION with at least one hash.
        if ! python3 - "$lock" <<'EOF'; then
import re, sys
path = sys.argv[1]
text = open(path).read().replace("\\\n", " ")
bad = []
for line in text.splitlines():
    s = line.split(" #", 1)[0].strip()
    if not s or s.startswith("#"):
        continue
    spec = s.split(";", 1)[0].split("--hash", 1)[0].strip()
    if not re.fullmatch(r"[A-Za-z0-9._-]+(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!_-]+", spec):
        bad.append(f"not an exact pin: {spec}")
    elif "--hash=sha256:" not in s:
        bad.append(f"no hash: {spec}")
if bad:
    print(f"pylock.sh: {path}:", *bad, sep="\n  ", file=sys.stderr)
    sys.exit(1)
EOF
            bad=1
        fi
    done
    return "$bad"
}

case "${1:-}" in
venv) shift; cmd_venv "$@" ;;
lock) shift; cmd_lock "$@" ;;
check) shift; cmd_check "$@" ;;
*) die "usage: pylock.sh venv NAME | lock [NAME...] | check" ;;
esac
