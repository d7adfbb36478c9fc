#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests, built from the system's server binaries.
#
#   eval "$(scripts/pg-test-cluster.sh start DIR)"   # DIR must be absent or empty
#   scripts/pg-test-cluster.sh stop DIR              # stops the server and removes DIR
#   scripts/pg-test-cluster.sh bindir                # prints the PostgreSQL bin dir, or fails
#
# `start` prints shell `export` lines on stdout (CONVERGE_TEST_DATABASE_URL, an admin URL to
# database `postgres` as superuser `converge`, and CONVERGE_TEST_PG_DIR); everything else goes
# to stderr. Settings favour speed over durability (fsync/synchronous_commit/full_page_writes
# off, max_connections=500); the server listens on a free 127.0.0.1 port and on a unix socket
# in DIR. initdb and postgres refuse to run as root, so as root the cluster runs as `postgres`
# if that user exists, else `nobody` (override with PG_TEST_USER).
#
# The PostgreSQL bin dir is PG_BIN_DIR if set, else `pg_config --bindir`, else the newest
# /usr/lib/postgresql/*/bin, else wherever `initdb` is on PATH.
#
# The cluster itself (superuser, initdb flags, settings, users, timeouts) is defined once in
# pg-cluster-defs.sh, shared with `converge dev`'s embedded database.
set -euo pipefail

readonly MARKER=".pg-test-cluster"
# This cluster only: many test binaries run at once, each with its own pool.
readonly TEST_SETTINGS="max_connections=500"

# shellcheck source=pg-cluster-defs.sh
. "$(dirname "${BASH_SOURCE[0]}")/pg-cluster-defs.sh"

die() {
    echo "pg-test-cluster: error: $*" >&2
    exit 1
}

log() {
    echo "pg-test-cluster: $*" >&2
}

# Prints the directory holding initdb, pg_ctl and postgres, or returns 1.
find_bindir() {
    local candidates=() d
    if [[ -n "${PG_BIN_DIR:-}" ]]; then
        candidates+=("$PG_BIN_DIR")
    fi
    if command -v pg_config >/dev/null 2>&1; then
        candidates+=("$(pg_config --bindir 2>/dev/null || true)")
    fi
    if compgen -G "$PG_VERSIONS_DIR/*/bin" >/dev/null; then
        while IFS= read -r d; do
            candidates+=("$d")
        done < <(printf '%s\n' "$PG_VERSIONS_DIR"/*/bin | sort -rV)
    fi
    if command -v initdb >/dev/null 2>&1; then
        candidates+=("$(dirname "$(command -v initdb)")")
    fi
    for d in "${candidates[@]}"; do
        if [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/postgres" ]]; then
            echo "$d"
            return 0
        fi
    done
    return 1
}

# Prints the user the server runs as when we are root (empty when we are not root).
pick_user() {
    if [[ "$(id -u)" != 0 ]]; then
        return 0
    fi
    local u
    for u in ${PG_TEST_USER:-} $PG_RUN_AS_USERS; do
        if id -u "$u" >/dev/null 2>&1 && [[ "$(id -u "$u")" != 0 ]]; then
            echo "$u"
            return 0
        fi
    done
    die "running as root and found no unprivileged user (${PG_RUN_AS_USERS// /, }) to run PostgreSQL as; set PG_TEST_USER"
}

# run_as USER CMD...: runs CMD as USER (or as ourselves when USER is empty).
run_as() {
    local user="$1"
    shift
    if [[ -z "$user" ]]; then
        "$@"
    elif command -v runuser >/dev/null 2>&1; then
        runuser -u "$user" -- "$@"
    elif command -v setpriv >/dev/null 2>&1; then
        setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups -- "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo -u "$user" -- "$@"
    else
        die "need runuser, setpriv or sudo to run PostgreSQL as $user"
    fi
}

# A loopback port nothing is listening on (the server start retries on a lost race).
free_port() {
    local p i
    for i in $(seq 1 50); do
        p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    die "could not find a free loopback port"
}

# conf_lines NAME=VALUE...: the settings as postgresql.conf lines.
conf_lines() {
    local s
    for s in "$@"; do
        printf "%s = '%s'\n" "${s%%=*}" "${s#*=}"
    done
}

cmd_start() {
    local dir="${1:?usage: pg-test-cluster.sh start DIR}"
    local bindir user port attempt initdb_args fast_settings test_settings
    read -ra initdb_args <<<"$PG_INITDB_ARGS"
    read -ra fast_settings <<<"$PG_FAST_SETTINGS"
    read -ra test_settings <<<"$TEST_SETTINGS"
    bindir="$(find_bindir)" || die "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found; install PostgreSQL (e.g. apt-get install postgresql) or set PG_BIN_DIR"
    user="$(pick_user)"

    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    if [[ -n "$(ls -A "$dir")" ]]; then
        die "$dir is not empty"
    fi
    touch "$dir/$MARKER"
    if [[ -n "$user" ]]; then
        chown -R "$user:$(id -g "$user")" "$dir"
        run_as "$user" test -w "$dir" ||
            die "user $user cannot write $dir (are its parent directories traversable?)"
    fi

    log "initdb in $dir/pgdata (bin dir $bindir${user:+, as user $user})"
    if ! run_as "$user" "$bindir/initdb" -D "$dir/pgdata" -U "$PG_SUPERUSER" \
        "${initdb_args[@]}" >"$dir/initdb.log" 2>&1; then
        cat "$dir/initdb.log" >&2
        die "initdb failed"
    fi
    {
        printf '\n# pg-test-cluster.sh: throwaway test cluster, speed over durability\n'
        conf_lines "listen_addresses=$PG_LISTEN_ADDRESS" "unix_socket_directories=$dir" \
            "${test_settings[@]}" "${fast_settings[@]}"
    } >>"$dir/pgdata/postgresql.conf"

    for attempt in $(seq 1 "$PG_START_ATTEMPTS"); do
        port="$(free_port)"
        if run_as "$user" "$bindir/pg_ctl" -D "$dir/pgdata" -l "$dir/postgres.log" -w \
            -t "$PG_READY_TIMEOUT_SECS" -o "-p $port" start >&2; then
            log "PostgreSQL listening on $PG_LISTEN_ADDRESS:$port"
            printf "export CONVERGE_TEST_DATABASE_URL='postgres://%s@%s:%s/postgres'\n" \
                "$PG_SUPERUSER" "$PG_LISTEN_ADDRESS" "$port"
            printf "export CONVERGE_TEST_PG_DIR='%s'\n" "$dir"
            return 0
        fi
        log "start on port $port failed (attempt $attempt); server log tail:"
        tail -n 20 "$dir/postgres.log" >&2 || true
    done
    die "PostgreSQL did not start; see $dir/postgres.log"
}

cmd_stop() {
    local dir="${1:?usage: pg-test-cluster.sh stop DIR}"
    [[ -d "$dir" ]] || return 0
    if [[ -z "$(ls -A "$dir")" ]]; then
        rmdir "$dir"
        return 0
    fi
    [[ -e "$dir/$MARKER" ]] || die "$dir was not created by pg-test-cluster.sh; refusing to touch it"
    local bindir user
    if [[ -f "$dir/pgdata/postmaster.pid" ]] && bindir="$(find_bindir)"; then
        user="$(pick_user)"
        run_as "$user" "$bindir/pg_ctl" -D "$dir/pgdata" -m fast -w -t "$PG_STOP_TIMEOUT_SECS" stop >&2 ||
            run_as "$user" "$bindir/pg_ctl" -D "$dir/pgdata" -m immediate -w -t "$PG_STOP_TIMEOUT_SECS" stop >&2 ||
            log "could not stop the server in $dir"
    fi
    rm -rf "$dir"
}

case "${1:-}" in
start) cmd_start "${2:-}" ;;
stop) cmd_stop "${2:-}" ;;
bindir) find_bindir || die "PostgreSQL server binaries not found" ;;
*)
    echo "usage: $0 start DIR | stop DIR | bindir" >&2
    exit 2
    ;;
esac
