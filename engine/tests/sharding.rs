//! Dynamic sharding against a real database: `cluster_tiling` tiles the 256 shards among the
//! live members of each duty with no gap and no overlap, ignores the silent and the released,
//! tiles a pair's claims among exactly the brokers with a ready, non-draining worker for it;
//! `cluster_changed` is sent on a join, a leave and a change of what a broker can run, never
//! on a heartbeat; a [`Topology`] following the tiling adopts its member's new range; and a
//! drainer on the control range drains only inside it.

use std::{collections::BTreeMap, time::Duration};

use converge_engine::{
    db::cluster::{self, Tile},
    ids::{KindPair, ShardRange},
    testing::{TestDb, wait_for},
    topology::Topology,
};
use serde_json::{Value, json};
use sqlx::{PgPool, postgres::PgListener};
use tokio_util::sync::CancellationToken;

const LIVENESS: Duration = Duration::from_secs(6);

/// A worker list serving `pairs` as (kind, ready), draining or not.
fn workers(pairs: &[(&str, bool)], draining: bool) -> Value {
    json!([{
        "stream": 1, "name": "w", "sdk": "test/0", "principal": null, "peer": null,
        "kinds": pairs.iter().map(|(k, ready)| json!({"kind": k, "kind_version": 1, "ready": ready}))
            .collect::<Vec<_>>(),
        "max_inflight": 4, "inflight": 0, "connected_at": "2026-01-01T00:00:00Z",
        "draining": draining,
    }])
}

/// Inserts a member row stamped `age_secs` ago.
async fn member(pool: &PgPool, id: &str, role: &str, workers: Value, age_secs: i64) {
    sqlx::query(
        "INSERT INTO cluster_members (member_id, role, version, host, pid, started_at,
                                      heartbeat_at, workers)
         VALUES ($1, $2, 'test', 'h', 1, now(), now() - make_interval(secs => $3), $4)",
    )
    .bind(id)
    .bind(role)
    .bind(age_secs as f64)
    .bind(workers)
    .execute(pool)
    .await
    .unwrap();
}

/// The tiles of one duty (and pair), by member.
fn duty(tiles: &[Tile], duty: &str, kind: Option<&str>) -> BTreeMap<String, (i16, i16)> {
    tiles
        .iter()
        .filter(|t| t.duty == duty && t.kind.as_deref() == kind)
        .map(|t| (t.member_id.clone(), (t.lo, t.hi)))
        .collect()
}

/// The ranges, in member order, cover 0..=255 exactly once.
fn assert_tiles_all(ranges: &BTreeMap<String, (i16, i16)>) {
    let mut v: Vec<(i16, i16)> = ranges.values().copied().collect();
    v.sort();
    assert_eq!(v.first().map(|r| r.0), Some(0), "{ranges:?}");
    assert_eq!(v.last().map(|r| r.1), Some(255), "{ranges:?}");
    for w in v.windows(2) {
        assert_eq!(w[0].1 + 1, w[1].0, "a gap or an overlap: {ranges:?}");
    }
}

#[tokio::test]
async fn the_live_members_of_each_duty_tile_every_shard_once() {
    let db = TestDb::new().await;
    let pool = &db.pool;
    let none = json!([]);
    member(pool, "c1", "control", none.clone(), 0).await;
    member(pool, "c2", "control", none.clone(), 0).await;
    member(pool, "a1", "all", workers(&[("hello", true)], false), 0).await;
    member(
        pool,
        "b1",
        "broker",
        workers(&[("hello", true), ("other", false)], false),
        0,
    )
    .await;
    member(pool, "b2", "broker", workers(&[("hello", true)], true), 0).await;
    member(pool, "b3", "broker", workers(&[("other", true)], false), 0).await;
    // Silent past the liveness window, and released: neither counts.
    member(pool, "c0", "control", none.clone(), 60).await;
    member(pool, "b0", "broker", workers(&[("hello", true)], false), 0).await;
    sqlx::query("UPDATE cluster_members SET released_at = now() WHERE member_id = 'b0'")
        .execute(pool)
        .await
        .unwrap();

    let tiles = cluster::tiling(pool, LIVENESS).await.unwrap();
    let control = duty(&tiles, "control", None);
    assert_eq!(
        control.keys().collect::<Vec<_>>(),
        ["a1", "c1", "c2"],
        "control and all members, live and not released"
    );
    assert_tiles_all(&control);
    assert_eq!(control["a1"], (0, 84), "ranked by member id");

    let brokers = duty(&tiles, "broker", None);
    assert_eq!(brokers.keys().collect::<Vec<_>>(), ["a1", "b1", "b2", "b3"]);
    assert_tiles_all(&brokers);

    // hello: a1 and b1 have a ready worker; b2's is draining, b0 is released.
    let hello = duty(&tiles, "claim", Some("hello"));
    assert_eq!(hello.keys().collect::<Vec<_>>(), ["a1", "b1"]);
    assert_tiles_all(&hello);
    // other: only b3's worker is ready; it claims every shard.
    let other = duty(&tiles, "claim", Some("other"));
    assert_eq!(other, BTreeMap::from([("b3".to_string(), (0, 255))]));

    // Tiling 1 to 300 members: every shard once; past 256 the extra members get none.
    for n in [1usize, 2, 3, 5, 7, 16, 100, 256, 300] {
        sqlx::query("DELETE FROM cluster_members")
            .execute(pool)
            .await
            .unwrap();
        for i in 0..n {
            member(pool, &format!("m{i:03}"), "control", none.clone(), 0).await;
        }
        let control = duty(
            &cluster::tiling(pool, LIVENESS).await.unwrap(),
            "control",
            None,
        );
        assert_eq!(control.len(), n.min(256), "members with a range of {n}");
        assert_tiles_all(&control);
    }
}

/// The next `cluster_changed` within `within`, if any.
async fn changed(l: &mut PgListener, within: Duration) -> bool {
    tokio::time::timeout(within, l.recv()).await.is_ok()
}

#[tokio::test]
async fn cluster_changed_follows_joins_leaves_and_what_brokers_can_run_not_heartbeats() {
    let db = TestDb::new().await;
    let pool = &db.pool;
    let mut l = PgListener::connect_with(pool).await.unwrap();
    l.listen("cluster_changed").await.unwrap();
    let quiet = Duration::from_millis(300);
    let exec = |sql: &'static str| async move {
        sqlx::query(sql).execute(pool).await.unwrap();
    };

    member(pool, "b1", "broker", workers(&[("hello", true)], false), 0).await;
    assert!(changed(&mut l, Duration::from_secs(5)).await, "a join");
    // A heartbeat, and a worker list whose in-flight count moved: nothing to re-tile.
    exec("UPDATE cluster_members SET heartbeat_at = now(), released_at = NULL").await;
    exec("UPDATE cluster_members SET workers = jsonb_set(workers, '{0,inflight}', '3')").await;
    assert!(!changed(&mut l, quiet).await, "a heartbeat notified");
    // The worker turns unready: b1 no longer claims hello.
    exec("UPDATE cluster_members SET workers = jsonb_set(workers, '{0,kinds,0,ready}', 'false')")
        .await;
    assert!(changed(&mut l, Duration::from_secs(5)).await, "readiness");
    exec("UPDATE cluster_members SET released_at = now()").await;
    assert!(changed(&mut l, Duration::from_secs(5)).await, "a release");
    exec("DELETE FROM cluster_members").await;
    assert!(changed(&mut l, Duration::from_secs(5)).await, "a leave");
}

#[tokio::test]
async fn a_followed_topology_adopts_its_members_new_range() {
    let db = TestDb::new().await;
    let pool = &db.pool;
    let hello = KindPair::new("hello", 1);
    member(pool, "b1", "broker", workers(&[("hello", true)], false), 0).await;
    member(pool, "c1", "control", json!([]), 0).await;
    let t = Topology::new("b1");
    let stop = CancellationToken::new();
    let follow = tokio::spawn(t.clone().follow(pool.clone(), LIVENESS, stop.clone()));
    let whole = ShardRange { lo: 0, hi: 255 };
    wait_for(
        Duration::from_secs(10),
        "b1 claims every hello shard",
        || async { (t.claim(&hello) == whole).then_some(()) },
    )
    .await;
    // b1 is not a control member: its control loops keep every shard.
    assert_eq!(t.control(), whole);
    // A second broker with a ready hello worker joins (named to rank first).
    member(pool, "a0", "broker", workers(&[("hello", true)], false), 0).await;
    wait_for(
        Duration::from_secs(10),
        "b1 claims the upper half",
        || async { (t.claim(&hello) == ShardRange { lo: 128, hi: 255 }).then_some(()) },
    )
    .await;
    // The other broker goes silent: b1 takes every shard again once it leaves the window.
    sqlx::query("UPDATE cluster_members SET heartbeat_at = now() - interval '1 minute' WHERE member_id = 'a0'")
        .execute(pool)
        .await
        .unwrap();
    wait_for(
        Duration::from_secs(10),
        "b1 claims every shard again",
        || async { (t.claim(&hello) == whole).then_some(()) },
    )
    .await;
    stop.cancel();
    follow.await.unwrap();
}

/// A drainer configured with its process's control range drains only the results in it,
/// and takes a result in once a re-tile hands its shard to the process.
#[tokio::test]
async fn a_drainer_works_its_members_control_range() {
    use converge_engine::{
        drainer::{Drainer, DrainerConfig},
        topology::Shards,
    };
    let db = TestDb::new().await;
    let pool = &db.pool;
    db.leaf_kind("hello").await;
    let (id, _, _): (uuid::Uuid, String, i64) =
        sqlx::query_as("SELECT * FROM resource_apply('hello', 1, 'r', '{}', '{}', NULL)")
            .fetch_one(pool)
            .await
            .unwrap();
    // A result waiting in the outbox (a plain result is applied where it is fenced, so
    // one is written here as work_complete writes any other).
    sqlx::query(
        "INSERT INTO work_outbox (shard_id, resource_id, task_type, generation, ok, advance)
         SELECT shard_id, id, 'reconcile', generation, true, true FROM resources WHERE id = $1",
    )
    .bind(id)
    .execute(pool)
    .await
    .unwrap();
    let shard: i16 = sqlx::query_scalar("SELECT shard_of($1)")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap();
    // This member's control range is the half without the result's shard.
    let (other, own) = if shard < 128 {
        ((128, 255), (0, 127))
    } else {
        ((0, 127), (128, 255))
    };
    let t = Topology::new("c1");
    let control = |(lo, hi): (i16, i16)| Tile {
        member_id: "c1".into(),
        duty: "control".into(),
        kind: None,
        kind_version: None,
        lo,
        hi,
    };
    t.adopt(&[control(other)]);
    let (drainer, _) = Drainer::new(
        pool.clone(),
        DrainerConfig {
            shards: Shards::Control {
                topology: t.clone(),
                slice: 0,
                of: 1,
            },
            batch: 100,
            failsafe: Duration::from_millis(50),
            express: false,
        },
        None,
    );
    let stop = CancellationToken::new();
    let run = tokio::spawn(drainer.run(stop.clone()));
    let synced = || async {
        sqlx::query_scalar::<_, i64>("SELECT synced_gen FROM resources WHERE id = $1")
            .bind(id)
            .fetch_one(pool)
            .await
            .unwrap()
    };
    // Ten failsafe passes outside the result's shard leave it in the outbox.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(synced().await, 0, "a drainer drained outside its range");
    t.adopt(&[control(own)]);
    wait_for(
        Duration::from_secs(10),
        "the re-tiled drainer drains it",
        || async { (synced().await == 1).then_some(()) },
    )
    .await;
    stop.cancel();
    run.await.unwrap();
}
