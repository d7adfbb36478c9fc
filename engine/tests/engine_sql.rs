//! The plpgsql engine against a real PostgreSQL (one fresh database per test): phase
//! derivation, exclusive concurrent claims, partition pruning, epoch fencing, drain, value
//! flows over a batch, key probes from plans cached while the tables were empty (and the
//! settings that keep generic plans on keys), the lock order of a result batch, the lag table
//! kept by triggers, a compose's key lookups whatever the statistics say, the provider config
//! a claimed task carries, the problem ranks that must not slow a reconcile, the spec
//! history kept by statement triggers, the event GC, and result updates that stay on their
//! page (HOT).

use std::collections::HashSet;

use converge_engine::testing::TestDb;
use converge_engine::words::{ApplyResult, Phase, TaskType};
use converge_engine::{
    db::queue::{Completion, LeaseKey, Revoked},
    ids::{ClaimEpoch, LeaseToken, ResourceId, ShardId},
};
use serde_json::{Value, json};
use sqlx::{PgPool, Row};
use uuid::Uuid;

/// Kind `comp`: a composite (a composer and a rollup).
async fn comp_kind(pool: &PgPool) {
    sqlx::query("INSERT INTO kind_manifest (kind, kind_version, manifest) VALUES ('comp', 1, $1)")
        .bind(json!({"kind": "comp", "kind_version": 1, "reactions": [
            {"name": "compose", "trigger": "specChange", "emits": ["children", "status"]},
            {"name": "rollup", "trigger": "childrenSettled", "emits": ["status"]}]}))
        .execute(pool)
        .await
        .unwrap();
}

async fn apply(pool: &PgPool, name: &str, spec: serde_json::Value) -> Uuid {
    let (id, _, _): (Uuid, String, i64) =
        sqlx::query_as("SELECT * FROM resource_apply('hello', 1, $1, $2, '{}', NULL)")
            .bind(name)
            .bind(spec)
            .fetch_one(pool)
            .await
            .unwrap();
    id
}

/// A `hello` item for `resource_apply_batch`: `name` with `spec`, no labels, no config.
fn hello_item(name: impl Into<String>, spec: Value) -> converge_engine::db::resources::ApplyItem {
    converge_engine::db::resources::ApplyItem {
        kind: "hello".into(),
        kind_version: 1,
        name: name.into(),
        spec,
        labels: json!({}),
        provider_config_ref: None,
    }
}

#[tokio::test]
async fn phase_derivation_covers_all_seven_states() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    // (name, columns to set, expected phase); precedence is checked by overlapping cases.
    let cases = [
        ("reconciling", "synced_gen = 0", "Reconciling"),
        ("ready", "synced_gen = generation", "Ready"),
        (
            "degraded",
            "synced_gen = generation, health_ok = false",
            "Degraded",
        ),
        ("failed", "failure_gen = generation", "Failed"),
        (
            "failed-over-ready",
            "synced_gen = generation, failure_gen = generation",
            "Failed",
        ),
        (
            "orphaned",
            "synced_gen = generation, frozen_until = now() + interval '1 hour'",
            "Orphaned",
        ),
        (
            "quarantined",
            "failure_gen = generation, frozen_until = 'infinity'",
            "Quarantined",
        ),
        (
            "deleting",
            "frozen_until = 'infinity', deletion_requested_at = now()",
            "Deleting",
        ),
        (
            "failed-over-orphaned",
            "failure_gen = generation, frozen_until = now() + interval '1 hour'",
            "Failed",
        ),
    ];
    for (name, set, _) in &cases {
        let id = apply(&db.pool, name, json!({})).await;
        let sql = format!("UPDATE resources SET {set} WHERE id = $1");
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .execute(&db.pool)
            .await
            .unwrap();
    }
    for (name, _, want) in &cases {
        let (phase, ready): (String, bool) = sqlx::query_as(
            "SELECT phase, is_ready FROM resources WHERE kind = 'hello' AND name = $1",
        )
        .bind(name)
        .fetch_one(&db.pool)
        .await
        .unwrap();
        assert_eq!(&phase, want, "phase of {name}");
        // is_ready is only the synced/healthy/not-deleting axis (an orphaned row can be
        // ready); check it where it must differ from neighbouring phases.
        if ["reconciling", "ready", "degraded", "failed", "deleting"].contains(name) {
            assert_eq!(ready, *want == "Ready", "is_ready of {name}");
        }
    }
    let seen: HashSet<String> = sqlx::query_scalar("SELECT DISTINCT phase FROM resources")
        .fetch_all(&db.pool)
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(seen.len(), 7, "all seven phases: {seen:?}");
}

#[tokio::test]
async fn spec_change_bumps_generation_and_labels_do_not() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let id = apply(&db.pool, "a", json!({"x": 1})).await;
    let row: (String, i64) = sqlx::query_as(
        "SELECT result, generation FROM resource_apply('hello', 1, 'a', '{\"x\": 1}', '{}', NULL)",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(row, ("unchanged".to_string(), 1));
    let row: (String, i64) = sqlx::query_as("SELECT result, generation FROM resource_apply('hello', 1, 'a', '{\"x\": 1}', '{\"team\": \"a\"}', NULL)")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        row,
        ("configured".to_string(), 1),
        "a label change is not a spec change"
    );
    let row: (String, i64) = sqlx::query_as("SELECT result, generation FROM resource_apply('hello', 1, 'a', '{\"x\": 2}', '{\"team\": \"a\"}', NULL)")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(row, ("configured".to_string(), 2));
    let gen_in_queue: i64 =
        sqlx::query_scalar("SELECT generation FROM work_queue WHERE resource_id = $1")
            .bind(id)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(
        gen_in_queue, 2,
        "the queued task was re-pointed at the new generation"
    );
}

/// The batch apply answers as the single apply does for each item (created, configured,
/// unchanged, with the generation), queues exactly the changed ones at their generation, and
/// keeps `resource_lag` and the events in step.
#[tokio::test]
async fn a_batch_apply_matches_the_single_apply_item_by_item() {
    use converge_engine::db::resources::resource_apply_batch;
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    apply(&db.pool, "same", json!({"x": 1})).await;
    apply(&db.pool, "edit", json!({"x": 1})).await;
    // Drain the queue so only what the batch schedules is left.
    sqlx::query("DELETE FROM work_queue")
        .execute(&db.pool)
        .await
        .unwrap();
    let item = |name: &str, x: i64| hello_item(name, json!({"x": x}));
    let items = [
        item("new-b", 1),
        item("same", 1),
        item("edit", 2),
        item("new-a", 7),
    ];
    let applied = resource_apply_batch(&db.pool, Some("tester"), &items)
        .await
        .unwrap();
    let got: Vec<(&str, i64)> = applied
        .iter()
        .map(|a| (a.result.as_str(), a.generation))
        .collect();
    assert_eq!(
        got,
        [
            ("created", 1),
            ("unchanged", 1),
            ("configured", 2),
            ("created", 1)
        ],
        "one answer per item, in item order"
    );
    let queued: Vec<(String, i64)> = sqlx::query_as(
        "SELECT r.name, w.generation FROM work_queue w JOIN resources r ON r.id = w.resource_id
         ORDER BY r.name",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        queued,
        [("edit".into(), 2), ("new-a".into(), 1), ("new-b".into(), 1)],
        "exactly the changed items are queued, at their new generation"
    );
    assert_eq!(db.lag_mismatches().await, 0);
    let created_events: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM resource_events WHERE actor = 'tester' AND type = 'created'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        created_events, 2,
        "the actor is stamped on the batch's events"
    );
    // Ids agree with a read by name; a second identical batch changes nothing.
    let ids: Vec<Uuid> = applied.iter().map(|a| a.id).collect();
    let again = resource_apply_batch(&db.pool, None, &items).await.unwrap();
    assert!(again.iter().all(|a| a.result == ApplyResult::Unchanged));
    assert_eq!(again.iter().map(|a| a.id).collect::<Vec<_>>(), ids);
}

async fn claim(pool: &PgPool, n: i32) -> Vec<(Uuid, Uuid, i64)> {
    sqlx::query("SELECT resource_id, lease_token, claim_epoch FROM work_claim(0::smallint, 255::smallint, 'hello', 1, $1, 'b')")
        .bind(n)
        .fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// A claim's rows beyond the broker's free slots (`p_ahead`, broker/src/ahead.rs) are taken
/// for an uncapped kind and never for a capped one, whose budget is for running tasks.
#[tokio::test]
async fn a_capped_kind_is_never_claimed_ahead_of_free_slots() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    for i in 0..40 {
        apply(&db.pool, &format!("r{i}"), json!({})).await;
    }
    let claim = |limit: i32, ahead: i32| {
        let pool = db.pool.clone();
        async move {
            let n: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM work_claim(0::smallint, 255::smallint, 'hello', 1, $1, 'b', $2)",
            )
            .bind(limit)
            .bind(ahead)
            .fetch_one(&pool)
            .await
            .unwrap();
            n
        }
    };
    let cap = |n: i32| {
        let pool = db.pool.clone();
        async move {
            sqlx::query("UPDATE kind_config SET max_inflight = $1 WHERE kind = 'hello'")
                .bind(n)
                .execute(&pool)
                .await
                .unwrap();
        }
    };
    cap(8).await;
    assert_eq!(claim(10, 6).await, 4, "capped: the free slots' part only");
    assert_eq!(
        claim(10, 10).await,
        0,
        "capped: nothing for a claim wholly ahead"
    );
    assert_eq!(claim(10, 0).await, 4, "and the cap still bounds the rest");
    cap(0).await;
    assert_eq!(claim(10, 6).await, 10, "uncapped: ahead included");
}

#[tokio::test]
async fn concurrent_claims_never_return_the_same_row() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    for i in 0..400 {
        apply(&db.pool, &format!("r{i}"), json!({})).await;
    }
    // Two transactions hold their claims open at the same time: SKIP LOCKED must give the
    // second one other rows, not wait and not duplicate.
    let mut a = db.pool.begin().await.unwrap();
    let mut b = db.pool.begin().await.unwrap();
    let q = "SELECT resource_id FROM work_claim(0::smallint, 255::smallint, 'hello', 1, 100, 'b')";
    let ra: Vec<Uuid> = sqlx::query_scalar(q).fetch_all(&mut *a).await.unwrap();
    let rb: Vec<Uuid> = sqlx::query_scalar(q).fetch_all(&mut *b).await.unwrap();
    assert_eq!((ra.len(), rb.len()), (100, 100));
    let sa: HashSet<_> = ra.iter().collect();
    assert!(
        rb.iter().all(|id| !sa.contains(id)),
        "two open transactions claimed the same row"
    );
    a.commit().await.unwrap();
    b.commit().await.unwrap();

    // Eight concurrent claimers drain the rest: every row exactly once.
    let mut handles = Vec::new();
    for _ in 0..8 {
        let pool = db.pool.clone();
        handles.push(tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let batch = claim(&pool, 7).await;
                if batch.is_empty() {
                    break got;
                }
                got.extend(batch.into_iter().map(|r| r.0));
            }
        }));
    }
    let mut all: Vec<Uuid> = ra.into_iter().chain(rb).collect();
    for h in handles {
        all.extend(h.await.unwrap());
    }
    let unique: HashSet<_> = all.iter().collect();
    assert_eq!(all.len(), 400);
    assert_eq!(unique.len(), 400, "a row was claimed twice");
}

/// The claim's pick runs with one plan per connection (0017): the plan covers every queue
/// partition, and the shard range bound when it runs prunes all but the range's own.
#[tokio::test]
async fn claim_plan_touches_one_partition() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    // The real claim's pick (the locking select that walks the queue; the update that follows
    // probes the picked keys), prepared with the function's settings and its parameters as
    // parameters, then run for a range inside partition 0.
    let body: String =
        sqlx::query_scalar("SELECT prosrc FROM pg_proc WHERE proname = 'work_claim'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    let start = body
        .find("SELECT q.resource_id, q.task_type, q.shard_id")
        .expect("work_claim picks with SELECT q.resource_id, q.task_type, q.shard_id");
    let end = body[start..]
        .find("FOR UPDATE SKIP LOCKED")
        .map(|i| start + i + "FOR UPDATE SKIP LOCKED".len())
        .expect("the pick locks with FOR UPDATE SKIP LOCKED");
    let sql = body[start..end]
        .replace("p_kind_version", "$4")
        .replace("p_kind", "$3")
        .replace("p_lo", "$1")
        .replace("p_hi", "$2")
        .replace("v_limit", "$5");
    let mut conn = db.pool.acquire().await.unwrap();
    for stmt in [
        "SET plan_cache_mode = force_generic_plan".to_string(),
        "SET enable_seqscan = off".to_string(),
        format!("PREPARE pick(smallint, smallint, text, int, int) AS {sql}"),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(stmt))
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    let plan: serde_json::Value = sqlx::query_scalar(
        "EXPLAIN (FORMAT JSON) EXECUTE pick(0::smallint, 15::smallint, 'hello', 1, 10)",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    let text = plan.to_string();
    assert!(text.contains("Subplans Removed"), "a generic plan: {text}");
    let parts: HashSet<String> = (0..16)
        .map(|p| format!("work_queue_p{p}\""))
        .filter(|p| text.contains(p.as_str()))
        .collect();
    assert_eq!(
        parts,
        HashSet::from(["work_queue_p0\"".to_string()]),
        "plan: {text}"
    );
}

/// Reads counters from `pg_stat_*` with `sql`, after flushing `conn`'s own table and index
/// counters to the statistics collector and dropping its cached snapshot, so the read includes
/// `conn`'s work so far.
async fn stats<T>(conn: &mut sqlx::PgConnection, sql: &'static str) -> T
where
    T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
{
    for flush in [
        "SELECT pg_stat_force_next_flush()",
        "SELECT pg_stat_clear_snapshot()",
    ] {
        sqlx::query(flush).execute(&mut *conn).await.unwrap();
    }
    sqlx::query_as(sql).fetch_one(&mut *conn).await.unwrap()
}

/// Sequential scans of `resources` and `resource_deps`, and of the queue's and the outbox's
/// partitions, by every connection so far and by `conn` up to now (pass the connection whose
/// scans are counted: its counts are flushed first).
async fn seq_scans(conn: &mut sqlx::PgConnection) -> (i64, i64) {
    stats(
        conn,
        "SELECT coalesce(sum(seq_scan) FILTER (WHERE relname IN ('resources', 'resource_deps')),
                         0)::bigint,
                coalesce(sum(seq_scan) FILTER (WHERE relname LIKE 'work\\_queue\\_p%'
                                                  OR relname LIKE 'work\\_outbox\\_p%'), 0)::bigint
         FROM pg_stat_user_tables",
    )
    .await
}

#[tokio::test]
async fn gate_and_claim_probe_by_key_after_planning_on_an_empty_table() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    // One connection makes its cached plans while resources and the queue are empty, the
    // way every pooled connection of a fresh install does.
    let mut conn = db.pool.acquire().await.unwrap();
    sqlx::query("SELECT schedule_eligible(ARRAY[gen_random_uuid()])")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query("SELECT * FROM work_claim(0::smallint, 255::smallint, 'hello', 1, 10, 'b')")
        .execute(&mut *conn)
        .await
        .unwrap();
    // Then the tables fill up (on the same connection, so that every scan it counts below is
    // one of its own, flushed when asked).
    let mut ids: Vec<Uuid> = Vec::new();
    for i in 0..300 {
        ids.push(
            sqlx::query_scalar("SELECT id FROM resource_apply('hello', 1, $1, '{}', '{}', NULL)")
                .bind(format!("r{i}"))
                .fetch_one(&mut *conn)
                .await
                .unwrap(),
        );
    }
    sqlx::query("DELETE FROM work_queue")
        .execute(&mut *conn)
        .await
        .unwrap();
    let before = seq_scans(&mut conn).await;
    for chunk in ids.chunks(100) {
        let n: i32 = sqlx::query_scalar("SELECT schedule_eligible($1)")
            .bind(chunk)
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(n, 100, "every resource is behind and gets queued again");
    }
    let claimed: Vec<Uuid> = sqlx::query_scalar(
        "SELECT resource_id FROM work_claim(0::smallint, 255::smallint, 'hello', 1, 50, 'b')",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    assert_eq!(claimed.len(), 50);
    let after = seq_scans(&mut conn).await;
    assert_eq!(
        after, before,
        "(resources, work_queue) sequential scans by the gate and the claim"
    );
}

/// The express drain's pick walks the lane's partial index, never the bulk lane's rows, even
/// on a connection that planned it while the outbox had no statistics (every connection of a
/// new database): such a plan once read the whole bulk backlog on each express pass.
#[tokio::test]
async fn the_express_drain_never_reads_the_bulk_lane_after_planning_on_an_empty_outbox() {
    let db = TestDb::new().await;
    let mut conn = db.pool.acquire().await.unwrap();
    async fn popped(conn: &mut sqlx::PgConnection) -> i32 {
        sqlx::query_scalar(
            "SELECT popped FROM drain_outbox_batch(100, 0::smallint, 255::smallint, true)",
        )
        .fetch_one(conn)
        .await
        .unwrap()
    }
    assert_eq!(popped(&mut conn).await, 0);
    // Then 2,000 bulk results wait (for resources long gone: nothing to apply).
    sqlx::query(
        "INSERT INTO work_outbox (shard_id, resource_id, task_type, generation, ok)
         SELECT (g % 256)::smallint, gen_random_uuid(), 'reconcile', 1, true
         FROM generate_series(1, 2000) g",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    let pkey_reads = "SELECT coalesce(sum(idx_tup_read), 0)::bigint FROM pg_stat_user_indexes
                      WHERE indexrelname LIKE 'work\\_outbox\\_p%\\_pkey'";
    let (before,): (i64,) = stats(&mut conn, pkey_reads).await;
    for _ in 0..3 {
        assert_eq!(popped(&mut conn).await, 0);
    }
    let (after,): (i64,) = stats(&mut conn, pkey_reads).await;
    assert_eq!(
        after, before,
        "index entries of the bulk lane read by express passes"
    );
    // The lane still takes its own rows.
    sqlx::query(
        "INSERT INTO work_outbox (shard_id, resource_id, task_type, generation, ok, express)
         VALUES (7, gen_random_uuid(), 'reconcile', 1, true, true)",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    assert_eq!(popped(&mut conn).await, 1);
}

#[tokio::test]
async fn single_applies_probe_by_key_after_planning_on_an_empty_table() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    // One connection caches resource_apply_batch's plans while resources is small, the way a
    // pooled connection of a fresh install does; a plan that scanned the table then cost
    // every later single apply a scan of all resources (issue 44).
    let mut conn = db.pool.acquire().await.unwrap();
    let apply = "SELECT id FROM resource_apply('hello', 1, $1, '{}', '{}', NULL)";
    for i in 0..200 {
        let _: Uuid = sqlx::query_scalar(apply)
            .bind(format!("r{i}"))
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    }
    let before = seq_scans(&mut conn).await;
    // New names and unchanged ones: both read the unchanged rows' side of the upsert.
    for i in 150..300 {
        let _: Uuid = sqlx::query_scalar(apply)
            .bind(format!("r{i}"))
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    }
    let after = seq_scans(&mut conn).await;
    assert_eq!(
        after.0, before.0,
        "sequential scans of resources by 150 single applies"
    );
}

/// One reconcile result through work_complete: $1 id, $2 token, $3 epoch, $4 ok, $5 status.
/// Answers how many results were accepted, and the synced kinds and seconds behind.
const COMPLETE_ONE: &str = "SELECT coalesce(cardinality(accepted_ids), 0), synced_kinds, synced_secs FROM work_complete(ARRAY[$1]::uuid[], ARRAY[shard_of($1)]::smallint[], ARRAY['reconcile'], ARRAY[$2]::uuid[], ARRAY[$3]::bigint[], ARRAY[$4]::boolean[], ARRAY[false], ARRAY[NULL]::text[], ARRAY[$5]::jsonb[], ARRAY[NULL]::jsonb[], ARRAY[true], ARRAY[true])";

/// [`COMPLETE_ONE`]'s answer: accepted, synced kinds, seconds behind.
type Completed = (i32, Option<Vec<String>>, Option<Vec<f64>>);

async fn complete_answer(
    pool: &PgPool,
    id: Uuid,
    token: Uuid,
    epoch: i64,
    ok: bool,
    status: serde_json::Value,
) -> Completed {
    sqlx::query_as(COMPLETE_ONE)
        .bind(id)
        .bind(token)
        .bind(epoch)
        .bind(ok)
        .bind(status)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Records one result; answers how many were accepted (0 or 1).
async fn complete(
    pool: &PgPool,
    id: Uuid,
    token: Uuid,
    epoch: i64,
    ok: bool,
    status: serde_json::Value,
) -> usize {
    let (accepted, _, _) = complete_answer(pool, id, token, epoch, ok, status).await;
    usize::try_from(accepted).unwrap()
}

/// Dates `id`'s fall behind `secs` seconds back (its `resource_lag` row).
async fn behind_for(pool: &PgPool, id: Uuid, secs: f64) {
    let n = sqlx::query(
        "UPDATE resource_lag SET behind_since = now() - make_interval(secs => $2) WHERE id = $1",
    )
    .bind(id)
    .bind(secs)
    .execute(pool)
    .await
    .unwrap()
    .rows_affected();
    assert_eq!(n, 1, "{id} is behind");
}

#[tokio::test]
async fn a_result_that_brings_a_resource_to_synced_reports_its_kind_and_time_behind() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let pool = &db.pool;

    // A plain result, applied where it is fenced: reported by work_complete.
    let solo = apply(pool, "solo", json!({})).await;
    behind_for(pool, solo, 7.0).await;
    let (_, token, epoch) = claim(pool, 1).await.pop().unwrap();
    let (accepted, kinds, secs) = complete_answer(pool, solo, token, epoch, true, json!({})).await;
    assert_eq!((accepted, kinds), (1, Some(vec!["hello".to_string()])));
    assert!(
        secs.as_ref().is_some_and(|s| s.len() == 1 && s[0] >= 7.0),
        "{secs:?}"
    );

    // A failure leaves its resource behind: accepted, nothing reported.
    let lone = apply(pool, "lone", json!({})).await;
    let (_, token, epoch) = claim(pool, 1).await.pop().unwrap();
    let answer = complete_answer(pool, lone, token, epoch, false, json!(null)).await;
    assert_eq!(answer, (1, None, None));

    // A result in the outbox (any result that is not plain): reported by the drain.
    let late = apply(pool, "late", json!({})).await;
    behind_for(pool, late, 5.0).await;
    sqlx::query(
        "INSERT INTO work_outbox (shard_id, resource_id, task_type, generation, ok, advance)
         SELECT shard_id, id, 'reconcile', generation, true, true FROM resources WHERE id = $1",
    )
    .bind(late)
    .execute(pool)
    .await
    .unwrap();
    let (popped, kinds, secs): (i32, Option<Vec<String>>, Option<Vec<f64>>) =
        sqlx::query_as("SELECT * FROM drain_outbox_batch(100, 0::smallint, 255::smallint)")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!((popped, kinds), (1, Some(vec!["hello".to_string()])));
    assert!(
        secs.as_ref().is_some_and(|s| s.len() == 1 && s[0] >= 5.0),
        "{secs:?}"
    );
}

#[tokio::test]
async fn stale_epoch_result_changes_nothing() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let id = apply(&db.pool, "a", json!({})).await;
    let (_, token, epoch) = claim(&db.pool, 1).await.pop().unwrap();
    // The lease is released (stream ended) and claimed again: the first claim's result is stale.
    sqlx::query("SELECT work_release(ARRAY[$1]::uuid[], ARRAY[shard_of($1)]::smallint[], ARRAY['reconcile'], ARRAY[$2]::bigint[])")
        .bind(id)
        .bind(epoch)
        .execute(&db.pool)
        .await
        .unwrap();
    let (_, token2, epoch2) = claim(&db.pool, 1).await.pop().unwrap();
    assert!(epoch2 > epoch);
    assert_eq!(
        complete(&db.pool, id, token, epoch, true, json!({"stale": true})).await,
        0
    );
    assert_eq!(
        complete(&db.pool, id, token2, epoch, true, json!({"stale": true})).await,
        0,
        "token alone is not enough"
    );
    let outbox: i64 = sqlx::query_scalar("SELECT count(*) FROM work_outbox")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(outbox, 0);
    assert_eq!(
        complete(&db.pool, id, token2, epoch2, true, json!({"fresh": true})).await,
        1
    );
    assert_eq!(
        complete(&db.pool, id, token2, epoch2, true, json!({"dup": true})).await,
        0,
        "a duplicate is refused"
    );
    // A plain result is applied where it is fenced: nothing waits in the outbox.
    let outbox: i64 = sqlx::query_scalar("SELECT count(*) FROM work_outbox")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(outbox, 0);
    let (phase, status): (String, serde_json::Value) =
        sqlx::query_as("SELECT phase, status FROM resources WHERE id = $1")
            .bind(id)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(phase, "Ready");
    assert_eq!(status, json!({"fresh": true}));
}

#[tokio::test]
async fn conditions_are_written_on_transition_only() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let id = apply(&db.pool, "a", json!({})).await;
    let (_, token, epoch) = claim(&db.pool, 1).await.pop().unwrap();
    assert_eq!(
        complete(&db.pool, id, token, epoch, true, json!({"ok": 1})).await,
        1
    );
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM resource_conditions")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        n, 0,
        "a healthy reconcile that reports nothing writes no condition"
    );
}

/// A `hello` row with the given id written directly (no queue row), with a status.
async fn row(
    pool: &PgPool,
    id: Uuid,
    name: &str,
    spec: serde_json::Value,
    status: serde_json::Value,
) {
    sqlx::query(
        "INSERT INTO resources (id, kind, kind_version, name, shard_id, spec, status)
         VALUES ($1, 'hello', 1, $2, shard_of($1), $3, $4)",
    )
    .bind(id)
    .bind(name)
    .bind(spec)
    .bind(status)
    .execute(pool)
    .await
    .unwrap();
}

#[tokio::test]
async fn flowed_specs_applies_every_edge_in_dependency_order() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let mut ups = [Uuid::new_v4(), Uuid::new_v4()];
    ups.sort();
    let (low, high) = (ups[0], ups[1]);
    row(
        &db.pool,
        low,
        "low",
        json!({}),
        json!({"v": "low", "a/b": {"c~d": 7}}),
    )
    .await;
    row(&db.pool, high, "high", json!({}), json!({"v": "high"})).await;
    let (dep, frozen) = (Uuid::new_v4(), Uuid::new_v4());
    row(
        &db.pool,
        dep,
        "dep",
        json!({"keep": true, "x": null}),
        json!(null),
    )
    .await;
    row(&db.pool, frozen, "frozen", json!({"x": null}), json!(null)).await;
    sqlx::query("UPDATE resources SET frozen_until = 'infinity' WHERE id = $1")
        .bind(frozen)
        .execute(&db.pool)
        .await
        .unwrap();
    // Both upstreams write /x, and the higher dependency id is applied last. The lower one also
    // flows an escaped pointer and a source it does not report (null); the higher one uses
    // bare field names.
    let edges = [
        (
            low,
            json!([{"dep_field": "/x", "src_field": "/v"},
                     {"dep_field": "/esc", "src_field": "/a~1b/c~0d"},
                     {"dep_field": "/missing", "src_field": "/nope"}]),
        ),
        (high, json!([{"dep_field": "x", "src_field": "v"}])),
    ];
    for (up, flows) in &edges {
        for d in [dep, frozen] {
            sqlx::query(
                "INSERT INTO resource_deps (dependent_id, dependency_id, owner_id, value_flows)
                 VALUES ($1, $2, $2, $3)",
            )
            .bind(d)
            .bind(up)
            .bind(flows)
            .execute(&db.pool)
            .await
            .unwrap();
        }
    }
    let rows: Vec<(Uuid, serde_json::Value, serde_json::Value)> =
        sqlx::query_as("SELECT id, spec, fspec FROM flowed_specs($1)")
            .bind(vec![dep, frozen])
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(
        rows,
        vec![(
            dep,
            json!({"keep": true, "x": null}),
            json!({"keep": true, "x": "high", "esc": 7, "missing": null})
        )],
        "a frozen dependent gets no flows"
    );
}

/// A result of `(id, token, epoch)` as the broker records it.
fn result_of(id: Uuid, token: Uuid, epoch: i64) -> Completion {
    Completion {
        key: LeaseKey {
            resource_id: ResourceId(id),
            shard_id: ShardId(shard_of(id)),
            task_type: TaskType::Reconcile,
            lease_token: LeaseToken(token),
            claim_epoch: ClaimEpoch(epoch),
        },
        ok: true,
        terminal: false,
        error_message: None,
        status: Some(json!({})),
        conditions: None,
        health_ok: true,
        advance: true,
        output: None,
        composite: false,
    }
}

/// The logical shard of a resource id, as `shard_of` in the engine computes it.
fn shard_of(id: Uuid) -> i16 {
    i16::from(id.as_bytes()[15])
}

/// work_complete takes a plain result's resource row before its queue row, the order an
/// apply takes them (the row, then the gate's upsert of its queue row). So an edit that holds
/// the row and then re-points the leased queue row never waits for a completion that waits
/// for it: the completion waits for the row, then finds its lease superseded.
#[tokio::test]
async fn a_plain_result_and_an_edit_of_its_resource_never_deadlock() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let id = apply(&db.pool, "a", json!({"v": 1})).await;
    let (_, token, epoch) = claim(&db.pool, 1).await.pop().unwrap();
    // An edit holds the row (the generation bumps) ...
    let mut edit = db.pool.begin().await.unwrap();
    sqlx::query("UPDATE resources SET spec = '{\"v\": 2}' WHERE id = $1")
        .bind(id)
        .execute(&mut *edit)
        .await
        .unwrap();
    // ... while the result comes in: it waits for the row.
    let pool = db.pool.clone();
    let done = tokio::spawn(async move {
        complete(&pool, id, token, epoch, true, json!({"from": "first run"})).await
    });
    wait_until_blocked(&db.pool, "work_complete").await;
    // The edit's gate re-points the leased queue row: had the completion taken that row
    // first, this would deadlock and one side would be aborted.
    sqlx::query("SELECT schedule_eligible(ARRAY[$1]::uuid[])")
        .bind(id)
        .execute(&mut *edit)
        .await
        .expect("the completion held the queue row while waiting for the resource");
    edit.commit().await.unwrap();
    assert_eq!(done.await.unwrap(), 0, "the superseded result is refused");
    let (generation, synced_gen, queued): (i64, i64, i64) = sqlx::query_as(
        "SELECT generation, synced_gen,
                (SELECT count(*) FROM work_queue WHERE resource_id = $1 AND lease_token IS NULL)
         FROM resources WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        (generation, synced_gen, queued),
        (2, 0, 1),
        "the edit waits for its run"
    );
}

#[tokio::test]
async fn a_result_batch_locks_queue_rows_in_id_order() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    apply(&db.pool, "a", json!({})).await;
    apply(&db.pool, "b", json!({})).await;
    let mut claimed = claim(&db.pool, 2).await;
    claimed.sort();
    let [(lo, lo_token, lo_epoch), (hi, hi_token, hi_epoch)] = claimed[..] else {
        panic!("claimed {claimed:?}");
    };
    // Another transaction (standing in for the drainer's rollup recheck, which schedules in
    // id order) holds the lower row and is about to want the higher one.
    let mut other = db.pool.begin().await.unwrap();
    let lock = "SELECT 1 FROM work_queue WHERE resource_id = $1 FOR UPDATE";
    sqlx::query(lock)
        .bind(lo)
        .execute(&mut *other)
        .await
        .unwrap();
    // The batch arrives higher id first.
    let pool = db.pool.clone();
    let batch = vec![
        result_of(hi, hi_token, hi_epoch),
        result_of(lo, lo_token, lo_epoch),
    ];
    let append =
        tokio::spawn(
            async move { converge_engine::db::queue::record_results(&pool, &batch).await },
        );
    // Wait until the batch blocks on the lower row ...
    wait_until_blocked(&db.pool, "work_complete").await;
    // ... then take the higher one: had the batch locked it first (arrival order), this
    // would be a deadlock and one side would be aborted.
    sqlx::query(lock)
        .bind(hi)
        .execute(&mut *other)
        .await
        .expect("the batch held the higher row while waiting for the lower one");
    other.commit().await.unwrap();
    let recorded = append.await.unwrap().expect("the result batch failed");
    assert_eq!(recorded.accepted.len(), 2, "both results recorded");
}

#[tokio::test]
async fn related_resources_come_in_kind_and_name_byte_order() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let root = apply(&db.pool, "root", json!({})).await;
    for name in ["b-2", "a", "frozen", "b-10", "B"] {
        let id = apply(&db.pool, name, json!({})).await;
        sqlx::query("UPDATE resources SET owner_id = $2, root_id = $2 WHERE id = $1")
            .bind(id)
            .bind(root)
            .execute(&db.pool)
            .await
            .unwrap();
    }
    sqlx::query("UPDATE resources SET frozen_until = 'infinity' WHERE name = 'frozen'")
        .execute(&db.pool)
        .await
        .unwrap();
    let names = |rows: Vec<converge_engine::db::compose::RelatedRow>| {
        rows.into_iter().map(|r| r.name).collect::<Vec<_>>()
    };
    let related = converge_engine::db::compose::related;
    // A rollup's live subtree (by root_id), then a compose's children (by owner_id, all).
    assert_eq!(
        names(related(&db.pool, root, None, true).await.unwrap()),
        ["B", "a", "b-10", "b-2"]
    );
    assert_eq!(
        names(related(&db.pool, root, None, false).await.unwrap()),
        ["B", "a", "b-10", "b-2", "frozen"]
    );
}

/// A related row is decoded by column position (broker `RelatedRow`): every field lands where
/// it belongs, the same-typed ones (kind/name/phase, spec/status, generation/synced_gen)
/// included.
#[tokio::test]
async fn related_rows_decode_every_column_into_its_field() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let root = apply(&db.pool, "root", json!({})).await;
    let id = apply(&db.pool, "kid", json!({"s": 1})).await;
    sqlx::query(
        "UPDATE resources SET owner_id = $2, root_id = $2, status = '{\"t\": 2}',
                labels = '{\"team\": \"x\"}', failure_message = 'boom', synced_gen = 0,
                spec = '{\"s\": 3}'
         WHERE id = $1",
    )
    .bind(id)
    .bind(root)
    .execute(&db.pool)
    .await
    .unwrap();
    let rows = converge_engine::db::compose::related(&db.pool, root, None, true)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!((r.id, r.owner_id, r.root_id), (id, Some(root), Some(root)));
    assert_eq!(
        (r.kind.as_str(), r.kind_version, r.name.as_str()),
        ("hello", 1, "kid")
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&r.spec).unwrap(),
        json!({"s": 3})
    );
    let status: serde_json::Value = serde_json::from_str(r.status.as_deref().unwrap()).unwrap();
    assert_eq!(status, json!({"t": 2}));
    assert_eq!((r.generation, r.synced_gen, r.is_ready), (2, 0, false));
    assert_eq!(r.labels, json!({"team": "x"}));
    assert_eq!(r.phase, Phase::Reconciling);
    assert_eq!(r.failure_message.as_deref(), Some("boom"));
}

/// Claims every queued `hello` task on `conn` and records each as a success with `status`;
/// answers how many were accepted.
async fn claim_and_complete_all(conn: &mut sqlx::PgConnection, status: serde_json::Value) -> i32 {
    let claimed: Vec<(Uuid, i16, Uuid, i64)> = sqlx::query_as(
        "SELECT resource_id, shard_id, lease_token, claim_epoch
         FROM work_claim(0::smallint, 255::smallint, 'hello', 1, 1000, 'b')",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    let n = claimed.len();
    sqlx::query_scalar(
        "SELECT coalesce(cardinality(accepted_ids), 0)
         FROM work_complete($1, $2, array_fill('reconcile'::text, ARRAY[$5]), $3, $4,
                array_fill(true, ARRAY[$5]), array_fill(false, ARRAY[$5]),
                array_fill(NULL::text, ARRAY[$5]), array_fill($6::jsonb, ARRAY[$5]),
                array_fill(NULL::jsonb, ARRAY[$5]), array_fill(true, ARRAY[$5]),
                array_fill(true, ARRAY[$5]))",
    )
    .bind(claimed.iter().map(|c| c.0).collect::<Vec<_>>())
    .bind(claimed.iter().map(|c| c.1).collect::<Vec<_>>())
    .bind(claimed.iter().map(|c| c.2).collect::<Vec<_>>())
    .bind(claimed.iter().map(|c| c.3).collect::<Vec<_>>())
    .bind(i32::try_from(n).unwrap())
    .bind(status)
    .fetch_one(&mut *conn)
    .await
    .unwrap()
}

/// Drains the whole outbox on `conn`, both lanes; returns the results applied.
async fn drain_all(conn: &mut sqlx::PgConnection) -> i32 {
    let mut total = 0;
    loop {
        let mut n = 0;
        for express in [false, true] {
            let k: i32 = sqlx::query_scalar(
                "SELECT popped FROM drain_outbox_batch(1000, 0::smallint, 255::smallint, $1)",
            )
            .bind(express)
            .fetch_one(&mut *conn)
            .await
            .unwrap();
            n += k;
        }
        if n == 0 {
            return total;
        }
        total += n;
    }
}

/// Applies `up` and `down` under `root`, `down` depending on `up` with `/x` flowing.
async fn flowing_pair(conn: &mut sqlx::PgConnection, root: Uuid, i: usize) {
    let mut ids = Vec::new();
    for name in [format!("up{i}"), format!("down{i}")] {
        let id: Uuid =
            sqlx::query_scalar("SELECT id FROM resource_apply('hello', 1, $1, '{}', '{}', NULL)")
                .bind(name)
                .fetch_one(&mut *conn)
                .await
                .unwrap();
        ids.push(id);
    }
    sqlx::query("UPDATE resources SET owner_id = $2, root_id = $2 WHERE id = ANY ($1)")
        .bind(&ids)
        .bind(root)
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO resource_deps (dependent_id, dependency_id, owner_id, value_flows)
         VALUES ($1, $2, $3, '[{\"dep_field\": \"/x\", \"src_field\": \"/x\"}]')",
    )
    .bind(ids[1])
    .bind(ids[0])
    .bind(root)
    .execute(&mut *conn)
    .await
    .unwrap();
}

/// A plain result is applied where it is fenced (work_complete → apply_locked_results), so
/// those statements, the cascade's value flow among them, are the drain's hot path here.
#[tokio::test]
async fn result_apply_probes_by_key_after_planning_on_an_empty_table() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let mut conn = db.pool.acquire().await.unwrap();
    let root = apply(&db.pool, "root", json!({})).await;
    // Six small rounds (PL/pgSQL keeps a generic plan from the sixth call on) while the
    // tables hold a handful of rows: every statement that applies a result, the cascade's
    // value flow among them, makes its cached plan now, as on a fresh install's first
    // composites.
    for i in 0..6 {
        flowing_pair(&mut conn, root, i).await;
        claim_and_complete_all(&mut conn, json!({"x": i})).await;
        drain_all(&mut conn).await;
        sqlx::query("SELECT sweep_deletable(0::smallint, 255::smallint, 100)")
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    // The tables grow.
    for i in 6..306 {
        flowing_pair(&mut conn, root, i).await;
    }
    let before = seq_scans(&mut conn).await;
    // Every new pair, and any dependent an earlier round's flow re-pended.
    assert!(claim_and_complete_all(&mut conn, json!({"x": "v"})).await >= 600);
    drain_all(&mut conn).await;
    sqlx::query("SELECT sweep_deletable(0::smallint, 255::smallint, 100)")
        .execute(&mut *conn)
        .await
        .unwrap();
    let after = seq_scans(&mut conn).await;
    assert_eq!(
        after, before,
        "(resources + resource_deps, work_queue + work_outbox) sequential scans by the apply"
    );
    // The values flowed: every dependent's spec carries its upstream's status.
    let flowed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM resources WHERE name LIKE 'down%' AND spec->>'x' = 'v'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(flowed, 300);
}

#[tokio::test]
async fn a_child_set_aside_under_a_rollup_in_flight_re_pends_the_root_after_it() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    comp_kind(&db.pool).await;
    let (root, _, _): (Uuid, String, i64) =
        sqlx::query_as("SELECT * FROM resource_apply('comp', 1, 'root', '{}', '{}', NULL)")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    let child = apply(&db.pool, "child", json!({})).await;
    sqlx::query("UPDATE resources SET owner_id = $2, root_id = $2 WHERE id = $1")
        .bind(child)
        .bind(root)
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query("UPDATE resources SET composed_gen = generation WHERE id = $1")
        .bind(root)
        .execute(&db.pool)
        .await
        .unwrap();
    // A recheck armed before the run reads the subtree (as the drain that pends a root arms
    // it) is retired by that read: the read sees the change that armed it.
    sqlx::query("INSERT INTO rollup_recheck (root_id, shard_id) SELECT id, shard_id FROM resources WHERE id = $1")
        .bind(root)
        .execute(&db.pool)
        .await
        .unwrap();
    // The root's run is in flight (it has read its subtree) when the child is set aside.
    let (token, epoch): (Uuid, i64) = sqlx::query_as(
        "SELECT lease_token, claim_epoch FROM work_claim(0::smallint, 255::smallint, 'comp', 1, 1, 'b')",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    let subtree = converge_engine::db::compose::related(&db.pool, root, None, true)
        .await
        .unwrap();
    assert_eq!(subtree.len(), 1);
    let before: i64 = sqlx::query_scalar("SELECT count(*) FROM rollup_recheck")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        before, 0,
        "the subtree read retired the recheck it could see"
    );
    sqlx::query("SELECT resource_quarantine($1)")
        .bind(child)
        .execute(&db.pool)
        .await
        .unwrap();
    let recheck = || async {
        sqlx::query_scalar::<_, i32>(
            "SELECT drain_rollup_rechecks(100, 0::smallint, 255::smallint)",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap()
    };
    let armed = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM rollup_recheck")
            .fetch_one(&db.pool)
            .await
            .unwrap()
    };
    assert_eq!(
        recheck().await,
        0,
        "nothing can be pended while the run is leased"
    );
    assert_eq!(armed().await, 1, "the recheck waits for the run in flight");
    // The run's result lands (a rollup of the subtree as it was).
    assert_eq!(
        complete(&db.pool, root, token, epoch, true, json!({"children": 1})).await,
        1
    );
    assert_eq!(drain_all(&mut db.pool.acquire().await.unwrap()).await, 1);
    // The next pass re-pends the root against the subtree as it is now.
    assert_eq!(recheck().await, 1);
    assert_eq!(armed().await, 0);
    let trigger: String = sqlx::query_scalar(
        "SELECT trigger FROM work_queue WHERE resource_id = $1 AND lease_token IS NULL",
    )
    .bind(root)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(trigger, "childrenSettled");
}

/// 0017: the engine's hot entry points keep one plan per statement and connection, and a plan
/// kept that long must probe by key however small the tables were when it was made, so every
/// function holding a generic plan runs with sequential scans off.
#[tokio::test]
async fn functions_with_generic_plans_never_plan_sequential_scans() {
    let db = TestDb::new().await;
    let rows: Vec<(String, Vec<String>)> = sqlx::query_as(
        "SELECT p.proname::text, p.proconfig FROM pg_proc p \
         JOIN pg_namespace n ON n.oid = p.pronamespace \
         WHERE n.nspname = 'public' AND p.proconfig IS NOT NULL",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let generic: HashSet<&str> = rows
        .iter()
        .filter(|(_, cfg)| {
            cfg.iter()
                .any(|s| s == "plan_cache_mode=force_generic_plan")
        })
        .map(|(name, _)| name.as_str())
        .collect();
    for hot in [
        "work_claim",
        "work_complete",
        "outbox_pop",
        "drain_outbox_batch",
        "drain_rollup_rechecks",
        "schedule_eligible",
        "sweep_deletable",
    ] {
        assert!(generic.contains(hot), "{hot} re-plans per call: {rows:?}");
    }
    for (name, cfg) in &rows {
        if generic.contains(name.as_str()) {
            assert!(
                cfg.iter().any(|s| s == "enable_seqscan=off"),
                "{name} keeps a generic plan with sequential scans allowed: {cfg:?}"
            );
        }
    }
}

/// Index entries read from the queue's partitions by every connection so far (`conn`'s own
/// counts flushed first).
async fn queue_index_reads(conn: &mut sqlx::PgConnection) -> i64 {
    let (n,): (i64,) = stats(
        conn,
        "SELECT coalesce(sum(idx_tup_read), 0)::bigint FROM pg_stat_user_indexes
         WHERE relname LIKE 'work\\_queue\\_p%'",
    )
    .await;
    n
}

/// 0017: a recheck whose root's run is in flight stays queued, and finding that out is one
/// probe of the queue's key, not a read of every leased row (which the planner chose once it
/// knew the queue's size).
#[tokio::test]
async fn the_recheck_clean_up_probes_the_queue_by_key() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let mut conn = db.pool.acquire().await.unwrap();
    sqlx::query(
        "SELECT resource_apply('hello', 1, 'r' || g, '{}', '{}', NULL)
         FROM generate_series(1, 2000) g",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    let leased: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM work_claim(0::smallint, 255::smallint, 'hello', 1, 5000, 'b')",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    assert_eq!(leased, 2000);
    sqlx::query(
        "INSERT INTO rollup_recheck (root_id, shard_id)
         SELECT id, shard_id FROM resources WHERE name IN ('r1', 'r2', 'r3')",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    sqlx::query("ANALYZE work_queue")
        .execute(&mut *conn)
        .await
        .unwrap();

    let before = queue_index_reads(&mut conn).await;
    let pended: i32 =
        sqlx::query_scalar("SELECT drain_rollup_rechecks(100, 0::smallint, 255::smallint)")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    let read = queue_index_reads(&mut conn).await - before;
    assert_eq!(pended, 0, "a leased root is not pended again");
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM rollup_recheck")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(kept, 3, "rechecks of roots in flight stay");
    assert!(
        read < 100,
        "the clean-up read {read} queue index entries for 3 rechecks over {leased} leased rows"
    );
}

/// The queue is served oldest first (0019): tasks queued one after another are claimed in
/// that order, whichever partitions their shards fall in, and a task waiting out a backoff
/// is not claimed before it is due.
#[tokio::test]
async fn the_claim_serves_the_oldest_due_task_first() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let mut applied = Vec::new();
    for i in 0..40 {
        applied.push(apply(&db.pool, &format!("r{i}"), json!({})).await);
    }
    let partitions: HashSet<i16> = applied.iter().map(|id| shard_of(*id) / 16).collect();
    assert!(partitions.len() > 4, "the ids spread over the partitions");
    // The last one waits out a backoff.
    sqlx::query(
        "UPDATE work_queue SET not_before = now() + interval '1 hour' WHERE resource_id = $1",
    )
    .bind(applied[39])
    .execute(&db.pool)
    .await
    .unwrap();
    let mut claimed = Vec::new();
    loop {
        let batch = claim(&db.pool, 3).await;
        if batch.is_empty() {
            break;
        }
        claimed.extend(batch.into_iter().map(|c| c.0));
    }
    assert_eq!(claimed, applied[..39], "claimed in the order queued");
}

/// One claimed task's trigger, provider config override (spec, bundle), lease and epoch.
type ClaimedConfig = (String, Option<Value>, Option<Vec<u8>>, Uuid, i64);

async fn claim_with_config(pool: &PgPool) -> ClaimedConfig {
    sqlx::query_as(
        "SELECT trigger, provider_config, provider_bundle, lease_token, claim_epoch
         FROM work_claim(0::smallint, 255::smallint, 'hello', 1, 1, 'b')",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// The provider config a task carries is the one its resource names when the task is
/// claimed, whatever the task's type: a config changed after the task was queued goes out in
/// its new form, and a resync (queued without a copy of any config) carries it as a spec
/// change does. A resource naming no config gets none.
#[tokio::test]
async fn a_claimed_task_carries_its_resources_provider_config_as_it_is_now() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let pool = &db.pool;
    sqlx::query(
        "INSERT INTO providerconfigs (name, kind, kind_version, spec, data)
         VALUES ('c', 'hello', 1, '{\"v\": 1}', '\\x01')",
    )
    .execute(pool)
    .await
    .unwrap();
    let (id, _, _): (Uuid, String, i64) =
        sqlx::query_as("SELECT * FROM resource_apply('hello', 1, 'r', '{}', '{}', 'c')")
            .fetch_one(pool)
            .await
            .unwrap();
    // Changed while the spec change's task waits in the queue.
    sqlx::query("UPDATE providerconfigs SET spec = '{\"v\": 2}', data = '\\x02' WHERE name = 'c'")
        .execute(pool)
        .await
        .unwrap();
    let (trigger, spec, bundle, token, epoch) = claim_with_config(pool).await;
    assert_eq!(
        (trigger.as_str(), spec, bundle),
        ("specChange", Some(json!({"v": 2})), Some(vec![2])),
        "the config as it is at the claim, not as it was queued"
    );
    assert_eq!(complete(pool, id, token, epoch, true, json!({})).await, 1);
    // A resync of the synced resource: the reaper queues it with no config of its own.
    let queued: i32 =
        sqlx::query_scalar("SELECT requeue_for_resync('hello', 1, interval '0', false, 10)")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(queued, 1, "the synced resource is due a resync");
    let (trigger, spec, bundle, _, _) = claim_with_config(pool).await;
    assert_eq!(
        (trigger.as_str(), spec, bundle),
        ("resync", Some(json!({"v": 2})), Some(vec![2])),
        "a resync carries the config too"
    );
    // No config named, none sent.
    sqlx::query("DELETE FROM work_queue")
        .execute(pool)
        .await
        .unwrap();
    apply(pool, "bare", json!({})).await;
    let (_, spec, bundle, _, _) = claim_with_config(pool).await;
    assert_eq!((spec, bundle), (None, None));
}

/// Composites' results are drained in their own lane (0020): every result of a kind with a
/// rollup goes to the express lane, which only the express drain takes, and the bulk drain
/// never takes an express row (so one drainer applies a resource's results, in order). A
/// plain result (a leaf's) skips the outbox: work_complete applies it where it fences it.
#[tokio::test]
async fn composites_results_take_the_express_lane_and_only_it() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    comp_kind(&db.pool).await;
    for name in ["a", "b"] {
        apply(&db.pool, name, json!({})).await;
    }
    let comp: Uuid =
        sqlx::query_scalar("SELECT id FROM resource_apply('comp', 1, 'root', '{}', '{}', NULL)")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    let mut claimed = claim(&db.pool, 2).await;
    claimed.extend(
        sqlx::query_as::<_, (Uuid, Uuid, i64)>(
            "SELECT resource_id, lease_token, claim_epoch
             FROM work_claim(0::smallint, 255::smallint, 'comp', 1, 1, 'b')",
        )
        .fetch_all(&db.pool)
        .await
        .unwrap(),
    );
    assert_eq!(claimed.len(), 3);
    // The broker's hint plays no part in the lane.
    let batch: Vec<Completion> = claimed
        .iter()
        .map(|&(id, token, epoch)| result_of(id, token, epoch))
        .collect();
    let recorded = converge_engine::db::queue::record_results(&db.pool, &batch)
        .await
        .unwrap();
    assert_eq!(recorded.accepted.len(), 3);
    assert!(recorded.to_drain && recorded.applied);
    let express: Vec<Uuid> =
        sqlx::query_scalar("SELECT resource_id FROM work_outbox WHERE express")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(express, [comp], "only the composite's result is express");
    let drain = "SELECT popped FROM drain_outbox_batch(100, 0::smallint, 255::smallint, $1)";
    let drained = |express: bool| {
        let pool = db.pool.clone();
        async move {
            let n: i32 = sqlx::query_scalar(drain)
                .bind(express)
                .fetch_one(&pool)
                .await
                .unwrap();
            n
        }
    };
    let ready = || async {
        let mut ids: Vec<Uuid> =
            sqlx::query_scalar("SELECT id FROM resources WHERE phase = 'Ready'")
                .fetch_all(&db.pool)
                .await
                .unwrap();
        ids.sort();
        ids
    };
    // The leaves' results are plain: applied where they were fenced, never in the outbox.
    let mut leaves: Vec<Uuid> = claimed
        .iter()
        .map(|c| c.0)
        .filter(|&id| id != comp)
        .collect();
    leaves.sort();
    assert_eq!(ready().await, leaves);
    assert_eq!(
        drained(false).await,
        0,
        "the bulk lane left the composite's"
    );
    assert!(!ready().await.contains(&comp));
    assert_eq!(drained(true).await, 1, "the express lane took it");
    assert_eq!(drained(true).await, 0);
    assert_eq!(ready().await.len(), 3);
}

/// resource_lag (migration 0021) follows every way a row gets behind, moves on, or goes:
/// insert, every column its flags read, multi-row and upsert statements, delete and the
/// owner's cascade.
#[tokio::test]
async fn the_lag_table_holds_exactly_the_rows_behind() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let lagging = || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM resource_lag")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        n
    };
    let a = apply(&db.pool, "a", json!({"n": 1})).await;
    let b = apply(&db.pool, "b", json!({"n": 1})).await;
    assert_eq!(lagging().await, 2, "new resources are behind");
    assert_eq!(db.lag_mismatches().await, 0);
    // Children under `a`, inserted in one statement; one of them caught up at once.
    sqlx::query(
        "INSERT INTO resources (id, kind, kind_version, name, owner_id, root_id, shard_id, synced_gen)
         SELECT u, 'hello', 1, 'child-' || i, $1, $1, shard_of(u), CASE WHEN i = 1 THEN 1 ELSE 0 END
         FROM generate_series(1, 4) i, LATERAL (SELECT gen_random_uuid() AS u WHERE i > 0) x",
    )
    .bind(a)
    .execute(&db.pool)
    .await
    .unwrap();
    assert_eq!(lagging().await, 5);
    assert_eq!(db.lag_mismatches().await, 0);
    // Each column a flag reads, one statement at a time (the phase cases' transitions).
    for set in [
        "synced_gen = generation",
        "spec = '{\"n\": 2}'",
        "status = '{\"x\": 1}'",
        "failure_gen = generation",
        "frozen_until = 'infinity'",
        "frozen_until = NULL",
        "failure_gen = 0, frozen_until = now() + interval '1 hour'",
        "deletion_requested_at = now()",
        "deletion_requested_at = NULL, frozen_until = NULL, synced_gen = generation",
    ] {
        let sql = format!("UPDATE resources SET {set} WHERE id = $1");
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(b)
            .execute(&db.pool)
            .await
            .unwrap();
        assert_eq!(db.lag_mismatches().await, 0, "after SET {set}");
    }
    // Many rows in one statement, some behind and some caught up.
    sqlx::query(
        "UPDATE resources SET synced_gen = generation WHERE name IN ('child-2', 'child-3')",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    sqlx::query("UPDATE resources SET spec = '{\"n\": 3}' WHERE owner_id = $1")
        .bind(a)
        .execute(&db.pool)
        .await
        .unwrap();
    assert_eq!(db.lag_mismatches().await, 0);
    // An upsert: re-applying `b` with a new spec puts it behind again.
    apply(&db.pool, "b", json!({"n": 4})).await;
    assert_eq!(db.lag_mismatches().await, 0);
    let behind: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM resource_lag WHERE id = $1)")
            .bind(b)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert!(behind, "a re-applied spec is behind");
    // An edge between two of a's children: resource_deps.owner_id has no foreign key since
    // 0021, so the edge must go with its dependent.
    sqlx::query(
        "INSERT INTO resource_deps (dependent_id, dependency_id, owner_id, value_flows)
         SELECT d.id, u.id, $1, '[]' FROM resources d, resources u
         WHERE d.name = 'child-2' AND u.name = 'child-1'",
    )
    .bind(a)
    .execute(&db.pool)
    .await
    .unwrap();
    // Deleting the owner takes its children by the foreign key's cascade, their lag rows and
    // their edges.
    sqlx::query("DELETE FROM resources WHERE id = $1")
        .bind(a)
        .execute(&db.pool)
        .await
        .unwrap();
    assert_eq!(db.lag_mismatches().await, 0);
    assert_eq!(lagging().await, 1, "only b is left behind");
    let edges: i64 = sqlx::query_scalar("SELECT count(*) FROM resource_deps")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(edges, 0, "the owner's edges went with its children");
}

/// jsonptr_path (migration 0022) is inlined where it is used, and its results are those of
/// a JSON pointer: escapes decoded, a missing leading slash tolerated, NULL for NULL.
#[tokio::test]
async fn json_pointer_paths_are_inlined_and_decoded() {
    let db = TestDb::new().await;
    let cases: [(Option<&str>, Option<Vec<&str>>); 5] = [
        (Some("/a/b"), Some(vec!["a", "b"])),
        (Some("x/y"), Some(vec!["x", "y"])),
        (Some(""), Some(vec![])),
        (Some("/a~1b/c~0d"), Some(vec!["a/b", "c~d"])),
        (None, None),
    ];
    for (pointer, want) in cases {
        let got: Option<Vec<String>> = sqlx::query_scalar("SELECT jsonptr_path($1)")
            .bind(pointer)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        let want = want.map(|w| w.into_iter().map(String::from).collect::<Vec<_>>());
        assert_eq!(got, want, "path of {pointer:?}");
    }
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN VERBOSE SELECT jsonptr_path(p) FROM (VALUES ('/a'), ('/b')) AS v(p)",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let plan = plan.join("\n");
    assert!(
        plan.contains("string_to_array") && !plan.contains("jsonptr_path("),
        "jsonptr_path is not inlined:\n{plan}"
    );
}

/// A composite `name` (created and claimed here) composing `chains` chains of three `hello`
/// children (a <- b <- c). Returns what [`compose_chains_again`] needs: the composite's id and
/// its lease.
async fn compose_chains(
    conn: &mut sqlx::PgConnection,
    name: &str,
    chains: usize,
) -> (Uuid, Uuid, i64) {
    let (root, _, _): (Uuid, String, i64) =
        sqlx::query_as("SELECT * FROM resource_apply('comp', 1, $1, '{}', '{}', NULL)")
            .bind(name)
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    let (token, epoch): (Uuid, i64) = sqlx::query_as(
        "SELECT lease_token, claim_epoch FROM work_claim(0::smallint, 255::smallint, 'comp', 1, 1, 'b')",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    let lease = (root, token, epoch);
    compose_chains_again(conn, lease, 1, name, chains).await;
    lease
}

/// Applies the compose result of [`compose_chains`] at `generation` under `lease`, its edges
/// naming the children by kind and name as a composer's do.
async fn compose_chains_again(
    conn: &mut sqlx::PgConnection,
    (root, token, epoch): (Uuid, Uuid, i64),
    generation: i64,
    name: &str,
    chains: usize,
) {
    let child = |i: usize, l: &str| format!("{name}-{i}-{l}");
    let node = |i: usize, l: &str| json!({"kind": "hello", "name": child(i, l)});
    let children: Vec<_> = (0..chains)
        .flat_map(|i| {
            ["a", "b", "c"]
                .map(|l| json!({"kind": "hello", "kind_version": 1, "name": child(i, l)}))
        })
        .collect();
    let edges: Vec<_> = (0..chains)
        .flat_map(|i| {
            [("b", "a"), ("c", "b")]
                .map(|(from, to)| json!({"from": node(i, from), "to": node(i, to)}))
        })
        .collect();
    let outcome: String = sqlx::query_scalar(
        "SELECT apply_compose_result($1, $2, $3, $4, $5, $6, '[]', true, false)",
    )
    .bind(root)
    .bind(token)
    .bind(epoch)
    .bind(generation)
    .bind(json!(children))
    .bind(json!(edges))
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    assert_eq!(outcome, "ok");
}

/// A compose result stores the composer's status with its composed_gen stamp (a claim cut
/// short after the write is not composed again, and its next rollup reads the status from
/// the row); a result without a status keeps the one the row has; a caller passing the nine
/// arguments of the previous release still resolves.
#[tokio::test]
async fn a_compose_result_stores_the_composers_status() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    comp_kind(&db.pool).await;
    let mut conn = db.pool.acquire().await.unwrap();
    let (root, token, epoch) = compose_chains(&mut conn, "st", 1).await;
    async fn read(conn: &mut sqlx::PgConnection, root: Uuid) -> (i64, Option<Value>) {
        sqlx::query_as("SELECT composed_gen, status FROM resources WHERE id = $1")
            .bind(root)
            .fetch_one(conn)
            .await
            .unwrap()
    }
    // compose_chains passes nine arguments: no status stored.
    assert_eq!(read(&mut conn, root).await, (1, None));
    let kept = Some(json!({"vpc": "v-1"}));
    // (lease, status passed, answer, status after): a status is stored; none keeps it; a
    // stale lease writes nothing, the status included.
    let cases = [
        (token, kept.clone(), "ok", kept.clone()),
        (token, None, "ok", kept.clone()),
        (Uuid::new_v4(), Some(json!({"x": 1})), "stale", kept),
    ];
    for (lease, status, answer, after) in cases {
        let s: String = sqlx::query_scalar(
            "SELECT apply_compose_result($1, $2, $3, 1, '[]', '[]', '[]', true, false, $4)",
        )
        .bind(root)
        .bind(lease)
        .bind(epoch)
        .bind(status)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
        assert_eq!(s, answer);
        assert_eq!(read(&mut conn, root).await, (1, after));
    }
}

/// Entries read from the owner index, and rows read by sequential scans of temp tables (a
/// compose's scratch tables), by every connection so far (`conn`'s own counts flushed first).
async fn compose_reads(conn: &mut sqlx::PgConnection) -> (i64, i64) {
    stats(
        conn,
        "SELECT (SELECT idx_tup_read FROM pg_stat_user_indexes
                 WHERE indexrelname = 'idx_resources_owner_created'),
                (SELECT coalesce(sum(seq_tup_read), 0)::bigint FROM pg_stat_user_tables
                 WHERE schemaname LIKE 'pg\\_temp\\_%')",
    )
    .await
}

/// 0023: a compose reaches each edge's endpoints through the (kind, name) key, and a
/// recompose finds the edges to remove by the key of its scratch table. Once ANALYZE has seen
/// other composites, a composite it has not seen has its children and edges estimated at one
/// row: the planner then read every child through the owner index for every edge (a
/// 10,000-child compose took 17 s, not 1), and every resolved edge for every existing edge on
/// a recompose (2 s, not 0.35).
#[tokio::test]
async fn a_compose_reads_each_edge_by_key_after_analyze() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    comp_kind(&db.pool).await;
    let mut conn = db.pool.acquire().await.unwrap();
    // Enough rows that the owner index looks as cheap as the key (5,000: at 600 the planner
    // kept to the key even before 0023).
    for r in 0..5 {
        compose_chains(&mut conn, &format!("old{r}"), 333).await;
    }
    sqlx::query("ANALYZE resources, resource_deps")
        .execute(&mut *conn)
        .await
        .unwrap();
    let chains = 200;
    let (edges, children) = (2 * chains as i64, 3 * chains as i64);
    let (owner_before, _) = compose_reads(&mut conn).await;
    let lease = compose_chains(&mut conn, "fresh", chains).await;
    let (owner_after, temp_before) = compose_reads(&mut conn).await;
    compose_chains_again(&mut conn, lease, 2, "fresh", chains).await;
    let (_, temp_after) = compose_reads(&mut conn).await;

    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM resource_deps WHERE owner_id = $1")
        .bind(lease.0)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(
        kept, edges,
        "every edge resolved, and kept by the recompose"
    );
    // A few passes over the composite's children (locking, pruning) are linear; a pass per
    // edge is 400 edges x up to 600 children.
    let owner_reads = owner_after - owner_before;
    assert!(
        owner_reads < 10 * children,
        "the compose read {owner_reads} owner-index entries for {children} children"
    );
    // Writing the edges reads the scratch table once; a read per existing edge is 400 x 400.
    let temp_reads = temp_after - temp_before;
    assert!(
        temp_reads < 10 * edges,
        "the recompose read {temp_reads} scratch rows for {edges} edges"
    );
}

/// The next `lease_revoked` notice's payload.
async fn notice(l: &mut sqlx::postgres::PgListener) -> String {
    tokio::time::timeout(std::time::Duration::from_secs(5), l.recv())
        .await
        .expect("no lease_revoked notice in time")
        .unwrap()
        .payload()
        .to_owned()
}

#[tokio::test]
async fn the_engine_announces_each_running_task_it_takes_away_with_its_reason() {
    let db = TestDb::new().await;
    let p = &db.pool;
    db.leaf_kind("hello").await;
    let mut l = sqlx::postgres::PgListener::connect_with(p).await.unwrap();
    l.listen("lease_revoked").await.unwrap();
    let ids = [
        apply(p, "del", json!({})).await,
        apply(p, "quar", json!({})).await,
        apply(p, "sup", json!({})).await,
        apply(p, "done", json!({})).await,
    ];
    let leases = claim(p, 10).await;
    assert_eq!(leases.len(), 4);
    let lease = |id: Uuid| *leases.iter().find(|l| l.0 == id).unwrap();
    let [del, quar, sup, done] = ids.map(lease);

    // A task that ends normally, a heartbeat and a release take nothing away: no notice.
    // (Notices arrive in commit order, so the next one proves these sent none.)
    let key = |(id, token, epoch): (Uuid, Uuid, i64)| LeaseKey {
        resource_id: ResourceId(id),
        shard_id: ShardId(shard_of(id)),
        task_type: TaskType::Reconcile,
        lease_token: LeaseToken(token),
        claim_epoch: ClaimEpoch(epoch),
    };
    converge_engine::db::queue::lease_heartbeat(p, &[key(sup)])
        .await
        .unwrap();
    assert_eq!(
        complete(p, done.0, done.1, done.2, true, json!({})).await,
        1
    );

    // A spec change re-points the running task's row at generation 2: superseded.
    apply(p, "sup", json!({"greeting": "new"})).await;
    assert_eq!(notice(&mut l).await, format!("superseded {}", sup.1));
    assert_eq!(
        complete(p, sup.0, sup.1, sup.2, true, json!({})).await,
        0,
        "the superseded task's result is refused"
    );

    // Quarantine drops the running reconcile: its result is refused, the row stays set aside.
    sqlx::query("SELECT resource_quarantine($1)")
        .bind(quar.0)
        .execute(p)
        .await
        .unwrap();
    assert_eq!(notice(&mut l).await, format!("quarantined {}", quar.1));
    assert_eq!(
        complete(p, quar.0, quar.1, quar.2, true, json!({})).await,
        0
    );
    let phase: String = sqlx::query_scalar("SELECT phase FROM resources WHERE id = $1")
        .bind(quar.0)
        .fetch_one(p)
        .await
        .unwrap();
    assert_eq!(phase, "Quarantined");

    // A delete request drops the running reconcile too.
    sqlx::query("SELECT resource_request_deletion($1)")
        .bind(del.0)
        .execute(p)
        .await
        .unwrap();
    assert_eq!(notice(&mut l).await, format!("deleted {}", del.1));
    assert_eq!(complete(p, del.0, del.1, del.2, true, json!({})).await, 0);

    // The failsafe finds the same three from the broker's side (the generation each task
    // runs for), and not the task that ended normally.
    let mut found = converge_engine::db::queue::lease_revocations(
        p,
        &[(key(del), 1), (key(quar), 1), (key(sup), 1), (key(done), 1)],
    )
    .await
    .unwrap();
    found.sort_by_key(|(t, _)| t.0);
    let mut want = vec![
        (LeaseToken(del.1), Revoked::Deleted),
        (LeaseToken(quar.1), Revoked::Quarantined),
        (LeaseToken(sup.1), Revoked::Superseded),
    ];
    want.sort_by_key(|(t, _)| t.0);
    assert_eq!(found, want);

    // A hard delete of a running task's resource is announced as well, and nothing else was.
    let next = claim(p, 10).await;
    assert_eq!(next.len(), 1, "the superseded resource's generation 2");
    assert_eq!(next[0].0, sup.0);
    sqlx::query("SELECT resource_delete_now($1)")
        .bind(sup.0)
        .execute(p)
        .await
        .unwrap();
    assert_eq!(notice(&mut l).await, format!("deleted {}", next[0].1));
    sqlx::query("SELECT pg_notify('lease_revoked', 'end')")
        .execute(p)
        .await
        .unwrap();
    assert_eq!(notice(&mut l).await, "end");
}

#[test]
fn a_revocation_notice_parses_into_its_reason_and_tokens() {
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    assert_eq!(
        Revoked::parse_notice(&format!("superseded {a} {b}")),
        Some((Revoked::Superseded, vec![LeaseToken(a), LeaseToken(b)]))
    );
    assert_eq!(
        Revoked::parse_notice(&format!("deleted {a} not-a-token")),
        Some((Revoked::Deleted, vec![LeaseToken(a)]))
    );
    assert_eq!(Revoked::parse_notice(""), None, "a LISTEN reconnect");
    assert_eq!(Revoked::parse_notice(&format!("evicted {a}")), None);
    for r in [Revoked::Deleted, Revoked::Quarantined, Revoked::Superseded] {
        assert_eq!(Revoked::parse(r.as_str()), Some(r));
    }
}

/// Polls until a backend runs a statement containing `text` and waits on a lock.
async fn wait_until_blocked(pool: &PgPool, text: &str) {
    for _ in 0.. {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'",
        )
        .bind(text)
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_kind_version_is_deleted_only_when_nothing_uses_it() {
    use converge_engine::db::kinds::{KindVersionDelete as D, kind_version_delete};
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    assert_eq!(
        kind_version_delete(&db.pool, "hello", 2).await.unwrap(),
        D::NotFound
    );
    apply(&db.pool, "a", json!({})).await;
    apply(&db.pool, "b", json!({})).await;
    assert_eq!(
        kind_version_delete(&db.pool, "hello", 1).await.unwrap(),
        D::InUse {
            resources: 2,
            bindings: 0
        }
    );
    sqlx::query("DELETE FROM resources")
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO providerconfigs (name, kind, kind_version, is_default) VALUES ('d', 'hello', 1, true)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        kind_version_delete(&db.pool, "hello", 1).await.unwrap(),
        D::Deleted
    );
    let left: (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM kind_manifest), (SELECT count(*) FROM kind_config),
                (SELECT count(*) FROM providerconfigs)",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(left, (0, 0, 0));
    // Gone: an apply of it is refused by the guard, not written.
    let err = sqlx::query("SELECT * FROM resource_apply('hello', 1, 'late', '{}', '{}', NULL)")
        .execute(&db.pool)
        .await
        .unwrap_err();
    let d = err.as_database_error().unwrap();
    assert!(d.is_foreign_key_violation(), "{d}");
    assert_eq!(d.message(), "kind hello version 1 is not registered");
}

#[tokio::test]
async fn a_kind_version_delete_and_an_apply_of_it_serialise() {
    use converge_engine::db::kinds::{KindVersionDelete as D, kind_version_delete};
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let apply_sql = "SELECT * FROM resource_apply('hello', 1, $1, '{}', '{}', NULL)";

    // An apply in flight (not committed yet): the delete waits for it, then counts it.
    let mut tx = db.pool.begin().await.unwrap();
    sqlx::query(apply_sql)
        .bind("in-flight")
        .execute(&mut *tx)
        .await
        .unwrap();
    let pool = db.pool.clone();
    let delete = tokio::spawn(async move { kind_version_delete(&pool, "hello", 1).await });
    wait_until_blocked(&db.pool, "kind_version_delete").await;
    tx.commit().await.unwrap();
    assert_eq!(
        delete.await.unwrap().unwrap(),
        D::InUse {
            resources: 1,
            bindings: 0
        }
    );

    // A delete in flight: the apply waits for it, then finds the version gone.
    sqlx::query("DELETE FROM resources")
        .execute(&db.pool)
        .await
        .unwrap();
    let mut tx = db.pool.begin().await.unwrap();
    let (registered, resources): (bool, i64) =
        sqlx::query_as("SELECT registered, resource_count FROM kind_version_delete('hello', 1)")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    assert_eq!((registered, resources), (true, 0));
    let pool = db.pool.clone();
    let late = tokio::spawn(async move {
        sqlx::query(apply_sql)
            .bind("late")
            .execute(&pool)
            .await
            .map(|_| ())
    });
    wait_until_blocked(&db.pool, "resource_apply").await;
    tx.commit().await.unwrap();
    let err = late.await.unwrap().unwrap_err();
    assert!(
        err.as_database_error()
            .is_some_and(|d| d.is_foreign_key_violation()),
        "{err}"
    );
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM resources")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(n, 0, "no resource of a deleted kind version");
}

#[tokio::test]
async fn the_last_version_of_a_bound_kind_is_kept() {
    use converge_engine::db::kinds::{KindVersionDelete as D, kind_version_delete};
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    sqlx::query("INSERT INTO kind_manifest (kind, kind_version, manifest) VALUES ('sink', 1, $1)")
        .bind(json!({"kind": "sink", "kind_version": 1,
                     "reactions": [{"name": "r", "trigger": "reactor", "emits": ["sideEffect"]}]}))
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO reactor_bindings (name, watch_kind, transition, reactor)
         VALUES ('b', 'hello', 'synced', 'sink')",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    for kind in ["hello", "sink"] {
        assert_eq!(
            kind_version_delete(&db.pool, kind, 1).await.unwrap(),
            D::InUse {
                resources: 0,
                bindings: 1
            },
            "{kind}"
        );
    }
    // Not its last version: the binding still has a kind to name.
    sqlx::query("INSERT INTO kind_manifest (kind, kind_version, manifest) VALUES ('hello', 2, $1)")
        .bind(json!({"kind": "hello", "kind_version": 2,
                     "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]}))
        .execute(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        kind_version_delete(&db.pool, "hello", 1).await.unwrap(),
        D::Deleted
    );
}

/// A bundle is stored lz4-compressed where the server has lz4 (migration 0006), and with
/// pglz where it does not; either way it reads back byte for byte.
#[tokio::test]
async fn bundles_are_stored_with_lz4_where_the_server_has_it() {
    use converge_engine::db::providerconfigs::{
        ProviderConfigPut, providerconfig_get, providerconfig_put,
    };
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    // Compressible, above the 2 kB TOAST threshold: a bundle PostgreSQL compresses.
    let bundle: Vec<u8> = (0..256 * 1024u32).map(|i| (i % 251) as u8).collect();
    let spec = json!({});
    providerconfig_put(
        &db.pool,
        &ProviderConfigPut {
            name: "big",
            kind: "hello",
            kind_version: 1,
            is_default: true,
            spec: &spec,
            data: Some(&bundle),
            kept_from: None,
        },
    )
    .await
    .unwrap()
    .unwrap();
    let has_lz4: bool = sqlx::query_scalar(
        "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    let method: Option<String> = sqlx::query_scalar(
        "SELECT pg_column_compression(data) FROM providerconfigs WHERE name = 'big'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    let want = if has_lz4 { "lz4" } else { "pglz" };
    assert_eq!(method.as_deref(), Some(want), "lz4 available: {has_lz4}");
    let (_, data) = providerconfig_get(&db.pool, "big").await.unwrap().unwrap();
    assert!(
        data.as_deref() == Some(&bundle[..]),
        "the bundle reads back unchanged"
    );
}

/// The problems-first order's side table (migration 0008, engine/sql/problems.sql) costs the
/// hot path nothing: a reconcile's phase change (Reconciling -> Ready) is still a HOT update
/// of `resources` (no index names `phase`) and writes no `resource_problems` row, while a
/// failure does. And re-applying problems.sql fills the table from the rows already there,
/// as it does for a database that had resources before 0008.
#[tokio::test]
async fn problem_ranks_cost_a_reconcile_nothing_and_refill_from_the_rows() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let ok = apply(&db.pool, "ok", json!({})).await;
    let bad = apply(&db.pool, "bad", json!({})).await;
    let mut tx = db.pool.begin().await.unwrap();
    let hot = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql);
    let hot_sql = "SELECT pg_stat_get_xact_tuples_hot_updated('resources'::regclass)";
    let before = hot(hot_sql).fetch_one(&mut *tx).await.unwrap();
    sqlx::query("UPDATE resources SET synced_gen = generation WHERE id = $1")
        .bind(ok)
        .execute(&mut *tx)
        .await
        .unwrap();
    let after = hot(hot_sql).fetch_one(&mut *tx).await.unwrap();
    assert_eq!(after - before, 1, "Reconciling -> Ready is a HOT update");
    sqlx::query("UPDATE resources SET failure_gen = generation WHERE id = $1")
        .bind(bad)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let problems: Vec<(Uuid, i16)> = sqlx::query_as("SELECT id, rank FROM resource_problems")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert_eq!(problems, [(bad, 0)], "only the failure is a problem");

    // A table that lost its rows (as before 0008) is refilled when the file applies again.
    sqlx::query("DELETE FROM resource_problems")
        .execute(&db.pool)
        .await
        .unwrap();
    let file = converge_engine::db::engine_sql::ENGINE_FILES
        .iter()
        .find(|f| f.name == "problems.sql")
        .unwrap();
    sqlx::raw_sql(file.sql).execute(&db.pool).await.unwrap();
    let refilled: Vec<(Uuid, i16)> = sqlx::query_as("SELECT id, rank FROM resource_problems")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert_eq!(refilled, [(bad, 0)]);
}

/// Spec history without row work on the hot paths: a batch apply records every created
/// root's first spec in one statement (not a composed child's), a spec change records the new
/// generation and trims to `converge.spec_history_keep`, and deleting resources (a root, a
/// child through its owner's cascade) forgets their history, which the foreign key's cascade
/// did before 0009.
#[tokio::test]
async fn spec_history_is_recorded_trimmed_and_forgotten_by_statement() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM resource_apply_batch(ARRAY['hello', 'hello', 'hello'], ARRAY[1, 1, 1],
             ARRAY['a', 'b', 'c'], ARRAY['{\"v\": 1}', '{}', '{}']::jsonb[],
             ARRAY['{}', '{}', '{}']::jsonb[], ARRAY[NULL, NULL, NULL]::text[]) ORDER BY ord",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let (a, b) = (ids[0], ids[1]);
    let child: Uuid = sqlx::query_scalar(
        "INSERT INTO resources (id, kind, name, owner_id, root_id, shard_id)
         SELECT g, 'hello', 'a-child', $1, $1, shard_of(g) FROM gen_random_uuid() g RETURNING id",
    )
    .bind(a)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    let history = |id: Uuid| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_as::<_, (i64, Value)>(
                "SELECT generation, spec FROM spec_versions WHERE resource_id = $1
                 ORDER BY generation",
            )
            .bind(id)
            .fetch_all(&pool)
            .await
            .unwrap()
        }
    };
    assert_eq!(history(a).await, [(1, json!({"v": 1}))]);
    assert_eq!(history(b).await, [(1, json!({}))]);
    assert_eq!(history(child).await, [], "a composed child has no history");

    let mut conn = db.pool.acquire().await.unwrap();
    sqlx::query("SET converge.spec_history_keep = 2")
        .execute(&mut *conn)
        .await
        .unwrap();
    for v in 2..=4 {
        sqlx::query("UPDATE resources SET spec = jsonb_build_object('v', $2::int) WHERE id = $1")
            .bind(a)
            .bind(v)
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    drop(conn);
    assert_eq!(
        history(a).await,
        [(3, json!({"v": 3})), (4, json!({"v": 4}))],
        "the last two generations kept"
    );

    sqlx::query("DELETE FROM resources WHERE id = $1")
        .bind(a)
        .execute(&db.pool)
        .await
        .unwrap();
    let left: Vec<Uuid> = sqlx::query_scalar("SELECT DISTINCT resource_id FROM spec_versions")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    let mut want = vec![b, ids[2]];
    want.sort();
    let mut left = left;
    left.sort();
    assert_eq!(left, want, "a's history is gone, b's and c's are kept");
}

/// A connection's warm-up (warmup.sql) runs the hot path on a resource of its own and leaves
/// nothing behind: no row in any table it wrote, no wake-up sent, no gate window taken, and
/// real work beside it (a queued task, a waiting result) untouched and still served after it.
#[tokio::test]
async fn the_warm_up_leaves_nothing_behind_and_wakes_nobody() {
    let db = TestDb::new().await;
    let p = &db.pool;
    db.leaf_kind("hello").await;
    let queued = apply(p, "queued", json!({})).await;
    let waiting = apply(p, "waiting", json!({})).await;
    // `waiting` has a result in the outbox (as work_complete leaves any result that is not
    // plain); `queued` a claimable task.
    let (token, _): (Uuid, i64) = sqlx::query_as(
        "SELECT lease_token, claim_epoch FROM work_claim(0::smallint, 255::smallint, 'hello', 1, 1, 'b')",
    )
    .fetch_one(p)
    .await
    .unwrap();
    let first: Uuid =
        sqlx::query_scalar("SELECT resource_id FROM work_queue WHERE lease_token = $1")
            .bind(token)
            .fetch_one(p)
            .await
            .unwrap();
    let other = if first == queued { waiting } else { queued };
    let waits = sqlx::query(
        "WITH d AS (DELETE FROM work_queue WHERE lease_token = $1
                    RETURNING shard_id, resource_id, generation)
         INSERT INTO work_outbox (shard_id, resource_id, task_type, generation, ok, advance)
         SELECT shard_id, resource_id, 'reconcile', generation, true, true FROM d",
    )
    .bind(token)
    .execute(p)
    .await
    .unwrap();
    assert_eq!(waits.rows_affected(), 1);
    let snapshot = "SELECT (SELECT count(*) FROM kind_manifest), (SELECT count(*) FROM kind_config),
                           (SELECT count(*) FROM resources), (SELECT count(*) FROM work_queue),
                           (SELECT count(*) FROM work_outbox), (SELECT count(*) FROM resource_events),
                           (SELECT count(*) FROM resource_lag), (SELECT count(*) FROM spec_versions),
                           (SELECT string_agg(channel || ' ' || coalesce(last_at::text, ''), ',' ORDER BY channel)
                            FROM wake_state)";
    type Snap = (i64, i64, i64, i64, i64, i64, i64, i64, Option<String>);
    let before: Snap = sqlx::query_as(snapshot).fetch_one(p).await.unwrap();
    let mut l = sqlx::postgres::PgListener::connect_with(p).await.unwrap();
    for ch in ["work_ready", "outbox_ready", "lease_revoked"] {
        l.listen(ch).await.unwrap();
    }

    let mut conn = p.acquire().await.unwrap();
    for _ in 0..2 {
        sqlx::query("SELECT engine_warm_up()")
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    let after: Snap = sqlx::query_as(snapshot).fetch_one(p).await.unwrap();
    assert_eq!(after, before);
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(300), l.recv())
            .await
            .is_err(),
        "the warm-up sent a notice"
    );

    // The warmed connection serves the real work: the other task, then both results.
    let (t2, e2): (Uuid, i64) = sqlx::query_as(
        "SELECT lease_token, claim_epoch FROM work_claim(0::smallint, 255::smallint, 'hello', 1, 5, 'b')",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    let recorded = converge_engine::db::queue::record_results(p, &[result_of(other, t2, e2)])
        .await
        .unwrap();
    assert_eq!(recorded.accepted.len(), 1);
    let popped: i32 = sqlx::query_scalar(
        "SELECT popped FROM drain_outbox_batch(100, 0::smallint, 255::smallint)",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    assert_eq!(popped, 1, "the waiting result");
    let ready: i64 = sqlx::query_scalar("SELECT count(*) FROM resources WHERE phase = 'Ready'")
        .fetch_one(p)
        .await
        .unwrap();
    assert_eq!(ready, 2);
}

/// New resources get UUIDv7 ids (uuid_v7 in api.sql), by both ways a resource is created: an
/// apply and a composer's children. Resources created later get greater ids, so a batch's
/// rows sit together in every index keyed by id; the last byte, which picks the shard, stays
/// random, so 2,000 rows land in nearly every one of the 256 shards.
#[tokio::test]
async fn new_resources_get_time_ordered_ids_over_every_shard() {
    use converge_engine::db::resources::{ApplyItem, resource_apply_batch};
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    comp_kind(&db.pool).await;
    let batch = |from: usize| -> Vec<ApplyItem> {
        (from..from + 1000)
            .map(|i| hello_item(format!("r{i}"), json!({})))
            .collect()
    };
    let first = resource_apply_batch(&db.pool, None, &batch(0))
        .await
        .unwrap();
    // The timestamp counts milliseconds: let one pass, so the second batch's are later.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let second = resource_apply_batch(&db.pool, None, &batch(1000))
        .await
        .unwrap();
    let ids = |a: &[converge_engine::db::resources::Applied]| -> Vec<Uuid> {
        a.iter().map(|x| x.id).collect()
    };
    let (first, second) = (ids(&first), ids(&second));
    assert!(
        first
            .iter()
            .chain(&second)
            .all(|id| id.get_version_num() == 7),
        "every new id is a version 7 UUID"
    );
    let newest_first = first.iter().max().unwrap();
    let oldest_second = second.iter().min().unwrap();
    assert!(
        oldest_second > newest_first,
        "a later batch's ids are all greater: {oldest_second} <= {newest_first}"
    );
    let shards: i64 = sqlx::query_scalar("SELECT count(DISTINCT shard_id) FROM resources")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    // 2,000 random bytes leave a given shard empty with probability (255/256)^2000, about
    // 0.04 %, so some shard is empty in about one run in ten: ask for nearly all, not all.
    assert!(
        shards >= 240,
        "the shard byte is still random: {shards} of 256 used"
    );

    // A composer's children: created after the applies, so greater again, and version 7.
    let mut conn = db.pool.acquire().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    compose_chains(&mut conn, "tree", 10).await;
    let children: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM resources WHERE owner_id IS NOT NULL ORDER BY id")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    assert_eq!(children.len(), 30);
    assert!(children.iter().all(|id| id.get_version_num() == 7));
    assert!(
        children[0] > *second.iter().max().unwrap(),
        "children created later have greater ids"
    );
}

/// The reaper's event GC (`gc_resource_events`, over the BRIN index on `at` since 0010):
/// removes only events older than the cutoff, at most `limit` a call, until none is left,
/// and leaves the index summarized.
#[tokio::test]
async fn event_gc_removes_only_old_events_a_bounded_number_a_call() {
    let db = TestDb::new().await;
    sqlx::query(
        "INSERT INTO resource_events (resource_id, kind, name, type, at)
         SELECT gen_random_uuid(), 'hello', 'e-' || i, 'created',
                now() - CASE WHEN i <= 250 THEN interval '2 days' ELSE interval '1 minute' END
         FROM generate_series(1, 400) i",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let day = std::time::Duration::from_secs(86_400);
    let gc = converge_engine::db::sweeps::events_gc;
    assert_eq!(
        gc(&db.pool, day, 100).await.unwrap(),
        100,
        "bounded by the limit"
    );
    assert_eq!(gc(&db.pool, day, 100).await.unwrap(), 100);
    assert_eq!(
        gc(&db.pool, day, 100).await.unwrap(),
        50,
        "the rest of the old ones"
    );
    assert_eq!(
        gc(&db.pool, day, 100).await.unwrap(),
        0,
        "nothing old is left"
    );
    let (left, oldest): (i64, bool) = sqlx::query_as(
        "SELECT count(*), bool_and(at > now() - interval '1 hour') FROM resource_events",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((left, oldest), (150, true), "every recent event is kept");
    // Each call leaves no full block range unsummarized, so the next one reads only old
    // ranges' pages, not every page appended since the last VACUUM (30,000 events fill a few
    // ranges of 128 pages).
    sqlx::query(
        "INSERT INTO resource_events (resource_id, kind, name, type)
         SELECT gen_random_uuid(), 'hello', 'r-' || i, 'created' FROM generate_series(1, 30000) i",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    assert_eq!(gc(&db.pool, day, 100).await.unwrap(), 0);
    let unsummarized: i32 =
        sqlx::query_scalar("SELECT brin_summarize_new_values('idx_resource_events_at'::regclass)")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(unsummarized, 0, "the GC summarized what was appended");
}

/// A reconcile's result update is HOT when a batch updates every row of a page at once (the
/// shape time-ordered ids give): `resources` keeps half of each page free (0010) and no index
/// names a column the result writes. A HOT version stays on its page, so the rows that moved
/// to another page are the updates that were not HOT.
#[tokio::test]
async fn a_result_batch_over_whole_pages_stays_on_its_pages() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let items: Vec<_> = (0..500)
        .map(|i| {
            hello_item(
                format!("hot-{i:03}"),
                json!({"i": i, "region": "eu-west-1"}),
            )
        })
        .collect();
    converge_engine::db::resources::resource_apply_batch(&db.pool, None, &items)
        .await
        .unwrap();
    const PAGES: &str = "SELECT id, (ctid::text::point)[0]::bigint FROM resources ORDER BY id";
    let before: Vec<(Uuid, i64)> = sqlx::query_as(PAGES).fetch_all(&db.pool).await.unwrap();
    let mut conn = db.pool.acquire().await.unwrap();
    let status =
        json!({"endpoint": "https://hot.example/leaf", "observedAt": "2026-12-07T21:00:00Z"});
    assert_eq!(claim_and_complete_all(&mut conn, status).await, 500);
    let after: Vec<(Uuid, i64)> = sqlx::query_as(PAGES).fetch_all(&db.pool).await.unwrap();
    assert_eq!(
        db.count("SELECT count(*) FROM resources WHERE synced_gen = generation")
            .await,
        500,
        "every result was applied"
    );
    let pages = before.iter().map(|b| b.1).collect::<HashSet<_>>().len();
    assert!(pages > 10, "the batch spans many pages ({pages})");
    let moved = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b.1 != a.1)
        .count();
    // 87 of 500 here at fillfactor 50 (a status makes each new version longer than the
    // old), 431 at 85.
    assert!(
        moved <= 125,
        "{moved} of 500 result updates left their page (not HOT) over {pages} pages"
    );
}

/// The owner key (`resources.owner_id`): deleting a resource deletes its children and
/// theirs, with their edges and lag rows, each deletion recorded; a statement naming an owner
/// that is not there is refused whole.
#[tokio::test]
async fn the_owner_key_cascades_deletes_and_refuses_a_missing_owner() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    comp_kind(&db.pool).await;
    let mut conn = db.pool.acquire().await.unwrap();
    let (root, _, _) = compose_chains(&mut conn, "tree", 4).await;
    // A grandchild under the first child (a composite's own children are owned by it).
    let child: Uuid =
        sqlx::query_scalar("SELECT id FROM resources WHERE owner_id = $1 ORDER BY name LIMIT 1")
            .bind(root)
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    sqlx::query(
        "INSERT INTO resources (id, kind, name, owner_id, root_id, shard_id)
         SELECT u, 'hello', 'grandchild', $1, $2, shard_of(u) FROM uuid_v7() u",
    )
    .bind(child)
    .bind(root)
    .execute(&mut *conn)
    .await
    .unwrap();
    assert_eq!(db.count("SELECT count(*) FROM resources").await, 1 + 12 + 1);
    assert!(db.count("SELECT count(*) FROM resource_deps").await > 0);

    // An owner that is not there, alone or among good rows: refused with the key's code.
    let err = sqlx::query(
        "INSERT INTO resources (id, kind, name, owner_id, root_id, shard_id)
         SELECT u, 'hello', 'stray-' || i, CASE WHEN i = 2 THEN gen_random_uuid() ELSE $1 END,
                $1, shard_of(u)
         FROM (SELECT uuid_v7() AS u, i FROM generate_series(1, 3) i) x",
    )
    .bind(root)
    .execute(&mut *conn)
    .await
    .unwrap_err();
    let code = err
        .as_database_error()
        .and_then(|e| e.code())
        .map(|c| c.into_owned());
    assert_eq!(code.as_deref(), Some("23503"), "{err}");
    assert_eq!(
        db.count("SELECT count(*) FROM resources").await,
        14,
        "none of the three stayed"
    );

    // The root goes, and its whole subtree with it.
    sqlx::query("DELETE FROM resources WHERE id = $1")
        .bind(root)
        .execute(&mut *conn)
        .await
        .unwrap();
    assert_eq!(db.count("SELECT count(*) FROM resources").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM resource_deps").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM resource_lag").await, 0);
    assert_eq!(
        db.count("SELECT count(*) FROM resource_events WHERE type = 'deleted'")
            .await,
        14,
        "every deleted row is recorded"
    );
}
