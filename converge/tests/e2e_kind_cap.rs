//! The per-kind global concurrency cap against the real `converge` and four hello-worker
//! processes: with max_inflight = 5 and 200 ready tasks the number of live leases never
//! exceeds 5; raising the cap live lets more run at once; every resource finishes.

mod common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicI64, Ordering},
    },
    time::Duration,
};

use common::{Converge, Worker};
use serde_json::json;

async fn ready(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM resources WHERE kind = 'hello' AND phase = 'Ready'")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cap_bounds_concurrency_across_workers_and_is_live_editable() {
    let c = Converge::start(&[]).await;
    let mut m = Converge::hello_manifest(30);
    m["max_inflight"] = 5.into();
    c.apply_manifest(&m).await;
    // Sample live leases until the cap is raised.
    let max_seen = Arc::new(AtomicI64::new(0));
    let raised = Arc::new(AtomicBool::new(false));
    let after_raise = Arc::new(AtomicI64::new(0));
    let sampler = {
        let (pool, max_seen, raised, after) = (
            c.db.pool.clone(),
            max_seen.clone(),
            raised.clone(),
            after_raise.clone(),
        );
        tokio::spawn(async move {
            loop {
                let n = common::hello_leases(&pool).await;
                if raised.load(Ordering::SeqCst) {
                    after.fetch_max(n, Ordering::SeqCst);
                } else {
                    max_seen.fetch_max(n, Ordering::SeqCst);
                }
                if ready(&pool).await >= 200 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    // The whole backlog exists before any worker does: on a loaded machine applies can be
    // slower than the capped workers, and then no cap would ever be reached.
    for i in 0..200 {
        c.apply(&json!({"kind": "hello", "kind_version": 1, "name": format!("r{i}"), "spec": {"sleep_ms": 100}}))
            .await;
    }
    let _workers: Vec<Worker> = (0..4)
        .map(|i| {
            Worker::hello(
                &c.broker,
                &format!("w{i}"),
                &[("WORKER_MAX_PARALLEL", "16")],
            )
        })
        .collect();
    converge_control::testing::wait_for(
        Duration::from_secs(60),
        "60 resources Ready under cap 5",
        || async { (ready(&c.db.pool).await >= 60).then_some(()) },
    )
    .await;
    let under_five = max_seen.load(Ordering::SeqCst);
    raised.store(true, Ordering::SeqCst);
    let cfg = json!({"max_inflight": 12, "task_deadline_seconds": 30, "resync_interval_seconds": 0,
                     "orphan_grace_seconds": 0, "max_transient_attempts": 0});
    let r = c
        .client
        .put(format!("{}/api/v1/kinds/hello/versions/1/config", c.http))
        .json(&cfg)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    tokio::time::timeout(Duration::from_secs(90), sampler)
        .await
        .expect("all 200 finish")
        .unwrap();

    assert!(
        (1..=5).contains(&under_five),
        "cap 5 was exceeded: {under_five} live leases"
    );
    let after = after_raise.load(Ordering::SeqCst);
    assert!(
        (6..=12).contains(&after),
        "after raising the cap to 12 the peak was {after}"
    );
    assert_eq!(ready(&c.db.pool).await, 200);
    c.stop().await;
}
