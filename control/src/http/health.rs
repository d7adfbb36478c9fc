//! Probes (`/livez`, `/healthz` need no database; `/readyz` answers 503 while the process
//! drains and pings the primary), the version endpoint, and the probe router of a broker-only
//! process (which serves `/metrics` too).

use std::time::Duration;

use axum::{Json, Router, extract::State, routing::get};
use converge_engine::health::Health;

use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    AppState,
    openapi::Unavailable,
    problem::ApiError,
    wire::{StatusOk, VersionInfo},
};
use crate::db;

/// The build's version string.
pub fn build_version() -> &'static str {
    option_env!("CONVERGE_BUILD_VERSION").unwrap_or(env!("CARGO_PKG_VERSION"))
}

async fn live() -> Json<StatusOk> {
    Json(StatusOk::ok())
}

/// Liveness probe.
///
/// `GET /livez`: the process is up (no database needed).
#[utoipa::path(get, operation_id = "health_livez", path = "/livez", tag = "meta",
    responses((status = 200, description = "Alive.", body = StatusOk)))]
async fn livez() -> Json<StatusOk> {
    live().await
}

/// Liveness and readiness in one answer.
///
/// `GET /healthz`: the same answer as `/livez` (the process is up), for probes configured
/// with the conventional path. Needs no credential and no database.
#[utoipa::path(get, operation_id = "health_healthz", path = "/healthz", tag = "meta",
    responses((status = 200, description = "Alive.", body = StatusOk)))]
async fn healthz() -> Json<StatusOk> {
    live().await
}

/// Readiness probe.
///
/// `GET /readyz`: the process is not draining, and the primary answers a ping within 2 s.
#[utoipa::path(get, operation_id = "health_ready", path = "/readyz", tag = "meta",
    responses(
        (status = 200, description = "Ready.", body = StatusOk),
        (status = 503, response = Unavailable),
    ))]
async fn ready(State(s): State<AppState>) -> Result<Json<StatusOk>, ApiError> {
    ready_check(&s.pool, &s.runtime.health).await
}

/// Ready unless `health` says the process drains or lost PostgreSQL (its monitor's last
/// ping), and then only if `pool` answers a ping of its own.
async fn ready_check(pool: &sqlx::PgPool, health: &Health) -> Result<Json<StatusOk>, ApiError> {
    let readiness = health.readiness();
    if !readiness.serving() {
        return Err(ApiError::Unavailable(readiness.reason().into()));
    }
    match tokio::time::timeout(Duration::from_secs(2), db::ping(pool)).await {
        Ok(Ok(())) => Ok(Json(StatusOk::ok())),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness ping failed");
            Err(ApiError::Unavailable("database unreachable".into()))
        }
        Err(_) => Err(ApiError::Unavailable("database ping timed out".into())),
    }
}

/// Read the build's version.
///
/// `GET /api/v1/version`: the build's version and the API version, for a client to check
/// what it talks to before relying on newer fields.
#[utoipa::path(get, operation_id = "health_version", path = "/version", tag = "meta",
    responses((status = 200, description = "The build and the API versions it serves.", body = VersionInfo)))]
pub async fn version() -> Json<VersionInfo> {
    Json(VersionInfo {
        version: build_version().to_owned(),
        api_version: "v1".to_owned(),
        api_versions: vec!["v1".to_owned()],
    })
}

/// The probe routes.
pub fn probes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(livez))
        .routes(routes!(healthz))
        .routes(routes!(ready))
}

/// Probe-only router for broker pods (HEALTH_ADDR): liveness without a database, readiness
/// from `health` and a ping of `pool`, and the process's metrics.
pub fn probe_router(pool: sqlx::PgPool, health: Health) -> Router {
    let scrape_pool = pool.clone();
    Router::new()
        .route("/livez", get(live))
        .route("/healthz", get(live))
        .route(
            "/readyz",
            get(move || {
                let (pool, health) = (pool.clone(), health.clone());
                async move { ready_check(&pool, &health).await }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let pool = scrape_pool.clone();
                async move { super::metrics::scrape(&pool).await }
            }),
        )
        .layer(axum::middleware::from_fn(super::metrics::track))
}
