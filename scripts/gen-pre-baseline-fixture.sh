#!/usr/bin/env bash
# Writes engine/tests/fixtures/pre_baseline.sql: a database as a converge built before the
# baseline squash left it, schema and data, for converge/tests/upgrade.rs.
#
#   eval "$(scripts/pg-test-cluster.sh start DIR)"; scripts/gen-pre-baseline-fixture.sh
#
# The database gets the old migrations 0001-0025 as they were at commit $OLD (read with
# `git show`), each in its own transaction, and the _sqlx_migrations rows sqlx records for
# them (its table, its descriptions, the checksums of the old migrations/CHECKSUMS). Then a
# kind and resources in every state an upgrade must carry over, written through the engine's
# own functions where one exists:
#   hello (examples/hello manifest), served by hello-worker;
#   upg-root      Ready (synced at generation 1), the owner of upg-a and upg-b;
#   upg-a         behind, its reconcile task leased by a broker that is gone (the lease is
#                 stale: the reaper frees it);
#   upg-b         behind, depending on upg-a with a value flow (/greeting <- /message), so it
#                 waits for upg-a and then takes its greeting;
#   upg-c         behind, its result already in the outbox (not yet drained);
#   upg-d         behind, its task queued and unclaimed.
# The dump is plain SQL with INSERTs (no COPY), so a test can run it without psql.
# Generated once; it never needs regenerating (it stands for databases that exist).
set -euo pipefail
cd "$(dirname "$0")/.."

OLD=64f12c708af88c0b568fdf815baa2da23193b837
bindir="${PG_BIN_DIR:-$(scripts/pg-test-cluster.sh bindir)}"
psql=("$bindir/psql" -X -q -v ON_ERROR_STOP=1)
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
: "${CONVERGE_TEST_DATABASE_URL:?set CONVERGE_TEST_DATABASE_URL (scripts/pg-test-cluster.sh start DIR)}"
admin="$CONVERGE_TEST_DATABASE_URL"
db="pre_baseline_$$"
url="${admin%/*}/$db"
"${psql[@]}" "$admin" -c "CREATE DATABASE $db"
trap '"${psql[@]}" "$admin" -c "DROP DATABASE IF EXISTS $db" >/dev/null' EXIT

"${psql[@]}" "$url" <<'SQL'
CREATE TABLE IF NOT EXISTS _sqlx_migrations (
    version BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    installed_on TIMESTAMPTZ NOT NULL DEFAULT now(),
    success BOOLEAN NOT NULL,
    checksum BYTEA NOT NULL,
    execution_time BIGINT NOT NULL
);
SQL
git show "$OLD:migrations/CHECKSUMS" | grep -v '^#' | while read -r version desc sum; do
    file=$(git ls-tree --name-only "$OLD" migrations/ | grep "/${version}_")
    git show "$OLD:$file" > "/tmp/$db.sql"
    [[ "$(sha384sum "/tmp/$db.sql" | cut -d' ' -f1)" == "$sum" ]] || { echo "checksum of $file" >&2; exit 1; }
    { cat "/tmp/$db.sql"; echo
      echo "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)"
      echo "VALUES ($((10#$version)), '${desc//_/ }', true, decode('$sum', 'hex'), 1000000);"
    } | "${psql[@]}" -1 "$url" -f -
done
rm -f "/tmp/$db.sql"

manifest=$(cat examples/hello/kind-hello.json)
"${psql[@]}" -o /dev/null "$url" -v manifest="$manifest" <<'SQL'
INSERT INTO kind_manifest (kind, kind_version, manifest) VALUES ('hello', 1, :'manifest'::jsonb);
SELECT resource_apply('hello', 1, n, '{"greeting": "hi"}', '{"suite": "upgrade"}', NULL)
FROM unnest(ARRAY['upg-root', 'upg-a', 'upg-b', 'upg-c', 'upg-d']) n;
-- upg-root: Ready at generation 1; upg-a and upg-b are its children.
UPDATE resources SET synced_gen = 1, status = '{"message": "hi, upg-root!", "observed_generation": 1, "attempt": 1}'
WHERE name = 'upg-root';
DELETE FROM work_queue WHERE resource_id = (SELECT id FROM resources WHERE name = 'upg-root');
UPDATE resources c SET owner_id = r.id, root_id = r.id
FROM resources r WHERE r.name = 'upg-root' AND c.name IN ('upg-a', 'upg-b');
INSERT INTO resource_deps (dependent_id, dependency_id, owner_id, value_flows)
SELECT b.id, a.id, a.owner_id, '[{"dep_field": "/greeting", "src_field": "/message"}]'
FROM resources a, resources b WHERE a.name = 'upg-a' AND b.name = 'upg-b';
-- upg-a: leased by a broker that died ten minutes ago.
UPDATE work_queue SET lease_token = gen_random_uuid(), claim_epoch = claim_epoch + 1,
    broker_id = 'gone-broker', worker_id = 'gone-worker', claimed_at = now() - interval '10 minutes',
    heartbeat_at = now() - interval '10 minutes'
WHERE resource_id = (SELECT id FROM resources WHERE name = 'upg-a');
-- upg-b waits for upg-a (the upstream gate): no queue row.
DELETE FROM work_queue WHERE resource_id = (SELECT id FROM resources WHERE name = 'upg-b');
-- upg-c: its result is in the outbox, the queue row gone (what work_complete leaves).
DELETE FROM work_queue WHERE resource_id = (SELECT id FROM resources WHERE name = 'upg-c');
INSERT INTO work_outbox (shard_id, resource_id, task_type, generation, ok, status, health_ok)
SELECT shard_id, id, 'reconcile', generation, true,
       '{"message": "hi, upg-c!", "observed_generation": 1, "attempt": 1}', true
FROM resources WHERE name = 'upg-c';
SQL
# upg-d keeps the unclaimed queue row resource_apply gave it.

"$bindir/pg_dump" --no-owner --no-privileges --inserts "$url" \
    | sed -E -e '/^-- Dumped (from|by) /d' -e '/^\\(un)?restrict /d' \
    > engine/tests/fixtures/pre_baseline.sql
echo "wrote engine/tests/fixtures/pre_baseline.sql ($(wc -l < engine/tests/fixtures/pre_baseline.sql) lines)" >&2
