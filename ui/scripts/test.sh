#!/usr/bin/env bash
# Every UI check: typecheck, component tests (Vitest), production build, then the browser
# tests (Playwright driving Debian's Chromium) against a real `converge dev` with the classic
# example. Exits non-zero on the first failure.
#
#   CHROMIUM_PATH   browser to drive (default /usr/bin/chromium; apt-installed when missing and root)
#   CONVERGE_BIN, CLASSIC_WORKER_BIN, OIDC_ISSUER_BIN, CARGO_TARGET_DIR
#                   where the binaries are (built when missing)
#   UI_BASE_URL, UI_FROM_CONVERGE=1, CONVERGE_URL         see e2e/global-setup.ts
set -euo pipefail
ui="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$ui/.." && pwd)"
cd "$ui"

step() { printf '\n==> %s\n' "$*"; }

chromium="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ ! -x "$chromium" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        step "installing Chromium (apt)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "ui tests: no browser at $chromium; install Debian's chromium (apt-get install chromium) or set CHROMIUM_PATH" >&2
        exit 1
    fi
fi
export CHROMIUM_PATH="$chromium"

step "npm ci"
npm ci --no-audit --no-fund

step "typecheck (tsc --noEmit)"
npx --no-install tsc --noEmit -p tsconfig.json

step "component tests (vitest)"
npx --no-install vitest run

step "production build (vite build -> ui/dist)"
npx --no-install vite build

target="${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}"
if [ -z "${OIDC_ISSUER_BIN:-}" ]; then
    # The OIDC issuer of e2e/oidc.spec.ts, needed even with CONVERGE_URL (test-util only;
    # built on its own so the feature does not reach the converge binary).
    step "the OIDC test issuer: cargo build converge-auth --features test-util"
    (cd "$repo" && CARGO_TARGET_DIR="$target" cargo build --locked -p converge-auth --features test-util --bin oidc-test-issuer)
fi

if [ -z "${CONVERGE_URL:-}" ]; then
    # Rebuild so converge embeds the dist just built (control/build.rs), then test the UI
    # as users get it: served by converge itself.
    step "embedding the UI: cargo build converge and classic-worker"
    (cd "$repo" && CARGO_TARGET_DIR="$target" cargo build --locked -p converge --bin converge -p classic-worker --bin classic-worker)
    if [ -z "${UI_BASE_URL:-}" ]; then
        export UI_FROM_CONVERGE="${UI_FROM_CONVERGE:-1}"
    fi
fi

step "browser tests (playwright + $chromium)"
rm -rf test-results
npx --no-install playwright test
echo "screenshots: $ui/test-results/screenshots/"
