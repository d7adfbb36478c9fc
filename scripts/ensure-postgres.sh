#!/usr/bin/env bash
# Makes sure PostgreSQL server binaries (initdb, postgres) are present, installing Debian's
# `postgresql` package with apt-get when none are found. Used by .ci/run and scripts/demo.sh
# so a fresh machine needs nothing installed by hand.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() {
    echo "ensure-postgres: error: $*" >&2
    exit 1
}

# Runs a command as root (directly, or via sudo when we are not root).
as_root() {
    if [[ "$(id -u)" == 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

if "$here/pg-test-cluster.sh" bindir >/dev/null 2>&1; then
    exit 0
fi
command -v apt-get >/dev/null 2>&1 ||
    die "PostgreSQL server binaries not found and apt-get is unavailable; install PostgreSQL or set PG_BIN_DIR"
echo "ensure-postgres: installing PostgreSQL with apt-get" >&2
as_root apt-get update
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql
"$here/pg-test-cluster.sh" bindir >/dev/null 2>&1 ||
    die "PostgreSQL was installed but its server binaries still cannot be found; set PG_BIN_DIR"
