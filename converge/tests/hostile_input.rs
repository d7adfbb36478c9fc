//! Hostile and malformed input against a real `converge` on real PostgreSQL: a problem
//! response stays small whatever was sent (a 15 MiB value failing 50 schema rules costs a
//! few KiB of answer and no memory blow-up), U+0000 is refused as a 4xx problem wherever it
//! enters (JSON bodies, path and query parameters: PostgreSQL cannot store it), a gRPC status
//! quotes a client's value short, and a deterministic fuzz over the main routes never gets a
//! 5xx.

mod common;

use std::time::Duration;

use common::Converge;
use converge_proto::pb::{self, worker_service_client::WorkerServiceClient};
use reqwest::Method;
use serde_json::{Value, json};

/// The cap on a problem body (`MAX_PROBLEM_BYTES` in `control/src/http/problem.rs`).
const MAX_PROBLEM: usize = 64 * 1024;

/// The peak resident set of process `pid` (VmHWM), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in /proc/{pid}/status"))
}

/// A kind whose spec field `v` carries 50 rules, every one of which a long run of "x" breaks.
fn fifty_rules_manifest() -> Value {
    let mut rules: Vec<Value> = Vec::new();
    rules.extend((1..=20).map(|i| json!({"maxLength": i})));
    rules.extend((1..=20).map(|i| json!({"pattern": format!("^y{{{i}}}")})));
    rules.extend(
        ["number", "integer", "boolean", "array", "object", "null"]
            .iter()
            .map(|t| json!({"type": t})),
    );
    rules.extend((0..4).map(|i| json!({"const": format!("c{i}")})));
    assert_eq!(rules.len(), 50);
    json!({"kind": "wide", "kind_version": 1,
           "spec_schema": {"type": "object", "properties": {"v": {"allOf": rules}}},
           "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]})
}

/// A kind without a spec schema: any spec reaches the database.
fn free_manifest() -> Value {
    json!({"kind": "free", "kind_version": 1,
           "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]})
}

fn is_problem(r: &reqwest::Response) -> bool {
    r.headers()
        .get("content-type")
        .is_some_and(|v| v == "application/problem+json")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_huge_value_failing_fifty_rules_gets_a_small_problem() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&fifty_rules_manifest()).await;
    let rss_before = peak_rss_kib(c.pid());

    let value = "x".repeat(15 * 1024 * 1024);
    let body = serde_json::to_vec(
        &json!({"kind": "wide", "kind_version": 1, "name": "big", "spec": {"v": value}}),
    )
    .unwrap();
    let r = c
        .client
        .post(format!("{}/api/v1/resources", c.http))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    assert!(is_problem(&r));
    let bytes = r.bytes().await.unwrap();
    let rss_after = peak_rss_kib(c.pid());
    eprintln!(
        "422 body: {} bytes; converge VmHWM {} KiB before, {} KiB after",
        bytes.len(),
        rss_before,
        rss_after
    );
    assert!(bytes.len() < MAX_PROBLEM, "{} bytes", bytes.len());
    assert!(
        rss_after < 200 * 1024,
        "converge peaked at {rss_after} KiB answering one 15 MiB apply"
    );

    // Every rule is accounted for, each error at the field's pointer with its keyword and a
    // short quote of the value; the detail summarises.
    let p: Value = serde_json::from_slice(&bytes).unwrap();
    let errors = p["errors"].as_array().unwrap();
    let omitted = p["errors_omitted"].as_u64().unwrap_or(0) as usize;
    assert_eq!(errors.len() + omitted, 50, "{p}");
    let prefix = format!("\"{}…\"", "x".repeat(64));
    for e in errors {
        assert_eq!(e["location"], "/spec/v", "{e}");
        let message = e["message"].as_str().unwrap();
        assert!(message.len() < 300, "{message}");
        assert!(e["keyword"].is_string(), "{e}");
    }
    let by_keyword = |k: &str| errors.iter().find(|e| e["keyword"] == k);
    let max_length = by_keyword("maxLength").expect("a maxLength error");
    assert_eq!(
        max_length["message"],
        format!("{prefix} is longer than 1 character"),
        "{max_length}"
    );
    for k in ["pattern", "type", "const"] {
        assert!(by_keyword(k).is_some(), "no {k} error in {p}");
    }
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("big does not satisfy kind \"wide\": 50 problems; first at /spec/v: "),
        "{detail}"
    );
    assert!(detail.len() < 1024, "{detail}");
    assert!(c.get("wide", "big").await.is_none(), "nothing is written");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn nul_characters_are_refused_where_they_enter() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(30)).await;
    c.apply_manifest(&free_manifest()).await;
    let (s, _, body) = c
        .apply(&json!({"kind": "free", "kind_version": 1, "name": "ok", "spec": {"a": 1}}))
        .await;
    assert_eq!(s, 201, "{body}");
    let nul = "a\u{0}b";

    // JSON bodies: 422 at the pointer of the string (or of the object whose key) holding it.
    let resource = |patch: Value| {
        let mut r = json!({"kind": "free", "kind_version": 1, "name": "n", "spec": {}});
        r.as_object_mut()
            .unwrap()
            .extend(patch.as_object().unwrap().clone());
        r
    };
    let reactions = json!([{"name": "w", "trigger": "specChange", "emits": ["status"]}]);
    let cases: Vec<(Method, &str, Value, &str)> = vec![
        (
            Method::POST,
            "resources",
            resource(json!({"spec": {"deep": [1, {"s": nul}]}})),
            "/spec/deep/1/s",
        ),
        (
            Method::POST,
            "resources",
            resource(json!({"spec": {nul: 1}})),
            "/spec",
        ),
        (
            Method::POST,
            "resources",
            resource(json!({"name": nul})),
            "/name",
        ),
        (
            Method::POST,
            "resources",
            resource(json!({"labels": {"team": nul}})),
            "/labels/team",
        ),
        (
            Method::POST,
            "resources",
            resource(json!({"labels": {nul: "web"}})),
            "/labels",
        ),
        (
            Method::POST,
            "resources",
            resource(json!({"kind": nul})),
            "/kind",
        ),
        (
            Method::POST,
            "resources",
            resource(json!({"provider_config_ref": nul})),
            "/provider_config_ref",
        ),
        (
            Method::PUT,
            "kinds/nul/manifest",
            json!({"kind": "nul", "kind_version": 1, "description": nul, "reactions": reactions}),
            "/description",
        ),
        (
            Method::PUT,
            "kinds/free/versions/1/config",
            json!({"max_inflight": nul}),
            "/max_inflight",
        ),
        (
            Method::POST,
            "providerconfigs",
            json!({"name": "pc", "kind": "free", "kind_version": 1, "spec": {"k": [nul]}}),
            "/spec/k/0",
        ),
        (
            Method::POST,
            "reactor-bindings",
            json!({"name": nul, "watch_kind": "free", "transition": "created", "reactor": "r"}),
            "/name",
        ),
        (
            Method::POST,
            "resources/free/ok/ops",
            json!({"verb": "x", "input": {"a": nul}}),
            "/input/a",
        ),
        (
            Method::POST,
            "resources/free/ok/ops",
            json!({"verb": nul}),
            "/verb",
        ),
        (
            Method::POST,
            "resources/free/ok/rollback",
            json!({"generation": nul}),
            "/generation",
        ),
    ];
    for (method, path, body, pointer) in cases {
        let r = c
            .client
            .request(method.clone(), format!("{}/api/v1/{path}", c.http))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        assert!(is_problem(&r), "{method} {path}: {status} not problem+json");
        let p: Value = r.json().await.unwrap();
        assert_eq!(status, 422, "{method} {path} {body}: {p}");
        assert_eq!(p["errors"][0]["location"], pointer, "{method} {path}: {p}");
        assert!(
            p["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("U+0000"),
            "{p}"
        );
    }

    // Path and query parameters: 400 naming the parameter.
    let cases: Vec<(Method, &str, &str)> = vec![
        (Method::GET, "resources/free/a%00b", "{name}"),
        (Method::GET, "resources/fr%00ee/ok", "{kind}"),
        (Method::DELETE, "resources/free/%00", "{name}"),
        (Method::POST, "resources/free/ok%00/reconcile", "{name}"),
        (Method::GET, "resources/free/ok/ops/%00", "{uid}"),
        (
            Method::GET,
            "resources/free/ok/events?cursor=%00",
            "\"cursor\"",
        ),
        (Method::GET, "kinds/a%00/manifest", "{kind}"),
        (Method::GET, "kinds/free/versions/1/config?x=%00", "\"x\""),
        (Method::DELETE, "providerconfigs/x%00", "{name}"),
        (Method::GET, "reactor-bindings/%00", "{name}"),
        (Method::GET, "resources?name=a%00", "\"name\""),
        (Method::GET, "resources?label=team:%00", "\"label\""),
        (Method::GET, "resources?kind=%00", "\"kind\""),
        (Method::GET, "resources?owner=free/%00", "\"owner\""),
        (Method::GET, "resources/roots?kind=%00", "\"kind\""),
        (Method::GET, "resources/summary?kind=%00", "\"kind\""),
        (Method::GET, "providerconfigs?name=%00", "\"name\""),
        (
            Method::GET,
            "reactor-bindings?watch_kind=%00",
            "\"watch_kind\"",
        ),
        (Method::GET, "resources?a%00=1", "name \"a\\0\""),
    ];
    for (method, path, names) in cases {
        let r = c
            .client
            .request(method.clone(), format!("{}/api/v1/{path}", c.http))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        assert!(is_problem(&r), "{method} {path}: {status} not problem+json");
        let p: Value = r.json().await.unwrap();
        assert_eq!(status, 400, "{method} {path}: {p}");
        let detail = p["detail"].as_str().unwrap();
        assert!(detail.contains(names), "{method} {path}: {detail}");
        assert!(detail.contains("U+0000"), "{method} {path}: {detail}");
    }

    // Nothing above was stored or broke anything.
    let (s, list) = c.call(Method::GET, "resources", None).await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list["resources"].as_array().unwrap().len(), 1, "{list}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grpc_status_quotes_a_huge_kind_name_short() {
    let c = Converge::start(&[]).await;
    let mut client = WorkerServiceClient::connect(c.broker.clone())
        .await
        .unwrap();
    let err = client
        .get_provider_config(pb::GetProviderConfigRequest {
            kinds: vec!["X".repeat(1 << 20)],
            kind_versions: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    let message = err.message();
    assert!(
        message.starts_with(&format!("kinds[0]: \"{}\"…", "X".repeat(64))),
        "{message:.200}"
    );
    assert!(message.len() < 200, "{} bytes", message.len());
    c.stop().await;
}

/// splitmix64: a small deterministic generator (the fuzz must replay the same requests).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// Path segments and query values, already percent-encoded (invalid UTF-8 included).
const SEGMENTS: &[&str] = &[
    "free",
    "ok",
    "hello",
    "x",
    "%00",
    "a%00b",
    "%FF",
    "%C3%28",
    "%ED%A0%80",
    "%F4%90%80%80",
    "..",
    "%2F",
    "%25",
    "%",
    "_",
    "%5C",
    "a%20b",
    "%E2%80%8B",
    "%EF%BF%BF",
    "-1",
    "0",
    "1",
    "32767",
    "32768",
    "2147483648",
    "99999999999999999999",
    "1e308",
    "NaN",
    "00000000-0000-0000-0000-000000000000",
    "null",
    "true",
    "%7B%7D",
    "Ready",
    "free/ok",
    ":",
    "a:b",
    "team:web",
];

const QUERY_KEYS: &[&str] = &[
    "kind",
    "phase",
    "owner",
    "name",
    "label",
    "limit",
    "cursor",
    "offset",
    "default",
    "watch_kind",
    "reactor",
    "kind_version",
    "force",
    "x",
    "%00",
    "%FF",
];

/// Strings for JSON values and keys.
fn edge_string(rng: &mut Rng) -> String {
    match rng.below(12) {
        0 => String::new(),
        1 => "\u{0}".into(),
        2 => "a\u{0}".into(),
        3 => "\u{FFFF}\u{10FFFF}é".into(),
        4 => "y".repeat(2000),
        5 => "ok".into(),
        6 => "free".into(),
        7 => "%00".into(),
        8 => "\\".into(),
        9 => "' OR 1=1 --".into(),
        10 => "a/b~c".into(),
        _ => "\u{1}\u{1f}\u{7f}".into(),
    }
}

fn edge_value(rng: &mut Rng, depth: usize) -> Value {
    let scalar_only = depth == 0;
    match rng.below(if scalar_only { 8 } else { 10 }) {
        0 => Value::Null,
        1 => json!(rng.chance(50)),
        2 => json!(*rng.pick(&[0i64, -1, 1, i64::MIN, i64::MAX, 32768, 2_147_483_648])),
        3 => json!(u64::MAX),
        4 => json!(*rng.pick(&[1e308, -1e308, 5e-324, 0.5, -0.0])),
        5..=7 => Value::String(edge_string(rng)),
        8 => Value::Array(
            (0..rng.below(4))
                .map(|_| edge_value(rng, depth - 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..rng.below(4))
                .map(|_| (edge_string(rng), edge_value(rng, depth - 1)))
                .collect(),
        ),
    }
}

/// Nested arrays `depth` deep, as JSON text.
fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// A field: the valid value most of the time, an edge value otherwise.
fn field(rng: &mut Rng, valid: Value) -> Value {
    if rng.chance(75) {
        valid
    } else {
        edge_value(rng, 2)
    }
}

/// What a route's body looks like when well formed, with fields sometimes replaced.
fn body_for(rng: &mut Rng, shape: &str) -> Value {
    let name = Value::String(SEGMENTS[rng.below(3)].into());
    let mut v = match shape {
        "resource" => {
            // Values inside the spec and labels, where they reach the database.
            let inner = edge_value(rng, 2);
            let label = Value::String(edge_string(rng));
            json!({
                "kind": field(rng, json!("free")), "kind_version": field(rng, json!(1)),
                "name": field(rng, name), "labels": field(rng, json!({"team": label})),
                "spec": field(rng, json!({"a": inner})),
            })
        }
        "manifest" => json!({
            "kind": field(rng, json!("fz")), "kind_version": field(rng, json!(1)),
            "description": field(rng, json!("d")),
            "spec_schema": field(rng, json!({"type": "object"})),
            "reactions": field(rng, json!([{"name": "w", "trigger": "specChange", "emits": ["status"]}])),
        }),
        "config" => json!({
            "max_inflight": field(rng, json!(1)), "task_deadline_seconds": field(rng, json!(30)),
            "resync_interval_seconds": field(rng, json!(0)),
            "orphan_grace_seconds": field(rng, json!(0)),
            "max_transient_attempts": field(rng, json!(3)),
        }),
        "providerconfig" => {
            let inner = edge_value(rng, 2);
            json!({
                "name": field(rng, name), "kind": field(rng, json!("free")),
                "kind_version": field(rng, json!(1)), "is_default": field(rng, json!(false)),
                "spec": field(rng, json!({"a": inner})), "data": field(rng, json!("aGk=")),
            })
        }
        "binding" => json!({
            "name": field(rng, name), "watch_kind": field(rng, json!("free")),
            "transition": field(rng, json!("created")), "reactor": field(rng, json!("free")),
            "label_match": field(rng, json!({})), "enabled": field(rng, json!(true)),
        }),
        "op" => {
            let inner = edge_value(rng, 2);
            json!({"verb": field(rng, json!("x")), "input": field(rng, json!({"a": inner}))})
        }
        _ => json!({"generation": field(rng, json!(1))}),
    };
    // Now and then a field nobody declared.
    if rng.chance(10) {
        v[edge_string(rng)] = edge_value(rng, 1);
    }
    v
}

/// One raw body: JSON for `shape` mostly, sometimes text that is not what the route wants.
fn raw_body(rng: &mut Rng, shape: &str) -> Vec<u8> {
    match rng.below(20) {
        0 => Vec::new(),
        1 => b"{".to_vec(),
        2 => b"\xff\xfe{}".to_vec(),
        3 => br#"{"a": "\ud800"}"#.to_vec(),
        4 => b"1e999999".to_vec(),
        5 => nested(*rng.pick(&[100, 127, 200, 5000])).into_bytes(),
        6 => format!(
            r#"{{"kind": "free", "kind_version": 1, "name": "deep", "spec": {{"a": {}}}}}"#,
            nested(*rng.pick(&[10, 100, 120]))
        )
        .into_bytes(),
        7 => b"[]".to_vec(),
        _ => serde_json::to_vec(&body_for(rng, shape)).unwrap(),
    }
}

/// (method, path template, body shape); `{k}`, `{n}`, `{u}`, `{v}` are filled per request.
const ROUTES: &[(&str, &str, &str)] = &[
    ("POST", "resources", "resource"),
    ("GET", "resources", ""),
    ("GET", "resources/roots", ""),
    ("GET", "resources/summary", ""),
    ("GET", "resources/{k}/{n}", ""),
    ("DELETE", "resources/{k}/{n}", ""),
    ("GET", "resources/{k}/{n}/children", ""),
    ("GET", "resources/{k}/{n}/dependencies", ""),
    ("GET", "resources/{k}/{n}/graph", ""),
    ("GET", "resources/{k}/{n}/summary", ""),
    ("POST", "resources/{k}/{n}/reconcile", ""),
    ("POST", "resources/{k}/{n}/quarantine", ""),
    ("POST", "resources/{k}/{n}/unquarantine", ""),
    ("POST", "resources/{k}/{n}/ops", "op"),
    ("GET", "resources/{k}/{n}/ops", ""),
    ("GET", "resources/{k}/{n}/ops/{u}", ""),
    ("GET", "resources/{k}/{n}/events", ""),
    ("GET", "resources/{k}/{n}/spec-history", ""),
    ("POST", "resources/{k}/{n}/rollback", "rollback"),
    ("GET", "raw/resources/{k}/{n}/spec/{v}", ""),
    ("GET", "kinds", ""),
    ("PUT", "kinds/{k}/manifest", "manifest"),
    ("GET", "kinds/{k}/manifest", ""),
    ("GET", "kinds/{k}/versions/{v}/manifest", ""),
    ("DELETE", "kinds/{k}/versions/{v}", ""),
    ("GET", "schemas/manifest", ""),
    ("PUT", "kinds/{k}/versions/{v}/config", "config"),
    ("GET", "kinds/{k}/versions/{v}/config", ""),
    ("POST", "providerconfigs", "providerconfig"),
    ("GET", "providerconfigs", ""),
    ("GET", "providerconfigs/{n}", ""),
    ("DELETE", "providerconfigs/{n}", ""),
    ("POST", "reactor-bindings", "binding"),
    ("GET", "reactor-bindings", ""),
    ("GET", "reactor-bindings/{n}", ""),
    ("DELETE", "reactor-bindings/{n}", ""),
];

#[tokio::test(flavor = "multi_thread")]
async fn fuzzed_requests_never_get_a_server_error() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(30)).await;
    c.apply_manifest(&free_manifest()).await;
    let (s, _, body) = c
        .apply(&json!({"kind": "free", "kind_version": 1, "name": "ok", "spec": {"a": 1}}))
        .await;
    assert_eq!(s, 201, "{body}");
    // A hang guard only: every request is expected back in milliseconds.
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();

    let mut rng = Rng(0x00c0_ffee_2024);
    let mut failures = Vec::new();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    // Two requests in five carry a body, so bodies reach the handlers often.
    let with_body: Vec<_> = ROUTES.iter().filter(|r| !r.2.is_empty()).copied().collect();
    for i in 0..500 {
        let (method, template, shape) = if rng.chance(40) {
            *rng.pick(&with_body)
        } else {
            *rng.pick(ROUTES)
        };
        let seg = |rng: &mut Rng, valid: &str| {
            if rng.chance(70) {
                valid.to_string()
            } else {
                rng.pick(SEGMENTS).to_string()
            }
        };
        let path = template
            .replace("{k}", &seg(&mut rng, "free"))
            .replace("{n}", &seg(&mut rng, "ok"))
            .replace(
                "{u}",
                &seg(&mut rng, "00000000-0000-0000-0000-000000000000"),
            )
            .replace("{v}", &seg(&mut rng, "1"));
        let mut url = format!("{}/api/v1/{path}", c.http);
        if rng.chance(50) {
            let pairs: Vec<String> = (0..1 + rng.below(3))
                .map(|_| format!("{}={}", rng.pick(QUERY_KEYS), rng.pick(SEGMENTS)))
                .collect();
            url = format!("{url}?{}", pairs.join("&"));
        }
        let mut req = client.request(method.parse::<Method>().unwrap(), &url);
        let mut sent = String::new();
        if !shape.is_empty() {
            let body = raw_body(&mut rng, shape);
            sent = String::from_utf8_lossy(&body).chars().take(200).collect();
            let ctype = match rng.below(10) {
                0 => None,
                1 => Some("text/plain"),
                2 => Some("application/merge-patch+json"),
                _ => Some("application/json"),
            };
            if let Some(t) = ctype {
                req = req.header("content-type", t);
            }
            req = req.body(body);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        *statuses.entry(status).or_default() += 1;
        if status >= 500 {
            let text: String = r
                .text()
                .await
                .unwrap_or_default()
                .chars()
                .take(300)
                .collect();
            failures.push(format!(
                "#{i} {method} {url} body {sent:?} -> {status} {text}"
            ));
        }
    }
    eprintln!("status counts: {statuses:?}");
    assert!(
        failures.is_empty(),
        "{} server errors:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The fuzz reached past the front door too: some requests succeeded.
    assert!(
        statuses.keys().any(|s| (200..300).contains(s)),
        "{statuses:?}"
    );
    c.stop().await;
}
