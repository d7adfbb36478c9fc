#!/usr/bin/env bash
# build-python.sh: builds the Python guest (wasm-host/guests/python/app.py) into a
# `converge:handler@0.1.0` component with componentize-py from PyPI.
#
# Output: $CONVERGE_PYTHON_GUEST, by default $HOME/.cache/converge-wasm/python-guest.wasm.
# It is not committed: it is ~18 MB (CPython for WASI plus its standard library), and it
# is rebuilt from PyPI in about 20 s. tests/guest_python.rs (cargo feature `python-guest`)
# and examples/bench_python.rs read it from the same place.
#
# Idempotent: the output has a stamp beside it (sha256 over the guest's .py files, the WIT,
# the componentize-py version and this script); when the stamp matches, nothing is
# rebuilt. FORCE=1 rebuilds anyway.
#
# componentize-py comes from the lock scripts/pylock/componentize-py.txt (exact version and
# hashes), in a venv made by scripts/pylock.sh outside the repo, so the toolchain never
# touches the system Python.
set -euo pipefail

# Pinned (here and in scripts/pylock/componentize-py.in, which must agree: checked below):
# the newest release on PyPI (checked 2026-11), and its components load and run
# under the host's wasmtime =48.0.8. It imports WASI at 0.2.9 while wasmtime-wasi 48
# provides 0.2.x at a lower patch level; wasmtime's linker matches 0.2.x imports by semver
# compatibility, so that works as long as componentize-py calls nothing newer than what
# 48 provides (verified by tests/guest_python.rs). Bump it only together with a run of
# those tests: a release that starts using component-model-async or WASI 0.3 features
# would need a newer wasmtime (and so a newer rustc) on the host.
COMPONENTIZE_PY_VERSION=0.25.1

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/python"
wit="$here/../wit"
out="${CONVERGE_PYTHON_GUEST:-$HOME/.cache/converge-wasm/python-guest.wasm}"
stamp="$out.stamp"

die() {
    echo "build-python.sh: $*" >&2
    exit 1
}

command -v python3 >/dev/null || die "python3 is not installed (apt-get install python3 python3-venv)"

# --- the toolchain ------------------------------------------------------------------------
venv="$("$here/../../scripts/pylock.sh" venv componentize-py)" ||
    die "could not install componentize-py from scripts/pylock/componentize-py.txt.
  PyPI may be unreachable from this machine (check the network or PIP_INDEX_URL), or the
  wheel for this platform is missing. Nothing was built; the tests behind the
  'python-guest' feature will fail until $out exists."
cpy="$venv/bin/componentize-py"
[[ -x "$cpy" ]] || die "$cpy is missing after installing componentize-py"
version="$("$cpy" --version | awk '{print $2}')"
[[ "$version" == "$COMPONENTIZE_PY_VERSION" ]] ||
    die "componentize-py reports version '$version', expected $COMPONENTIZE_PY_VERSION"

# --- skip when nothing changed ------------------------------------------------------------
inputs_hash() {
    {
        echo "componentize-py $version"
        sha256sum "${BASH_SOURCE[0]}"
        # Sorted so the hash does not depend on directory order.
        find "$src" "$wit" -type f \( -name '*.py' -o -name '*.wit' \) -print0 |
            sort -z | xargs -0 sha256sum
    } | sed "s#$here/##" | sha256sum | awk '{print $1}'
}
want="$(inputs_hash)"
if [[ "${FORCE:-0}" != 1 && -f "$out" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "build-python.sh: $out is up to date ($(stat -c %s "$out") bytes)"
    exit 0
fi

# --- build --------------------------------------------------------------------------------
mkdir -p "$(dirname "$out")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Stage only the guest's own modules: componentize-py bundles what is on its Python path,
# so building from the source dir could pick up stray files (editor backups, caches).
mkdir -p "$work/app"
cp "$src"/*.py "$work/app/"
# A syntax error is reported here in a second, instead of after the componentize step.
python3 -m py_compile "$work/app"/*.py
rm -rf "$work/app/__pycache__"

# Bindings for editors and type checkers (componentize generates its own real ones). Kept
# beside the output so an IDE can be pointed at them; cheap to regenerate.
bindings="$(dirname "$out")/python-guest-bindings"
rm -rf "$bindings"
"$cpy" -d "$wit" -w handler bindings "$bindings" >/dev/null

echo "build-python.sh: componentize-py $version: building $out"
started=$SECONDS
# VIRTUAL_ENV and PYTHONPATH would add the caller's packages to the component's path.
(
    cd "$work/app"
    env -u VIRTUAL_ENV -u PYTHONPATH "$cpy" -q -d "$wit" -w handler componentize \
        -p . app -o "$work/python-guest.wasm"
)
mv -f "$work/python-guest.wasm" "$out"
echo "$want" >"$stamp"
echo "build-python.sh: built $out ($(stat -c %s "$out") bytes) in $((SECONDS - started)) s"
