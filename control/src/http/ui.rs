//! The embedded web UI: files from `ui/dist` (compiled in by `build.rs`) served at `/`, with
//! the SPA fallback — any other non-API path gets `index.html`, so deep links work. A binary
//! built before the UI was serves a short page saying how to build it.

use axum::{
    http::{StatusCode, Uri, header},
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

/// Serves a UI file, or `index.html` for client-side routes.
pub async fn serve(uri: Uri) -> Response {
    let path = uri.path();
    if path.starts_with("/api/") {
        return StatusCode::NOT_FOUND.into_response();
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
