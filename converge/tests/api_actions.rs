//! Operator actions against the real `converge` and a real hello worker: quarantine drops the
//! pending task and unquarantine re-queues it, reconcile re-runs a synced resource, and delete
//! removes a resource with its composed subtree and their queued work.

mod common;

use std::time::Duration;

use common::{Converge, Worker};
use converge_control::testing::wait_for;
use serde_json::{Value, json};
use uuid::Uuid;

const T: Duration = Duration::from_secs(30);

fn hello(name: &str, spec: Value) -> Value {
    json!({"kind": "hello", "kind_version": 1, "name": name, "spec": spec})
}

async fn setup() -> Converge {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(30)).await;
    c
}

/// Sends `method` to `/api/v1/resources/{target}{suffix}`; returns (status, body).
async fn call(c: &Converge, method: reqwest::Method, target: &str, suffix: &str) -> (u16, Value) {
    let r = c
        .client
        .request(
            method,
            format!("{}/api/v1/resources/{target}{suffix}", c.http),
        )
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn post(c: &Converge, target: &str, action: &str) -> (u16, Value) {
    call(c, reqwest::Method::POST, target, &format!("/{action}")).await
}

/// Queue rows of these resources.
async fn queued(c: &Converge, ids: &[Uuid]) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM work_queue WHERE resource_id = ANY($1)")
        .bind(ids)
        .fetch_one(&c.db.pool)
        .await
        .unwrap()
}

fn uid(v: &Value) -> Uuid {
    v["uid"].as_str().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn quarantine_drops_pending_work_and_unquarantine_requeues_it() {
    let c = setup().await;
    // No worker yet: the task stays queued.
    c.apply(&hello("q", json!({"greeting": "hi"}))).await;
    let r = c.get("hello", "q").await.unwrap();
    assert_eq!(r["phase"], "Reconciling");
    assert_eq!(r["work"]["claimed"], false, "{r}");
    let (s, body) = post(&c, "hello/q", "reconcile").await;
    assert_eq!(
        (s, &body),
        (202, &json!({"status": "already_queued"})),
        "a queued task is not duplicated"
    );
    assert!(
        r["work"]["not_before"].is_null(),
        "new work is due at once: {r}"
    );
    // A task waiting out a backoff shows when it is due; a manual reconcile lifts it.
    sqlx::query(
        "UPDATE work_queue SET not_before = now() + interval '1 hour' WHERE resource_id = $1",
    )
    .bind(uid(&r))
    .execute(&c.db.pool)
    .await
    .unwrap();
    let r = c.get("hello", "q").await.unwrap();
    assert!(r["work"]["not_before"].is_string(), "{r}");
    let (s, body) = post(&c, "hello/q", "reconcile").await;
    assert_eq!(
        (s, &body),
        (202, &json!({"status": "queued"})),
        "the backoff is lifted"
    );
    let r = c.get("hello", "q").await.unwrap();
    assert!(r["work"]["not_before"].is_null(), "{r}");

    let (s, body) = post(&c, "hello/q", "quarantine").await;
    assert_eq!((s, &body), (200, &json!({"quarantined": true})));
    let r = c.get("hello", "q").await.unwrap();
    assert_eq!(r["phase"], "Quarantined");
    assert!(r["work"].is_null(), "the pending task is dropped: {r}");
    assert_eq!(queued(&c, &[uid(&r)]).await, 0);
    let (s, _) = post(&c, "hello/q", "quarantine").await;
    assert_eq!(s, 200, "quarantine is idempotent");
    let (s, body) = post(&c, "hello/q", "reconcile").await;
    assert_eq!(s, 409, "a quarantined resource is not reconciled: {body}");
    // A spec edit while quarantined is stored but schedules nothing.
    c.apply(&hello("q", json!({"greeting": "hey"}))).await;
    let r = c.get("hello", "q").await.unwrap();
    assert_eq!(
        (r["phase"].as_str(), r["generation"].as_i64()),
        (Some("Quarantined"), Some(2))
    );
    assert!(r["work"].is_null(), "{r}");

    let (s, body) = post(&c, "hello/q", "unquarantine").await;
    assert_eq!((s, &body), (200, &json!({"quarantined": false})));
    let r = c.get("hello", "q").await.unwrap();
    assert_eq!(r["phase"], "Reconciling");
    assert_eq!(
        r["work"]["generation"], 2,
        "re-queued at the live generation: {r}"
    );

    let _w = Worker::hello(&c.broker, "w1", &[]);
    let r = c
        .wait_resource("hello", "q", "Ready after unquarantine", T, |v| {
            v["phase"] == "Ready"
        })
        .await;
    assert_eq!(r["status"]["message"], "hey, q!");
    let (s, _) = post(&c, "hello/q", "unquarantine").await;
    assert_eq!(s, 200, "unquarantining a live resource is a no-op");

    for action in ["quarantine", "unquarantine", "reconcile"] {
        let (s, body) = post(&c, "hello/nope", action).await;
        assert_eq!(s, 404, "{action}: {body}");
        assert!(
            body["detail"].as_str().unwrap().contains("hello/nope"),
            "{body}"
        );
    }
    c.stop().await;
}

fn done_lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("done"))
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn reconcile_runs_a_synced_resource_again() {
    let c = setup().await;
    let log = std::env::temp_dir().join(format!("converge-reconcile-{}.log", Uuid::new_v4()));
    let _w = Worker::hello(&c.broker, "w1", &[("HELLO_LOG", log.to_str().unwrap())]);
    c.apply(&hello("again", json!({}))).await;
    let before = c
        .wait_resource("hello", "again", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    wait_for(T, "the first run logged", || async {
        (done_lines(&log) == 1).then_some(())
    })
    .await;

    let (s, body) = post(&c, "hello/again", "reconcile").await;
    assert_eq!((s, &body), (202, &json!({"status": "queued"})));
    wait_for(T, "the handler ran a second time", || async {
        (done_lines(&log) == 2).then_some(())
    })
    .await;
    let after = c
        .wait_resource("hello", "again", "the manual task drained", T, |v| {
            v["work"].is_null()
        })
        .await;
    assert_eq!(after["phase"], "Ready");
    assert_eq!(
        (after["generation"].as_i64(), after["synced_gen"].as_i64()),
        (Some(1), Some(1)),
        "a manual reconcile does not bump the generation"
    );
    // hello's status is a pure function of the spec, so nothing else changes either.
    assert_eq!(after["status"], before["status"]);
    let _ = std::fs::remove_file(&log);
    c.stop().await;
}

/// Inserts a composed child (behind its spec, so schedulable) straight into the table.
async fn child(c: &Converge, kind: &str, name: &str, owner: Uuid, root: Uuid) -> Uuid {
    sqlx::query_scalar(
        "INSERT INTO resources (id, kind, name, owner_id, root_id, shard_id)
         SELECT g, $1, $2, $3, $4, shard_of(g) FROM (SELECT gen_random_uuid() AS g) x
         RETURNING id",
    )
    .bind(kind)
    .bind(name)
    .bind(owner)
    .bind(root)
    .fetch_one(&c.db.pool)
    .await
    .unwrap()
}

async fn schedule(c: &Converge, ids: &[Uuid]) {
    let _: i32 = sqlx::query_scalar("SELECT schedule_eligible($1)")
        .bind(ids)
        .fetch_one(&c.db.pool)
        .await
        .unwrap();
}

async fn existing(c: &Converge, ids: &[Uuid]) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM resources WHERE id = ANY($1)")
        .bind(ids)
        .fetch_one(&c.db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_removes_the_resource_its_subtree_and_their_work() {
    let c = setup().await;
    // No worker: every task stays queued, so the delete has queue rows to remove.
    let (_, _, d) = c.apply(&hello("doomed", json!({}))).await;
    let (_, _, keep) = c.apply(&hello("keeper", json!({}))).await;
    let (root, keep) = (uid(&d), uid(&keep));
    let net = child(&c, "hello", "d-net", root, root).await;
    let vm = child(&c, "hello", "d-vm", root, root).await;
    let disk = child(&c, "hello", "d-disk", vm, root).await;
    schedule(&c, &[net, vm, disk]).await;
    let tree = [root, net, vm, disk];
    assert_eq!(queued(&c, &tree).await, 4);

    // A mid-level child goes with its own subtree only.
    // hello has no finalizer: with nothing hanging below them, the marked rows go at once.
    let (s, body) = call(&c, reqwest::Method::DELETE, "hello/d-vm", "").await;
    assert_eq!(
        (s, &body),
        (202, &json!({"phase": "Deleting", "marked": 2}))
    );
    assert_eq!(existing(&c, &[vm, disk]).await, 0);
    assert_eq!(queued(&c, &[vm, disk]).await, 0);
    assert_eq!(existing(&c, &[root, net]).await, 2);
    assert_eq!(queued(&c, &[root, net]).await, 2);

    let (s, body) = call(&c, reqwest::Method::DELETE, "hello/doomed", "").await;
    assert_eq!(
        (s, &body),
        (202, &json!({"phase": "Deleting", "marked": 2}))
    );
    assert!(c.get("hello", "doomed").await.is_none());
    assert!(c.get("hello", "d-net").await.is_none());
    assert_eq!(existing(&c, &tree).await, 0);
    assert_eq!(
        queued(&c, &tree).await,
        0,
        "no queue row outlives its resource"
    );
    assert_eq!(
        existing(&c, &[keep]).await,
        1,
        "other resources are untouched"
    );
    assert_eq!(queued(&c, &[keep]).await, 1);

    let (s, body) = call(&c, reqwest::Method::DELETE, "hello/doomed", "").await;
    assert_eq!(s, 404, "{body}");

    // The name is free again, and a worker that arrives later finds nothing stale.
    let _w = Worker::hello(&c.broker, "w1", &[]);
    let (s, result, _) = c.apply(&hello("doomed", json!({"greeting": "back"}))).await;
    assert_eq!((s, result.as_str()), (201, "created"));
    let r = c
        .wait_resource("hello", "doomed", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert_eq!(r["status"]["message"], "back, doomed!");
    c.stop().await;
}
