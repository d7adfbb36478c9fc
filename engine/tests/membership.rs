//! The membership loop against a real database: a member's row appears with its roster of
//! workers, follows a worker's arrival without waiting for the refresh interval, a silent
//! member's row is removed (and counts for nothing meanwhile), and the row goes at stop.

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
        role: "broker".into(),
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
    let row = rows.into_iter().find(|m| m.member.id == id)?;
    Some(row.workers.0.into_iter().map(|w| w.name).collect())
}

#[tokio::test]
async fn a_member_publishes_its_roster_removes_the_silent_and_leaves_at_stop() {
    let db = TestDb::new().await;
    // A member that stopped stamping an hour ago: not listed, not counted, then removed.
    let dead = member("dead-1");
    let gone = Hand::default();
    gone.connect("ghost", "vpc");
    cluster::beat(&db.pool, &dead, Some(&gone.workers()))
        .await
        .unwrap();
    sqlx::query(
        "UPDATE cluster_members SET heartbeat_at = now() - interval '1 hour' WHERE member_id = $1",
    )
    .bind(&dead.id)
    .execute(&db.pool)
    .await
    .unwrap();
    assert_eq!(workers_of(&db, "dead-1").await, None);
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

    wait_for(T, "the silent member's row removed", || async {
        let n: i64 =
            sqlx::query_scalar("SELECT count(*) FROM cluster_members WHERE member_id = 'dead-1'")
                .fetch_one(&db.pool)
                .await
                .unwrap();
        (n == 0).then_some(())
    })
    .await;

    stop.cancel();
    run.await.unwrap();
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM cluster_members")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
}
