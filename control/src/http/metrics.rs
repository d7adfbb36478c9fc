//! `GET /metrics`: the process's Prometheus metrics in the text format, and the middleware
//! that counts and times every HTTP request by its route template.
//!
//! Open like the probes (the auth guard checks `/api/v1` only) and outside the OpenAPI
//! document: it is for Prometheus, not a call of the API. The families and why a scrape is
//! cheap are in `converge_engine::metrics`.

use std::time::Instant;

use axum::{
    extract::{MatchedPath, Request, State},
    http::header,
    middleware::Next,
    response::{IntoResponse, Response},
};
use converge_engine::metrics::{self, RequestLabels, RouteLabel};
use sqlx::PgPool;

use super::AppState;

/// The `route` label of a request no route matched: the UI's files (served by the
/// fallback) and unknown paths, counted together so a scan of random paths adds no series.
pub const FALLBACK_ROUTE: &str = "fallback";

/// `GET /metrics` on the API's listener.
pub async fn serve(State(s): State<AppState>) -> Response {
    scrape(&s.pool).await
}

/// The scrape itself, for any router that holds the process's pool (the API's, and the
/// probe router of a broker-only process).
pub async fn scrape(pool: &PgPool) -> Response {
    let body = metrics::render(pool).await;
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], body).into_response()
}

/// Counts and times each request under its matched route template (`MatchedPath`, set by
/// the router before a `Router::layer` middleware runs), never the raw path, so the label
/// has as many values as the router has routes. A streamed response is timed to its
/// headers.
pub async fn track(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or(FALLBACK_ROUTE, MatchedPath::as_str)
        .to_owned();
    let started = Instant::now();
    let resp = next.run(req).await;
    let m = metrics::metrics();
    m.http_requests
        .get_or_create(&RequestLabels {
            route: route.clone(),
            code: resp.status().as_u16(),
        })
        .inc();
    m.http_request_duration
        .get_or_create(&RouteLabel { route })
        .observe(started.elapsed().as_secs_f64());
    resp
}
