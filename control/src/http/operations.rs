//! Operations on one resource: `POST/GET /api/v1/resources/{kind}/{name}/ops` and
//! `GET .../ops/{uid}`. A verb must be declared by the kind's manifest (an operation
//! reaction); it runs once on a worker as STAGE_OPERATE and its output is recorded.

use axum::{Json, extract::State, http::StatusCode, response::IntoResponse};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use super::openapi::{Conflict, NotFound};
use super::wire::{Operation, OperationList, OperationPath, ResourcePath};
use super::{
    AppState, auth,
    input::{ApiJson, ApiPath},
    problem::{ApiError, quote},
};
use crate::db::{self, operations::Target};

/// The request body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OperateBody {
    /// The verb (one the kind declares).
    pub verb: String,
    /// Input handed to the reaction.
    #[serde(default)]
    pub input: Option<Value>,
    /// Who asks (free text, shown in the operation).
    #[serde(default)]
    pub requested_by: Option<String>,
}

/// How many operations a list returns.
const LIST_LIMIT: i64 = 100;

async fn target(s: &AppState, kind: &str, name: &str) -> Result<Target, ApiError> {
    db::operations::target(&s.pool, kind, name)
        .await
        .map_err(ApiError::db("look up a resource"))?
        .ok_or_else(|| ApiError::NotFound(format!("resource {kind}/{name} not found")))
}

/// Request an operation on a resource.
///
/// `POST .../ops` → 202 with the operation (state `pending`). 422 for a verb the kind does
/// not declare, 409 while the resource is being deleted.
#[utoipa::path(
    post, operation_id = "operations_create", path = "/resources/{kind}/{name}/ops", tag = "resources",
    params(ResourcePath),
    request_body = OperateBody,
    responses((status = 202, description = "Recorded and queued.", body = Operation), (status = 404, response = NotFound), (status = 409, response = Conflict)),
)]
#[tracing::instrument(skip(s, body))]
pub async fn create(
    State(s): State<AppState>,
    caller: Option<axum::Extension<auth::Caller>>,
    ApiPath((kind, name)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<OperateBody>,
) -> Result<impl IntoResponse, ApiError> {
    let t = target(&s, &kind, &name).await?;
    let declared: Vec<String> = s
        .catalog
        .get(&kind, t.kind_version)
        .map(|k| k.manifest.verbs().into_iter().map(str::to_string).collect())
        .unwrap_or_default();
    if !declared.contains(&body.verb) {
        let known = if declared.is_empty() {
            "it declares none".to_string()
        } else {
            format!("it declares {}", declared.join(", "))
        };
        return Err(ApiError::invalid(
            "/verb",
            format!(
                "kind {kind} version {} has no operation {}; {known}",
                t.kind_version,
                quote(&body.verb)
            ),
        ));
    }
    if t.deleting {
        return Err(ApiError::Conflict(format!(
            "resource {kind}/{name} is being deleted"
        )));
    }
    // With authentication on, the principal is who asked, whatever the body says.
    let by = auth::actor(&caller)
        .or_else(|| body.requested_by.clone())
        .unwrap_or_else(|| "api".into());
    let by = by.as_str();
    let op = db::operations::operation_request(&s.pool, t.id, &body.verb, body.input.as_ref(), by)
        .await
        .map_err(ApiError::db("request an operation"))?
        .ok_or_else(|| ApiError::Conflict(format!("resource {kind}/{name} is being deleted")))?;
    s.work_scheduled();
    Ok((StatusCode::ACCEPTED, Json(Operation::from(op))))
}

/// List a resource's operations.
///
/// `GET .../ops` → `{items: [...]}`, newest first (at most 100).
#[utoipa::path(
    get, operation_id = "operations_list", path = "/resources/{kind}/{name}/ops", tag = "resources",
    params(ResourcePath),
    responses((status = 200, description = "Its latest operations.", body = OperationList), (status = 404, response = NotFound)),
)]
#[tracing::instrument(skip(s))]
pub async fn list(
    State(s): State<AppState>,
    ApiPath((kind, name)): ApiPath<(String, String)>,
) -> Result<Json<OperationList>, ApiError> {
    let t = target(&s, &kind, &name).await?;
    let items = db::operations::operation_list(&s.pool, t.id, LIST_LIMIT)
        .await
        .map_err(ApiError::db("list operations"))?;
    Ok(Json(OperationList {
        items: items.into_iter().map(Operation::from).collect(),
    }))
}

/// Read one operation.
///
/// `GET /api/v1/resources/{kind}/{name}/ops/{uid}`: one operation with its state, attempts,
/// output (once it succeeded) and last error; poll it until it is `Succeeded` or `Failed`.
#[utoipa::path(
    get, operation_id = "operations_get", path = "/resources/{kind}/{name}/ops/{uid}", tag = "resources",
    params(OperationPath),
    responses((status = 200, description = "The operation.", body = Operation), (status = 404, response = NotFound)),
)]
#[tracing::instrument(skip(s))]
pub async fn get(
    State(s): State<AppState>,
    ApiPath((kind, name, uid)): ApiPath<(String, String, String)>,
) -> Result<impl IntoResponse, ApiError> {
    let t = target(&s, &kind, &name).await?;
    let missing = || ApiError::NotFound(format!("operation {uid} of {kind}/{name} not found"));
    let id = Uuid::parse_str(&uid).map_err(|_| missing())?;
    let op = db::operations::operation_get(&s.pool, t.id, id)
        .await
        .map_err(ApiError::db("read an operation"))?
        .ok_or_else(missing)?;
    Ok(Json(Operation::from(op)))
}
