//! Rate limits (issue 46, item 4) against the real `converge` binary: a flood from one
//! principal is answered 429 with `Retry-After` while another principal goes on unaffected
//! (RATE_LIMIT_PER_PRINCIPAL); one client address's budget (RATE_LIMIT_PER_ADDRESS) is
//! spent by WorkerService calls with bad credentials (RESOURCE_EXHAUSTED past it, while a
//! good token still gets in) and then refuses its HTTP calls, but never the probes or
//! `/metrics`; each refusal is counted in `converge_rate_limited_total{limit}`.
//!
//! And the security headers (item 6) of every answer over plain HTTP, a 429 included: the
//! Content-Security-Policy, nosniff, no referrer, and no HSTS without TLS (the TLS listener's
//! are checked in `security.rs`).
//!
//! The rates are per hour with a small burst, so a bucket never refills while a test runs:
//! every count here is exact, whatever the machine's speed.

mod common;

use std::path::Path;

use common::Converge;
use converge_auth::testing::principal_line;
use converge_proto::pb::{self, worker_service_client::WorkerServiceClient};
use reqwest::Method;
use tonic::{Code, transport::Channel};

const ALICE: &str = "tok-alice-0123456789";
const BOB: &str = "tok-bob-0123456789";
const WORKER: &str = "tok-worker-0123456789";

fn write_auth(dir: &Path) -> String {
    let path = dir.join("auth.yaml");
    let y = format!(
        "principals:\n{}{}{}",
        principal_line("alice", "viewer", ALICE, &[]),
        principal_line("bob", "viewer", BOB, &[]),
        principal_line("w", "worker", WORKER, &["*"]),
    );
    std::fs::write(&path, y).unwrap();
    path.to_str().unwrap().to_string()
}

async fn get(c: &Converge, token: Option<&str>, path: &str) -> reqwest::Response {
    let mut r = c.client.request(Method::GET, format!("{}{path}", c.http));
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    r.send().await.unwrap()
}

/// The value of `converge_rate_limited_total{limit="<limit>"}` in a scrape.
async fn refusals(c: &Converge, limit: &str) -> f64 {
    let text = get(c, None, "/metrics").await.text().await.unwrap();
    let series = format!("converge_rate_limited_total{{limit=\"{limit}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .unwrap_or_else(|| panic!("no {series} in the scrape"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_flooding_principal_is_refused_and_another_is_not() {
    let dir = converge_auth::testing::scratch_dir("ratelimit");
    let auth = write_auth(&dir);
    let c = Converge::start(&[
        ("AUTH_FILE", auth.as_str()),
        ("RATE_LIMIT_PER_PRINCIPAL", "1/h,burst=20"),
    ])
    .await;
    let mut codes = Vec::new();
    let mut refused = None;
    for _ in 0..30 {
        let r = get(&c, Some(ALICE), "/api/v1/kinds").await;
        codes.push(r.status().as_u16());
        if r.status() == 429 && refused.is_none() {
            refused = Some(r);
        }
    }
    assert_eq!(
        codes.iter().filter(|s| **s == 200).count(),
        20,
        "the burst: {codes:?}"
    );
    assert_eq!(codes[20..], [429; 10], "past the burst: {codes:?}");
    let r = refused.unwrap();
    let r_headers = r.headers().clone();
    let wait: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    // One request back per hour: the wait is most of an hour.
    assert!((60..=3600).contains(&wait), "Retry-After {wait}");
    assert_eq!(
        r.headers()["content-type"],
        "application/problem+json",
        "a problem"
    );
    let p: serde_json::Value = r.json().await.unwrap();
    assert_eq!(p["status"], 429);
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("alice") && detail.contains("RATE_LIMIT_PER_PRINCIPAL"),
        "{detail}"
    );
    // Every answer carries the security headers, the refusals too; HSTS only over TLS.
    let ok = get(&c, Some(BOB), "/api/v1/kinds").await;
    let ui = get(&c, None, "/").await;
    for (what, h) in [
        ("429", &r_headers),
        ("200", ok.headers()),
        ("ui", ui.headers()),
    ] {
        assert_eq!(
            h["content-security-policy"],
            converge_control::http::CONTENT_SECURITY_POLICY,
            "{what}"
        );
        assert!(
            h["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("script-src 'self';"),
            "{what}"
        );
        assert_eq!(h["x-content-type-options"], "nosniff", "{what}");
        assert_eq!(h["referrer-policy"], "no-referrer", "{what}");
        assert!(!h.contains_key("strict-transport-security"), "{what}");
    }
    // Bob has a bucket of his own, and the probes need none.
    for _ in 0..19 {
        assert_eq!(get(&c, Some(BOB), "/api/v1/kinds").await.status(), 200);
    }
    assert_eq!(get(&c, None, "/readyz").await.status(), 200);
    assert_eq!(refusals(&c, "principal").await, 10.0);
    assert_eq!(refusals(&c, "address").await, 0.0);
    c.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// Opens a WorkStream with `token` and its Subscribe, for the authentication answer.
async fn subscribe(channel: Channel, token: Option<&str>) -> Result<(), tonic::Status> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(pb::WorkStreamClientMsg {
        body: Some(pb::work_stream_client_msg::Body::Subscribe(pb::Subscribe {
            kinds: vec!["hello".into()],
            kind_versions: vec![1],
            max_inflight: 1,
            worker_name: "raw".into(),
            sdk: "test/0".into(),
            ..Default::default()
        })),
    })
    .await
    .unwrap();
    let mut req = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    WorkerServiceClient::new(channel)
        .work_stream(req)
        .await
        .map(|_| ())
}

#[tokio::test]
async fn bad_credentials_spend_the_address_budget_and_probes_stay_open() {
    let dir = converge_auth::testing::scratch_dir("ratelimit");
    let auth = write_auth(&dir);
    let c = Converge::start(&[
        ("AUTH_FILE", auth.as_str()),
        ("RATE_LIMIT_PER_ADDRESS", "1/h,burst=5"),
    ])
    .await;
    let channel = Channel::from_shared(c.broker.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    // Five bad attempts are each told why; the sixth and later, to slow down.
    for (i, token) in [
        None,
        Some("tok-guess-1"),
        Some("tok-guess-2"),
        None,
        Some("x"),
    ]
    .into_iter()
    .enumerate()
    {
        let e = subscribe(channel.clone(), token).await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "attempt {i}: {e:?}");
    }
    for _ in 0..3 {
        let e = subscribe(channel.clone(), Some("tok-guess-3"))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
        assert!(
            e.message().contains("RATE_LIMIT_PER_ADDRESS") && e.message().contains("retry in"),
            "{e:?}"
        );
    }
    // A good token is never slowed by the address's bad attempts.
    if let Err(e) = subscribe(channel.clone(), Some(WORKER)).await {
        assert!(
            !matches!(e.code(), Code::ResourceExhausted | Code::Unauthenticated),
            "the worker's token must get past authentication: {e:?}"
        );
    }
    // The address's one budget is spent: its HTTP calls are refused too, with a token or
    // without, but the probes and the metrics answer.
    for token in [Some(ALICE), None] {
        let r = get(&c, token, "/api/v1/kinds").await;
        assert_eq!(r.status(), 429);
        assert!(r.headers().contains_key("retry-after"));
        let p: serde_json::Value = r.json().await.unwrap();
        assert!(
            p["detail"]
                .as_str()
                .unwrap()
                .contains("RATE_LIMIT_PER_ADDRESS"),
            "{p}"
        );
    }
    assert_eq!(get(&c, None, "/").await.status(), 429, "the UI counts too");
    for path in ["/livez", "/healthz", "/readyz", "/metrics"] {
        for _ in 0..10 {
            assert_eq!(get(&c, None, path).await.status(), 200, "{path}");
        }
    }
    assert_eq!(refusals(&c, "grpc_bad_credentials").await, 3.0);
    assert_eq!(refusals(&c, "address").await, 3.0);
    assert_eq!(refusals(&c, "principal").await, 0.0);
    c.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}
