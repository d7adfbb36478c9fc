//! End to end: a worker given two brokers keeps working when the first one dies. Two real
//! `converge` processes share one fresh database: a broker-only one (`ROLE=broker`), the
//! first address, and a combined one (`ROLE=all`: the HTTP API, the control loops and the
//! second broker). Both serve TLS from one test CA, and the two entries name their hosts
//! differently (`127.0.0.1`, then `localhost`) so each connection checks its own server
//! name. Resources become Ready through the first broker; after it is SIGKILLed, new ones
//! become Ready through the second without touching the worker.

mod common;

use std::{path::Path, time::Duration};

use common::{Logs, Probe, Scripted, Worker};
use converge_auth::testing::TestCa;
use converge_control::testing::{TestDb, spawn_ready_tls, wait_for};
use converge_sdk::{Registry, WorkerConfig};
use converge_testkit::{Api, Method, converge_bin, serve_command};
use serde_json::json;
use tokio::process::Child;

const KIND: &str = "sdk-failover";
const T: Duration = Duration::from_secs(60);

/// A `converge serve` on `db` serving TLS with `cert`/`key`, plus `env`.
fn converge(db: &TestDb, cert: &Path, key: &Path, env: &[(&str, String)]) -> Child {
    serve_command(converge_bin(), &db.url)
        .env("TLS_CERT_FILE", cert)
        .env("TLS_KEY_FILE", key)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .spawn()
        .expect("spawn converge")
}

/// Waits until every resource of `names` is Ready with the status the worker wrote.
async fn all_ready(api: &Api, names: &[String]) {
    for name in names {
        let r = wait_for(T, &format!("{name} Ready"), || async {
            let (s, r) = api
                .call(Method::GET, &format!("resources/{KIND}/{name}"), None)
                .await;
            (s == 200 && r["phase"] == "Ready").then_some(r)
        })
        .await;
        assert_eq!(r["status"]["name"], name.as_str(), "{r}");
    }
}

/// Applies resource `name` of the test kind; asserts it was accepted.
async fn apply(api: &Api, name: &str) {
    let res = json!({"kind": KIND, "kind_version": 1, "name": name, "spec": {"mode": "ok"}});
    let (s, body) = api.call(Method::POST, "resources", Some(&res)).await;
    assert!((200..300).contains(&s), "apply {name}: {s} {body}");
}

/// Whether the worker logged a stream opened on `broker`.
fn opened_on(logs: &Logs, broker: &str) -> bool {
    let needle = format!("broker={broker}");
    logs.text()
        .lines()
        .any(|l| l.contains("work stream open") && l.split_whitespace().any(|w| w == needle))
}

#[tokio::test]
async fn a_worker_with_two_brokers_keeps_working_when_the_first_dies() {
    let logs = Logs::default();
    let _capture = logs.capture();
    let dir = converge_auth::testing::scratch_dir("sdk-failover");
    let ca = TestCa::new("sdk failover CA");
    let (cert, key) = ca.server("converge").write(&dir, "server");
    let ca_pem = ca.pem();
    let db = TestDb::new().await;

    let (mut all, http_port, all_grpc) = spawn_ready_tls("converge /readyz", &ca_pem, |hp, gp| {
        converge(
            &db,
            &cert,
            &key,
            &[
                ("LISTEN_ADDR", format!("127.0.0.1:{hp}")),
                ("BROKER_LISTEN_ADDR", format!("127.0.0.1:{gp}")),
            ],
        )
    })
    .await;
    // Probes of a broker-only process are on HEALTH_ADDR (the first port spawn_ready_tls
    // polls).
    let (mut first, _, first_grpc) = spawn_ready_tls("broker /readyz", &ca_pem, |hp, gp| {
        converge(
            &db,
            &cert,
            &key,
            &[
                ("ROLE", "broker".into()),
                ("HEALTH_ADDR", format!("127.0.0.1:{hp}")),
                ("BROKER_LISTEN_ADDR", format!("127.0.0.1:{gp}")),
            ],
        )
    })
    .await;
    let api = Api::tls(http_port, ca_pem.clone(), None);
    let manifest = json!({"kind": KIND, "kind_version": 1, "reactions": [
        {"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]}]});
    api.apply_manifest(&manifest).await;

    let first_addr = format!("https://127.0.0.1:{first_grpc}");
    let second_addr = format!("https://localhost:{all_grpc}");
    let mut cfg = WorkerConfig::new(first_addr.clone());
    cfg.broker_addrs.push(second_addr.clone());
    cfg.broker_ca_file = Some(ca.write(&dir, "ca"));
    cfg.worker_name = "failover".into();
    cfg.drain_timeout = Duration::from_secs(5);
    cfg.readiness_poll = Duration::from_millis(50);
    cfg.reconnect_min = Duration::from_millis(50);
    cfg.reconnect_max = Duration::from_millis(500);
    let probe = Probe::new();
    let mut w = Worker::start(cfg, Registry::new().with(Scripted::new(KIND, 1, &probe)));

    let before: Vec<String> = (0..5).map(|i| format!("before-{i}")).collect();
    for name in &before {
        apply(&api, name).await;
    }
    all_ready(&api, &before).await;
    assert!(opened_on(&logs, &first_addr), "{}", logs.text());
    assert!(
        !opened_on(&logs, &second_addr),
        "the worker left a healthy first broker"
    );

    // SIGKILL: no drain, no goodbye; the worker's stream just breaks.
    first.kill().await.expect("SIGKILL the first broker");

    let after: Vec<String> = (0..5).map(|i| format!("after-{i}")).collect();
    for name in &after {
        apply(&api, name).await;
    }
    all_ready(&api, &after).await;
    assert!(
        opened_on(&logs, &second_addr),
        "served through the second broker: {}",
        logs.text()
    );
    assert!(Probe::get(&probe.started) >= before.len() + after.len());

    w.request_shutdown();
    w.finished().await.unwrap();
    let _ = all.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
}
