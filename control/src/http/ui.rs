//! The embedded web UI: files from `ui/dist` (compiled in by `build.rs`) served at `/`, with
//! the SPA fallback — any other non-API path gets `index.html`, so deep links work. A binary
//! built before the UI was serves a short page saying how to build it.

use axum::{
    http::{Uri, header},
    response::{Html, IntoResponse, Response},
};

include!(concat!(env!("OUT_DIR"), "/ui_assets.rs"));

const NOT_BUILT: &str = "<!doctype html><meta charset=utf-8><title>converge</title>\
<h1>converge</h1><p>The web UI is not built into this binary. Build it with \
<code>(cd ui &amp;&amp; npm ci &amp;&amp; npm run build)</code> and rebuild <code>converge</code> \
(<code>./scripts/demo.sh</code> does both). The API is at <a href=\"/api/v1/kinds\">/api/v1</a>.</p>";

fn file(path: &str) -> Option<&'static (&'static str, &'static str, &'static [u8])> {
    UI_FILES.iter().find(|(p, _, _)| *p == path)
}

/// Serves a UI file, or `index.html` for client-side routes. A path under `/api/` that no
/// route matches is a problem+json 404 like every other API answer, so a client that
/// mistypes a path gets an error it can parse, not an empty body.
pub async fn serve(uri: Uri) -> Response {
    let path = uri.path();
    if path.starts_with("/api/") || path == "/api" {
        return super::problem::ApiError::NotFound(format!(
            "no API operation at {}; /openapi.json lists them",
            super::problem::quote(&super::problem::clipped(253, path))
        ))
        .into_response();
    }
    if let Some((_, ctype, bytes)) = file(path).filter(|_| path != "/") {
        // Vite fingerprints everything under /assets, so those can be cached for good.
        let cache = if path.starts_with("/assets/") {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        };
        return (
            [
                (header::CONTENT_TYPE, *ctype),
                (header::CACHE_CONTROL, cache),
            ],
            *bytes,
        )
            .into_response();
    }
    match file("/index.html") {
        Some((_, _, bytes)) => (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            *bytes,
        )
            .into_response(),
        None => Html(NOT_BUILT).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unknown_api_path_is_a_problem_not_the_ui() {
        for path in ["/api/v1/nosuch", "/api", "/api/v2/resources"] {
            let r = serve(path.parse().unwrap()).await;
            assert_eq!(r.status(), 404, "{path}");
            assert_eq!(
                r.headers()[header::CONTENT_TYPE],
                "application/problem+json",
                "{path}"
            );
            let body = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(v["status"], 404);
            assert!(v["detail"].as_str().unwrap().contains(path), "{v}");
        }
        // A client-side route of the UI is still the UI (index.html or the not-built page).
        let r = serve("/resources/hello/a".parse().unwrap()).await;
        assert_eq!(r.status(), 200);
    }
}
