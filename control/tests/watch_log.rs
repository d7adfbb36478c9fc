//! The watches' event-log tail against a real PostgreSQL: an event whose transaction commits
//! after a later id's is still delivered, in id order; concurrent writers that commit, roll
//! back and interleave lose no event to a watch and repeat none; a watch resumed from a cursor
//! gets exactly what followed it; and the limit on open watches holds.

use std::{sync::Arc, time::Duration};

use converge_control::{
    app::watch::{ACTIVE_POLL, OpenError, Watch, WatchConfig, WatchHub},
    db::events::EventFilter,
    testing::TestDb,
};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(30);
/// Transactions per writer in the concurrency test.
const WRITES: u64 = 40;

fn hub(db: &TestDb, max_watchers: usize) -> Arc<WatchHub> {
    WatchHub::start(
        db.pool.clone(),
        WatchConfig { max_watchers },
        CancellationToken::new(),
    )
}

/// Inserts a resource in `tx` (its `created` event is written by the insert's trigger) and
/// returns that event's id.
async fn create_in(tx: &mut sqlx::PgConnection, name: &str) -> i64 {
    sqlx::query(
        "INSERT INTO resources (id, kind, name, shard_id)
         SELECT g, 'hello', $1, shard_of(g) FROM (SELECT gen_random_uuid() AS g) x",
    )
    .bind(name)
    .execute(&mut *tx)
    .await
    .unwrap();
    sqlx::query_scalar("SELECT max(id) FROM resource_events WHERE name = $1")
        .bind(name)
        .fetch_one(&mut *tx)
        .await
        .unwrap()
}

/// Everything `w` delivers until it has delivered `want` events (or `T` passes).
async fn collect(w: &mut Watch, want: usize) -> Vec<i64> {
    let mut got = Vec::new();
    let until = tokio::time::Instant::now() + T;
    while got.len() < want {
        let batch = tokio::time::timeout_at(until, w.next())
            .await
            .unwrap_or_else(|_| panic!("only {} of {want} events arrived: {got:?}", got.len()))
            .expect("the watch ended")
            .expect("the log could be read");
        got.extend(batch.iter().map(|e| e.id));
    }
    got
}

async fn committed_ids(pool: &PgPool, after: i64) -> Vec<i64> {
    sqlx::query_scalar("SELECT id FROM resource_events WHERE id > $1 ORDER BY id")
        .bind(after)
        .fetch_all(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_sequence_hands_out_ids_one_at_a_time() {
    // The horizon's proof assumes it (db::events::horizon_candidate): a cached block of ids
    // would let a session insert an id below one another session already read.
    let db = TestDb::new().await;
    let cache: i64 = sqlx::query_scalar(
        "SELECT seqcache FROM pg_sequence
         WHERE seqrelid = pg_get_serial_sequence('resource_events', 'id')::regclass",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(cache, 1);
}

#[tokio::test]
async fn an_event_committed_after_a_later_id_is_delivered_first_and_once() {
    let db = TestDb::new().await;
    let hub = hub(&db, 8);
    let mut w = hub.open(EventFilter::default(), None).await.unwrap();

    // A draws the lower id and stays open; B draws the next one and commits.
    let mut a = db.pool.begin().await.unwrap();
    let first = create_in(&mut a, "slow").await;
    let mut b = db.pool.begin().await.unwrap();
    let second = create_in(&mut b, "fast").await;
    assert!(first < second);
    b.commit().await.unwrap();
    // Several polls with B visible and A not: a tail reading `id > cursor` would send B now
    // and move past A for good. (Not a timing assertion: the order below is.)
    tokio::time::sleep(ACTIVE_POLL * 5).await;
    a.commit().await.unwrap();

    assert_eq!(collect(&mut w, 2).await, vec![first, second]);
    db.pool.close().await;
}

#[tokio::test]
async fn a_lone_transaction_in_flight_holds_the_horizon() {
    // One open writer and no other transaction completing after it: it is newer than the
    // last completed one, so a snapshot's `xmax` does not cover it and its in-progress list
    // does not name it. Reading up to a horizon taken from the snapshot alone would skip it.
    let db = TestDb::new().await;
    let hub = hub(&db, 8);
    let mut w = hub.open(EventFilter::default(), None).await.unwrap();
    let mut a = db.pool.begin().await.unwrap();
    let first = create_in(&mut a, "alone").await;
    tokio::time::sleep(ACTIVE_POLL * 5).await;
    let mut b = db.pool.begin().await.unwrap();
    let second = create_in(&mut b, "after").await;
    b.commit().await.unwrap();
    tokio::time::sleep(ACTIVE_POLL * 5).await;
    a.commit().await.unwrap();
    assert_eq!(collect(&mut w, 2).await, vec![first, second]);
    db.pool.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_writers_lose_nothing_and_repeat_nothing() {
    let db = TestDb::new().await;
    let hub = hub(&db, 8);
    let mut watch = hub.open(EventFilter::default(), None).await.unwrap();
    let start = watch.start();

    // Writers whose transactions overlap, commit out of id order, and sometimes roll back
    // (their ids are never used); the pause inside a transaction is pseudo-random.
    let mut writers = Vec::new();
    for writer in 0..6u64 {
        let pool = db.pool.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..WRITES {
                let mut tx = pool.begin().await.unwrap();
                create_in(&mut tx, &format!("w{writer}-{i}")).await;
                let pause = (writer * 7 + i * 13) % 25;
                tokio::time::sleep(Duration::from_millis(pause)).await;
                if (writer + i) % 5 == 0 {
                    tx.rollback().await.unwrap();
                } else {
                    tx.commit().await.unwrap();
                }
            }
        }));
    }
    // A second watch opens mid-run: it too must see everything after its start.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut late = hub.open(EventFilter::default(), None).await.unwrap();
    let late_start = late.start();
    for w in writers {
        w.await.unwrap();
    }

    let committed = committed_ids(&db.pool, start).await;
    assert_eq!(
        committed.len() as u64,
        6 * WRITES * 4 / 5,
        "six writers, one write in five rolled back"
    );
    let got = collect(&mut watch, committed.len()).await;
    assert_eq!(got, committed, "every committed event, once, in id order");

    let late_committed = committed_ids(&db.pool, late_start).await;
    let late_got = collect(&mut late, late_committed.len()).await;
    assert_eq!(late_got, late_committed);
    db.pool.close().await;
}

#[tokio::test]
async fn a_watch_resumed_from_a_cursor_gets_exactly_what_followed_it() {
    let db = TestDb::new().await;
    let hub = hub(&db, 8);
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut tx = db.pool.begin().await.unwrap();
        ids.push(create_in(&mut tx, &format!("r{i}")).await);
        tx.commit().await.unwrap();
    }
    // Resume after the second event, filtered to one name and then unfiltered.
    let mut all = hub
        .open(EventFilter::default(), Some(ids[1]))
        .await
        .unwrap();
    assert_eq!(collect(&mut all, 3).await, ids[2..].to_vec());
    let one = EventFilter {
        kind: Some("hello".into()),
        name: Some("r3".into()),
    };
    let mut w = hub.open(one, Some(ids[1])).await.unwrap();
    assert_eq!(collect(&mut w, 1).await, vec![ids[3]]);

    // Then live: only the filtered resource's next event, not the others'.
    let mut tx = db.pool.begin().await.unwrap();
    create_in(&mut tx, "r5").await;
    sqlx::query("UPDATE resources SET frozen_until = 'infinity' WHERE name = 'r3'")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let quarantined: i64 =
        sqlx::query_scalar("SELECT max(id) FROM resource_events WHERE name = 'r3'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(collect(&mut w, 1).await, vec![quarantined]);
    db.pool.close().await;
}

#[tokio::test]
async fn no_more_watches_open_than_the_limit() {
    let db = TestDb::new().await;
    let hub = hub(&db, 2);
    let a = hub.open(EventFilter::default(), None).await.unwrap();
    let _b = hub.open(EventFilter::default(), None).await.unwrap();
    assert!(matches!(
        hub.open(EventFilter::default(), None).await,
        Err(OpenError::Full(2))
    ));
    assert_eq!(hub.open_watches(), 2);
    drop(a);
    assert!(
        hub.open(EventFilter::default(), None).await.is_ok(),
        "a closed watch frees its slot"
    );
    db.pool.close().await;
}
