//! End to end against a secured broker: the real `converge` (from `CONVERGE_BIN`, else
//! `$CARGO_TARGET_DIR/debug/converge`) serving both listeners over TLS (a CA and a
//! 127.0.0.1 certificate made in the test) with an `AUTH_FILE`. A worker built with this
//! SDK and a wrong token is refused (logged, no work, its token never logged); one reading
//! its token from a file over `https://` with `BROKER_CA_FILE` reconciles a resource. With
//! `TLS_CLIENT_CA_FILE`, a worker presenting a certificate whose SAN URI is a principal's
//! `spiffe_id` reconciles without a token, and one from another CA gets nothing.

mod common;

use std::{path::PathBuf, time::Duration};

use common::{Logs, Probe, Scripted, Worker};
use converge_auth::testing::TestCa;
use converge_control::testing::{TestDb, spawn_ready_tls, wait_for};
use converge_sdk::{Registry, WorkerConfig, WorkerToken};
use converge_testkit::{Api, Method, converge_bin, secure_env, serve_on, terminate};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::process::Child;

const KIND: &str = "sdk-secure";
const T: Duration = Duration::from_secs(30);

/// A fresh scratch directory under the system temp dir.
fn scratch(tag: &str) -> std::path::PathBuf {
    converge_auth::testing::scratch_dir(&format!("sdk-secure-{tag}"))
}

/// Lowercase hex SHA-256 of the token's UTF-8 bytes: what AUTH_FILE stores (computed here,
/// not with the server's helper, so the test checks the documented format).
fn sha256_hex(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A `converge serve` with TLS on both listeners and an AUTH_FILE.
struct SecureConverge {
    _db: TestDb,
    /// The API over HTTPS, as the admin.
    api: Api,
    /// `https://127.0.0.1:<grpc port>`.
    broker: String,
    child: Child,
}

impl SecureConverge {
    async fn start(
        dir: &std::path::Path,
        ca: &TestCa,
        principals: Value,
        admin: &str,
        extra_env: &[(&str, PathBuf)],
    ) -> Self {
        let bin = converge_bin();
        let env = secure_env(dir, ca, &principals);
        let db = TestDb::new().await;
        let ca_pem = ca.pem();
        let (child, hp, gp) = spawn_ready_tls("converge /readyz over HTTPS", &ca_pem, |hp, gp| {
            serve_on(&bin, &db.url, hp, gp)
                .envs(env.iter().chain(extra_env).map(|(k, v)| (k, v)))
                .spawn()
                .expect("spawn converge")
        })
        .await;
        Self {
            _db: db,
            api: Api::tls(hp, ca_pem, Some(admin.to_string())),
            broker: format!("https://127.0.0.1:{gp}"),
            child,
        }
    }

    /// `method /api/v1/{path}` with `token`; returns (status, body).
    async fn call_as(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let method = Method::from_bytes(method.as_bytes()).expect("an HTTP method");
        self.api.call_as(token, method, path, body).await
    }

    async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let method = Method::from_bytes(method.as_bytes()).expect("an HTTP method");
        self.api.call(method, path, body).await
    }

    /// Applies the test kind's manifest and a resource `name` of it; asserts both accepted.
    async fn apply(&self, name: &str) {
        let manifest = json!({"kind": KIND, "kind_version": 1, "reactions": [
            {"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]}]});
        self.api.apply_manifest(&manifest).await;
        let res = json!({"kind": KIND, "kind_version": 1, "name": name, "spec": {"mode": "ok"}});
        let (s, body) = self.call("POST", "resources", Some(&res)).await;
        assert!((200..300).contains(&s), "apply: {s} {body}");
    }

    async fn resource(&self, name: &str) -> Value {
        let (s, body) = self
            .call("GET", &format!("resources/{KIND}/{name}"), None)
            .await;
        assert_eq!(s, 200, "{body}");
        body
    }

    async fn stop(mut self) {
        terminate(&mut self.child, Duration::from_secs(15)).await;
    }
}

/// Test timings on top of `cfg`.
fn fast(mut cfg: WorkerConfig, name: &str) -> WorkerConfig {
    cfg.worker_name = name.into();
    cfg.drain_timeout = Duration::from_secs(5);
    cfg.readiness_poll = Duration::from_millis(50);
    cfg.reconnect_min = Duration::from_millis(50);
    cfg.reconnect_max = Duration::from_millis(500);
    cfg
}

#[tokio::test]
async fn a_worker_connects_over_tls_with_a_token_and_a_wrong_token_gets_nothing() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let dir = scratch("e2e");
    let ca = TestCa::new("sdk e2e CA");
    let (admin, worker_token, wrong_token) = ("cvg_admin_e2e", "cvg_worker_e2e", "cvg_wrong_e2e");
    let principals = json!({"principals": [
        {"name": "ops", "role": "admin", "token_sha256": sha256_hex(admin)},
        {"name": "w", "role": "worker", "token_sha256": sha256_hex(worker_token), "kinds": [KIND]},
    ]});
    let c = SecureConverge::start(&dir, &ca, principals, admin, &[]).await;

    let (s, body) = c.call_as(None, "GET", "resources", None).await;
    assert_eq!(s, 401, "the API wants a token: {body}");
    c.apply("secure").await;
    let ca_file = ca.write(&dir, "ca");

    // A wrong token: refused at the door, retried, and no work reaches it.
    let mut cfg = fast(WorkerConfig::new(c.broker.clone()), "wrong-token");
    cfg.broker_ca_file = Some(ca_file.clone());
    cfg.token = Some(WorkerToken::Value(wrong_token.into()));
    let wrong_probe = Probe::new();
    let mut wrong = Worker::start(
        cfg,
        Registry::new().with(Scripted::new(KIND, 1, &wrong_probe)),
    );
    wait_for(T, "the wrong token's UNAUTHENTICATED in the log", || {
        let text = logs.text();
        async move { text.contains("authentication credentials").then_some(()) }
    })
    .await;
    wrong.request_shutdown();
    wrong.finished().await.unwrap();
    assert_eq!(
        Probe::get(&wrong_probe.started),
        0,
        "a refused worker ran a task"
    );
    assert_ne!(c.resource("secure").await["phase"], "Ready");

    // The right token, from a file as a deployment mounts it.
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{worker_token}\n")).unwrap();
    let mut cfg = fast(WorkerConfig::new(c.broker.clone()), "right-token");
    cfg.broker_ca_file = Some(ca_file);
    cfg.token = Some(WorkerToken::File(token_file));
    let probe = Probe::new();
    let mut w = Worker::start(cfg, Registry::new().with(Scripted::new(KIND, 1, &probe)));
    let r = wait_for(T, "the resource Ready", || async {
        let r = c.resource("secure").await;
        (r["phase"] == "Ready").then_some(r)
    })
    .await;
    assert_eq!(r["status"]["name"], "secure", "{r}");
    w.request_shutdown();
    w.finished().await.unwrap();

    let text = logs.text();
    for secret in [admin, worker_token, wrong_token] {
        assert!(!text.contains(secret), "a token reached the log: {text}");
    }
    c.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_worker_with_a_client_certificate_needs_no_token_and_another_ca_gets_nothing() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let dir = scratch("mtls");
    let ca = TestCa::new("sdk e2e CA");
    let spiffe = "spiffe://converge.test/worker/sdk-rust";
    let admin = "cvg_admin_mtls";
    let principals = json!({"principals": [
        {"name": "ops", "role": "admin", "token_sha256": sha256_hex(admin)},
        {"name": "mtls-w", "role": "worker", "spiffe_id": spiffe, "kinds": [KIND]},
    ]});
    let client_ca = ca.write(&dir, "client-ca");
    let c = SecureConverge::start(
        &dir,
        &ca,
        principals,
        admin,
        &[("TLS_CLIENT_CA_FILE", client_ca)],
    )
    .await;
    c.apply("mtls").await;
    let ca_file = ca.write(&dir, "ca");

    // The same SPIFFE ID, signed by a CA the broker does not trust: no work.
    let (cert, key) = TestCa::new("rogue CA").client(spiffe).write(&dir, "rogue");
    let mut cfg = fast(WorkerConfig::new(c.broker.clone()), "rogue");
    cfg.broker_ca_file = Some(ca_file.clone());
    (cfg.cert_file, cfg.key_file) = (Some(cert), Some(key));
    let rogue_probe = Probe::new();
    let mut rogue = Worker::start(
        cfg,
        Registry::new().with(Scripted::new(KIND, 1, &rogue_probe)),
    );
    wait_for(T, "the rogue certificate refused", || {
        let text = logs.text();
        async move { text.contains("cannot load provider configs").then_some(()) }
    })
    .await;
    rogue.request_shutdown();
    rogue.finished().await.unwrap();
    assert_eq!(
        Probe::get(&rogue_probe.started),
        0,
        "a refused worker ran a task"
    );
    assert_ne!(c.resource("mtls").await["phase"], "Ready");

    // Its own CA's certificate: the SAN URI is the principal; no token at all.
    let (cert, key) = ca.client(spiffe).write(&dir, "worker");
    let mut cfg = fast(WorkerConfig::new(c.broker.clone()), "mtls");
    cfg.broker_ca_file = Some(ca_file);
    (cfg.cert_file, cfg.key_file) = (Some(cert), Some(key));
    let probe = Probe::new();
    let mut w = Worker::start(cfg, Registry::new().with(Scripted::new(KIND, 1, &probe)));
    let r = wait_for(T, "the resource Ready", || async {
        let r = c.resource("mtls").await;
        (r["phase"] == "Ready").then_some(r)
    })
    .await;
    assert_eq!(r["status"]["name"], "mtls", "{r}");
    w.request_shutdown();
    w.finished().await.unwrap();
    c.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
