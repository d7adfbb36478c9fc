//! Spec history and rollback of roots: `GET .../spec-history`, `POST .../rollback` and the
//! raw spec of one generation at `GET /api/v1/raw/resources/{kind}/{name}/spec/{generation}`.
//! Only roots keep history (a composed child's spec is derived from its root's).

use axum::{Json, extract::State, http::StatusCode, response::IntoResponse};
use serde::Deserialize;
use serde_json::Value;

use super::openapi::NotFound;
use super::wire::{ResourcePath, RolledBack, SpecHistory, SpecPath, SpecVersion};
use super::{
    AppState, auth,
    input::{ApiJson, ApiPath},
    problem::ApiError,
};
use crate::db;

/// The rollback body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackBody {
    /// The recorded generation whose spec becomes the live one.
    pub generation: i64,
}

async fn resource_id(s: &AppState, kind: &str, name: &str) -> Result<uuid::Uuid, ApiError> {
    db::operations::target(&s.pool, kind, name)
        .await
        .map_err(ApiError::db("look up a resource"))?
        .map(|t| t.id)
        .ok_or_else(|| ApiError::NotFound(format!("resource {kind}/{name} not found")))
}

/// Read a root's spec history.
///
/// `GET .../spec-history` → `{items: [{generation, spec, created_at}]}`, newest first.
#[utoipa::path(
    get, operation_id = "spec_history_history", path = "/resources/{kind}/{name}/spec-history", tag = "resources",
    params(ResourcePath),
    responses((status = 200, description = "Its recorded specs.", body = SpecHistory), (status = 404, response = NotFound)),
)]
#[tracing::instrument(skip(s))]
pub async fn history(
    State(s): State<AppState>,
    ApiPath((kind, name)): ApiPath<(String, String)>,
) -> Result<Json<SpecHistory>, ApiError> {
    let id = resource_id(&s, &kind, &name).await?;
    let items = db::spec_history::spec_history(&s.pool, id)
        .await
        .map_err(ApiError::db("read spec history"))?;
    Ok(Json(SpecHistory {
        items: items.into_iter().map(SpecVersion::from).collect(),
    }))
}

/// Roll a root back to an earlier generation's spec.
///
/// `POST .../rollback {generation}` → 202 `{generation, changed}`: the recorded spec is
/// applied as a new generation (or nothing happens when it equals the live spec). 404 when
/// that generation is not recorded.
#[utoipa::path(
    post, operation_id = "spec_history_rollback", path = "/resources/{kind}/{name}/rollback", tag = "resources",
    params(ResourcePath),
    request_body = RollbackBody,
    responses((status = 202, description = "The spec is that generation's again.", body = RolledBack), (status = 404, response = NotFound)),
)]
#[tracing::instrument(skip(s))]
pub async fn rollback(
    State(s): State<AppState>,
    caller: Option<axum::Extension<auth::Caller>>,
    ApiPath((kind, name)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<RollbackBody>,
) -> Result<impl IntoResponse, ApiError> {
    let id = resource_id(&s, &kind, &name).await?;
    let (generation, changed) = db::spec_history::rollback(
        &s.pool,
        auth::actor(&caller).as_deref(),
        id,
        body.generation,
    )
    .await
    .map_err(ApiError::db("roll back a spec"))?
    .ok_or_else(|| {
        ApiError::NotFound(format!(
            "generation {} of {kind}/{name} is not recorded",
            body.generation
        ))
    })?;
    if changed {
        s.work_scheduled();
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(RolledBack {
            generation,
            changed,
        }),
    ))
}

/// Read the raw spec a generation was applied with.
///
/// `GET /api/v1/raw/resources/{kind}/{name}/spec/{generation}` → the spec document itself.
#[utoipa::path(
    get, operation_id = "spec_history_raw_spec", path = "/raw/resources/{kind}/{name}/spec/{generation}", tag = "resources",
    params(SpecPath),
    responses((status = 200, description = "The spec recorded for that generation, as it was applied.", body = Object), (status = 404, response = NotFound)),
)]
#[tracing::instrument(skip(s))]
pub async fn raw_spec(
    State(s): State<AppState>,
    ApiPath((kind, name, generation)): ApiPath<(String, String, i64)>,
) -> Result<Json<Value>, ApiError> {
    let id = resource_id(&s, &kind, &name).await?;
    db::spec_history::spec_at(&s.pool, id, generation)
        .await
        .map_err(ApiError::db("read a recorded spec"))?
        .map(Json)
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "generation {generation} of {kind}/{name} is not recorded"
            ))
        })
}
