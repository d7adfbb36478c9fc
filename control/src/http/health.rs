//! Probes (`/livez`, `/healthz` need no database; `/readyz` pings the primary) and the
//! version endpoint.

use std::time::Duration;

use axum::{Json, Router, extract::State, routing::get};
use serde_json::{Value, json};

use super::{AppState, problem::ApiError};
use crate::db;

/// The build's version string.
pub fn build_version() -> &'static str {
    option_env!("CONVERGE_BUILD_VERSION").unwrap_or(env!("CARGO_PKG_VERSION"))
}

async fn live() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn ready(State(s): State<AppState>) -> Result<Json<Value>, ApiError> {
    ready_check(&s.pool).await
}

async fn ready_check(pool: &sqlx::PgPool) -> Result<Json<Value>, ApiError> {
    match tokio::time::timeout(Duration::from_secs(2), db::ping(pool)).await {
        Ok(Ok(())) => Ok(Json(json!({"status": "ok"}))),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness ping failed");
            Err(ApiError::Unavailable("database unreachable".into()))
        }
        Err(_) => Err(ApiError::Unavailable("database ping timed out".into())),
    }
}

/// `GET /api/v1/version`.
pub async fn version() -> Json<Value> {
    Json(json!({"version": build_version(), "api_version": "v1", "api_versions": ["v1"]}))
}

/// The probe routes.
pub fn probes() -> Router<AppState> {
    Router::new()
        .route("/livez", get(live))
        .route("/healthz", get(live))
        .route("/readyz", get(ready))
}

/// Probe-only router for broker pods (HEALTH_ADDR): liveness without a database, readiness
/// with a ping of `pool`.
pub fn probe_router(pool: sqlx::PgPool) -> Router {
    Router::new()
        .route("/livez", get(live))
        .route("/healthz", get(live))
        .route(
            "/readyz",
            get(move || {
                let pool = pool.clone();
                async move { ready_check(&pool).await }
            }),
        )
}
