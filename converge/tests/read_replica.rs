//! `DATABASE_READ_URL` against a real streaming replica (issue 43): a private primary, a
//! replica made from it with `pg_basebackup -R`, and a real `converge` pointed at both.
//!
//! - lists, summaries, graphs, event feeds, the kinds list and the cluster view read the
//!   replica once it is up (`X-Converge-Read-Source: replica`), and each answers 200 there
//!   (a read of an UNLOGGED table, which a standby cannot serve, would be a 500);
//! - a write and a single resource's read go to the primary, so a caller sees its own write;
//! - a replica that does not answer (not yet started, stopped) is bypassed, and is used again
//!   once it is back; one whose replay is paused falls behind `READ_MAX_LAG` and is bypassed
//!   until replay resumes;
//! - `converge_read_replica_lag_seconds` is exported.

mod common;

use std::{path::Path, time::Duration};

use common::{free_port, serve_command, spawn_ready, wait_for};
use converge_control::devdb::{DevDb, DevDbConfig};
use serde_json::{Value, json};

/// What a GET answered: its status, where it read from, its body.
struct Answer {
    status: u16,
    source: String,
    body: Value,
}

async fn get(client: &reqwest::Client, http: &str, path: &str) -> Option<Answer> {
    let r = client.get(format!("{http}{path}")).send().await.ok()?;
    let status = r.status().as_u16();
    let source = r
        .headers()
        .get("x-converge-read-source")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = r.json().await.unwrap_or(Value::Null);
    Some(Answer {
        status,
        source,
        body,
    })
}

/// Polls the resource list until it answers 200 from `source`.
async fn wait_list_from(client: &reqwest::Client, http: &str, source: &str, why: &str) {
    wait_for(Duration::from_secs(30), why, || async {
        get(client, http, "/api/v1/resources")
            .await
            .filter(|a| a.status == 200 && a.source == source)
    })
    .await;
}

/// A replica of the cluster at `primary_port`, in `dir/pgdata`, written by `pg_basebackup -R`
/// (streaming WAL, a `standby.signal` and `primary_conninfo`), then started.
async fn start_replica(primary_port: u16, dir: &Path, port: u16) -> DevDb {
    let bin = pg_bin_dir();
    let status = tokio::process::Command::new(bin.join("pg_basebackup"))
        .args(["-h", "127.0.0.1", "-U", "converge", "-X", "stream", "-R"])
        .args(["--checkpoint=fast", "--no-sync"])
        .arg("-p")
        .arg(primary_port.to_string())
        .arg("-D")
        .arg(dir.join("pgdata"))
        .status()
        .await
        .expect("run pg_basebackup");
    assert!(status.success(), "pg_basebackup failed: {status}");
    restart_replica(dir, port).await
}

/// Starts the replica already made in `dir` (it resumes streaming from the primary).
async fn restart_replica(dir: &Path, port: u16) -> DevDb {
    DevDb::start(DevDbConfig {
        data_dir: dir.to_path_buf(),
        port: Some(port),
        settings: Vec::new(),
    })
    .await
    .expect("start the replica")
}

/// The PostgreSQL bin dir holding `pg_basebackup`: `PG_BIN_DIR`, `pg_config --bindir`, or the
/// newest `/usr/lib/postgresql/*/bin` (as `converge dev` finds `initdb`).
fn pg_bin_dir() -> std::path::PathBuf {
    let mut candidates = Vec::new();
    if let Some(d) = std::env::var_os("PG_BIN_DIR").filter(|d| !d.is_empty()) {
        candidates.push(std::path::PathBuf::from(d));
    }
    if let Ok(out) = std::process::Command::new("pg_config")
        .arg("--bindir")
        .output()
    {
        candidates.push(String::from_utf8_lossy(&out.stdout).trim().into());
    }
    let mut versions: Vec<_> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    versions.sort();
    candidates.extend(versions.into_iter().rev());
    candidates
        .into_iter()
        .find(|d| d.join("pg_basebackup").is_file())
        .expect("pg_basebackup (PostgreSQL's client binaries) is installed")
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_follow_a_streaming_replica_and_fall_back_to_the_primary() {
    let root = std::env::temp_dir().join(format!(
        "converge-replica-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let primary = DevDb::start(DevDbConfig {
        data_dir: root.join("primary"),
        port: None,
        settings: Vec::new(),
    })
    .await
    .expect("start the primary");
    let replica_dir = root.join("replica");
    let replica_port = free_port();
    let replica_url = primary.url().replace(
        &format!(":{}/", primary.port()),
        &format!(":{replica_port}/"),
    );

    // spawn_ready starts it again on new ports if another test's process took one first.
    let (mut converge, hp, _) = spawn_ready("converge /readyz", |hp, gp| {
        serve_command(
            &primary.url(),
            hp,
            gp,
            &[
                ("DATABASE_READ_URL", replica_url.as_str()),
                ("READ_MAX_LAG", "1s"),
            ],
        )
        .spawn()
        .expect("spawn converge")
    })
    .await;
    let http = format!("http://127.0.0.1:{hp}");
    let client = reqwest::Client::new();

    // No replica yet: every read goes to the primary, and says so.
    let a = get(&client, &http, "/api/v1/resources").await.unwrap();
    assert_eq!((a.status, a.source.as_str()), (200, "primary"));

    // The hello kind (no worker: its resources wait, which is all these reads need).
    let r = client
        .put(format!("{http}/api/v1/kinds/hello/manifest"))
        .json(&common::Converge::hello_manifest(30))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "manifest: {}", r.status());
    let replica = start_replica(primary.port(), &replica_dir, replica_port).await;
    wait_list_from(&client, &http, "replica", "reads move to the replica").await;

    // A write answers from the primary, and the writer's own read sees it at once.
    let r = client
        .post(format!("{http}/api/v1/resources"))
        .json(
            &json!({"kind": "hello", "kind_version": 1, "name": "r1", "spec": {"greeting": "hi"}}),
        )
        .send()
        .await
        .unwrap();
    let source = r.headers()["x-converge-read-source"].clone();
    let status = r.status();
    assert!(
        status.is_success(),
        "apply: {status} {}",
        r.text().await.unwrap()
    );
    assert_eq!(source, "primary");
    let one = get(&client, &http, "/api/v1/resources/hello/r1")
        .await
        .unwrap();
    assert_eq!((one.status, one.source.as_str()), (200, "primary"));
    assert_eq!(one.body["name"], "r1");

    // The list (the replica) shows it once the replica has replayed the write.
    wait_for(
        Duration::from_secs(30),
        "the replica replays r1",
        || async {
            get(&client, &http, "/api/v1/resources")
                .await
                .filter(|a| a.source == "replica")
                .filter(|a| {
                    a.body["resources"]
                        .as_array()
                        .is_some_and(|i| i.iter().any(|r| r["name"] == "r1"))
                })
        },
    )
    .await;

    // Every read that may use the replica answers there (none reads what a standby cannot).
    for path in [
        "/api/v1/resources",
        "/api/v1/resources/roots",
        "/api/v1/resources/summary",
        "/api/v1/resources/hello/r1/summary",
        "/api/v1/resources/hello/r1/children",
        "/api/v1/resources/hello/r1/graph",
        "/api/v1/resources/hello/r1/dependencies",
        "/api/v1/resources/hello/r1/events",
        "/api/v1/events",
        "/api/v1/kinds",
        "/api/v1/cluster",
    ] {
        let a = get(&client, &http, path).await.unwrap();
        assert_eq!(
            (a.status, a.source.as_str()),
            (200, "replica"),
            "GET {path}: {}",
            a.body
        );
    }
    let metrics = client
        .get(format!("{http}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("converge_read_replica_lag_seconds ")),
        "no converge_read_replica_lag_seconds in /metrics"
    );

    // A replica whose replay is paused falls behind READ_MAX_LAG as the primary writes, and
    // is bypassed; resumed, it catches up and is used again.
    let standby = sqlx::PgPool::connect(&replica_url).await.unwrap();
    sqlx::query("SELECT pg_wal_replay_pause()")
        .execute(&standby)
        .await
        .unwrap();
    let writer = {
        let (client, http) = (client.clone(), http.clone());
        tokio::spawn(async move {
            for i in 0.. {
                let _ = client
                    .post(format!("{http}/api/v1/resources"))
                    .json(&json!({"kind": "hello", "kind_version": 1, "name": format!("w{i}"), "spec": {"greeting": "x"}}))
                    .send()
                    .await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    wait_list_from(&client, &http, "primary", "a paused replica is bypassed").await;
    sqlx::query("SELECT pg_wal_replay_resume()")
        .execute(&standby)
        .await
        .unwrap();
    standby.close().await;
    wait_list_from(&client, &http, "replica", "a resumed replica is used again").await;
    writer.abort();

    // A replica that stops is bypassed (reads keep answering, from the primary)…
    replica.stop().await.expect("stop the replica");
    wait_list_from(&client, &http, "primary", "a stopped replica is bypassed").await;
    let a = get(&client, &http, "/api/v1/resources/summary")
        .await
        .unwrap();
    assert_eq!((a.status, a.source.as_str()), (200, "primary"));
    // …and used again once it is back.
    let replica = restart_replica(&replica_dir, replica_port).await;
    wait_list_from(
        &client,
        &http,
        "replica",
        "a restarted replica is used again",
    )
    .await;

    let _ = converge.kill().await;
    let _ = replica.stop().await;
    let _ = primary.stop().await;
    let _ = std::fs::remove_dir_all(&root);
}
