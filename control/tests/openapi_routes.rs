//! The OpenAPI document against the router it describes: the router serves exactly the
//! documented paths (plus the reference page's files), each documented path answers exactly
//! its documented methods, and every operation documents the problem+json errors it can
//! answer.
//!
//! The router is read through axum's `Debug` output, which lists every route's path: axum
//! has no other way to enumerate routes. Should that output change, the first test finds no
//! path and says so, rather than passing on an empty set.

use std::collections::BTreeSet;

use axum::{
    body::Body,
    http::{Method, Request, StatusCode, header},
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
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// Routes served that are not operations of the document: Swagger UI's files, served like
/// the web UI's, and Prometheus's `/metrics`.
const NOT_OPERATIONS: [&str; 4] = ["/docs", "/docs/", "/docs/{*rest}", "/metrics"];

fn document() -> Value {
    serde_json::from_str(openapi::document_json()).expect("the document is JSON")
}

fn documented_paths(doc: &Value) -> BTreeSet<String> {
    doc["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .cloned()
        .collect()
}

fn app(pool: sqlx::PgPool) -> axum::Router {
    router(pool, CancellationToken::new())
}

/// The router over a pool that must never connect: its event-log tail is stopped at once.
fn app_without_db(pool: sqlx::PgPool) -> axum::Router {
    let stopped = CancellationToken::new();
    stopped.cancel();
    router(pool, stopped)
}

fn router(pool: sqlx::PgPool, stop: CancellationToken) -> axum::Router {
    let state = AppState {
        watches: WatchHub::start(pool.clone(), WatchConfig::default(), stop),
        applies: ApplyCoalescer::start(pool.clone()),
        pool,
        catalog: Default::default(),
        runtime: Runtime::default(),
        dispatch_hint: None,
        auth: None,
        max_bundle_bytes: 10 << 20,
        secrets: Default::default(),
    };
    http::router(state, 1 << 20)
}

/// Every quoted string in `text` that starts with `/`.
fn quoted_paths(text: &str) -> BTreeSet<String> {
    text.split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| s.starts_with('/') && !s.contains("__private__"))
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn the_router_serves_exactly_the_documented_paths() {
    // No request reaches the database here: a lazy pool never connects.
    let pool = sqlx::PgPool::connect_lazy("postgres://localhost/unused").unwrap();
    // Only the path router: the fallback router lists the fallback's own catch-all.
    let debug = format!("{:?}", app_without_db(pool));
    let paths = debug.split("fallback_router").next().unwrap();
    let served = quoted_paths(paths);
    assert!(
        served.contains("/api/v1/resources"),
        "axum's Debug output no longer lists route paths; find another way to enumerate \
         them: {served:?}"
    );
    let mut expected = documented_paths(&document());
    expected.extend(NOT_OPERATIONS.map(str::to_string));
    let undocumented: Vec<_> = served.difference(&expected).collect();
    let unserved: Vec<_> = expected.difference(&served).collect();
    assert!(
        undocumented.is_empty() && unserved.is_empty(),
        "served but not documented: {undocumented:?}; documented but not served: {unserved:?}"
    );
}

/// `template` with each `{param}` replaced by a value of the right type.
fn concrete(template: &str) -> String {
    template
        .replace("{kind}", "k")
        .replace("{name}", "n")
        .replace("{version}", "1")
        .replace("{generation}", "1")
        .replace("{uid}", "00000000-0000-0000-0000-000000000000")
}

#[tokio::test]
async fn each_documented_path_answers_exactly_its_documented_methods() {
    let db = TestDb::new().await;
    let doc = document();
    let app = app(db.pool.clone());
    let mut checked = 0;
    for (template, item) in doc["paths"].as_object().unwrap() {
        for method in [
            Method::GET,
            Method::PUT,
            Method::POST,
            Method::DELETE,
            Method::PATCH,
        ] {
            let documented = item.get(method.as_str().to_lowercase()).is_some();
            let req = Request::builder()
                .method(method.clone())
                .uri(concrete(template))
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from("{}"))
                .unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            let status = resp.status();
            let ctype = resp
                .headers()
                .get(header::CONTENT_TYPE)
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            if documented {
                // A handler answered: not the router's 405, not the fallback's bare 404.
                assert_ne!(
                    status,
                    StatusCode::METHOD_NOT_ALLOWED,
                    "{method} {template}"
                );
                assert!(
                    status != StatusCode::NOT_FOUND || ctype == "application/problem+json",
                    "{method} {template}: {status} {ctype:?}: no handler answered"
                );
                checked += 1;
            } else {
                assert_eq!(
                    status,
                    StatusCode::METHOD_NOT_ALLOWED,
                    "{method} {template} is served but not documented"
                );
            }
        }
    }
    assert!(checked >= 35, "only {checked} operations checked");
    db.pool.close().await;
}

#[test]
fn operations_are_named_once_and_document_their_problems() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut ids = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap_or_default();
            assert!(
                ids.insert(id.to_string()),
                "{method} {path}: operationId {id:?} twice"
            );
        }
    }
    let problem = &doc["components"]["schemas"]["Problem"];
    for field in [
        "type",
        "title",
        "status",
        "detail",
        "errors",
        "errors_omitted",
    ] {
        assert!(
            problem["properties"].get(field).is_some(),
            "Problem lacks {field}"
        );
    }
    for (path, item) in doc["paths"].as_object().unwrap() {
        if !path.starts_with("/api/v1") {
            continue;
        }
        for (method, op) in item.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            let mut needed = vec!["400", "401", "403", "500"];
            if op.get("requestBody").is_some() {
                needed.extend(["413", "415", "422"]);
            }
            for status in needed {
                assert!(
                    responses.contains_key(status),
                    "{method} {path} does not document {status}"
                );
            }
            for (status, r) in responses {
                if status.starts_with('4') || status.starts_with('5') {
                    let name = r["$ref"].as_str().unwrap_or_else(|| {
                        panic!("{method} {path} {status} is not a problem response")
                    });
                    let name = name.trim_start_matches("#/components/responses/");
                    let content = &doc["components"]["responses"][name]["content"];
                    assert!(
                        content.get("application/problem+json").is_some(),
                        "{method} {path} {status}: {name} is not problem+json"
                    );
                } else {
                    assert!(
                        r.get("$ref").is_none(),
                        "{method} {path} {status} is a success with a problem body"
                    );
                }
            }
        }
    }
}

/// GETs `uri` from a router without a database; returns (status, content type, body).
async fn get_text(uri: &str) -> (StatusCode, String, String) {
    let pool = sqlx::PgPool::connect_lazy("postgres://localhost/unused").unwrap();
    let req = Request::get(uri).body(Body::empty()).unwrap();
    let resp = app_without_db(pool).oneshot(req).await.unwrap();
    let status = resp.status();
    let ctype = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, ctype, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn the_reference_page_is_served_from_the_binary_alone() {
    let (status, _, _) = get_text("/docs").await;
    assert!(status.is_redirection(), "/docs answers {status}");
    let (status, ctype, html) = get_text("/docs/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(ctype.starts_with("text/html"), "{ctype}");
    // Every script and stylesheet the page names is one of its own files, served here.
    let mut assets = Vec::new();
    for attr in ["src=\"", "href=\""] {
        for part in html.split(attr).skip(1) {
            let url = part.split('"').next().unwrap();
            assert!(
                !url.contains("://") && !url.starts_with("//"),
                "the page loads {url} from elsewhere"
            );
            assets.push(url.trim_start_matches("./").to_string());
        }
    }
    assert!(assets.iter().any(|a| a.ends_with(".js")), "{html}");
    for asset in assets {
        let (status, _, body) = get_text(&format!("/docs/{asset}")).await;
        assert_eq!(status, StatusCode::OK, "/docs/{asset}");
        if asset.ends_with("initializer.js") {
            assert!(body.contains("/openapi.json"), "{body}");
            assert!(!body.contains("://"), "{body}");
        }
    }
    let (status, ctype, doc) = get_text("/openapi.json").await;
    assert_eq!(
        (status, ctype.as_str()),
        (StatusCode::OK, "application/json")
    );
    assert_eq!(doc, openapi::document_json());
}
