//! Real answers of the handlers against the OpenAPI document: a composed tree with an edge
//! and a value flow is staged, every route is called (successes and the problems it
//! documents), and each body is validated, with formats, against the schema the document
//! gives for that operation, status and content type. A field the document forgets, a wrong
//! type or nullability, or an undocumented status fails here before a client sees it.

use std::collections::BTreeSet;

use axum::{
    body::Body,
    http::{Method, Request, header},
};
use converge_control::{
    app::{
        apply_coalescer::ApplyCoalescer,
        runtime::Runtime,
        watch::{WatchConfig, WatchHub},
    },
    http::{self, AppState, openapi},
    testing::TestDb,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use uuid::Uuid;

/// The router and the document, and which (method, path, status) were checked.
struct Contract {
    app: axum::Router,
    doc: Value,
    seen: BTreeSet<(String, String, u16)>,
}

impl Contract {
    /// Calls `method uri` (matching the document's `template`) with an optional JSON body,
    /// asserts the status is `want`, validates the body against the document, and returns it.
    async fn call(
        &mut self,
        method: Method,
        template: &str,
        uri: &str,
        body: Option<Value>,
        want: u16,
    ) -> Value {
        let req = Request::builder().method(method.clone()).uri(uri);
        let req = match body {
            Some(b) => req
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(b.to_string())),
            None => req.body(Body::empty()),
        }
        .unwrap();
        self.send(req, template, want).await
    }

    async fn send(&mut self, req: Request<Body>, template: &str, want: u16) -> Value {
        let method = req.method().as_str().to_lowercase();
        let uri = req.uri().to_string();
        let resp = self.app.clone().oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let ctype = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_string());
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let body: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        };
        assert_eq!(status, want, "{method} {uri}: {body}");
        self.validate(&method, template, status, ctype.as_deref(), &body);
        self.seen.insert((method, template.to_string(), status));
        body
    }

    /// Opens the watch `uri` (resuming after `last_event_id`), checks it answers an event
    /// stream, and validates its first message's data against the document's
    /// `text/event-stream` schema; returns that data.
    async fn first_message(
        &mut self,
        template: &str,
        uri: &str,
        last_event_id: Option<&str>,
    ) -> Value {
        use futures::StreamExt;
        let mut req = Request::get(uri);
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = self
            .app
            .clone()
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "GET {uri}");
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "text/event-stream");
        let mut body = resp.into_body().into_data_stream();
        let mut text = String::new();
        let data = loop {
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), body.next())
                .await
                .expect("a message within 30 s")
                .expect("the stream is open")
                .unwrap();
            text.push_str(std::str::from_utf8(&chunk).unwrap());
            // Messages end in a blank line; a keep-alive is a comment with no `data:`.
            let complete = text.rsplit_once("\n\n").map_or("", |(done, _)| done);
            let field = |m: &str, name: &str| {
                m.lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
                    .map(str::to_string)
            };
            if let Some(event) = complete
                .split("\n\n")
                .find_map(|m| Some(json!({"id": field(m, "id")?, "data": field(m, "data")?})))
            {
                break event;
            }
        };
        // The event as a stream's schema describes it (its fields), then its data as JSON
        // against the schema its `contentSchema` names.
        self.validate("get", template, 200, Some("text/event-stream"), &data);
        let op = &self.doc["paths"][template]["get"];
        let mut event = &op["responses"]["200"]["content"]["text/event-stream"]["schema"];
        if let Some(r) = event["$ref"].as_str() {
            let name = r.trim_start_matches("#/components/schemas/");
            event = &self.doc["components"]["schemas"][name];
        }
        let content = &event["properties"]["data"]["contentSchema"];
        assert!(content.is_object(), "{template}: no contentSchema for data");
        let data: Value = serde_json::from_str(data["data"].as_str().unwrap()).unwrap();
        self.check(&format!("{template} (watch data)"), content, &data);
        self.seen
            .insert(("get".into(), format!("{template} (watch)"), 200));
        data
    }

    fn validate(
        &self,
        method: &str,
        template: &str,
        status: u16,
        ctype: Option<&str>,
        body: &Value,
    ) {
        let at = format!("{method} {template} {status}");
        let op = &self.doc["paths"][template][method];
        assert!(op.is_object(), "{at}: no such operation in the document");
        let mut response = &op["responses"][status.to_string()];
        if let Some(r) = response["$ref"].as_str() {
            let name = r.trim_start_matches("#/components/responses/");
            response = &self.doc["components"]["responses"][name];
        }
        assert!(response.is_object(), "{at}: status not documented");
        let Some(ctype) = ctype else {
            assert!(
                response.get("content").is_none(),
                "{at}: documented with a body, answered none"
            );
            return;
        };
        let essence = ctype.split(';').next().unwrap().trim();
        let schema = &response["content"][essence]["schema"];
        assert!(
            schema.is_object(),
            "{at}: content type {essence} not documented: {response}"
        );
        self.check(&at, schema, body);
    }

    /// Validates `body` against `schema`, with formats.
    fn check(&self, at: &str, schema: &Value, body: &Value) {
        // The schema with the document's components beside it, so its `$ref`s resolve.
        let mut root = schema.clone();
        root["components"] = self.doc["components"].clone();
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(&root)
            .unwrap_or_else(|e| panic!("{at}: the document's schema does not compile: {e}"));
        let errors: Vec<String> = validator
            .iter_errors(body)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{at}: {errors:#?}\nbody: {body}");
    }
}

fn hello_manifest() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/hello/kind-hello.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Inserts a composed child of `root` straight into the table (composition runs in the
/// broker, which this test does not start).
async fn child(db: &TestDb, name: &str, root: Uuid, ready: bool) -> Uuid {
    sqlx::query_scalar(
        "INSERT INTO resources (id, kind, name, owner_id, root_id, shard_id, synced_gen, health_ok)
         SELECT g, 'hello', $1, $2, $2, shard_of(g), CASE WHEN $3 THEN 1 ELSE 0 END, true
         FROM (SELECT gen_random_uuid() AS g) x
         RETURNING id",
    )
    .bind(name)
    .bind(root)
    .bind(ready)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

/// Stamps a broker's `cluster_members` row as its membership loop would, with one worker.
async fn broker_with_a_worker(db: &TestDb) {
    use converge_control::db::cluster::{self, Member, ServedKind, WorkerInfo};
    let served = |kind: &str| ServedKind {
        kind: kind.into(),
        kind_version: 1,
        ready: true,
    };
    let me = Member {
        id: "broker-1-abcdef01".into(),
        role: converge_engine::words::MemberRole::Broker,
        version: "0.1.0".into(),
        host: "broker".into(),
        pid: 1,
        addresses: json!({"grpc": "10.0.0.2:9090", "health": "10.0.0.2:8081"}),
        started_at: chrono::Utc::now(),
    };
    let worker = WorkerInfo {
        stream: 1,
        name: "w".into(),
        sdk: "rust/0.1.0".into(),
        principal: None,
        peer: Some("10.0.0.9:50000".into()),
        kinds: vec![served("hello"), served("helo")],
        max_inflight: 8,
        inflight: 0,
        connected_at: chrono::Utc::now(),
        draining: false,
        dry_runs: false,
    };
    cluster::beat(&db.pool, &me, Some(&[worker])).await.unwrap();
}

#[tokio::test]
async fn real_answers_validate_against_the_document() {
    use Method as M;
    let db = TestDb::new().await;
    let mut c = contract(&db).await;

    // Meta.
    c.call(M::GET, "/api/v1/version", "/api/v1/version", None, 200)
        .await;
    let me = c
        .call(M::GET, "/api/v1/whoami", "/api/v1/whoami", None, 200)
        .await;
    assert_eq!(me["role"], "admin", "auth is off: {me}");
    for p in ["/livez", "/healthz", "/readyz"] {
        c.call(M::GET, p, p, None, 200).await;
    }
    c.call(M::GET, "/openapi.json", "/openapi.json", None, 200)
        .await;

    // Kinds.
    let kind_manifest = "/api/v1/kinds/{kind}/manifest";
    c.call(
        M::PUT,
        kind_manifest,
        "/api/v1/kinds/hello/manifest",
        Some(hello_manifest()),
        201,
    )
    .await;
    c.call(
        M::PUT,
        kind_manifest,
        "/api/v1/kinds/hello/manifest",
        Some(hello_manifest()),
        200,
    )
    .await;
    c.call(
        M::PUT,
        kind_manifest,
        "/api/v1/kinds/hello/manifest",
        Some(json!({"kind_version": 0})),
        422,
    )
    .await;
    c.call(
        M::GET,
        kind_manifest,
        "/api/v1/kinds/hello/manifest",
        None,
        200,
    )
    .await;
    c.call(
        M::GET,
        kind_manifest,
        "/api/v1/kinds/nope/manifest",
        None,
        404,
    )
    .await;
    c.call(
        M::GET,
        "/api/v1/schemas/manifest",
        "/api/v1/schemas/manifest",
        None,
        200,
    )
    .await;
    // A broker with one worker serving hello and a kind nobody registered.
    broker_with_a_worker(&db).await;
    let kinds = c
        .call(M::GET, "/api/v1/kinds", "/api/v1/kinds", None, 200)
        .await;
    assert_eq!(kinds["kinds"][0]["workers"], 1, "{kinds}");
    let cluster = c
        .call(M::GET, "/api/v1/cluster", "/api/v1/cluster", None, 200)
        .await;
    assert_eq!(
        cluster["members"][0]["workers"][0]["unknown_kinds"],
        json!([{"kind": "helo", "kind_version": 1}])
    );
    let version_manifest = "/api/v1/kinds/{kind}/versions/{version}/manifest";
    c.call(
        M::GET,
        version_manifest,
        "/api/v1/kinds/hello/versions/1/manifest",
        None,
        200,
    )
    .await;
    c.call(
        M::GET,
        version_manifest,
        "/api/v1/kinds/hello/versions/x/manifest",
        None,
        400,
    )
    .await;
    let config = "/api/v1/kinds/{kind}/versions/{version}/config";
    c.call(
        M::GET,
        config,
        "/api/v1/kinds/hello/versions/1/config",
        None,
        200,
    )
    .await;
    let edit = json!({"max_inflight": 0, "task_deadline_seconds": 30, "resync_interval_seconds": 0,
        "orphan_grace_seconds": 60, "max_transient_attempts": 0});
    c.call(
        M::PUT,
        config,
        "/api/v1/kinds/hello/versions/1/config",
        Some(edit.clone()),
        200,
    )
    .await;
    c.call(
        M::PUT,
        config,
        "/api/v1/kinds/hello/versions/9/config",
        Some(edit),
        404,
    )
    .await;

    // Resources.
    let app = json!({"kind": "hello", "kind_version": 1, "name": "app", "labels": {"team": "web"},
        "spec": {"greeting": "hi"}});
    let applied = c
        .call(
            M::POST,
            "/api/v1/resources",
            "/api/v1/resources",
            Some(app.clone()),
            201,
        )
        .await;
    c.call(
        M::POST,
        "/api/v1/resources",
        "/api/v1/resources",
        Some(app),
        200,
    )
    .await;
    let bad =
        json!({"kind": "hello", "kind_version": 1, "name": "bad", "spec": {"greeting": 5, "x": 1}});
    c.call(
        M::POST,
        "/api/v1/resources",
        "/api/v1/resources",
        Some(bad.clone()),
        422,
    )
    .await;
    let root: Uuid = applied["uid"].as_str().unwrap().parse().unwrap();
    let a = child(&db, "app-a", root, true).await;
    let b = child(&db, "app-b", root, false).await;
    sqlx::query(
        "INSERT INTO resource_deps (dependent_id, dependency_id, owner_id, value_flows)
         VALUES ($1, $2, $3, $4)",
    )
    .bind(b)
    .bind(a)
    .bind(root)
    .bind(json!([{"dep_field": "/greeting", "src_field": "/message"}]))
    .execute(&db.pool)
    .await
    .unwrap();

    c.call(
        M::GET,
        "/api/v1/resources",
        "/api/v1/resources?limit=1",
        None,
        200,
    )
    .await;
    c.call(
        M::GET,
        "/api/v1/resources",
        "/api/v1/resources?owner=hello/app&phase=Ready&label=team:web",
        None,
        200,
    )
    .await;
    c.call(
        M::GET,
        "/api/v1/resources",
        "/api/v1/resources?limit=0",
        None,
        422,
    )
    .await;
    c.call(
        M::GET,
        "/api/v1/resources",
        "/api/v1/resources?owner=hello/none",
        None,
        404,
    )
    .await;
    c.call(
        M::GET,
        "/api/v1/resources/roots",
        "/api/v1/resources/roots",
        None,
        200,
    )
    .await;
    let summary = "/api/v1/resources/summary";
    c.call(M::GET, summary, summary, None, 200).await;
    c.call(
        M::GET,
        summary,
        "/api/v1/resources/summary?owner=hello/app",
        None,
        200,
    )
    .await;
    let one = "/api/v1/resources/{kind}/{name}";
    c.call(M::GET, one, "/api/v1/resources/hello/app", None, 200)
        .await;
    c.call(M::GET, one, "/api/v1/resources/hello/app-b", None, 200)
        .await;
    c.call(M::GET, one, "/api/v1/resources/hello/none", None, 404)
        .await;
    c.call(
        M::GET,
        one,
        "/api/v1/resources/hello/app?watch=maybe",
        None,
        400,
    )
    .await;
    c.call(
        M::GET,
        one,
        "/api/v1/resources/hello/none?watch=true",
        None,
        404,
    )
    .await;
    // A watch's messages: the first (the state) and, resumed, a log entry.
    let first = c
        .first_message(one, "/api/v1/resources/hello/app?watch=true", None)
        .await;
    assert!(first["event"].is_null() && first["resource"]["name"] == "app");
    let entry = c
        .first_message(one, "/api/v1/resources/hello/app?watch=true", Some("0"))
        .await;
    assert_eq!(entry["event"]["type"], "created");
    let log = "/api/v1/events";
    c.call(M::GET, log, "/api/v1/events?limit=2", None, 200)
        .await;
    c.call(M::GET, log, "/api/v1/events?kind=hello&name=app", None, 200)
        .await;
    c.call(M::GET, log, "/api/v1/events?x=1", None, 400).await;
    let recent = "/api/v1/events/recent";
    let newest = c
        .call(M::GET, recent, "/api/v1/events/recent?limit=2", None, 200)
        .await;
    let ids: Vec<i64> = newest["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    assert!(ids.len() == 2 && ids[0] > ids[1], "newest first: {newest}");
    assert!(newest["horizon"].as_i64().unwrap() >= ids[0], "{newest}");
    let older = c
        .call(
            M::GET,
            recent,
            &format!("/api/v1/events/recent?before={}", ids[1]),
            None,
            200,
        )
        .await;
    assert!(
        older["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["id"].as_i64().unwrap() < ids[1]),
        "{older}"
    );
    c.call(M::GET, recent, "/api/v1/events/recent?limit=0", None, 400)
        .await;
    let e = c
        .first_message(log, "/api/v1/events?watch=true&cursor=0", None)
        .await;
    assert_eq!(e["kind"], "hello");
    for (template, uri) in [
        (
            "/api/v1/resources/{kind}/{name}/children",
            "/api/v1/resources/hello/app/children",
        ),
        (
            "/api/v1/resources/{kind}/{name}/summary",
            "/api/v1/resources/hello/app/summary",
        ),
        (
            "/api/v1/resources/{kind}/{name}/dependencies",
            "/api/v1/resources/hello/app-b/dependencies",
        ),
        (
            "/api/v1/resources/{kind}/{name}/dependencies",
            "/api/v1/resources/hello/app-a/dependencies",
        ),
        (
            "/api/v1/resources/{kind}/{name}/graph",
            "/api/v1/resources/hello/app/graph?limit=2",
        ),
        (
            "/api/v1/resources/{kind}/{name}/events",
            "/api/v1/resources/hello/app/events?limit=5",
        ),
        (
            "/api/v1/resources/{kind}/{name}/spec-history",
            "/api/v1/resources/hello/app/spec-history",
        ),
        (
            "/api/v1/raw/resources/{kind}/{name}/spec/{generation}",
            "/api/v1/raw/resources/hello/app/spec/1",
        ),
        (
            "/api/v1/resources/{kind}/{name}/ops",
            "/api/v1/resources/hello/app/ops",
        ),
    ] {
        c.call(M::GET, template, uri, None, 200).await;
    }
    c.call(
        M::GET,
        "/api/v1/resources/{kind}/{name}/events",
        "/api/v1/resources/hello/app/events?x=1",
        None,
        400,
    )
    .await;
    c.call(
        M::GET,
        "/api/v1/resources/{kind}/{name}/ops/{uid}",
        "/api/v1/resources/hello/app/ops/nope",
        None,
        404,
    )
    .await;
    c.call(
        M::POST,
        "/api/v1/resources/{kind}/{name}/ops",
        "/api/v1/resources/hello/app/ops",
        Some(json!({"verb": "nope"})),
        422,
    )
    .await;
    let reconcile = "/api/v1/resources/{kind}/{name}/reconcile";
    c.call(
        M::POST,
        reconcile,
        "/api/v1/resources/hello/app/reconcile",
        None,
        202,
    )
    .await;
    c.call(
        M::POST,
        "/api/v1/resources/{kind}/{name}/quarantine",
        "/api/v1/resources/hello/app/quarantine",
        None,
        200,
    )
    .await;
    c.call(
        M::POST,
        reconcile,
        "/api/v1/resources/hello/app/reconcile",
        None,
        409,
    )
    .await;
    c.call(
        M::POST,
        "/api/v1/resources/{kind}/{name}/unquarantine",
        "/api/v1/resources/hello/app/unquarantine",
        None,
        200,
    )
    .await;
    c.call(
        M::POST,
        "/api/v1/resources/{kind}/{name}/rollback",
        "/api/v1/resources/hello/app/rollback",
        Some(json!({"generation": 1})),
        202,
    )
    .await;

    // A batch with an applied and a refused item; a body of the wrong type.
    let batch = json!([
        {"kind": "hello", "kind_version": 1, "name": "other", "spec": {}},
        bad,
    ]);
    let r = c
        .call(
            M::POST,
            "/api/v1/resources:batch",
            "/api/v1/resources:batch",
            Some(batch),
            200,
        )
        .await;
    assert_eq!(
        (r["created"].as_u64(), r["failed"].as_u64()),
        (Some(1), Some(1)),
        "{r}"
    );
    let req = Request::post("/api/v1/resources")
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from("x"))
        .unwrap();
    c.send(req, "/api/v1/resources", 415).await;

    // Provider configs and reactor bindings.
    let pc = json!({"name": "hello-default", "kind": "hello", "kind_version": 1, "is_default": true,
        "spec": {}, "data": "aGk="});
    c.call(
        M::POST,
        "/api/v1/providerconfigs",
        "/api/v1/providerconfigs",
        Some(pc.clone()),
        201,
    )
    .await;
    c.call(
        M::POST,
        "/api/v1/providerconfigs",
        "/api/v1/providerconfigs",
        Some(pc),
        200,
    )
    .await;
    c.call(
        M::GET,
        "/api/v1/providerconfigs",
        "/api/v1/providerconfigs?kind=hello",
        None,
        200,
    )
    .await;
    let named = "/api/v1/providerconfigs/{name}";
    c.call(
        M::GET,
        named,
        "/api/v1/providerconfigs/hello-default",
        None,
        200,
    )
    .await;
    c.call(
        M::DELETE,
        named,
        "/api/v1/providerconfigs/hello-default",
        None,
        204,
    )
    .await;
    c.call(
        M::DELETE,
        named,
        "/api/v1/providerconfigs/hello-default",
        None,
        404,
    )
    .await;
    c.call(
        M::GET,
        "/api/v1/reactor-bindings",
        "/api/v1/reactor-bindings",
        None,
        200,
    )
    .await;
    c.call(
        M::GET,
        "/api/v1/reactor-bindings/{name}",
        "/api/v1/reactor-bindings/none",
        None,
        404,
    )
    .await;

    c.call(M::DELETE, one, "/api/v1/resources/hello/app", None, 202)
        .await;
    let version = "/api/v1/kinds/{kind}/versions/{version}";
    c.call(
        M::DELETE,
        version,
        "/api/v1/kinds/hello/versions/1",
        None,
        409,
    )
    .await;
    c.call(
        M::DELETE,
        version,
        "/api/v1/kinds/hello/versions/7",
        None,
        404,
    )
    .await;
    assert!(c.seen.len() >= 50, "only {} answers checked", c.seen.len());
    db.pool.close().await;
}

/// A router over a fresh database, with the document to check its answers against.
async fn contract(db: &TestDb) -> Contract {
    let state = AppState {
        applies: ApplyCoalescer::start(db.pool.clone()),
        pool: db.pool.clone(),
        catalog: Default::default(),
        dispatch_hint: None,
        auth: None,
        watches: WatchHub::start(
            db.pool.clone(),
            WatchConfig::default(),
            CancellationToken::new(),
        ),
        max_bundle_bytes: 10 << 20,
        secrets: Default::default(),
        runtime: Runtime::default(),
    };
    Contract {
        app: http::router(state, 1 << 20),
        doc: serde_json::from_str(openapi::document_json()).unwrap(),
        seen: BTreeSet::new(),
    }
}

fn locations(problem: &Value) -> Vec<&str> {
    problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["location"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn one_manifest_apply_lists_every_problem_and_a_kind_version_deletes_when_unused() {
    use Method as M;
    let db = TestDb::new().await;
    let mut c = contract(&db).await;
    let put = "/api/v1/kinds/{kind}/manifest";

    // A misspelt field, a trigger and an emits value that do not exist, and a rule broken in
    // a reaction that decodes: one 422, every pointer.
    let mut bad = hello_manifest();
    bad["task_deadline_sec"] = json!(5);
    bad["reactions"] = json!([
        {"name": "work", "trigger": "specChang", "emits": ["status"]},
        {"name": "compose", "trigger": "specChange", "emits": ["children", "statuss"]},
        {"name": "restart", "trigger": "operation", "emits": ["operationOutput"]}
    ]);
    let problem = c
        .call(M::PUT, put, "/api/v1/kinds/hello/manifest", Some(bad), 422)
        .await;
    assert_eq!(
        locations(&problem),
        [
            "/reactions/0/trigger",
            "/reactions/1/emits/1",
            "/reactions/2/verb",
            "/task_deadline_sec"
        ],
        "{problem:#}"
    );
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("4 problems; first at /reactions/0/trigger"),
        "{problem:#}"
    );
    let unknown = &problem["errors"][3];
    assert_eq!(unknown["keyword"], "additionalProperties");
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .contains("did you mean \"task_deadline_secs\""),
        "{problem:#}"
    );
    // Nothing was stored.
    c.call(M::GET, put, "/api/v1/kinds/hello/manifest", None, 404)
        .await;

    // An operation may declare the schema of its output; one that does not compile is refused
    // at its pointer.
    let mut with_output = hello_manifest();
    with_output["reactions"].as_array_mut().unwrap().push(
        json!({"name": "restart", "trigger": "operation", "verb": "restart",
                     "emits": ["operationOutput"], "output_schema": {"type": "nonsense"}}),
    );
    let problem = c
        .call(
            M::PUT,
            put,
            "/api/v1/kinds/hello/manifest",
            Some(with_output.clone()),
            422,
        )
        .await;
    let at = format!(
        "/reactions/{}/output_schema",
        with_output["reactions"].as_array().unwrap().len() - 1
    );
    assert_eq!(locations(&problem), [at.as_str()], "{problem:#}");
    let last = with_output["reactions"].as_array().unwrap().len() - 1;
    with_output["reactions"][last]["output_schema"] =
        json!({"type": "object", "required": ["restarted_at"]});
    c.call(
        M::PUT,
        put,
        "/api/v1/kinds/hello/manifest",
        Some(with_output),
        201,
    )
    .await;
    let stored = c
        .call(M::GET, put, "/api/v1/kinds/hello/manifest", None, 200)
        .await;
    assert_eq!(
        stored["reactions"][last]["output_schema"]["required"],
        json!(["restarted_at"])
    );

    // A kind version with resources is kept (409 says how many); without, it goes.
    for name in ["a", "b"] {
        c.call(
            M::POST,
            "/api/v1/resources",
            "/api/v1/resources",
            Some(json!({"kind": "hello", "kind_version": 1, "name": name, "spec": {}})),
            201,
        )
        .await;
    }
    let version = "/api/v1/kinds/{kind}/versions/{version}";
    let problem = c
        .call(
            M::DELETE,
            version,
            "/api/v1/kinds/hello/versions/1",
            None,
            409,
        )
        .await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("2 resources of this version exist"),
        "{problem:#}"
    );
    sqlx::query("DELETE FROM resources")
        .execute(&db.pool)
        .await
        .unwrap();
    c.call(
        M::DELETE,
        version,
        "/api/v1/kinds/hello/versions/1",
        None,
        204,
    )
    .await;
    c.call(
        M::DELETE,
        version,
        "/api/v1/kinds/hello/versions/1",
        None,
        404,
    )
    .await;
    c.call(M::GET, put, "/api/v1/kinds/hello/manifest", None, 404)
        .await;
    // This pod forgot it at once: an apply of it is refused.
    c.call(
        M::POST,
        "/api/v1/resources",
        "/api/v1/resources",
        Some(json!({"kind": "hello", "kind_version": 1, "name": "c", "spec": {}})),
        404,
    )
    .await;
    db.pool.close().await;
}

#[tokio::test]
async fn manifest_edges_are_type_checked_at_apply_with_the_other_problems() {
    use Method as M;
    let db = TestDb::new().await;
    let mut c = contract(&db).await;
    let put = "/api/v1/kinds/{kind}/manifest";
    let leaf = |kind: &str, more: Value| {
        let mut m = json!({"kind": kind, "kind_version": 1,
            "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]});
        m.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        m
    };
    c.call(
        M::PUT,
        put,
        "/api/v1/kinds/vpc/manifest",
        Some(leaf(
            "vpc",
            json!({"status_schema": {"type": "object", "additionalProperties": false,
                "properties": {"vpc_id": {"type": "string"}, "prefix_len": {"type": "integer"}}}}),
        )),
        201,
    )
    .await;
    // The composite: its subnets take the vpc's id; its own status feeds a dependent.
    let net = |edges: Value| {
        json!({"kind": "net", "kind_version": 1,
            "spec_schema": {"type": "object", "properties": {"vpc_id": {"type": "string"}}},
            "status_schema": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
            "reactions": [{"name": "compose", "trigger": "specChange",
                           "emits": ["children", "edges", "status"]}],
            "edges": edges})
    };
    let flow = |from: &str, to: &str, dst: &str, src: &str| {
        json!({"from": {"kind": from}, "to": {"kind": to, "kind_version": 1},
               "values": [{"dependent_field": dst, "source_field": src}]})
    };

    // A string into a boolean, a status pointer the vpc cannot have, and an unknown field:
    // one 422 with all three, each flow naming both pointers and both kinds.
    let mut bad = net(json!([
        flow("net", "vpc", "/vpc_id", "/vpc_id"),
        {"from": {"kind": "net"}, "to": {"kind": "vpc"}, "values": [
            {"dependent_field": "/vpc_id", "source_field": "/vpcid"},
            {"dependent_field": "/vpc_id", "source_field": "/prefix_len"}]},
    ]));
    bad["task_deadline_sec"] = json!(5);
    let problem = c
        .call(M::PUT, put, "/api/v1/kinds/net/manifest", Some(bad), 422)
        .await;
    assert_eq!(
        locations(&problem),
        [
            "/edges/1/values/0",
            "/edges/1/values/1",
            "/task_deadline_sec"
        ],
        "{problem:#}"
    );
    let msg = |i: usize| {
        problem["errors"][i]["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        msg(0).contains("status_schema of vpc v1 has no /vpcid"),
        "{problem:#}"
    );
    for want in [
        "vpc.status/prefix_len",
        "kind vpc v1",
        "net.spec/vpc_id",
        "kind net v1",
    ] {
        assert!(msg(1).contains(want), "{want}: {problem:#}");
    }
    assert!(
        msg(1).contains("integer") && msg(1).contains("string"),
        "{problem:#}"
    );
    c.call(M::GET, put, "/api/v1/kinds/net/manifest", None, 404)
        .await;

    // A bad pointer is a schema problem; an edge into the kind itself uses its own schemas.
    let problem = c
        .call(
            M::PUT,
            put,
            "/api/v1/kinds/net/manifest",
            Some(net(json!([flow("net", "net", "vpc_id", "/ready")]))),
            422,
        )
        .await;
    assert_eq!(
        locations(&problem),
        ["/edges/0/values/0/dependent_field"],
        "{problem:#}"
    );
    let problem = c
        .call(
            M::PUT,
            put,
            "/api/v1/kinds/net/manifest",
            Some(net(json!([flow("net", "net", "/vpc_id", "/ready")]))),
            422,
        )
        .await;
    assert!(
        problem["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("a boolean cannot fill a place that takes string"),
        "{problem:#}"
    );

    // Good flows are stored with the manifest, without warnings.
    let answer = c
        .call(
            M::PUT,
            put,
            "/api/v1/kinds/net/manifest",
            Some(net(json!([flow("net", "vpc", "/vpc_id", "/vpc_id")]))),
            201,
        )
        .await;
    assert!(answer.get("warnings").is_none(), "{answer}");
    let stored = c
        .call(M::GET, put, "/api/v1/kinds/net/manifest", None, 200)
        .await;
    assert_eq!(
        stored["edges"][0]["from"],
        json!({"kind": "net", "kind_version": 1})
    );

    // A flow joining a kind not registered yet is a warning, and the manifest is stored.
    let answer = c
        .call(
            M::PUT,
            put,
            "/api/v1/kinds/net/manifest",
            Some(net(json!([
                flow("net", "vpc", "/vpc_id", "/vpc_id"),
                flow("gateway", "net", "/ready", "/ready"),
            ]))),
            200,
        )
        .await;
    let warnings = answer["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{answer}");
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .contains("kind gateway version 1 is not registered"),
        "{answer}"
    );
    db.pool.close().await;
}
