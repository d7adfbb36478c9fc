#!/usr/bin/env bash
# Where a BOM root's rollup latency goes: runs converge-bench's composite benchmark and times
# the hops of each root's last rollup, from the commit that settled its last child to the
# commit that made it Ready.
#
#   scripts/rollup-hops.sh BIN_DIR [converge-bench BOM args...]
#   scripts/rollup-hops.sh target/release --bom-children 1000000 --roots 20 --workers 2
#
# BIN_DIR holds a release `converge` and `converge-bench` (the bench starts the `converge`
# beside it). Once the bench's database is up, row triggers are added to it, outside the
# engine, to record each root's queue row as it is deleted (enqueued, claimed, deleted), each
# express outbox row as the drainer deletes it, and each lease of a root given back to the
# queue. When the bench reports its figures the table below is printed, one row per root, in
# ms:
#
#   total      last child's commit -> root's Ready commit (the bench's rollup latency)
#   enq        last child's commit -> the root's last queue row enqueued (a transaction's
#              start: negative when the writer that settled the child enqueued it)
#   to_claim   enqueued -> claimed (the claim's transaction start)
#   run_write  claimed -> the composites' writer deleted the queue row: the summary read,
#              the worker's ROLLUP, the writer's batch
#   to_drain   that delete -> the express drainer deleted the outbox row
#   to_commit  that delete -> the root's Ready commit
#
# The triggers cost a little on the composite's rows only; the figures are for finding the
# largest hop, not for BENCHMARKS.md's throughput tables. Needs psql on PATH.
set -euo pipefail
dir=${1:?usage: scripts/rollup-hops.sh BIN_DIR [converge-bench args...]}
shift
args=("$@")
if [[ ${#args[@]} -eq 0 ]]; then args=(--bom-children 300000 --roots 20 --workers 2); fi
dir=$(cd "$dir" && pwd)
log=$(mktemp)
out=$(mktemp)
trap 'rm -f "$log" "$out"' EXIT

(cd /tmp && exec "$dir/converge-bench" "${args[@]}") 2>"$log" >"$out" &
bench=$!

# The bench's `converge dev` names the port of its embedded database in its environment.
pid=
for _ in $(seq 300); do
    pid=$(pgrep -n -f "^$dir/converge dev" || true)
    [[ -n "$pid" ]] && break
    sleep 0.1
done
[[ -n "$pid" ]] || { echo "rollup-hops: converge dev did not start" >&2; exit 1; }
port=$(tr '\0' '\n' < "/proc/$pid/environ" | sed -n 's/^CONVERGE_DEV_PG_PORT=//p')
psql=(psql -X -q -h 127.0.0.1 -p "$port" -U converge -d converge -v ON_ERROR_STOP=1)
for _ in $(seq 600); do
    if "${psql[@]}" -Atc "SELECT 1 FROM pg_tables WHERE tablename = 'work_queue'" 2>/dev/null | grep -q 1; then
        break
    fi
    sleep 0.1
done

"${psql[@]}" <<'SQL'
CREATE TABLE hops_queue (rid uuid, enq timestamptz, claimed timestamptz, deleted timestamptz);
CREATE TABLE hops_outbox (rid uuid, deleted timestamptz);
CREATE TABLE hops_released (rid uuid, claimed timestamptz, at timestamptz, query text);
CREATE FUNCTION hops_queue_deleted() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    INSERT INTO hops_queue VALUES (old.resource_id, old.enqueued_at, old.claimed_at, clock_timestamp());
    RETURN NULL; END $$;
CREATE FUNCTION hops_outbox_deleted() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    INSERT INTO hops_outbox VALUES (old.resource_id, clock_timestamp());
    RETURN NULL; END $$;
CREATE FUNCTION hops_released() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    INSERT INTO hops_released VALUES (old.resource_id, old.claimed_at, clock_timestamp(), left(current_query(), 60));
    RETURN NULL; END $$;
CREATE TRIGGER hops_queue AFTER DELETE ON work_queue FOR EACH ROW
    WHEN (old.kind = 'benchbom') EXECUTE FUNCTION hops_queue_deleted();
CREATE TRIGGER hops_outbox AFTER DELETE ON work_outbox FOR EACH ROW
    WHEN (old.express) EXECUTE FUNCTION hops_outbox_deleted();
CREATE TRIGGER hops_released AFTER UPDATE ON work_queue FOR EACH ROW
    WHEN (old.kind = 'benchbom' AND old.lease_token IS NOT NULL AND new.lease_token IS NULL)
    EXECUTE FUNCTION hops_released();
SQL
echo "rollup-hops: timing the roots' hops (database on port $port)" >&2

# The bench measures its idle roots after the bulk ones: report before it stops converge.
until grep -q "measuring rollup latency of" "$log"; do
    if ! kill -0 "$bench" 2>/dev/null; then
        cat "$log" >&2
        echo "rollup-hops: the bench ended before its rollup figures" >&2
        exit 1
    fi
    sleep 0.2
done
"${psql[@]}" <<'SQL'
WITH roots AS (
    SELECT r.id, r.name, pg_xact_commit_timestamp(r.xmin) AS ready_at,
           (SELECT max(pg_xact_commit_timestamp(c.xmin)) FROM resources c WHERE c.root_id = r.id) AS last_child
    FROM resources r WHERE r.kind = 'benchbom' AND r.name LIKE 'bom%'
), q AS (
    SELECT DISTINCT ON (h.rid) h.* FROM hops_queue h JOIN roots ON roots.id = h.rid
    ORDER BY h.rid, h.deleted DESC
), o AS (
    SELECT DISTINCT ON (h.rid) h.* FROM hops_outbox h JOIN roots ON roots.id = h.rid
    ORDER BY h.rid, h.deleted DESC
)
SELECT roots.name,
       round(extract(epoch FROM ready_at - last_child) * 1000) AS total,
       round(extract(epoch FROM q.enq - last_child) * 1000) AS enq,
       round(extract(epoch FROM q.claimed - q.enq) * 1000) AS to_claim,
       round(extract(epoch FROM q.deleted - q.claimed) * 1000) AS run_write,
       round(extract(epoch FROM o.deleted - q.deleted) * 1000) AS to_drain,
       round(extract(epoch FROM ready_at - o.deleted) * 1000) AS to_commit
FROM roots LEFT JOIN q ON q.rid = roots.id LEFT JOIN o ON o.rid = roots.id
ORDER BY total;
SELECT count(*) AS root_leases_given_back,
       round(avg(extract(epoch FROM at - claimed)) * 1000) AS held_ms_avg,
       round(max(extract(epoch FROM at - claimed)) * 1000) AS held_ms_max
FROM hops_released;
SELECT query AS given_back_by, count(*) FROM hops_released GROUP BY 1 ORDER BY 2 DESC;
SQL
# How many times each stage ran (a compose run again shows here) and the rollup's own time.
http=$(tr '\0' '\n' < "/proc/$pid/environ" | sed -n 's/^LISTEN_ADDR=//p')
curl -s "http://$http/metrics" | grep -E '^converge_(reconciles_total|task_duration_seconds_(sum|count)|rollup_latency_seconds_(sum|count))\{kind="benchbom"' || true
wait "$bench"
tail -1 "$out"
