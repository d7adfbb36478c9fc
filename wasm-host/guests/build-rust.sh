#!/usr/bin/env bash
# Builds the Rust conformance guest (guests/rust) into tests/fixtures/conformance-guest.wasm.
#
#   guests/build-rust.sh           build and copy the component over the fixture
#   guests/build-rust.sh --check   build a temporary copy of the sources and fail if the
#                                  result differs from the committed fixture
#
# The build is byte-reproducible: every absolute path that could reach the binary (the
# sources, cargo's registry, the toolchain, the target dir) is remapped to a fixed prefix,
# and the lockfile is used as committed (--locked). Without the wasm32-wasip2 target the
# script says so and exits 0: the committed fixture is then used as it is.
#
# Environment: CARGO_TARGET_DIR_GUEST (default ~/.cache/converge-target-guest).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
host_dir="$(dirname "$here")"
guest_dir="$here/rust"
fixture="$host_dir/tests/fixtures/conformance-guest.wasm"
artifact="wasm32-wasip2/release/converge_guest_conformance.wasm"
target_root="${CARGO_TARGET_DIR_GUEST:-$HOME/.cache/converge-target-guest}"

check=0
case "${1:-}" in
    "") ;;
    --check) check=1 ;;
    *)
        echo "usage: $0 [--check]" >&2
        exit 2
        ;;
esac

# Resolve the toolchain where the guest lives (the repo's rust-toolchain.toml applies
# there), and pin it for the temporary copy, which sits outside the repo.
sysroot="$(cd "$guest_dir" && rustc --print sysroot)"
if [ ! -d "$sysroot/lib/rustlib/wasm32-wasip2" ]; then
    echo "build-rust.sh: the wasm32-wasip2 target is not installed for $(cd "$guest_dir" && rustc -V)" >&2
    echo "build-rust.sh: skipping (rustup target add wasm32-wasip2 to build); the committed fixture is used as is" >&2
    exit 0
fi
if command -v rustup > /dev/null 2>&1; then
    export RUSTUP_TOOLCHAIN="$(basename "$sysroot")"
fi
cargo_home="${CARGO_HOME:-$HOME/.cargo}"

# build SRC_HOST_DIR TARGET_DIR: builds SRC_HOST_DIR/guests/rust (its WIT is at
# SRC_HOST_DIR/wit) into TARGET_DIR.
build() {
    local src_host="$1" target="$2"
    # Later remappings win over earlier ones when several match, so the most specific
    # (the target dir, which may sit inside the sources) comes last.
    local flags=(
        "--remap-path-prefix=$src_host=/converge/wasm-host"
        "--remap-path-prefix=$cargo_home=/cargo"
        "--remap-path-prefix=$sysroot=/rustc-sysroot"
        "--remap-path-prefix=$target=/target"
    )
    local encoded
    encoded="$(printf '%s\x1f' "${flags[@]}")"
    (
        cd "$src_host/guests/rust"
        unset RUSTFLAGS
        CARGO_ENCODED_RUSTFLAGS="${encoded%$'\x1f'}" CARGO_TARGET_DIR="$target" \
            cargo build --locked --release --target wasm32-wasip2
    )
}

if [ "$check" = 0 ]; then
    build "$host_dir" "$target_root"
    mkdir -p "$(dirname "$fixture")"
    cp "$target_root/$artifact" "$fixture"
    echo "build-rust.sh: wrote $fixture ($(wc -c < "$fixture") bytes, sha256 $(sha256sum "$fixture" | cut -d' ' -f1))"
    exit 0
fi

# --check: the same sources from another directory and another target dir must give the
# committed bytes, which proves both that the fixture is current and that the build does
# not depend on where it ran.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/wasm-host/guests/rust"
cp -R "$host_dir/wit" "$tmp/wasm-host/wit"
cp -R "$guest_dir/Cargo.toml" "$guest_dir/Cargo.lock" "$guest_dir/src" "$tmp/wasm-host/guests/rust/"
build "$tmp/wasm-host" "$target_root/check"
built="$target_root/check/$artifact"
if [ ! -f "$fixture" ]; then
    echo "build-rust.sh: no committed fixture at $fixture; run $0 without --check" >&2
    exit 1
fi
if cmp -s "$built" "$fixture"; then
    echo "build-rust.sh: fixture is up to date ($(wc -c < "$fixture") bytes, sha256 $(sha256sum "$fixture" | cut -d' ' -f1))"
else
    echo "build-rust.sh: $fixture differs from a fresh build of guests/rust" >&2
    echo "  committed: $(wc -c < "$fixture") bytes, sha256 $(sha256sum "$fixture" | cut -d' ' -f1)" >&2
    echo "  built:     $(wc -c < "$built") bytes, sha256 $(sha256sum "$built" | cut -d' ' -f1)" >&2
    echo "build-rust.sh: run $0 and commit the fixture" >&2
    exit 1
fi
