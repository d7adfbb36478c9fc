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

step "build (tsc -> dist/) and check the committed dist/ is that build"
# dist/ is committed so that `npm install ./sdk-ts` works on a fresh clone with no build step
# (a linked folder's devDependencies, tsc among them, are never installed). A clean build must
# reproduce it byte for byte: rebuild from scratch and compare with git's copy.
rm -rf dist
npx --no-install tsc -p tsconfig.json
if [[ -n "$(git status --porcelain -- dist)" ]]; then
    git status --short -- dist >&2
    die "dist/ differs from a clean build of src/: run 'npm run build' in sdk-ts and commit dist/"
fi

step "typecheck and build the tests, example and bench worker (strict)"
rm -rf build
npx --no-install tsc -p tsconfig.test.json

step "lint and format check (biome)"
npx --no-install biome check

step "drift check"
scripts/check-gen.sh

step "npm install ./sdk-ts into an existing project, from a fresh copy (npm ci from test/install's lockfile)"
scratch="$(mktemp -d -t sdkts-install.XXXXXX)"
pgdir=""
cleanup() {
    rm -rf "$scratch"
    if [[ -n "$pgdir" ]]; then
        "$repo/scripts/pg-test-cluster.sh" stop "$pgdir" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT
# The package's own files only (git's view: no node_modules or build/), as a fresh clone has
# them, beside a project whose package.json already names it (`file:../sdk-ts`): what a user's
# `npm install ./sdk-ts` leaves, installed again on another machine. Nothing may need building:
# the copy has no node_modules, so no tsc. Every version comes from a committed lockfile so a
# new release on npm cannot change the run; after changing sdk-ts's dependencies, regenerate
# it: copy sdk-ts (git ls-files) and test/install/{package.json,.npmrc} into an empty dir laid
# out as here, run `npm install` in proj/, and copy the package-lock.json it writes over
# test/install's. The project's .npmrc says `install-links=true`, as README.md tells a project
# outside the repository to: npm installs the dependencies of a linked folder outside the
# project nowhere, so a plain link would import without @grpc/grpc-js.
mkdir "$scratch/sdk-ts" "$scratch/proj"
git -C "$sdk" ls-files -z --cached --others --exclude-standard . |
    (cd "$sdk" && xargs -0 cp --parents -t "$scratch/sdk-ts")
[[ ! -e "$scratch/sdk-ts/node_modules" ]] || die "the fresh copy has node_modules"
cp "$sdk/test/install/package.json" "$sdk/test/install/.npmrc" "$scratch/proj/"
if [[ "${CONVERGE_DEPS:-locked}" == newest ]]; then
    # pins: newest
    (cd "$scratch/proj" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
else
    cp "$sdk/test/install/package-lock.json" "$scratch/proj/"
    (cd "$scratch/proj" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
(cd "$scratch/proj" &&
    node --input-type=module -e '
        import { SDK, KindVersion, Reactions, WorkerConfig, kindManifest } from "converge-sdk";
        import { request, run } from "converge-sdk/testing";
        import { z } from "zod";
        const kv = new KindVersion("hello");
        const out = await run({ kind: kv, work: (r) => ({ name: r.resource.name }) }, request("hello"))
            .catch((e) => e.message);
        const m = kindManifest({ kind: kv, spec: z.object({ a: z.string() }), reactions: [Reactions.work()] });
        if (!SDK.startsWith("ts/") || WorkerConfig.fromEnv({ BROKER_ADDR: "a:1" }).targets[0] !== "a:1" ||
            !String(out).includes("expected an Outcome") || m.spec_schema.properties.a.type !== "string") {
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
