//! Crash recovery: PostgreSQL itself crashes (immediate shutdown, so crash recovery empties
//! the UNLOGGED queue and outbox) while a real `converge` and a real hello worker are midway
//! through 2,000 fresh resources. After the database comes back, every resource reaches
//! Ready within 15 s (issue 24): the reaper notices the restart and rebuilds the queue from
//! `resources` at once, young rows included (they used to wait ~87 s for the windowed sweep).

mod common;

use std::time::Duration;

use common::{Worker, free_port, serve_command, wait_for};
use converge_control::devdb::{DevDb, DevDbConfig};
use serde_json::{Value, json};

const N: usize = 2000;

/// Issue 24's recovery bound: every resource Ready this soon after PostgreSQL is back.
const RECOVERY: Duration = Duration::from_secs(15);

async fn phases(client: &reqwest::Client, http: &str) -> Option<(usize, usize)> {
    let v: Value = client
        .get(format!("{http}/api/v1/resources/summary"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    let ready = v["totals"]["Ready"].as_u64().unwrap_or(0) as usize;
    let total = v["total"].as_u64().unwrap_or(0) as usize;
    Some((ready, total))
}

#[tokio::test(flavor = "multi_thread")]
async fn every_resource_reaches_ready_after_postgres_crashes_mid_run() {
    let dir = std::env::temp_dir().join(format!(
        "converge-pgcrash-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let cfg = DevDbConfig {
        data_dir: dir.clone(),
        port: Some(free_port()),
        settings: Vec::new(),
    };
    let db = DevDb::start(cfg.clone()).await.expect("start PostgreSQL");
    let (hp, gp) = (free_port(), free_port());
    // The reaper's quiet window is max(RETRY_BASE, 10 s); 30 s here makes every row young
    // for it whatever this machine's apply rate, which is what the restart must not skip.
    let mut converge = serve_command(
        &db.url(),
        hp,
        gp,
        &[("RETRY_BASE", "30s"), ("RETRY_MAX", "60s")],
    )
    .spawn()
    .expect("spawn converge");
    let http = format!("http://127.0.0.1:{hp}");
    let client = reqwest::Client::new();
    wait_for(Duration::from_secs(30), "converge ready", || async {
        client
            .get(format!("{http}/readyz"))
            .send()
            .await
            .ok()
            .filter(|r| r.status() == 200)
    })
    .await;
    let manifest = common::Converge::hello_manifest(30);
    let r = client
        .put(format!("{http}/api/v1/kinds/hello/manifest"))
        .json(&manifest)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    // Every resource is applied before the worker exists, so the crash lands mid-run and
    // every row is seconds old (younger than the reaper's 10 s quiet window) at the restart.
    let applied = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut posts = tokio::task::JoinSet::new();
    for lane in 0..8 {
        let (client, http, applied) = (client.clone(), http.clone(), applied.clone());
        posts.spawn(async move {
            for i in (lane..N).step_by(8) {
                let r = client
                    .post(format!("{http}/api/v1/resources"))
                    .json(
                        &json!({"kind": "hello", "kind_version": 1, "name": format!("r{i}"),
                                  "spec": {"sleep_ms": 20}}),
                    )
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 201);
                applied.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
    }
    while let Some(r) = posts.join_next().await {
        r.unwrap();
    }
    assert_eq!(applied.load(std::sync::atomic::Ordering::Relaxed), N);
    let worker = Worker::hello(
        &format!("http://127.0.0.1:{gp}"),
        "pg-crash",
        &[("WORKER_MAX_PARALLEL", "32")],
    );
    // Crash once some, not all, are Ready.
    let (before, _) = wait_for(Duration::from_secs(60), "a few Ready", || async {
        phases(&client, &http)
            .await
            .filter(|(ready, _)| *ready >= 10)
    })
    .await;
    assert!(
        before < N,
        "the crash must land mid-run ({before} of {N} already Ready)"
    );
    db.crash().await.expect("crash PostgreSQL");
    let db = DevDb::start(cfg).await.expect("restart PostgreSQL");
    let back = std::time::Instant::now();

    let (ready, total) = wait_for(Duration::from_secs(120), "every resource Ready", || async {
        phases(&client, &http)
            .await
            .filter(|(ready, _)| *ready == N)
    })
    .await;
    let took = back.elapsed();
    eprintln!(
        "{N} resources: {before} Ready before the crash, all Ready {took:?} after the restart"
    );
    assert_eq!((ready, total), (N, N));
    assert!(
        took <= RECOVERY,
        "recovery took {took:?}; every resource must be Ready within {RECOVERY:?} of the restart"
    );
    drop(worker);
    let _ = converge.kill().await;
    let _ = db.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}
