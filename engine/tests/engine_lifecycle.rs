//! The lifecycle engine at the SQL level (one fresh database per test): marking a teardown
//! tree across ownership and edges (cycle-safe), the level-triggered sweep that queues
//! teardowns only for unblocked rows and removes finalizer-less ones, fenced teardown
//! results, and the abandoned-work GC whose dropped rows the catch-up re-enqueues.

use converge_engine::testing::TestDb;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

async fn kind(pool: &PgPool, kind: &str, finalizer: Option<&str>) {
    let mut m = json!({"kind": kind, "kind_version": 1,
                       "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]});
    if let Some(f) = finalizer {
        m["finalizer_name"] = json!(f);
        m["reactions"].as_array_mut().unwrap().push(json!(
            {"name": "teardown", "trigger": "deleteRequested", "finalizer": f, "emits": ["finalizer"]}));
    }
    sqlx::query("INSERT INTO kind_manifest (kind, kind_version, manifest) VALUES ($1, 1, $2)")
        .bind(kind)
        .bind(m)
        .execute(pool)
        .await
        .unwrap();
}

/// A root (owner None) or a child of `owner` under `root`.
async fn node(
    pool: &PgPool,
    kind: &str,
    name: &str,
    owner: Option<Uuid>,
    root: Option<Uuid>,
) -> Uuid {
    sqlx::query_scalar(
        "INSERT INTO resources (id, kind, name, owner_id, root_id, shard_id)
         SELECT x, $1, $2, $3, $4, shard_of(x) FROM gen_random_uuid() AS x RETURNING id",
    )
    .bind(kind)
    .bind(name)
    .bind(owner)
    .bind(root)
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn edge(pool: &PgPool, dependent: Uuid, dependency: Uuid, owner: Uuid) {
    sqlx::query(
        "INSERT INTO resource_deps (dependent_id, dependency_id, owner_id) VALUES ($1, $2, $3)",
    )
    .bind(dependent)
    .bind(dependency)
    .bind(owner)
    .execute(pool)
    .await
    .unwrap();
}

async fn exists(pool: &PgPool, id: Uuid) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM resources WHERE id = $1)")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Ids with a queued delete task.
async fn delete_tasks(pool: &PgPool) -> Vec<Uuid> {
    sqlx::query_scalar(
        "SELECT resource_id FROM work_queue WHERE task_type = 'delete' ORDER BY resource_id",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn sweep(pool: &PgPool) -> i32 {
    sqlx::query_scalar("SELECT sweep_deletable(0::smallint, 255::smallint, 1000)")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Claims the delete task of `id` and completes it (ok or not); returns whether accepted.
async fn teardown(pool: &PgPool, id: Uuid, ok: bool) -> bool {
    let (token, epoch, shard): (Uuid, i64, i16) = sqlx::query_as(
        "UPDATE work_queue SET lease_token = gen_random_uuid(), claim_epoch = claim_epoch + 1
         WHERE resource_id = $1 AND task_type = 'delete'
         RETURNING lease_token, claim_epoch, shard_id",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .unwrap();
    let err = (!ok).then_some("boom");
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM teardown_complete(ARRAY[$1]::uuid[], ARRAY[$2]::smallint[],
                ARRAY[$3]::uuid[], ARRAY[$4]::bigint[], ARRAY[$5]::boolean[], ARRAY[$6]::text[])",
    )
    .bind(id)
    .bind(shard)
    .bind(token)
    .bind(epoch)
    .bind(ok)
    .bind(err)
    .fetch_one(pool)
    .await
    .unwrap();
    n == 1
}

#[tokio::test]
async fn the_tree_is_marked_across_owners_and_edges_and_torn_down_bottom_up() {
    let db = TestDb::new().await;
    let p = &db.pool;
    kind(p, "fin", Some("test/fin")).await;
    kind(p, "plain", None).await;
    // root(fin) owns a(fin), b(plain), c(fin); c depends on a, a depends on c (a cycle);
    // an unrelated root x(plain) has y depending on a (downstream through an edge).
    let root = node(p, "fin", "root", None, None).await;
    let a = node(p, "fin", "a", Some(root), Some(root)).await;
    let b = node(p, "plain", "b", Some(root), Some(root)).await;
    let c = node(p, "fin", "c", Some(root), Some(root)).await;
    edge(p, c, a, root).await;
    edge(p, a, c, root).await;
    let x = node(p, "plain", "x", None, None).await;
    let y = node(p, "plain", "y", Some(x), Some(x)).await;
    edge(p, y, a, x).await;
    let keep = node(p, "plain", "keep", None, None).await;

    let marked: i32 = sqlx::query_scalar("SELECT resource_request_deletion($1)")
        .bind(root)
        .fetch_one(p)
        .await
        .unwrap();
    assert_eq!(
        marked, 5,
        "root, a, b, c and y (downstream of a); not x, not keep"
    );
    let phases: Vec<(String, String, Vec<String>)> =
        sqlx::query_as("SELECT name, phase, finalizers FROM resources ORDER BY name")
            .fetch_all(p)
            .await
            .unwrap();
    assert!(phases.contains(&("root".into(), "Deleting".into(), vec!["test/fin".into()])));
    assert!(phases.contains(&("x".into(), "Reconciling".into(), vec![])));
    // b and y had no finalizer and nothing below them: removed inline.
    assert!(!exists(p, b).await && !exists(p, y).await);
    assert!(exists(p, x).await && exists(p, keep).await);
    // a and c block each other (a cycle of dependents): neither is unblocked, nothing runs.
    assert_eq!(delete_tasks(p).await, Vec::<Uuid>::new());

    // Break the cycle by hand (as a recompose would): c's teardown is queued, then a's after.
    sqlx::query("DELETE FROM resource_deps WHERE dependent_id = $1 AND dependency_id = $2")
        .bind(a)
        .bind(c)
        .execute(p)
        .await
        .unwrap();
    sweep(p).await;
    assert_eq!(delete_tasks(p).await, vec![c]);
    assert!(teardown(p, c, false).await, "a failure is accepted");
    assert!(exists(p, c).await);
    // A failed teardown keeps the row, shows why, and re-arms its task.
    let msg: Option<String> =
        sqlx::query_scalar("SELECT failure_message FROM resources WHERE id = $1")
            .bind(c)
            .fetch_one(p)
            .await
            .unwrap();
    assert_eq!(msg.as_deref(), Some("teardown failed: boom"));
    assert_eq!(delete_tasks(p).await, vec![c]);
    sqlx::query("UPDATE work_queue SET not_before = now() WHERE resource_id = $1")
        .bind(c)
        .execute(p)
        .await
        .unwrap();
    assert!(teardown(p, c, true).await);
    sweep(p).await;
    assert!(
        !exists(p, c).await,
        "finalizer stripped and unblocked: removed"
    );
    assert_eq!(
        delete_tasks(p).await,
        vec![a],
        "a is next, root still waits"
    );
    assert!(teardown(p, a, true).await);
    sweep(p).await;
    assert_eq!(delete_tasks(p).await, vec![root]);
    assert!(teardown(p, root, true).await);
    sweep(p).await;
    assert!(!exists(p, root).await);
    assert!(exists(p, x).await && exists(p, keep).await);
    let leftover: i64 =
        sqlx::query_scalar("SELECT count(*) FROM work_queue WHERE task_type = 'delete'")
            .fetch_one(p)
            .await
            .unwrap();
    assert_eq!(leftover, 0);
}

#[tokio::test]
async fn a_stale_teardown_result_changes_nothing() {
    let db = TestDb::new().await;
    let p = &db.pool;
    kind(p, "fin", Some("test/fin")).await;
    let r = node(p, "fin", "r", None, None).await;
    let _: i32 = sqlx::query_scalar("SELECT resource_request_deletion($1)")
        .bind(r)
        .fetch_one(p)
        .await
        .unwrap();
    let shard: i16 = sqlx::query_scalar("SELECT shard_id FROM resources WHERE id = $1")
        .bind(r)
        .fetch_one(p)
        .await
        .unwrap();
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM teardown_complete(ARRAY[$1]::uuid[], ARRAY[$2]::smallint[],
                ARRAY[gen_random_uuid()], ARRAY[99::bigint], ARRAY[true], ARRAY[NULL::text])",
    )
    .bind(r)
    .bind(shard)
    .fetch_one(p)
    .await
    .unwrap();
    assert_eq!(n, 0);
    let fins: Vec<String> = sqlx::query_scalar("SELECT finalizers FROM resources WHERE id = $1")
        .bind(r)
        .fetch_one(p)
        .await
        .unwrap();
    assert_eq!(
        fins,
        ["test/fin"],
        "a result from a lost lease strips nothing"
    );
}

#[tokio::test]
async fn abandoned_work_is_dropped_and_re_enqueued_by_the_catch_up() {
    let db = TestDb::new().await;
    let p = &db.pool;
    kind(p, "plain", None).await;
    let (id, _, _): (Uuid, String, i64) =
        sqlx::query_as("SELECT * FROM resource_apply('plain', 1, 'lost', '{}', '{}', NULL)")
            .fetch_one(p)
            .await
            .unwrap();
    // Nobody claimed it for "a day".
    sqlx::query("UPDATE work_queue SET enqueued_at = now() - interval '2 days'")
        .execute(p)
        .await
        .unwrap();
    let dropped: i32 = sqlx::query_scalar(
        "SELECT delete_unclaimed_work(0::smallint, 255::smallint, interval '1 day')",
    )
    .fetch_one(p)
    .await
    .unwrap();
    assert_eq!(dropped, 1);
    let queued: i64 = sqlx::query_scalar("SELECT count(*) FROM work_queue")
        .fetch_one(p)
        .await
        .unwrap();
    assert_eq!(queued, 0);
    let catch_up = || async {
        let n: i32 = sqlx::query_scalar(
            "SELECT requeue_failed_and_pending(0::smallint, 255::smallint, interval '1 minute', 100)",
        )
        .fetch_one(p)
        .await
        .unwrap();
        n
    };
    assert_eq!(catch_up().await, 0, "behind for less than the retry window");
    // An hour on: the resource is still behind its spec, so the catch-up brings the task back.
    sqlx::query("UPDATE resources SET updated_at = now() - interval '1 hour' WHERE id = $1")
        .bind(id)
        .execute(p)
        .await
        .unwrap();
    sqlx::query("UPDATE resource_lag SET behind_since = now() - interval '1 hour' WHERE id = $1")
        .bind(id)
        .execute(p)
        .await
        .unwrap();
    assert_eq!(catch_up().await, 1);
    let back: i64 = sqlx::query_scalar("SELECT count(*) FROM work_queue WHERE resource_id = $1")
        .bind(id)
        .fetch_one(p)
        .await
        .unwrap();
    assert_eq!(back, 1);
}

/// Claims the pending delivery (if any) as broker `b`; returns its token and epoch.
async fn claim_delivery(pool: &PgPool) -> Option<(Uuid, i64)> {
    sqlx::query_as(
        "SELECT claim_token, claim_epoch FROM lifecycle_claim(0::smallint, 255::smallint, 'sink', 10, 'b')",
    )
    .fetch_optional(pool)
    .await
    .unwrap()
}

async fn complete_delivery(pool: &PgPool, token: Uuid, epoch: i64, ok: bool) -> bool {
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM lifecycle_complete(ARRAY[$1]::uuid[], ARRAY[$2]::bigint[],
                ARRAY[$3]::boolean[], ARRAY['sink down']::text[])",
    )
    .bind(token)
    .bind(epoch)
    .bind(ok)
    .fetch_one(pool)
    .await
    .unwrap();
    n == 1
}

#[tokio::test]
async fn a_synced_transition_is_delivered_at_least_once_and_a_silent_claim_is_re_armed() {
    let db = TestDb::new().await;
    let p = &db.pool;
    kind(p, "plain", None).await;
    sqlx::query(
        "INSERT INTO kind_manifest (kind, kind_version, manifest) VALUES ('sink', 1,
           '{\"kind\":\"sink\",\"kind_version\":1,\"reactions\":[{\"name\":\"r\",\"trigger\":\"reactor\",\"emits\":[\"sideEffect\"]}]}')",
    )
    .execute(p)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO reactor_bindings (name, watch_kind, transition, reactor)
         VALUES ('b1', 'plain', 'synced', 'sink')",
    )
    .execute(p)
    .await
    .unwrap();
    let (id, _, _): (Uuid, String, i64) =
        sqlx::query_as("SELECT * FROM resource_apply('plain', 1, 'w', '{}', '{}', NULL)")
            .fetch_one(p)
            .await
            .unwrap();
    // The worker's success, recorded and drained: the resource turns Ready (synced).
    sqlx::query(
        "INSERT INTO work_outbox (shard_id, resource_id, task_type, generation, ok, advance)
         SELECT shard_id, id, 'reconcile', generation, true, true FROM resources WHERE id = $1",
    )
    .bind(id)
    .execute(p)
    .await
    .unwrap();
    let _: i32 = sqlx::query_scalar(
        "SELECT popped FROM drain_outbox_batch(100, 0::smallint, 255::smallint)",
    )
    .fetch_one(p)
    .await
    .unwrap();

    // A failed delivery is kept and re-armed with a backoff, not acked.
    let (t1, e1) = claim_delivery(p)
        .await
        .expect("one delivery for the binding");
    assert!(
        claim_delivery(p).await.is_none(),
        "a claimed delivery is not handed out twice"
    );
    assert!(complete_delivery(p, t1, e1, false).await);
    let (armed, err): (bool, Option<String>) = sqlx::query_as(
        "SELECT claim_token IS NULL AND not_before > now(), last_error FROM lifecycle_outbox",
    )
    .fetch_one(p)
    .await
    .unwrap();
    assert!(armed);
    assert_eq!(err.as_deref(), Some("sink down"));
    // Nothing fails silently: the binding shows the failing delivery, and the watched
    // resource's events say which binding failed, how, and when it is retried.
    let b = converge_engine::db::reactor_bindings::binding_get(p, "b1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((b.pending, b.failing), (1, 1));
    assert_eq!(b.last_error.as_deref(), Some("sink down"));
    assert_eq!(b.last_error_attempts, Some(1));
    assert!(
        b.next_retry_at
            .is_some_and(|t| t > chrono::Utc::now() - chrono::Duration::seconds(5))
    );
    let delivery_events = || async {
        sqlx::query_scalar::<_, String>(
            "SELECT message FROM resource_events WHERE resource_id = $1 AND type = 'delivery'
             ORDER BY id",
        )
        .bind(id)
        .fetch_all(p)
        .await
        .unwrap()
    };
    let events = delivery_events().await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0].contains("b1")
            && events[0].contains("attempt 1")
            && events[0].contains("sink down"),
        "{events:?}"
    );
    // The same error again: the attempt counts, no second event.
    sqlx::query("UPDATE lifecycle_outbox SET not_before = now()")
        .execute(p)
        .await
        .unwrap();
    let (t, e) = claim_delivery(p).await.unwrap();
    assert!(complete_delivery(p, t, e, false).await);
    assert_eq!(delivery_events().await.len(), 1);
    let b = converge_engine::db::reactor_bindings::binding_get(p, "b1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b.last_error_attempts, Some(2));

    // A silent claim (no heartbeat) is re-armed by the reaper; its late result is refused.
    sqlx::query("UPDATE lifecycle_outbox SET not_before = now()")
        .execute(p)
        .await
        .unwrap();
    let (t2, e2) = claim_delivery(p).await.unwrap();
    sqlx::query("UPDATE lifecycle_outbox SET heartbeat_at = now() - interval '10 minutes'")
        .execute(p)
        .await
        .unwrap();
    let reaped: i32 = sqlx::query_scalar(
        "SELECT reap_stale_lifecycle(0::smallint, 255::smallint, interval '1 minute')",
    )
    .fetch_one(p)
    .await
    .unwrap();
    assert_eq!(reaped, 1);
    assert!(
        !complete_delivery(p, t2, e2, true).await,
        "fenced: the old claim is gone"
    );

    // The next claim succeeds and acks (deletes) the delivery; the dedup key stayed the same.
    // It carries the reactor kind's live task deadline (an operator's edit counts).
    sqlx::query("UPDATE kind_config SET task_deadline_secs = 7 WHERE kind = 'sink'")
        .execute(p)
        .await
        .unwrap();
    let claimed = converge_engine::db::queue::lifecycle_claim(
        p,
        converge_engine::ids::ShardRange::ALL,
        &converge_engine::ids::KindPair::new("sink", 1),
        10,
        "b",
    )
    .await
    .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].task_deadline_secs, 7);
    let (t3, e3) = (claimed[0].claim_token, claimed[0].claim_epoch);
    assert!(complete_delivery(p, t3, e3, true).await);
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM lifecycle_outbox")
        .fetch_one(p)
        .await
        .unwrap();
    assert_eq!(left, 0);
    let b = converge_engine::db::reactor_bindings::binding_get(p, "b1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((b.pending, b.failing, b.last_error), (0, 0, None));
}
