//! The list views against the real `converge`: filters on `GET /api/v1/resources` (owner and
//! phase unions, label AND, name substring, kind), keyset paging in both orders (`created`
//! and `problems`), the roots list with descendant counts, children, and the phase/kind
//! summaries.
//!
//! Roots are applied over the API; composed children are inserted directly in SQL (the
//! composition engine that creates them lands separately), so every phase can be staged.

mod common;

use std::collections::BTreeSet;

use common::Converge;
use serde_json::{Value, json};
use uuid::Uuid;

/// GETs `path` under the API; returns (status, X-Next-Cursor, body).
async fn get(c: &Converge, path: &str) -> (u16, String, Value) {
    let r = c
        .client
        .get(format!("{}/api/v1{path}", c.http))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let next = r
        .headers()
        .get("x-next-cursor")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, next, r.json().await.unwrap_or(Value::Null))
}

/// The names in `body[field]`, sorted.
fn names(body: &Value, field: &str) -> Vec<String> {
    let mut v: Vec<String> = body[field]
        .as_array()
        .unwrap_or_else(|| panic!("no {field} in {body}"))
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

/// Inserts a composed child in `phase` straight into the table.
async fn child(
    c: &Converge,
    kind: &str,
    name: &str,
    owner: Uuid,
    root: Uuid,
    phase: &str,
    labels: Value,
) -> Uuid {
    sqlx::query_scalar(
        "INSERT INTO resources (id, kind, name, owner_id, root_id, shard_id, labels,
                                synced_gen, health_ok, failure_gen, frozen_until)
         SELECT g, $1, $2, $3, $4, shard_of(g), $5,
                CASE WHEN $6 IN ('Ready', 'Degraded') THEN 1 ELSE 0 END,
                $6 <> 'Degraded',
                CASE WHEN $6 = 'Failed' THEN 1 ELSE 0 END,
                CASE $6 WHEN 'Quarantined' THEN 'infinity'::timestamptz
                        WHEN 'Orphaned' THEN now() + interval '1 hour' END
         FROM (SELECT gen_random_uuid() AS g) x
         RETURNING id",
    )
    .bind(kind)
    .bind(name)
    .bind(owner)
    .bind(root)
    .bind(labels)
    .bind(phase)
    .fetch_one(&c.db.pool)
    .await
    .unwrap()
}

async fn root(c: &Converge, name: &str, labels: Value) -> Uuid {
    let (status, _, body) = c
        .apply(&json!({"kind": "hello", "kind_version": 1, "name": name,
                       "labels": labels, "spec": {}}))
        .await;
    assert_eq!(status, 201, "{body}");
    body["uid"].as_str().unwrap().parse().unwrap()
}

/// Three hello roots (no worker, so Reconciling) and a composed tree under two of them:
///
/// ```text
/// hello/app-a {team:web, env:prod}    subnet/a-net-1 Ready, subnet/a-net-2 Failed,
///                                     vm/a-vm-1 Ready -> disk/a-disk-1 Ready
/// hello/app-b {team:db, env:prod}     subnet/b-net-1 Degraded, vm/b-vm-1 Quarantined
/// hello/other {team:web, env:dev}     (none)
/// ```
async fn fixture() -> Converge {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(30)).await;
    let a = root(&c, "app-a", json!({"team": "web", "env": "prod"})).await;
    let b = root(&c, "app-b", json!({"team": "db", "env": "prod"})).await;
    root(&c, "other", json!({"team": "web", "env": "dev"})).await;
    child(
        &c,
        "subnet",
        "a-net-1",
        a,
        a,
        "Ready",
        json!({"tier": "front"}),
    )
    .await;
    child(
        &c,
        "subnet",
        "a-net-2",
        a,
        a,
        "Failed",
        json!({"tier": "back"}),
    )
    .await;
    let vm = child(&c, "vm", "a-vm-1", a, a, "Ready", json!({"tier": "front"})).await;
    child(&c, "disk", "a-disk-1", vm, a, "Ready", json!({})).await;
    child(&c, "subnet", "b-net-1", b, b, "Degraded", json!({})).await;
    child(&c, "vm", "b-vm-1", b, b, "Quarantined", json!({})).await;
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn list_filters_union_owners_and_phases_and_and_labels() {
    let c = fixture().await;

    let (s, _, body) = get(&c, "/resources?owner=hello/app-a").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        names(&body, "resources"),
        ["a-net-1", "a-net-2", "a-vm-1"],
        "direct children only"
    );
    assert_eq!(body["owners"][0]["kind"], "hello");
    assert_eq!(body["owners"][0]["name"], "app-a");
    assert!(
        body["resources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["owner"] == json!({"kind": "hello", "name": "app-a"})),
        "{body}"
    );

    let (_, _, body) = get(&c, "/resources?owner=hello/app-a&owner=hello/app-b").await;
    assert_eq!(
        names(&body, "resources"),
        ["a-net-1", "a-net-2", "a-vm-1", "b-net-1", "b-vm-1"]
    );
    let (_, _, body) = get(&c, "/resources?owner=hello/app-a&phase=Failed").await;
    assert_eq!(names(&body, "resources"), ["a-net-2"]);
    let (_, _, body) = get(&c, "/resources?phase=Ready&phase=Degraded").await;
    assert_eq!(
        names(&body, "resources"),
        ["a-disk-1", "a-net-1", "a-vm-1", "b-net-1"]
    );
    let (_, _, body) = get(&c, "/resources?phase=Quarantined").await;
    assert_eq!(names(&body, "resources"), ["b-vm-1"]);
    let (_, _, body) = get(&c, "/resources?kind=vm&kind=disk").await;
    assert_eq!(names(&body, "resources"), ["a-disk-1", "a-vm-1", "b-vm-1"]);
    let (_, _, body) = get(&c, "/resources?name=NET").await;
    assert_eq!(names(&body, "resources"), ["a-net-1", "a-net-2", "b-net-1"]);
    let (_, _, body) = get(&c, "/resources?name=app&kind=hello&phase=Reconciling").await;
    assert_eq!(names(&body, "resources"), ["app-a", "app-b"]);

    let (_, _, body) = get(&c, "/resources?label=team:web").await;
    assert_eq!(names(&body, "resources"), ["app-a", "other"]);
    let (_, _, body) = get(&c, "/resources?label=team:web&label=env:prod").await;
    assert_eq!(
        names(&body, "resources"),
        ["app-a"],
        "labels combine with AND"
    );
    let (_, _, body) = get(&c, "/resources?label=team:web&label=team:db").await;
    assert_eq!(names(&body, "resources"), Vec::<String>::new());
    let (_, _, body) = get(&c, "/resources?label=tier:front&owner=hello/app-a").await;
    assert_eq!(names(&body, "resources"), ["a-net-1", "a-vm-1"]);

    for (path, code) in [
        ("/resources?owner=hello/nope", 404),
        ("/resources?owner=hello", 422),
        ("/resources?label=novalue", 422),
        ("/resources?phase=Sleeping", 422),
        ("/resources?limit=0", 422),
    ] {
        let (s, _, body) = get(&c, path).await;
        assert_eq!(s, code, "{path}: {body}");
        assert!(body["detail"].as_str().is_some(), "{path}: {body}");
    }
    c.stop().await;
}

/// Every row of `path` (a list URL without `limit` and `cursor`) walked `limit` rows a page
/// through `X-Next-Cursor`, in the order the pages gave them, and how many pages it took.
async fn walk(c: &Converge, path: &str, field: &str, limit: usize) -> (Vec<Value>, usize) {
    let mut seen = Vec::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let (s, next, body) = get(c, &format!("{path}{sep}limit={limit}&cursor={cursor}")).await;
        assert_eq!(s, 200, "{path}: {body}");
        let rows = body[field].as_array().unwrap();
        assert!(rows.len() <= limit, "{body}");
        seen.extend(rows.iter().cloned());
        pages += 1;
        if next.is_empty() {
            return (seen, pages);
        }
        assert!(pages < 1000, "the walk of {path} does not end");
        cursor = next;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn keyset_pages_cover_every_row_once_in_order() {
    let c = fixture().await;
    let (rows, pages) = walk(&c, "/resources", "resources", 2).await;
    let seen: Vec<String> = rows
        .iter()
        .map(|r| r["uid"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(seen.len(), 9, "{seen:?}");
    assert_eq!(pages, 5);
    let unique: BTreeSet<_> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), 9, "no row twice");
    let (_, _, all) = get(&c, "/resources?limit=500").await;
    let in_order: Vec<String> = all["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uid"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(seen, in_order, "pages follow the single-page order");
    let (s, _, body) = get(&c, "/resources?limit=2&cursor=garbage").await;
    assert_eq!(
        (s, body["resources"].as_array().unwrap().len()),
        (200, 2),
        "a malformed cursor restarts from the first page"
    );
    c.stop().await;
}

/// (name, phase) of every row of a walk, in its order.
async fn walked(c: &Converge, path: &str, field: &str, limit: usize) -> Vec<(String, String)> {
    let (rows, _) = walk(c, path, field, limit).await;
    rows.iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["phase"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The problems-first order stated independently of the server: the rank of each problem
/// phase (Failed, Quarantined, Degraded, Orphaned), every other phase after them, and
/// creation order within a rank. `rows` are (name, phase) in creation order.
fn problems_first(rows: &[(String, String)]) -> Vec<(String, String)> {
    let rank = |p: &str| match p {
        "Failed" => 0,
        "Quarantined" => 1,
        "Degraded" => 2,
        "Orphaned" => 3,
        _ => 4,
    };
    let mut v = rows.to_vec();
    v.sort_by_key(|(_, p)| rank(p)); // stable: creation order within a rank
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn problems_sort_walks_problems_first_and_follows_phase_changes() {
    let c = fixture().await;
    let a: Uuid = get(&c, "/resources/hello/app-a").await.2["uid"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // One more of each problem after the fixture's, so ranks hold several rows.
    child(&c, "subnet", "a-net-3", a, a, "Orphaned", json!({})).await;
    child(&c, "subnet", "a-net-4", a, a, "Failed", json!({})).await;
    child(&c, "vm", "a-vm-2", a, a, "Degraded", json!({})).await;

    let check = |label: &'static str| {
        let c = &c;
        async move {
            let created = walked(c, "/resources", "resources", 500).await;
            let want = problems_first(&created);
            assert_ne!(
                want, created,
                "{label}: the fixture must put problems out of order"
            );
            for limit in [1, 2, 3, 500] {
                assert_eq!(
                    walked(c, "/resources?sort=problems", "resources", limit).await,
                    want,
                    "{label}: pages of {limit}"
                );
            }
            // With filters: the same order restricted to them.
            let subnets: Vec<_> = created
                .iter()
                .filter(|(n, _)| n.contains("net"))
                .cloned()
                .collect();
            assert_eq!(
                walked(c, "/resources?sort=problems&kind=subnet", "resources", 2).await,
                problems_first(&subnets),
                "{label}: kind filter"
            );
            let roots = walked(c, "/resources/roots", "roots", 500).await;
            assert_eq!(
                walked(c, "/resources/roots?sort=problems", "roots", 1).await,
                problems_first(&roots),
                "{label}: roots"
            );
            // The side table holds exactly the problem rows.
            let (table, phases): (i64, i64) = sqlx::query_as(
                "SELECT (SELECT count(*) FROM resource_problems),
                        (SELECT count(*) FROM resources
                         WHERE phase IN ('Failed', 'Quarantined', 'Degraded', 'Orphaned'))",
            )
            .fetch_one(&c.db.pool)
            .await
            .unwrap();
            assert_eq!(table, phases, "{label}: resource_problems");
        }
    };
    check("inserted").await;

    // Updates move rows in and out: a Ready child fails, a failed one recovers, a quarantined
    // one is released into Reconciling, a degraded one is deleted.
    for sql in [
        "UPDATE resources SET failure_gen = generation WHERE name = 'a-net-1'",
        "UPDATE resources SET failure_gen = 0, synced_gen = generation WHERE name = 'a-net-2'",
        "UPDATE resources SET frozen_until = NULL WHERE name = 'b-vm-1'",
        "DELETE FROM resources WHERE name = 'a-vm-2'",
        // A problem that changes rank: Degraded -> Failed.
        "UPDATE resources SET failure_gen = generation WHERE name = 'b-net-1'",
        // A root among the problems.
        "UPDATE resources SET failure_gen = generation WHERE name = 'other'",
    ] {
        sqlx::query(sql).execute(&c.db.pool).await.unwrap();
    }
    check("updated").await;

    // Roots take the order too, and a cursor of one order restarts the other.
    let (s, next, body) = get(&c, "/resources/roots?sort=problems&limit=1").await;
    assert_eq!(s, 200, "{body}");
    assert!(!next.is_empty());
    assert_eq!(body["roots"][0]["name"], "other", "the failed root first");
    let (_, _, first) = get(&c, "/resources/roots?limit=1").await;
    assert_eq!(first["roots"][0]["name"], "app-a");
    let (_, _, again) = get(&c, &format!("/resources/roots?limit=1&cursor={next}")).await;
    assert_eq!(
        again["roots"], first["roots"],
        "a problems cursor restarts a created walk"
    );
    let (s, _, body) = get(&c, "/resources?sort=phase").await;
    assert_eq!(s, 422, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("sort"), "{body}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn roots_children_and_summaries_count_descendants() {
    let c = fixture().await;

    let (s, next, body) = get(&c, "/resources/roots").await;
    assert_eq!(s, 200, "{body}");
    assert!(next.is_empty());
    assert_eq!(names(&body, "roots"), ["app-a", "app-b", "other"]);
    let count = |body: &Value, name: &str| {
        body["roots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| r["resource_count"].as_i64().unwrap())
    };
    assert_eq!(count(&body, "app-a"), Some(4), "{body}");
    assert_eq!(count(&body, "app-b"), Some(2));
    assert_eq!(count(&body, "other"), Some(0));
    let (_, _, body) = get(&c, "/resources/roots?name=APP&kind=hello").await;
    assert_eq!(names(&body, "roots"), ["app-a", "app-b"]);
    let (_, _, body) = get(&c, "/resources/roots?phase=Ready").await;
    assert_eq!(names(&body, "roots"), Vec::<String>::new());
    let (_, _, body) = get(&c, "/resources/roots?kind=vm").await;
    assert_eq!(
        names(&body, "roots"),
        Vec::<String>::new(),
        "children are never roots"
    );
    let (_, next, body) = get(&c, "/resources/roots?limit=2").await;
    assert_eq!(body["roots"].as_array().unwrap().len(), 2);
    let (_, last, body) = get(&c, &format!("/resources/roots?limit=2&cursor={next}")).await;
    assert_eq!(names(&body, "roots"), ["other"]);
    assert!(last.is_empty());

    let (s, _, body) = get(&c, "/resources/hello/app-a/children").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["owner"]["name"], "app-a");
    assert_eq!(names(&body, "resources"), ["a-net-1", "a-net-2", "a-vm-1"]);
    let (_, _, body) = get(
        &c,
        "/resources/hello/app-a/children?phase=Ready&kind=subnet",
    )
    .await;
    assert_eq!(names(&body, "resources"), ["a-net-1"]);
    let (_, next, body) = get(&c, "/resources/hello/app-a/children?limit=2").await;
    assert_eq!(body["resources"].as_array().unwrap().len(), 2);
    let (_, _, body) = get(
        &c,
        &format!("/resources/hello/app-a/children?limit=2&cursor={next}"),
    )
    .await;
    assert_eq!(body["resources"].as_array().unwrap().len(), 1);
    let (s, _, _) = get(&c, "/resources/hello/nope/children").await;
    assert_eq!(s, 404);

    // No owner: the roots themselves.
    let (s, _, body) = get(&c, "/resources/summary").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["totals"].as_object().unwrap().len(), 7, "{body}");
    assert_eq!(body["totals"]["Reconciling"], 3);
    assert_eq!(body["totals"]["Ready"], 0);
    assert_eq!(body["total"], 3);
    assert_eq!(
        body["by_kind"],
        json!([{"kind": "hello", "total": 3, "phases": {
        "Deleting": 0, "Quarantined": 0, "Failed": 0, "Orphaned": 0, "Degraded": 0,
        "Ready": 0, "Reconciling": 3}}])
    );

    let (_, _, body) = get(&c, "/resources/summary?owner=hello/app-a").await;
    assert_eq!(body["total"], 4, "{body}");
    assert_eq!(body["totals"]["Ready"], 3);
    assert_eq!(body["totals"]["Failed"], 1);
    let kinds: Vec<(String, i64)> = body["by_kind"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["kind"].as_str().unwrap().to_string(),
                k["total"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [("disk".into(), 1), ("subnet".into(), 2), ("vm".into(), 1)]
    );
    let (_, _, body) = get(&c, "/resources/summary?owner=hello/app-a&owner=hello/app-b").await;
    assert_eq!(body["total"], 6);
    assert_eq!(body["totals"]["Degraded"], 1);
    assert_eq!(body["totals"]["Quarantined"], 1);
    assert_eq!(body["owners"].as_array().unwrap().len(), 2);
    let (_, _, body) = get(&c, "/resources/summary?owner=hello/app-a&owner=vm/a-vm-1").await;
    assert_eq!(
        body["total"], 4,
        "overlapping owners count each row once: {body}"
    );
    let (s, _, _) = get(&c, "/resources/summary?owner=hello/nope").await;
    assert_eq!(s, 404);

    let (s, _, body) = get(&c, "/resources/hello/app-a/summary").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["owner"]["name"], "app-a");
    assert_eq!(body["total"], 4);
    let (_, _, body) = get(&c, "/resources/vm/a-vm-1/summary").await;
    assert_eq!(body["total"], 1, "a mid-level composite: {body}");
    assert_eq!(body["by_kind"][0]["kind"], "disk");
    let (_, _, body) = get(&c, "/resources/hello/other/summary").await;
    assert_eq!(body["total"], 0);
    assert_eq!(body["totals"].as_object().unwrap().len(), 7);
    let (s, _, _) = get(&c, "/resources/hello/nope/summary").await;
    assert_eq!(s, 404);
    c.stop().await;
}
