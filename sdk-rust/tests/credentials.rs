//! The worker's broker credentials against the in-process broker double: the bearer token
//! on both calls (and none without one), a token file re-read at every reconnect, TLS with
//! `BROKER_CA_FILE` and a client certificate, a broker certificate from another CA refused
//! (logged, never connected, the token never logged), and unusable credential files that
//! stop `run_worker` at once, naming their variable.

mod common;

use std::{path::PathBuf, sync::Arc};

use common::{Logs, Probe, Scripted, TestBroker, Worker, wait_for, within};
use converge_auth::testing::TestCa;
use converge_sdk::{Registry, WorkerConfig, WorkerError, WorkerToken};

/// A fresh scratch directory under the system temp dir.
fn scratch(tag: &str) -> std::path::PathBuf {
    converge_auth::testing::scratch_dir(&format!("sdk-credentials-{tag}"))
}

fn registry(probe: &Arc<Probe>) -> Registry {
    Registry::new().with(Scripted::new("k", 1, probe))
}

#[tokio::test]
async fn the_token_rides_both_calls_and_its_file_is_reread_at_every_reconnect() {
    let mut broker = TestBroker::start().await;
    let dir = scratch("token");
    let file = dir.join("token");
    std::fs::write(&file, "first-token\n").unwrap();
    let mut cfg = Worker::config(&broker);
    cfg.token = Some(WorkerToken::File(file.clone()));
    let probe = Probe::new();
    let mut w = Worker::start(cfg, registry(&probe));

    let mut conn = broker.conn().await;
    conn.subscribe().await;
    assert_eq!(conn.authorization.as_deref(), Some("Bearer first-token"));
    assert_eq!(
        broker
            .config_auth
            .lock()
            .unwrap()
            .first()
            .cloned()
            .flatten(),
        Some("Bearer first-token".to_string()),
        "the config prime carries it too"
    );

    // A rotated token (surrounding whitespace trimmed) is used from the next connection on.
    std::fs::write(&file, "  second-token \n").unwrap();
    conn.close();
    let mut conn = broker.conn().await;
    conn.subscribe().await;
    assert_eq!(conn.authorization.as_deref(), Some("Bearer second-token"));
    assert_eq!(
        broker.config_auth.lock().unwrap().last().cloned().flatten(),
        Some("Bearer second-token".to_string()),
        "the re-pull after the reconnect carries the new token"
    );

    w.request_shutdown();
    w.finished().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn without_a_token_no_authorization_is_sent() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let mut w = Worker::start(Worker::config(&broker), registry(&probe));
    let mut conn = broker.conn().await;
    conn.subscribe().await;
    assert_eq!(conn.authorization, None);
    assert_eq!(broker.config_auth.lock().unwrap().first(), Some(&None));
    w.request_shutdown();
    w.finished().await.unwrap();
}

#[tokio::test]
async fn tls_with_the_ca_file_and_a_client_certificate_connects() {
    let ca = TestCa::new("sdk test CA");
    let server = ca.server("broker");
    // The double requires a client certificate from the same CA (mutual TLS).
    let mut broker = TestBroker::start_tls(&server.cert, &server.key, Some(&ca.pem())).await;
    assert!(
        broker.addr.starts_with("https://127.0.0.1:"),
        "{}",
        broker.addr
    );
    let dir = scratch("tls");
    let (cert, key) = ca.client("spiffe://test/worker").write(&dir, "worker");
    let mut cfg = Worker::config(&broker);
    cfg.broker_ca_file = Some(ca.write(&dir, "ca"));
    cfg.cert_file = Some(cert);
    cfg.key_file = Some(key);
    cfg.token = Some(WorkerToken::Value("tls-token".into()));
    let probe = Probe::new();
    let mut w = Worker::start(cfg, registry(&probe));

    let mut conn = broker.conn().await;
    let sub = conn.subscribe().await;
    assert_eq!(sub.kinds, vec!["k".to_string()]);
    assert_eq!(conn.authorization.as_deref(), Some("Bearer tls-token"));
    w.request_shutdown();
    w.finished().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_broker_certificate_from_another_ca_is_refused_and_the_token_never_logged() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let ca = TestCa::new("sdk test CA");
    let server = ca.server("broker");
    let broker = TestBroker::start_tls(&server.cert, &server.key, None).await;
    let dir = scratch("other-ca");
    let mut cfg = Worker::config(&broker);
    cfg.broker_ca_file = Some(TestCa::new("another CA").write(&dir, "other"));
    cfg.token = Some(WorkerToken::Value("never-logged-token".into()));
    let probe = Probe::new();
    let mut w = Worker::start(cfg, registry(&probe));

    // The handshake fails on the certificate, the prime is retried, and no call ever
    // reaches the broker.
    wait_for("the refused certificate in the log", || {
        logs.text().contains("cannot load provider configs")
            && logs.text().to_lowercase().contains("certificate")
    })
    .await;
    assert_eq!(
        broker
            .config_pulls
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    w.request_shutdown();
    w.finished().await.unwrap();
    let text = logs.text();
    assert!(text.contains("worker starting"), "{text}");
    assert!(!text.contains("never-logged-token"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn unusable_credential_files_stop_run_worker_naming_the_variable() {
    let ca = TestCa::new("sdk test CA");
    let dir = scratch("bad-files");
    let good_ca = ca.write(&dir, "ca");
    let (cert, key) = ca.client("spiffe://test/w").write(&dir, "w");
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not PEM at all").unwrap();
    let empty = dir.join("empty");
    std::fs::write(&empty, " \n").unwrap();
    let not_a_cert = dir.join("not-a-cert.pem");
    std::fs::write(
        &not_a_cert,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let missing = dir.join("missing");

    type Edit = Box<dyn Fn(&mut WorkerConfig)>;
    let with_ca = |p: &PathBuf| -> Edit {
        let p = p.clone();
        Box::new(move |c: &mut WorkerConfig| c.broker_ca_file = Some(p.clone()))
    };
    let with_pair = |c: &PathBuf, k: &PathBuf| -> Edit {
        let (c, k) = (c.clone(), k.clone());
        Box::new(move |cfg: &mut WorkerConfig| {
            cfg.cert_file = Some(c.clone());
            cfg.key_file = Some(k.clone());
        })
    };
    let with_token_file = |p: &PathBuf| -> Edit {
        let p = p.clone();
        Box::new(move |c: &mut WorkerConfig| c.token = Some(WorkerToken::File(p.clone())))
    };
    let cases: Vec<(Edit, &str, &str)> = vec![
        (
            with_token_file(&missing),
            "WORKER_TOKEN_FILE",
            "cannot read",
        ),
        (with_token_file(&empty), "WORKER_TOKEN_FILE", "empty"),
        (with_ca(&missing), "BROKER_CA_FILE", "cannot read"),
        (with_ca(&garbage), "BROKER_CA_FILE", "no PEM certificate"),
        (with_ca(&not_a_cert), "BROKER_CA_FILE", "certificate"),
        (with_pair(&garbage, &key), "WORKER_CERT_FILE", "no PEM"),
        (with_pair(&cert, &garbage), "WORKER_KEY_FILE", "private key"),
        (with_pair(&cert, &missing), "WORKER_KEY_FILE", "cannot read"),
    ];
    for (edit, var, needle) in cases {
        let mut cfg = WorkerConfig::new("https://127.0.0.1:1");
        cfg.broker_ca_file = Some(good_ca.clone());
        edit(&mut cfg);
        let probe = Probe::new();
        let res = within(
            "run_worker to refuse",
            converge_sdk::run_worker(cfg, registry(&probe), std::future::pending()),
        )
        .await;
        let Err(WorkerError::Config(e)) = res else {
            panic!("{var}: expected a config error, got {res:?}");
        };
        assert_eq!(e.var(), var, "{e}");
        assert!(e.to_string().contains(needle), "{var}: {e}");
    }

    // TLS files beside a plaintext address protect nothing: refused too.
    let mut cfg = WorkerConfig::new("http://127.0.0.1:1");
    cfg.broker_ca_file = Some(good_ca);
    let probe = Probe::new();
    let res = converge_sdk::run_worker(cfg, registry(&probe), std::future::pending()).await;
    let Err(WorkerError::Config(e)) = res else {
        panic!("expected a config error, got {res:?}");
    };
    assert!(e.to_string().contains("https://"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
