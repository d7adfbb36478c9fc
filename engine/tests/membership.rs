//! The membership loop against a real database: a member's row appears with its roster of
//! workers, follows a worker's arrival without waiting for the refresh interval, a silent
//! member counts for nothing and is released, its row kept (NotReady) until the TTL removes
//! it, a released member that stamps again is live again, and the row goes at stop.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use converge_engine::{
    db::cluster::{self, Member, ServedKind, WorkerInfo},
    membership::{DEAD_AFTER, Membership, Roster},
    testing::{TestDb, wait_for},
};
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(20);

/// A roster the test changes by hand.
#[derive(Default)]
struct Hand {
    generation: AtomicU64,
    workers: Mutex<Vec<WorkerInfo>>,
    changed: Arc<Notify>,
}

impl Hand {
    fn connect(&self, name: &str, kind: &str) {
        let mut ws = self.workers.lock().unwrap();
        let stream = ws.len() as u64 + 1;
        ws.push(WorkerInfo {
            stream,
            name: name.into(),
            sdk: "rust/0.1.0".into(),
            principal: None,
            peer: None,
            kinds: vec![ServedKind {
                kind: kind.into(),
                kind_version: 1,
                ready: true,
            }],
            max_inflight: 4,
            inflight: 0,
            connected_at: chrono::Utc::now(),
            draining: false,
            dry_runs: false,
        });
        drop(ws);
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.changed.notify_one();
    }
}

impl Roster for Hand {
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    fn workers(&self) -> Vec<WorkerInfo> {
        self.workers.lock().unwrap().clone()
    }

    fn changed(&self) -> Arc<Notify> {
        self.changed.clone()
    }
}

fn member(id: &str) -> Member {
    Member {
        id: id.into(),
        role: converge_engine::words::MemberRole::Broker,
        version: "test".into(),
        host: "here".into(),
        pid: 1,
        addresses: json!({"grpc": "127.0.0.1:9090"}),
        started_at: chrono::Utc::now(),
    }
}

/// The names of `id`'s workers, if its row is live.
async fn workers_of(db: &TestDb, id: &str) -> Option<Vec<String>> {
    let rows = cluster::members(&db.pool, DEAD_AFTER).await.unwrap();
    let row = rows.into_iter().find(|m| m.member.id == id && m.live)?;
    Some(row.workers.0.into_iter().map(|w| w.name).collect())
}

#[tokio::test]
async fn a_member_publishes_its_roster_releases_the_silent_and_leaves_at_stop() {
    let db = TestDb::new().await;
    // Members that stopped stamping: an hour ago (past the 10 min TTL: released, then
    // removed) and a minute ago (released, kept listed NotReady). Neither is counted.
    let gone = Hand::default();
    gone.connect("ghost", "vpc");
    for (id, silent) in [("dead-1", "1 hour"), ("dead-2", "1 minute")] {
        cluster::beat(&db.pool, &member(id), Some(&gone.workers()))
            .await
            .unwrap();
        sqlx::query(
            "UPDATE cluster_members SET heartbeat_at = now() - $2::interval WHERE member_id = $1",
        )
        .bind(id)
        .bind(silent)
        .execute(&db.pool)
        .await
        .unwrap();
        assert_eq!(workers_of(&db, id).await, None);
    }
    assert!(
        !cluster::served(&db.pool, "vpc", 1, DEAD_AFTER)
            .await
            .unwrap()
    );

    let roster = Arc::new(Hand::default());
    roster.connect("w1", "hello");
    let stop = CancellationToken::new();
    let run = tokio::spawn(
        Membership::new(db.pool.clone(), member("me-1"))
            .with_gc_after(Duration::from_secs(600))
            .with_roster(roster.clone(), Arc::new(Notify::new()))
            .run(stop.clone()),
    );
    wait_for(T, "my row with w1", || async {
        (workers_of(&db, "me-1").await? == ["w1"]).then_some(())
    })
    .await;
    assert!(
        cluster::served(&db.pool, "hello", 1, DEAD_AFTER)
            .await
            .unwrap()
    );
    roster.connect("w2", "hello");
    wait_for(T, "my row with w1 and w2", || async {
        (workers_of(&db, "me-1").await? == ["w1", "w2"]).then_some(())
    })
    .await;
    let coverage = cluster::coverage(&db.pool, DEAD_AFTER).await.unwrap();
    assert_eq!(coverage.len(), 1, "{coverage:?}");
    assert_eq!((coverage[0].workers, coverage[0].ready), (2, 2));

    // After the boot grace: dead-2 released and listed NotReady, dead-1 removed.
    wait_for(T, "dead-2 released, dead-1 removed", || async {
        let rows: Vec<(String, bool)> = sqlx::query_as(
            "SELECT member_id, released_at IS NOT NULL FROM cluster_members
             WHERE member_id LIKE 'dead-%' ORDER BY 1",
        )
        .fetch_all(&db.pool)
        .await
        .unwrap();
        (rows == [("dead-2".to_string(), true)]).then_some(())
    })
    .await;
    let listed = cluster::members(&db.pool, DEAD_AFTER).await.unwrap();
    let dead2 = listed.iter().find(|m| m.member.id == "dead-2").unwrap();
    assert!(!dead2.live, "a silent member is listed NotReady");
    assert_eq!(workers_of(&db, "dead-2").await, None);
    // It wakes up (a paused VM): its stamp says it had been released, and it is live again.
    assert!(
        cluster::beat(&db.pool, &member("dead-2"), None)
            .await
            .unwrap()
    );
    assert_eq!(workers_of(&db, "dead-2").await.unwrap(), ["ghost"]);
    assert!(
        !cluster::beat(&db.pool, &member("dead-2"), None)
            .await
            .unwrap()
    );
    cluster::leave(&db.pool, "dead-2").await.unwrap();

    stop.cancel();
    run.await.unwrap();
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM cluster_members")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
}
