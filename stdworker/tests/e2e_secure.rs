//! End to end against a secured converge: the real `converge` (from `CONVERGE_BIN`) serving
//! HTTPS and gRPC over TLS with a certificate from a CA made in the test and an
//! `AUTH_FILE`; the real `stdworker` dials it at `https://` with `BROKER_CA_FILE` and a
//! `WORKER_TOKEN` whose SHA-256 is a worker principal's, and completes an exec task (whose
//! handler does not see the token).

mod common;

use std::time::Duration;

use common::{Converge, Stdworker, fixture, scratch_dir};
use converge_auth::testing::TestCa;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const KIND: &str = "exec-secure";

/// Lowercase hex SHA-256 of the token's UTF-8 bytes: AUTH_FILE's `token_sha256` (computed
/// here, not with the server's helper, so the test checks the documented format).
fn sha256_hex(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn stdworker_completes_a_task_over_tls_with_a_worker_token() {
    let dir = scratch_dir("secure");
    let ca = TestCa::new("stdworker e2e CA");
    let (admin, worker) = ("cvg_stdworker_admin", "cvg_stdworker_worker");
    let principals = json!({"principals": [
        {"name": "ops", "role": "admin", "token_sha256": sha256_hex(admin)},
        {"name": "std", "role": "worker", "token_sha256": sha256_hex(worker), "kinds": [KIND]},
    ]});
    let c = Converge::start_secure(&dir, &ca, &principals, admin, &[]).await;
    assert!(c.broker.starts_with("https://127.0.0.1:"), "{}", c.broker);
    let (s, body) = c
        .call_as(None, reqwest::Method::GET, "resources", None)
        .await;
    assert_eq!(s, 401, "the API wants a token: {body}");

    c.apply_manifest(&json!({
        "kind": KIND, "kind_version": 1,
        "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]}],
    }))
    .await;
    c.put_config(
        &format!("{KIND}-default"),
        KIND,
        true,
        json!({"program": "python3", "args": [fixture("handler.py")]}),
    )
    .await;
    c.apply(KIND, "secure", json!({"mode": "ok"})).await;

    let ca_file = ca.write(&dir, "ca");
    let w = Stdworker::start(
        &c.broker,
        KIND,
        &[
            ("BROKER_CA_FILE", ca_file.to_str().unwrap()),
            ("WORKER_TOKEN", worker),
        ],
    );
    let r = c
        .wait_resource(
            KIND,
            "secure",
            "Ready",
            Duration::from_secs(30),
            |v: &Value| v["phase"] == "Ready",
        )
        .await;
    assert_eq!(r["status"]["spec"], json!({"mode": "ok"}), "{r}");
    assert!(
        r["status"]["worker_token"].is_null(),
        "the worker's token reached the handler: {r}"
    );

    assert!(w.stop().await.success(), "stdworker exits 0 after SIGTERM");
    c.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
