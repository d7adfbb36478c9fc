#!/usr/bin/env bash
# The queue lab: the engine's claim + complete SQL path for 100k leaf tasks, in one backend,
# with no converge process, no gRPC and no workers — what a change to engine/sql costs per
# reconcile, within about ±3 % from run to run (the full converge-bench moves ±10 %).
#
#   scripts/queue-lab.sh                     # the tree's engine, 3 runs
#   scripts/queue-lab.sh PATCH.sql [RUNS]    # the same, with PATCH.sql applied on top
#
# It starts a private cluster (scripts/pg-test-cluster.sh, with pg_stat_statements and
# track_commit_timestamp as converge-bench's cluster has them), builds a template database
# from migrations/ and engine/sql/ (scripts/gen-schema.sh --build), registers the bench's
# leaf kind and applies 100,000 resources through resource_apply_batch in batches of 1,000.
# Each run copies the template, applies PATCH.sql if given (CREATE OR REPLACE of engine
# functions, an index dropped, ...), VACUUM ANALYZEs, then runs 400 rounds of work_claim(250)
# and work_complete of those 250 (successes with a status, each in its own transaction) and
# prints µs per reconcile and the top statements (pg_stat_statements, track = all) per
# reconcile. Interleave runs with and without a patch to compare; the cluster is removed at
# the end.
set -euo pipefail
cd "$(dirname "$0")/.."

patch="${1:-}"
runs="${2:-3}"
N=100000
ROUND=250
[[ -z "$patch" || -f "$patch" ]] || { echo "queue-lab: no such file: $patch" >&2; exit 2; }

dir=$(mktemp -d /tmp/queue-lab.XXXXXX)
rmdir "$dir"
eval "$(scripts/pg-test-cluster.sh start "$dir")"
trap 'scripts/pg-test-cluster.sh stop "$dir" >/dev/null 2>&1 || true' EXIT
bindir="${PG_BIN_DIR:-$(scripts/pg-test-cluster.sh bindir)}"
P=("$bindir/psql" -X -q -v ON_ERROR_STOP=1)
export PGOPTIONS="-c client_min_messages=warning"
admin="$CONVERGE_TEST_DATABASE_URL"
base="${admin%/*}"

# pg_stat_statements must be preloaded: one restart of the private cluster.
"${P[@]}" "$admin" -c "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'" \
    -c "ALTER SYSTEM SET track_commit_timestamp = on"
pgdata="$dir/pgdata"
owner=$(stat -c %U "$pgdata")
port="${admin##*:}"; port="${port%%/*}"
restart=("$bindir/pg_ctl" -D "$pgdata" restart -m fast -w -l "$dir/postgres.log"
         -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir $(. scripts/pg-cluster-defs.sh; for s in $PG_FAST_SETTINGS; do printf -- '-c %s ' "$s"; done)")
if [[ "$(id -un)" == "$owner" ]]; then "${restart[@]}" >/dev/null; else su "$owner" -s /bin/bash -c "$(printf '%q ' "${restart[@]}")" >/dev/null; fi
"${P[@]}" "$admin" -c "ALTER SYSTEM SET pg_stat_statements.track = 'all'" -c "SELECT pg_reload_conf()" >/dev/null

echo "queue-lab: building the template ($N resources)" >&2
"${P[@]}" "$admin" -c "CREATE DATABASE lab"
PG_BIN_DIR="$bindir" scripts/gen-schema.sh --build "$base/lab"
"${P[@]}" "$base/lab" <<'SQL'
INSERT INTO kind_manifest (kind, kind_version, manifest) VALUES ('benchleaf', 1,
 '{"kind": "benchleaf", "kind_version": 1, "spec_schema": {"type": "object"},
   "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]}');
SQL
for b in $(seq 0 $((N / 1000 - 1))); do
    echo "SELECT count(*) FROM resource_apply_batch(array_fill('benchleaf'::text, ARRAY[1000]),
        array_fill(1, ARRAY[1000]),
        (SELECT array_agg('leaf-' || ($b * 1000 + i)) FROM generate_series(1, 1000) i),
        (SELECT array_agg(jsonb_build_object('i', $b * 1000 + i)) FROM generate_series(1, 1000) i),
        array_fill('{}'::jsonb, ARRAY[1000]), array_fill(NULL::text, ARRAY[1000]));"
done | "${P[@]}" -At "$base/lab" >/dev/null

rounds=$(( (N + ROUND - 1) / ROUND ))
script=$(mktemp)
{
    cat <<SQL
CREATE PROCEDURE lab_round() LANGUAGE plpgsql AS \$\$
DECLARE ids uuid[]; sh smallint[]; tt text[]; lt uuid[]; ep bigint[]; n int;
BEGIN
  SELECT array_agg(c.resource_id), array_agg(c.shard_id), array_agg(c.task_type),
         array_agg(c.lease_token), array_agg(c.claim_epoch)
  INTO ids, sh, tt, lt, ep
  FROM work_claim(0::smallint, 255::smallint, 'benchleaf', 1, $ROUND, 'lab', 0) c;
  IF ids IS NULL THEN RETURN; END IF;
  n := cardinality(ids);
  COMMIT;
  PERFORM count(*) FROM work_complete(ids, sh, tt, lt, ep, array_fill(true, ARRAY[n]),
     array_fill(false, ARRAY[n]), array_fill(NULL::text, ARRAY[n]),
     array_fill('{"ok": true, "generation": 1}'::jsonb, ARRAY[n]),
     array_fill(NULL::jsonb, ARRAY[n]), array_fill(true, ARRAY[n]), array_fill(true, ARRAY[n]));
  COMMIT;
END \$\$;
SELECT pg_stat_statements_reset();
SQL
    for _ in $(seq "$rounds"); do echo "CALL lab_round();"; done
} > "$script"

for r in $(seq "$runs"); do
    "${P[@]}" "$admin" -c "DROP DATABASE IF EXISTS run" -c "CREATE DATABASE run TEMPLATE lab"
    url="$base/run"
    "${P[@]}" "$url" -c "CREATE EXTENSION pg_stat_statements"
    [[ -n "$patch" ]] && "${P[@]}" "$url" -f "$patch" >/dev/null
    "${P[@]}" "$url" -c "VACUUM ANALYZE"
    s=$(date +%s%N)
    "${P[@]}" "$url" -f "$script" >/dev/null
    e=$(date +%s%N)
    left=$("${P[@]}" -At "$url" -c "SELECT count(*) FROM work_queue")
    echo "run $r: claim + complete $(( (e - s) / N / 1000 )).$(( (e - s) / N % 1000 / 100 )) µs per reconcile (${left} tasks left)"
    "${P[@]}" -At -F ' | ' "$url" -c "
        SELECT round((total_exec_time * 1000 / $N)::numeric, 1) AS us, calls,
               left(regexp_replace(query, '\s+', ' ', 'g'), 100)
        FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'run')
        ORDER BY total_exec_time DESC LIMIT 10" | sed 's/^/    /'
done
rm -f "$script"
