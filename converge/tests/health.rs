//! Health that tells the truth (issue 43): a real `converge` answers `/readyz` 503 and gRPC
//! Health NOT_SERVING (for the server, `""`, and for the WorkerService) while it cannot reach
//! PostgreSQL, and SERVING / 200 again once it can; and from the moment a SIGTERM starts its
//! drain until it exits. The database is a PostgreSQL of this test's own (`DevDb`), stopped
//! and started again; the drain holds a hello task in flight so it lasts long enough to ask.

mod common;

use std::time::Duration;

use common::{Worker, free_port, serve_command, wait_for};
use converge_control::{
    devdb::{DevDb, DevDbConfig},
    testing::TestDb,
};
use serde_json::json;
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

/// How long a flip may take: the monitor pings every second, with a 2 s timeout.
const FLIP: Duration = Duration::from_secs(15);
/// The WorkerService's name in gRPC Health.
const WORKER_SERVICE: &str = "converge.worker.v1.WorkerService";

/// `/readyz`'s status and body (None: no answer).
async fn readyz(client: &reqwest::Client, http: &str) -> Option<(u16, String)> {
    let r = client.get(format!("{http}/readyz")).send().await.ok()?;
    let status = r.status().as_u16();
    Some((status, r.text().await.unwrap_or_default()))
}

/// gRPC Health's answer for `service` (None: no answer).
async fn grpc_health(broker: &str, service: &str) -> Option<ServingStatus> {
    let channel = tonic::transport::Channel::from_shared(broker.to_string())
        .ok()?
        .connect()
        .await
        .ok()?;
    let mut c = HealthClient::new(channel);
    let r = c
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .ok()?;
    ServingStatus::try_from(r.into_inner().status).ok()
}

/// Waits until `/readyz` answers `status` and both Health services answer `serving`.
async fn wait_health(
    client: &reqwest::Client,
    http: &str,
    broker: &str,
    status: u16,
    serving: ServingStatus,
    what: &str,
) -> String {
    wait_for(FLIP, what, || async {
        let (s, body) = readyz(client, http).await?;
        if s != status {
            return None;
        }
        for service in ["", WORKER_SERVICE] {
            if grpc_health(broker, service).await? != serving {
                return None;
            }
        }
        Some(body)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn health_and_readyz_follow_postgres_down_and_back() {
    let dir =
        std::env::temp_dir().join(format!("converge-health-{}", uuid::Uuid::new_v4().simple()));
    let cfg = DevDbConfig {
        data_dir: dir.clone(),
        port: Some(free_port()),
        settings: Vec::new(),
    };
    let db = DevDb::start(cfg.clone()).await.expect("start PostgreSQL");
    let (hp, gp) = (free_port(), free_port());
    let mut converge = serve_command(&db.url(), hp, gp, &[])
        .spawn()
        .expect("spawn converge");
    let (http, broker) = (
        format!("http://127.0.0.1:{hp}"),
        format!("http://127.0.0.1:{gp}"),
    );
    let client = reqwest::Client::new();
    wait_health(
        &client,
        &http,
        &broker,
        200,
        ServingStatus::Serving,
        "ready and SERVING",
    )
    .await;

    db.stop().await.expect("stop PostgreSQL");
    let body = wait_health(
        &client,
        &http,
        &broker,
        503,
        ServingStatus::NotServing,
        "503 and NOT_SERVING while PostgreSQL is down",
    )
    .await;
    assert!(body.contains("database"), "{body}");

    let db = DevDb::start(cfg).await.expect("start PostgreSQL again");
    wait_health(
        &client,
        &http,
        &broker,
        200,
        ServingStatus::Serving,
        "ready and SERVING once PostgreSQL is back",
    )
    .await;

    converge_testkit::terminate(&mut converge, Duration::from_secs(15)).await;
    let _ = db.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// A converge on `db` with `SHUTDOWN_DRAIN=drain`, a hello worker, and one hello task of
/// `sleep_ms` in flight (its lease taken) when this returns: (converge, HTTP URL, broker URL,
/// the worker).
async fn one_task_in_flight(
    db: &TestDb,
    drain: &str,
    sleep_ms: u64,
) -> (tokio::process::Child, String, String, Worker) {
    let (converge, hp, gp) = common::spawn_ready("converge /readyz", |hp, gp| {
        serve_command(&db.url, hp, gp, &[("SHUTDOWN_DRAIN", drain)])
            .spawn()
            .expect("spawn converge")
    })
    .await;
    let (http, broker) = (
        format!("http://127.0.0.1:{hp}"),
        format!("http://127.0.0.1:{gp}"),
    );
    let api = converge_testkit::Api::new(&http);
    api.apply_manifest(&common::Converge::hello_manifest(600))
        .await;
    let worker = Worker::hello(&broker, "drain-health", &[]);
    let (s, v) = api
        .call(
            reqwest::Method::POST,
            "resources",
            Some(&json!({"kind": "hello", "kind_version": 1, "name": "slow",
                         "spec": {"sleep_ms": sleep_ms}})),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    wait_for(FLIP, "the task in flight", || async {
        let leased: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM work_queue WHERE lease_token IS NOT NULL)",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap();
        leased.then_some(())
    })
    .await;
    (converge, http, broker, worker)
}

#[tokio::test(flavor = "multi_thread")]
async fn health_and_readyz_turn_away_from_a_draining_broker() {
    let db = TestDb::new().await;
    // One 10 s task in flight keeps the drain going while the probes are asked; it ends
    // within SHUTDOWN_DRAIN, so the drain ends with its result accepted.
    let (mut converge, http, broker, _worker) = one_task_in_flight(&db, "60s", 10_000).await;
    let client = reqwest::Client::new();
    wait_health(
        &client,
        &http,
        &broker,
        200,
        ServingStatus::Serving,
        "ready and SERVING before the drain",
    )
    .await;

    converge_testkit::signal(converge.id().expect("running"), "TERM");
    let body = wait_health(
        &client,
        &http,
        &broker,
        503,
        ServingStatus::NotServing,
        "503 and NOT_SERVING while draining",
    )
    .await;
    assert!(body.contains("draining"), "{body}");
    let status = tokio::time::timeout(Duration::from_secs(60), converge.wait())
        .await
        .expect("converge exits after its drain")
        .expect("wait for converge");
    assert!(status.success(), "{status}");
}

/// A worker still busy when `SHUTDOWN_DRAIN` runs out, and still connected, does not keep
/// converge alive: the drain releases the lease and ends the worker's stream (the gRPC
/// server's graceful shutdown waits for every open stream), so the process exits long before
/// the task would have finished, and the task waits in the queue for the next broker.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_busy_past_the_drain_window_does_not_hold_the_process() {
    let db = TestDb::new().await;
    // Five minutes of work: far longer than the drain window and the wait below.
    let (mut converge, _, _, _worker) = one_task_in_flight(&db, "2s", 300_000).await;

    converge_testkit::signal(converge.id().expect("running"), "TERM");
    let status = tokio::time::timeout(Duration::from_secs(120), converge.wait())
        .await
        .expect("converge exits while its worker is still busy")
        .expect("wait for converge");
    assert!(status.success(), "{status}");
    let (queued, leased): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(lease_token) FROM work_queue w
         JOIN resources r ON r.id = w.resource_id WHERE r.name = 'slow'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        (queued, leased),
        (1, 0),
        "the task is queued again, unleased"
    );
}
