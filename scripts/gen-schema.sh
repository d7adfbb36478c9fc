#!/usr/bin/env bash
# Rewrites engine/schema.sql: the schema of a freshly migrated database (migrations/, then
# engine/sql/ in its apply order), as a normalised `pg_dump --schema-only`.
#
#   scripts/gen-schema.sh                 # needs CONVERGE_TEST_DATABASE_URL (an admin URL)
#   scripts/gen-schema.sh --check         # exits 1 and prints the diff if schema.sql is stale
#   scripts/gen-schema.sh --dump URL      # prints the normalised dump of an existing database
#   scripts/gen-schema.sh --build URL     # builds the schema into an existing empty database
#
# The database is built here with psql, the same files in the same order as the binary applies
# them (engine/sql/ORDER); engine/tests/schema.rs checks that a real `migrate` agrees. Start a
# throwaway server with `eval "$(scripts/pg-test-cluster.sh start DIR)"`. PostgreSQL tools come
# from PG_BIN_DIR, else `scripts/pg-test-cluster.sh bindir`.
set -euo pipefail
cd "$(dirname "$0")/.."

bindir="${PG_BIN_DIR:-$(scripts/pg-test-cluster.sh bindir)}"
psql=("$bindir/psql" -X -q -v ON_ERROR_STOP=1)
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"

# pg_dump output minus what depends on the server or client version (header comments, SET
# lines of the client, \restrict tokens of newer pg_dump); sqlx's history table is left out.
normalise() {
    sed -E \
        -e '/^-- Dumped (from|by) /d' \
        -e '/^\\(un)?restrict /d' \
        -e '/^SET /d' \
        -e '/^SELECT pg_catalog\.set_config/d' \
        | cat -s
}

dump() {
    "$bindir/pg_dump" --schema-only --no-owner --no-privileges \
        --exclude-table=public._sqlx_migrations "$1" | normalise
}

# migrations/, then engine/sql/ in its apply order, into the empty database at $1.
build() {
    local f name
    for f in migrations/[0-9]*.sql; do
        "${psql[@]}" -1 "$1" -f "$f"
    done
    while read -r name; do
        [[ -z "$name" || "$name" == \#* ]] && continue
        "${psql[@]}" -1 "$1" -f "engine/sql/$name"
    done < engine/sql/ORDER
}

if [[ "${1:-}" == "--dump" ]]; then
    dump "$2"
    exit 0
fi
if [[ "${1:-}" == "--build" ]]; then
    build "$2"
    exit 0
fi

: "${CONVERGE_TEST_DATABASE_URL:?set CONVERGE_TEST_DATABASE_URL (scripts/pg-test-cluster.sh start DIR)}"
admin="$CONVERGE_TEST_DATABASE_URL"
db="gen_schema_$$"
url="${admin%/*}/$db"
"${psql[@]}" "$admin" -c "CREATE DATABASE $db"
trap '"${psql[@]}" "$admin" -c "DROP DATABASE IF EXISTS $db" >/dev/null' EXIT

build "$url"

out=$(mktemp)
dump "$url" > "$out"
if [[ "${1:-}" == "--check" ]]; then
    if ! diff -u engine/schema.sql "$out"; then
        rm -f "$out"
        echo "engine/schema.sql is stale: run scripts/gen-schema.sh" >&2
        exit 1
    fi
    rm -f "$out"
else
    mv "$out" engine/schema.sql
    echo "wrote engine/schema.sql ($(wc -l < engine/schema.sql) lines)" >&2
fi
