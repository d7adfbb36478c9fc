//! Upgrades with the real `converge` binary: a database created before the baseline squash
//! (the committed fixture `engine/tests/fixtures/pre_baseline.sql`, written once by
//! scripts/gen-pre-baseline-fixture.sh: the old migrations 0001-0025, a hello kind, a Ready
//! root, children joined by an edge with a value flow, a stale lease, a pending outbox row and
//! a queued task) boots with nothing lost, and every resource converges once a worker
//! connects; an empty database boots on the baseline.

mod common;

use std::time::Duration;

use common::{Worker, serve_command, spawn_ready, wait_ready_at};
use converge_control::testing::TestDb;
use serde_json::{Value, json};
use sqlx::{Connection, PgConnection};
use tokio::process::Child;

const T: Duration = Duration::from_secs(60);

/// Every landed migration, the baseline first: the history a migrated database records.
fn landed() -> Vec<(i64, String)> {
    let all: Vec<(i64, String)> = converge_engine::db::MIGRATOR
        .iter()
        .map(|m| (m.version, m.description.to_string()))
        .collect();
    assert_eq!(all.first(), Some(&(1, "baseline".to_owned())));
    all
}

/// The pg_dump (schema and data, INSERTs) of a database migrated by the old 0001-0025.
const PRE_BASELINE: &str = include_str!("../../engine/tests/fixtures/pre_baseline.sql");

/// The resources of the fixture.
const NAMES: [&str; 5] = ["upg-root", "upg-a", "upg-b", "upg-c", "upg-d"];

/// Starts `converge serve` on `db` (its boot migrates), with a quick reaper so the fixture's
/// stale lease comes back at once. Returns the process and its HTTP and broker URLs.
async fn boot(db: &TestDb) -> (Child, String, String) {
    let (child, hp, gp) = spawn_ready("converge /readyz", |hp, gp| {
        serve_command(&db.url, hp, gp, &[("REAPER_EVERY", "500ms")])
            .spawn()
            .expect("spawn converge")
    })
    .await;
    (
        child,
        format!("http://127.0.0.1:{hp}"),
        format!("http://127.0.0.1:{gp}"),
    )
}

async fn history(db: &TestDb) -> Vec<(i64, String)> {
    sqlx::query_as("SELECT version, description FROM _sqlx_migrations ORDER BY version")
        .fetch_all(&db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_from_before_the_baseline_boots_and_every_resource_converges() {
    let db = TestDb::empty().await;
    // The dump empties search_path for its session: restore on a connection of its own.
    let mut conn = PgConnection::connect(&db.url).await.unwrap();
    sqlx::raw_sql(PRE_BASELINE)
        .execute(&mut conn)
        .await
        .expect("restore the fixture");
    conn.close().await.unwrap();
    assert_eq!(history(&db).await.len(), 25);
    let ids_before: Vec<(String, uuid::Uuid)> =
        sqlx::query_as("SELECT name, id FROM resources ORDER BY name")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(
        db.count("SELECT count(*) FROM work_queue WHERE lease_token IS NOT NULL")
            .await,
        1
    );
    assert_eq!(db.count("SELECT count(*) FROM work_outbox").await, 1);

    let (_converge, http, broker) = boot(&db).await;
    assert_eq!(history(&db).await, landed());
    let client = reqwest::Client::new();
    // Status schemas are enforced since the fixture was written, and today's hello worker
    // reports `worker`, which the fixture's kind forbids: ship the kind with its worker, as
    // the README's upgrade steps say (same version, so the stored resources keep it).
    let kind = client
        .put(format!("{http}/api/v1/kinds/hello/manifest"))
        .json(&common::Converge::hello_manifest(30))
        .send()
        .await
        .unwrap();
    assert!(
        kind.status().is_success(),
        "re-apply hello: {}",
        kind.status()
    );
    let _w = Worker::hello(&broker, "w1", &[]);
    let mut ready = std::collections::HashMap::new();
    for name in NAMES {
        ready.insert(name, wait_ready_at(&client, &http, "hello", name, T).await);
    }

    // Nothing lost: the same rows, ids, edge and owners.
    let ids_after: Vec<(String, uuid::Uuid)> =
        sqlx::query_as("SELECT name, id FROM resources ORDER BY name")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(ids_after, ids_before);
    assert_eq!(db.count("SELECT count(*) FROM resource_deps").await, 1);
    assert_eq!(
        db.count(
            "SELECT count(*) FROM resources c JOIN resources r ON r.id = c.owner_id
             WHERE r.name = 'upg-root' AND c.root_id = r.id"
        )
        .await,
        2
    );
    assert_eq!(db.lag_mismatches().await, 0);
    assert_eq!(
        db.count("SELECT count(*) FROM engine_sql").await,
        i64::try_from(converge_engine::db::engine_sql::ENGINE_FILES.len()).unwrap()
    );

    // The root was Ready and stays as it was; the drained outbox row is upg-c's status; the
    // value flow carried upg-a's message into upg-b's spec.
    assert_eq!(ready["upg-root"]["status"]["message"], "hi, upg-root!");
    assert_eq!(ready["upg-root"]["generation"], 1);
    assert_eq!(ready["upg-c"]["status"]["message"], "hi, upg-c!");
    assert_eq!(ready["upg-a"]["status"]["message"], "hi, upg-a!");
    let b: Value = wait_for_spec(&client, &http, "upg-b").await;
    assert_eq!(b["spec"]["greeting"], ready["upg-a"]["status"]["message"]);
    assert_eq!(ready["upg-d"]["status"]["message"], "hi, upg-d!");
}

/// upg-b once Ready with upg-a's message flowed into its spec.
async fn wait_for_spec(client: &reqwest::Client, http: &str, name: &str) -> Value {
    common::wait_for(T, &format!("{name} Ready with its flowed spec"), || async {
        let v: Value = client
            .get(format!("{http}/api/v1/resources/hello/{name}"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        (v["phase"] == "Ready" && v["spec"]["greeting"] == "hi, upg-a!").then_some(v)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_database_boots_on_the_baseline() {
    let db = TestDb::empty().await;
    let (_converge, http, broker) = boot(&db).await;
    assert_eq!(history(&db).await, landed());
    let client = reqwest::Client::new();
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/../examples/hello/kind-hello.json",
            common::manifest_dir()
        ))
        .unwrap(),
    )
    .unwrap();
    let r = client
        .put(format!("{http}/api/v1/kinds/hello/manifest"))
        .json(&manifest)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let r = client
        .post(format!("{http}/api/v1/resources"))
        .json(&json!({"kind": "hello", "kind_version": 1, "name": "fresh", "spec": {"greeting": "hi"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let _w = Worker::hello(&broker, "w1", &[]);
    let v = wait_ready_at(&client, &http, "hello", "fresh", T).await;
    assert_eq!(v["status"]["message"], "hi, fresh!");
}
