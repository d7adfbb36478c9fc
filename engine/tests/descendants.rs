//! The rollup's view of a subtree at the SQL level (one fresh database per test): the
//! summary counts what a full read would, and keyset pages return every live descendant
//! exactly once, for a top-level root (by root_id, id order) and for a nested composite (its
//! direct children, (created_at, id) order, including rows created in the same instant).

use std::collections::HashSet;

use converge_engine::{
    db::{
        compose::related,
        descendants::{self, Cursor, Summary},
    },
    testing::TestDb,
};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

async fn kind(pool: &PgPool, kind: &str) {
    let m = json!({"kind": kind, "kind_version": 1,
                   "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]});
    sqlx::query("INSERT INTO kind_manifest (kind, kind_version, manifest) VALUES ($1, 1, $2)")
        .bind(kind)
        .bind(m)
        .execute(pool)
        .await
        .unwrap();
}

/// `n` rows of `kind` under `owner`/`root`, all in one statement (one created_at).
async fn nodes(
    pool: &PgPool,
    kind: &str,
    prefix: &str,
    n: i32,
    owner: Option<Uuid>,
    root: Option<Uuid>,
) -> Vec<Uuid> {
    sqlx::query_scalar(
        "INSERT INTO resources (id, kind, name, owner_id, root_id, shard_id)
         SELECT x, $1, $2 || i, $3, $4, shard_of(x)
         FROM (SELECT gen_random_uuid() AS x, i FROM generate_series(1, $5) AS i) g
         RETURNING id",
    )
    .bind(kind)
    .bind(prefix)
    .bind(owner)
    .bind(root)
    .bind(n)
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn all_pages(pool: &PgPool, id: Uuid, root: Option<Uuid>, size: u32) -> (Vec<Uuid>, usize) {
    let (mut out, mut pages, mut after) = (Vec::new(), 0, None);
    loop {
        let (rows, next) = descendants::page(pool, id, root, after, size)
            .await
            .unwrap();
        pages += 1;
        out.extend(rows.iter().map(|r| r.id));
        // The token survives its wire form.
        match next.map(|c| Cursor::decode(&c.encode()).expect("a token made here")) {
            Some(c) => after = Some(c),
            None => return (out, pages),
        }
    }
}

#[tokio::test]
async fn summary_and_pages_cover_the_live_subtree_exactly_once() {
    let db = TestDb::new().await;
    let pool = &db.pool;
    for k in ["top", "mid", "leaf"] {
        kind(pool, k).await;
    }
    let root = nodes(pool, "top", "root", 1, None, None).await[0];
    let mid = nodes(pool, "mid", "mid", 1, Some(root), Some(root)).await[0];
    let leaves = nodes(pool, "leaf", "l", 37, Some(mid), Some(root)).await;
    let more = nodes(pool, "leaf", "m", 4, Some(root), Some(root)).await;
    // A child being deleted is not part of the live subtree.
    sqlx::query("UPDATE resources SET deletion_requested_at = now() WHERE id = $1")
        .bind(more[0])
        .execute(pool)
        .await
        .unwrap();
    // One synced and ready, one failed.
    sqlx::query("UPDATE resources SET synced_gen = generation WHERE id = $1")
        .bind(leaves[0])
        .execute(pool)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE resources SET failure_message = 'boom', failure_gen = generation WHERE id = $1",
    )
    .bind(leaves[1])
    .execute(pool)
    .await
    .unwrap();

    // The root: every live row carrying its root_id (mid, 37 leaves, 3 of `more`).
    let s = descendants::summary(pool, root, None).await.unwrap();
    let full = related(pool, root, None, true).await.unwrap();
    assert_eq!(s, Summary::of(&full), "SQL and in-memory summaries agree");
    assert_eq!(s.total, 41);
    assert_eq!(s.by_kind.get("leaf"), Some(&40));
    assert_eq!(s.not_ready_total, 40);
    assert_eq!(s.failed_total, s.failed.len() as i64);
    for size in [1, 7, 41, 500] {
        let (ids, pages) = all_pages(pool, root, None, size).await;
        let distinct: HashSet<Uuid> = ids.iter().copied().collect();
        assert_eq!((ids.len(), distinct.len()), (41, 41), "page size {size}");
        assert!(!distinct.contains(&more[0]));
        assert_eq!(
            pages,
            41usize.div_ceil(size as usize).max(1),
            "page size {size}"
        );
    }

    // The nested composite: its direct children, all created in one instant, so the
    // created_at part of the cursor ties and the id decides.
    let (ids, _) = all_pages(pool, mid, Some(root), 5).await;
    let distinct: HashSet<Uuid> = ids.iter().copied().collect();
    assert_eq!(distinct, leaves.iter().copied().collect::<HashSet<_>>());
    assert_eq!(ids.len(), 37);
    assert_eq!(
        descendants::summary(pool, mid, Some(root))
            .await
            .unwrap()
            .total,
        37
    );

    // Only a live reconcile lease opens the subtree.
    let token = Uuid::new_v4();
    assert_eq!(
        descendants::leased_composite(pool, root, token, 1)
            .await
            .unwrap(),
        None
    );
}

/// `root`'s summary, checked against the summary of its full read.
async fn summary_as_full_read(pool: &PgPool, root: Uuid) -> Summary {
    let s = descendants::summary(pool, root, None).await.unwrap();
    let full = related(pool, root, None, true).await.unwrap();
    assert_eq!(s, Summary::of(&full), "SQL and in-memory summaries agree");
    s
}

/// The summary's ref lists: none for a settled subtree (the usual rollup), and otherwise the
/// first [`descendants::SUMMARY_REFS`] of each list, as the full read's summary names them
/// (not-ready refs with no failed one, then both).
#[tokio::test]
async fn the_summary_names_refs_only_when_there_are_some() {
    let db = TestDb::new().await;
    let pool = &db.pool;
    for k in ["top", "leaf"] {
        kind(pool, k).await;
    }
    let root = nodes(pool, "top", "root", 1, None, None).await[0];
    let leaves = nodes(pool, "leaf", "l", 150, Some(root), Some(root)).await;
    sqlx::query("UPDATE resources SET synced_gen = generation WHERE root_id = $1")
        .bind(root)
        .execute(pool)
        .await
        .unwrap();

    let settled = summary_as_full_read(pool, root).await;
    assert_eq!(
        (settled.total, settled.unsettled, settled.not_ready_total),
        (150, 0, 0)
    );
    assert!(settled.failed.is_empty() && settled.not_ready.is_empty());

    // 120 progressing again: the not-ready list, cut at the cap, and no failed one.
    sqlx::query("UPDATE resources SET generation = generation + 1 WHERE id = ANY ($1)")
        .bind(&leaves[..120])
        .execute(pool)
        .await
        .unwrap();
    let progressing = summary_as_full_read(pool, root).await;
    assert_eq!(
        (progressing.not_ready_total, progressing.unsettled),
        (120, 120)
    );
    assert_eq!(
        progressing.not_ready.len(),
        descendants::SUMMARY_REFS as usize
    );
    assert!(progressing.failed.is_empty());

    // 2 of them failed: both lists.
    sqlx::query(
        "UPDATE resources SET failure_message = 'boom', failure_gen = generation WHERE id = ANY ($1)",
    )
    .bind(&leaves[..2])
    .execute(pool)
    .await
    .unwrap();
    let troubled = summary_as_full_read(pool, root).await;
    assert_eq!((troubled.not_ready_total, troubled.unsettled), (120, 118));
    assert_eq!(troubled.failed.len(), 2);
    assert_eq!(troubled.failed[0].failure_message.as_deref(), Some("boom"));
    assert_eq!(troubled.not_ready.len(), descendants::SUMMARY_REFS as usize);
}
