//! Operator actions on one resource: reconcile now, quarantine and unquarantine, delete.

use axum::{Extension, Json, extract::State, http::StatusCode, response::IntoResponse};
use converge_engine::words::Phase;

use super::openapi::{Conflict, NotFound};
use super::wire::{DeleteAccepted, Quarantined, ReconcileAccepted, ReconcileStatus, ResourcePath};
use super::{
    AppState,
    auth::{Caller, actor},
    input::ApiPath,
    problem::ApiError,
};
use crate::db::{self, resources::ReconcileNow};

fn not_found(kind: &str, name: &str) -> ApiError {
    ApiError::NotFound(format!("resource {kind}/{name} not found"))
}

/// Reconcile a resource now.
///
/// `POST /api/v1/resources/{kind}/{name}/reconcile` → 202 `{status: queued|already_queued}`:
/// queues a reconcile of the live generation even when the resource is synced (trigger
/// `manual`). 409 while it is quarantined, orphaned or being deleted.
#[utoipa::path(
    post, operation_id = "resource_actions_reconcile", path = "/resources/{kind}/{name}/reconcile", tag = "resources",
    params(ResourcePath),
    responses((status = 202, description = "Queued.", body = ReconcileAccepted), (status = 404, response = NotFound), (status = 409, response = Conflict)),
)]
#[tracing::instrument(skip(s))]
pub async fn reconcile(
    State(s): State<AppState>,
    caller: Option<Extension<Caller>>,
    ApiPath((kind, name)): ApiPath<(String, String)>,
) -> Result<impl IntoResponse, ApiError> {
    let outcome =
        db::resources::resource_reconcile_now(&s.pool, actor(&caller).as_deref(), &kind, &name)
            .await
            .map_err(ApiError::db("queue a reconcile"))?
            .ok_or_else(|| not_found(&kind, &name))?;
    let status = match outcome {
        ReconcileNow::Queued => {
            s.work_scheduled();
            ReconcileStatus::Queued
        }
        ReconcileNow::AlreadyQueued => ReconcileStatus::AlreadyQueued,
        ReconcileNow::Frozen => {
            return Err(ApiError::Conflict(format!(
                "resource {kind}/{name} is quarantined or orphaned; unquarantine it first"
            )));
        }
        ReconcileNow::Deleting => {
            return Err(ApiError::Conflict(format!(
                "resource {kind}/{name} is being deleted"
            )));
        }
    };
    Ok((StatusCode::ACCEPTED, Json(ReconcileAccepted { status })))
}

/// Quarantine a resource.
///
/// `POST /api/v1/resources/{kind}/{name}/quarantine` → `{quarantined: true}`: sets the
/// resource aside (phase Quarantined), frozen from every scheduler; its pending reconcile task
/// is dropped. Idempotent.
#[utoipa::path(
    post, operation_id = "resource_actions_quarantine", path = "/resources/{kind}/{name}/quarantine", tag = "resources",
    params(ResourcePath),
    responses((status = 200, description = "Quarantined.", body = Quarantined), (status = 404, response = NotFound)),
)]
#[tracing::instrument(skip(s))]
pub async fn quarantine(
    State(s): State<AppState>,
    caller: Option<Extension<Caller>>,
    ApiPath((kind, name)): ApiPath<(String, String)>,
) -> Result<Json<Quarantined>, ApiError> {
    if !db::resources::resource_set_quarantine(
        &s.pool,
        actor(&caller).as_deref(),
        &kind,
        &name,
        true,
    )
    .await
    .map_err(ApiError::db("quarantine a resource"))?
    {
        return Err(not_found(&kind, &name));
    }
    Ok(Json(Quarantined { quarantined: true }))
}

/// Release a resource from quarantine.
///
/// `POST /api/v1/resources/{kind}/{name}/unquarantine` → `{quarantined: false}`: lifts a
/// quarantine (never an orphan-grace deadline) and re-schedules the resource if it is behind
/// its spec. Idempotent.
#[utoipa::path(
    post, operation_id = "resource_actions_unquarantine", path = "/resources/{kind}/{name}/unquarantine", tag = "resources",
    params(ResourcePath),
    responses((status = 200, description = "Released.", body = Quarantined), (status = 404, response = NotFound)),
)]
#[tracing::instrument(skip(s))]
pub async fn unquarantine(
    State(s): State<AppState>,
    caller: Option<Extension<Caller>>,
    ApiPath((kind, name)): ApiPath<(String, String)>,
) -> Result<Json<Quarantined>, ApiError> {
    if !db::resources::resource_set_quarantine(
        &s.pool,
        actor(&caller).as_deref(),
        &kind,
        &name,
        false,
    )
    .await
    .map_err(ApiError::db("unquarantine a resource"))?
    {
        return Err(not_found(&kind, &name));
    }
    s.work_scheduled();
    Ok(Json(Quarantined { quarantined: false }))
}

/// Delete a resource.
///
/// `DELETE /api/v1/resources/{kind}/{name}` → 202 `{phase: "Deleting", marked: N}`.
///
/// A soft delete: the resource and its teardown tree (everything it owns, transitively, and
/// everything that depends on it through edges) turn Deleting at once and are torn down
/// dependents-before-dependencies — kinds with a finalizer run their teardown reaction,
/// the rest are removed as soon as nothing hangs below them. The row disappears when its
/// own teardown is done. Idempotent: a second DELETE marks nothing new.
#[utoipa::path(
    delete, operation_id = "resource_actions_delete", path = "/resources/{kind}/{name}", tag = "resources",
    params(ResourcePath),
    responses((status = 202, description = "Teardown started.", body = DeleteAccepted), (status = 404, response = NotFound)),
)]
#[tracing::instrument(skip(s))]
pub async fn delete(
    State(s): State<AppState>,
    caller: Option<Extension<Caller>>,
    ApiPath((kind, name)): ApiPath<(String, String)>,
) -> Result<impl IntoResponse, ApiError> {
    let marked =
        db::resources::resource_request_deletion(&s.pool, actor(&caller).as_deref(), &kind, &name)
            .await
            .map_err(ApiError::db("delete a resource"))?
            .ok_or_else(|| not_found(&kind, &name))?;
    s.work_scheduled();
    Ok((
        StatusCode::ACCEPTED,
        Json(DeleteAccepted {
            phase: Phase::Deleting.to_string(),
            marked,
        }),
    ))
}
