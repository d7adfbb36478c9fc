//! Dynamic sharding with the real `converge` binary: one `ROLE=all` process and `ROLE=broker`
//! peers on one database, real hello workers, `GET /api/v1/cluster` as the witness.
//!
//! - Three brokers with a hello worker each tile hello's 256 shards between them, with no
//!   gap and no overlap; one is SIGKILLed and the two left re-tile once its stamp leaves the
//!   liveness window; a fourth joins and all three re-tile; through all of it 3,000 leaves
//!   reach Ready, and only a resource the killed broker's worker had started runs twice.
//! - A worker connected to one broker of three is served from every shard: that broker's
//!   claim range of the kind is all 256 shards and every resource reaches Ready.

mod common;

use std::{collections::HashMap, path::Path, time::Duration};

use common::{Converge, Peer, Worker};
use converge_control::testing::wait_for;
use converge_testkit::Method;
use serde_json::{Value, json};
use tokio::time::Instant;

const T: Duration = Duration::from_secs(60);

/// Starts a `ROLE=broker` peer of `c`.
async fn broker(c: &Converge) -> Peer {
    c.spawn_broker(&[]).await
}

/// The `(lo, hi)` hello claim ranges of the Ready members, by member id.
fn hello_claims(cluster: &Value) -> HashMap<String, (i64, i64)> {
    let mut out = HashMap::new();
    for m in cluster["members"].as_array().into_iter().flatten() {
        if m["status"] != "Ready" {
            continue;
        }
        for c in m["claims"].as_array().into_iter().flatten() {
            if c["kind"] == "hello" {
                let id = m["id"].as_str().unwrap_or_default().to_owned();
                out.insert(id, (c["lo"].as_i64().unwrap(), c["hi"].as_i64().unwrap()));
            }
        }
    }
    out
}

/// Whether `ranges` are `n` ranges covering 0..=255 exactly once.
fn tiles(ranges: &HashMap<String, (i64, i64)>, n: usize) -> bool {
    let mut v: Vec<(i64, i64)> = ranges.values().copied().collect();
    v.sort();
    v.len() == n
        && v.first().map(|r| r.0) == Some(0)
        && v.last().map(|r| r.1) == Some(255)
        && v.windows(2).all(|w| w[0].1 + 1 == w[1].0)
}

/// Waits until `n` brokers' hello claim ranges tile the shards; returns them and how long
/// it took.
async fn tiled_by(c: &Converge, n: usize, what: &str) -> (HashMap<String, (i64, i64)>, Duration) {
    let started = Instant::now();
    let ranges = wait_for(T, what, || async {
        let (s, body) = c.call(Method::GET, "cluster", None).await;
        let ranges = hello_claims(&body);
        (s == 200 && tiles(&ranges, n)).then_some(ranges)
    })
    .await;
    (ranges, started.elapsed())
}

/// Applies `n` hello leaves named `{prefix}-{i}`, in batches.
async fn apply_leaves(c: &Converge, prefix: &str, n: usize, sleep_ms: u64) {
    let items: Vec<Value> = (0..n)
        .map(|i| {
            json!({"kind": "hello", "kind_version": 1, "name": format!("{prefix}-{i}"),
                   "spec": {"sleep_ms": sleep_ms}})
        })
        .collect();
    for chunk in items.chunks(500) {
        let (s, body) = c
            .call(Method::POST, "resources:batch", Some(json!(chunk)))
            .await;
        assert_eq!(s, 200, "{body}");
        assert_eq!(body["failed"], 0, "{body}");
    }
}

/// How many hello resources are Ready.
async fn ready_count(c: &Converge) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM resources WHERE kind = 'hello' AND phase = 'Ready'")
        .fetch_one(&c.db.pool)
        .await
        .unwrap()
}

/// How many times each resource was started, from the workers' HELLO_LOG files.
fn starts(logs: &[&Path]) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for path in logs {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for line in text.lines() {
            let mut f = line.split_whitespace();
            if f.next() == Some("start")
                && let Some(name) = f.next()
            {
                *out.entry(name.to_string()).or_default() += 1;
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn brokers_tile_each_kinds_shards_and_re_tile_on_a_crash_and_a_join() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(0)).await;
    let dir = std::env::temp_dir().join(format!("sharding-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = |n: &str| dir.join(format!("{n}.log"));
    let mut b2 = broker(&c).await;
    let b3 = broker(&c).await;
    let worker = |broker: &str, name: &str| {
        Worker::hello(broker, name, &[("HELLO_LOG", log(name).to_str().unwrap())])
    };
    let _w1 = worker(&c.broker, "w1");
    let _w2 = worker(&b2.broker, "w2");
    let _w3 = worker(&b3.broker, "w3");
    let (three, took) = tiled_by(&c, 3, "three brokers tile hello's shards").await;
    eprintln!("three brokers: {three:?} ({took:?} after the workers started)");

    const N: usize = 3000;
    apply_leaves(&c, "leaf", N, 20).await;
    wait_for(T, "a tenth of the leaves Ready", || async {
        (ready_count(&c).await >= (N / 10) as i64).then_some(())
    })
    .await;
    // A crash: the two brokers left divide the shards once its stamp is older than the
    // liveness window (MEMBER_DEAD_AFTER, 6 s) and their next re-read.
    b2.child.kill().await.unwrap();
    let (two, took) = tiled_by(&c, 2, "two brokers re-tile after a crash").await;
    eprintln!("after the crash: {two:?} in {took:?}");
    // A join: a fourth broker with a worker, and three tile again.
    let b4 = broker(&c).await;
    let _w4 = worker(&b4.broker, "w4");
    let (again, took) = tiled_by(&c, 3, "three brokers re-tile after a join").await;
    eprintln!("after the join: {again:?} in {took:?} (from the peer's /readyz)");

    wait_for(Duration::from_secs(120), "every leaf Ready", || async {
        (ready_count(&c).await == N as i64).then_some(())
    })
    .await;
    let (w1, w2, w3, w4) = (log("w1"), log("w2"), log("w3"), log("w4"));
    let all = starts(&[&w1, &w2, &w3, &w4]);
    let orphaned = starts(&[&w2]);
    for i in 0..N {
        let name = format!("leaf-{i}");
        let n = all.get(&name).copied().unwrap_or(0);
        assert!(n >= 1, "{name} never ran but is Ready");
        // Only what the crashed broker's worker had started may run again (its leases were
        // released when the broker was presumed dead).
        assert!(
            n == 1 || orphaned.contains_key(&name),
            "{name} ran {n} times, none of them on the crashed broker's worker"
        );
    }
    let twice = all.values().filter(|&&n| n > 1).count();
    eprintln!("{N} leaves Ready; {twice} ran twice (started by the crashed broker's worker)");
    drop((b3, b4));
    c.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_on_one_broker_of_three_is_served_from_every_shard() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(0)).await;
    let b2 = broker(&c).await;
    let b3 = broker(&c).await;
    let _w = Worker::hello(&b3.broker, "only", &[]);
    let (ranges, _) = tiled_by(&c, 1, "the one broker with a worker claims every shard").await;
    assert_eq!(ranges.values().next(), Some(&(0, 255)));
    // Its process is the third broker: the others have no worker, so no claim range.
    let (_, cluster) = c.call(Method::GET, "cluster", None).await;
    let holder = cluster["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["claims"].as_array().is_some_and(|c| !c.is_empty()))
        .unwrap();
    assert_eq!(
        holder["addresses"]["grpc"]
            .as_str()
            .map(|a| b3.broker.ends_with(a)),
        Some(true),
        "{cluster}"
    );
    // Every member has its role's share.
    for m in cluster["members"].as_array().unwrap() {
        assert!(m["shards"]["lo"].is_i64(), "{m}");
    }
    const N: usize = 300;
    apply_leaves(&c, "one", N, 0).await;
    wait_for(T, "every resource Ready through one broker", || async {
        (ready_count(&c).await == N as i64).then_some(())
    })
    .await;
    drop((b2, b3));
    c.stop().await;
}
