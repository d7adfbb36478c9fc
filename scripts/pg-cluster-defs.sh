# pg-cluster-defs.sh — the one definition of converge's private PostgreSQL cluster, shared by
# `converge dev`'s embedded database (control/src/devdb.rs embeds this file with include_str!
# and parses it) and the throwaway test cluster (scripts/pg-test-cluster.sh sources it).
#
# Format, so that bash and devdb.rs read the same values: `KEY=value` or `KEY="value"` lines,
# `#` comment lines and blank lines; no `$`, backquote, backslash or single quote. A list is
# one space-separated value.
# shellcheck disable=SC2034  # the variables are used by the scripts that source this file

# Superuser created by initdb; every connection uses it (trust authentication, no password).
PG_SUPERUSER=converge
# initdb flags besides `-D DIR -U "$PG_SUPERUSER"`.
PG_INITDB_ARGS="--auth=trust --encoding=UTF8 --locale=C --no-sync"
# The only TCP address the server listens on; the port is a free one chosen at each start.
PG_LISTEN_ADDRESS=127.0.0.1
# Settings trading durability for speed: always on for the test cluster, on for `converge
# dev` with DEVDB_FAST=1 (a crash may then lose or corrupt the data).
PG_FAST_SETTINGS="fsync=off synchronous_commit=off full_page_writes=off"
# Starts tried on a fresh free port when the chosen one was taken in the meantime.
PG_START_ATTEMPTS=5
# Seconds the server gets to accept connections after it was started.
PG_READY_TIMEOUT_SECS=60
# Seconds a fast shutdown may take before the server is shut down immediately.
PG_STOP_TIMEOUT_SECS=30
# initdb and postgres refuse to run as root: as root, the first of these users that exists
# (with a non-zero uid) runs them.
PG_RUN_AS_USERS="postgres nobody"
# Holds one `<major>/bin` directory per installed PostgreSQL version (Debian layout); the
# newest is tried after PG_BIN_DIR and `pg_config --bindir`, before PATH.
PG_VERSIONS_DIR=/usr/lib/postgresql
