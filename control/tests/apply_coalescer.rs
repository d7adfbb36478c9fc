//! Single applies written in batches (`app::apply_coalescer`) against a real PostgreSQL:
//! applies queued together share one transaction, each still gets its own answer, writes of
//! one resource keep their order, the actor of each is recorded, and an apply the database
//! refuses fails alone.

use converge_control::{
    app::apply_coalescer::ApplyCoalescer,
    db::resources::{Applied, ApplyItem},
    testing::TestDb,
};
use converge_engine::words::ApplyResult;
use futures::future::join_all;
use serde_json::{Value, json};

fn item(kind: &str, name: &str, spec: Value) -> ApplyItem {
    ApplyItem {
        kind: kind.into(),
        kind_version: 1,
        name: name.into(),
        spec,
        labels: json!({}),
        provider_config_ref: None,
    }
}

/// Applies `items` concurrently (each as `actor`), in order of submission.
async fn apply_all(
    c: &ApplyCoalescer,
    items: Vec<(Option<&str>, ApplyItem)>,
) -> Vec<Result<Applied, sqlx::Error>> {
    join_all(items.into_iter().map(|(actor, i)| c.apply(actor, i))).await
}

#[tokio::test]
async fn concurrent_applies_share_transactions_and_each_gets_its_answer() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let c = ApplyCoalescer::start(db.pool.clone());

    let n = 200;
    let items = (0..n)
        .map(|i| (None, item("hello", &format!("r{i}"), json!({"i": i}))))
        .collect();
    let out = apply_all(&c, items).await;
    for (i, r) in out.iter().enumerate() {
        let a = r.as_ref().unwrap_or_else(|e| panic!("r{i}: {e}"));
        assert_eq!((a.result, a.generation), (ApplyResult::Created, 1), "r{i}");
    }
    // Rows created in one transaction share its xmin: far fewer transactions than applies.
    let txs: i64 =
        sqlx::query_scalar("SELECT count(DISTINCT xmin::text) FROM resources WHERE kind = 'hello'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert!(txs < 10, "{n} applies took {txs} transactions");
    let queued: i64 = sqlx::query_scalar("SELECT count(*) FROM work_queue")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(queued, n, "every created resource is scheduled once");

    // The same documents again: nothing changes.
    let items = (0..n)
        .map(|i| (None, item("hello", &format!("r{i}"), json!({"i": i}))))
        .collect();
    for r in apply_all(&c, items).await {
        assert_eq!(r.unwrap().result, ApplyResult::Unchanged);
    }
}

#[tokio::test]
async fn writes_of_one_resource_keep_their_order_and_their_actor() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let c = ApplyCoalescer::start(db.pool.clone());

    // Ten writes of `one`, by two actors in turn, beside writes of other resources.
    let mut items = Vec::new();
    for v in 0..10 {
        let actor = if v % 2 == 0 { Some("alice") } else { None };
        items.push((actor, item("hello", "one", json!({"v": v}))));
        items.push((None, item("hello", &format!("other{v}"), json!({}))));
    }
    let out = apply_all(&c, items).await;
    let ones: Vec<Applied> = out
        .into_iter()
        .step_by(2)
        .map(|r| r.expect("an apply of one"))
        .collect();
    assert_eq!(ones[0].result, ApplyResult::Created);
    for (v, a) in ones.iter().enumerate() {
        assert_eq!(a.generation, v as i64 + 1, "write {v} of one");
        if v > 0 {
            assert_eq!(a.result, ApplyResult::Configured, "write {v} of one");
        }
    }
    let spec: Value = sqlx::query_scalar("SELECT spec FROM resources WHERE name = 'one'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        spec,
        json!({"v": 9}),
        "the last write submitted is the one kept"
    );
    let actor: Option<String> = sqlx::query_scalar(
        "SELECT actor FROM resource_events WHERE name = 'one' ORDER BY id LIMIT 1",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(actor.as_deref(), Some("alice"), "the creation is alice's");
    // Every event of `one` that names a generation names the actor of that write.
    let events: Vec<(i64, Option<String>)> = sqlx::query_as(
        "SELECT generation, actor FROM resource_events
         WHERE name = 'one' AND generation IS NOT NULL ORDER BY id",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert!(!events.is_empty());
    for (generation, actor) in &events {
        let want = if generation % 2 == 1 {
            Some("alice")
        } else {
            None
        };
        assert_eq!(actor.as_deref(), want, "events {events:?}");
    }
}

#[tokio::test]
async fn an_apply_the_database_refuses_fails_alone() {
    let db = TestDb::new().await;
    db.leaf_kind("hello").await;
    let c = ApplyCoalescer::start(db.pool.clone());

    // `nokind` is not registered: its write fails the batch statement it is in, and is
    // then retried alone; the others are written.
    let items = vec![
        (None, item("hello", "a", json!({}))),
        (None, item("nokind", "b", json!({}))),
        (None, item("hello", "c", json!({}))),
    ];
    let out = apply_all(&c, items).await;
    assert_eq!(out[0].as_ref().unwrap().result, ApplyResult::Created);
    assert_eq!(out[2].as_ref().unwrap().result, ApplyResult::Created);
    match &out[1] {
        Err(sqlx::Error::Database(d)) => assert!(d.is_foreign_key_violation(), "{d}"),
        other => panic!("nokind/b: {other:?}"),
    }
    let names: Vec<String> = sqlx::query_scalar("SELECT name FROM resources ORDER BY name")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert_eq!(names, ["a", "c"]);
}
