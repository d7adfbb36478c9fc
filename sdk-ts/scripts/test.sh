#!/usr/bin/env bash
# Every check of the TypeScript SDK: installs the pinned toolchain from npm (npm ci, from
# package-lock.json), builds dist/, type-checks the SDK, its tests, the example and the bench
# worker under strict TypeScript, lints and format-checks them (biome), runs the
# generated-code drift check, checks that
# `npm install ./sdk-ts` works from a fresh copy, and runs the node:test suite (unit,
# fake-broker stream tests and end-to-end tests against the real converge binary).
#
#   sdk-ts/scripts/test.sh [NODE --test ARGS...]
#
# Environment:
#   CONVERGE_BIN                converge binary for the e2e tests
#                               (default ${CARGO_TARGET_DIR:-~/.cache/converge-target}/debug/converge)
#   CONVERGE_TEST_DATABASE_URL  admin URL (database postgres) of a PostgreSQL the e2e tests may
#                               create databases on; when unset, a private cluster is started
#                               with scripts/pg-test-cluster.sh and stopped at exit.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
sdk="$(dirname "$here")"
repo="$(dirname "$sdk")"

die() { echo "sdk-ts/test.sh: error: $*" >&2; exit 1; }
step() { echo "sdk-ts: $*" >&2; }

command -v node >/dev/null || die "node not found (Node.js >= 20 is required)"
command -v npm >/dev/null || die "npm not found (it comes with Node.js)"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' ||
    die "Node.js $(node --version) is older than 20"
command -v openssl >/dev/null || die "openssl not found (the TLS e2e tests make their certificates with it)"

export CONVERGE_BIN="${CONVERGE_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/converge-target}/debug/converge}"
[[ -x "$CONVERGE_BIN" ]] || die "converge binary not found at $CONVERGE_BIN (build it or set CONVERGE_BIN)"

cd "$sdk"
case "${CONVERGE_DEPS:-locked}" in
locked)
    step "npm ci"
    npm ci --no-audit --no-fund --loglevel=error
    ;;
newest)
    # The newest releases package.json's ranges allow, ignoring (and not rewriting) the lock:
    # what `npm install converge-sdk` resolves for a user today (scripts/test.sh --newest).
    step "npm install --no-package-lock (newest releases)"
    # pins: newest
    npm install --no-package-lock --no-audit --no-fund --loglevel=error
    npm ls --depth=0 2>/dev/null | sed -n 's/^[^a-z@]*/sdk-ts: newest: /p' >&2 || true
    ;;
*) die "CONVERGE_DEPS must be 'locked' or 'newest'" ;;
esac

step "build (tsc -> dist/)"
npx --no-install tsc -p tsconfig.json

step "typecheck and build the tests, example and bench worker (strict)"
rm -rf build
npx --no-install tsc -p tsconfig.test.json

step "lint and format check (biome)"
npx --no-install biome check

step "drift check"
scripts/check-gen.sh

step "npm install ./sdk-ts from a fresh copy (npm ci from test/install's lockfile)"
scratch="$(mktemp -d -t sdkts-install.XXXXXX)"
pgdir=""
cleanup() {
    rm -rf "$scratch"
    if [[ -n "$pgdir" ]]; then
        "$repo/scripts/pg-test-cluster.sh" stop "$pgdir" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT
# The package's own files only (git's view: no node_modules, dist or build), as a checkout has them.
mkdir "$scratch/sdk-ts"
git -C "$sdk" ls-files -z --cached --others --exclude-standard . |
    (cd "$sdk" && xargs -0 cp --parents -t "$scratch/sdk-ts")
# What `npm install ./sdk-ts` does in a new project (link the folder, install its
# dependencies, build dist/ in `prepare`), with every version from a committed lockfile so a
# new release on npm cannot change the run. After changing sdk-ts's dependencies, regenerate
# it: in an empty dir holding a copy of sdk-ts, `npm install ./sdk-ts`, and copy the
# package-lock.json it writes over test/install's (its name and root entry are the fixture's).
cp "$sdk/test/install/package.json" "$scratch/"
if [[ "${CONVERGE_DEPS:-locked}" == newest ]]; then
    # pins: newest
    (cd "$scratch" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
else
    cp "$sdk/test/install/package-lock.json" "$scratch/"
    (cd "$scratch" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
(cd "$scratch" &&
    node --input-type=module -e '
        import { SDK, KindVersion, WorkerConfig } from "converge-sdk";
        import { request, run } from "converge-sdk/testing";
        const kv = new KindVersion("hello");
        const out = await run({ kind: kv, work: (r) => ({ name: r.resource.name }) }, request("hello"))
            .catch((e) => e.message);
        if (!SDK.startsWith("ts/") || WorkerConfig.fromEnv({ BROKER_ADDR: "a:1" }).targets[0] !== "a:1" ||
            !String(out).includes("expected an Outcome")) {
            throw new Error("the installed package does not work: " + out);
        }
        console.error("sdk-ts: installed " + SDK + " works");')

if [[ -z "${CONVERGE_TEST_DATABASE_URL:-}" ]]; then
    pgdir="$(mktemp -d -t converge-ts-pg.XXXXXX)"
    rmdir "$pgdir"
    eval "$("$repo/scripts/pg-test-cluster.sh" start "$pgdir")"
fi
export CONVERGE_E2E_REQUIRED=1

step "node --test"
node --test --test-concurrency=1 "$@" build/test/*.test.js
