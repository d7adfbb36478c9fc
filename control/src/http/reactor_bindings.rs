//! Reactor bindings: `POST /api/v1/reactor-bindings` (create or replace by name),
//! `GET /api/v1/reactor-bindings[?watch_kind=&reactor=]`, `GET` and `DELETE
//! /api/v1/reactor-bindings/{name}`. Live: the next transition uses the new wiring.

use axum::{
    Json,
    extract::{RawQuery, State},
    http::StatusCode,
    response::IntoResponse,
};
use converge_proto::manifest::is_valid_resource_name;
use serde::Deserialize;
use serde_json::Value;

use super::openapi::NotFound;
use super::problem::FieldError;
use super::wire::{BindingQuery, NamePath, ReactorBinding, ReactorBindingList};
use super::{
    AppState,
    input::{ApiJson, ApiPath},
    problem::{ApiError, quote},
    query_pairs,
};
use crate::db;
use converge_engine::words::Transition;

/// The create-or-replace body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BindingBody {
    /// Identity.
    pub name: String,
    /// The kind whose transitions fire it.
    pub watch_kind: String,
    /// One of `created`, `synced`, `degraded`, `failed`, `deleted`.
    pub transition: String,
    /// The reactor kind to run.
    pub reactor: String,
    /// Labels the watched resource must carry (string values).
    #[serde(default)]
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    pub label_match: serde_json::Map<String, Value>,
    /// Default true.
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

/// Every problem with a binding body, located.
async fn check(s: &AppState, b: &BindingBody) -> Result<Vec<FieldError>, ApiError> {
    let mut errs = Vec::new();
    let mut push =
        |location: &str, message: String| errs.push(FieldError::new(location.into(), message));
    if !is_valid_resource_name(&b.name) {
        push(
            "/name",
            "name must be 1-253 printable ASCII characters without '/' or spaces".into(),
        );
    }
    if Transition::parse(&b.transition).is_none() {
        push(
            "/transition",
            format!("must be one of {}", Transition::TEXTS.join(", ")),
        );
    }
    if b.label_match.values().any(|v| !v.is_string()) {
        push("/label_match", "label values must be strings".into());
    }
    if b.reactor == b.watch_kind {
        push("/reactor", "a reactor cannot watch its own kind".into());
    }
    let known = db::reactor_bindings::kind_known(&s.pool, &b.watch_kind)
        .await
        .map_err(ApiError::db("look up a kind"))?;
    if !known {
        push(
            "/watch_kind",
            format!("kind {} is not registered", quote(&b.watch_kind)),
        );
    }
    if !s.catalog.load().is_reactor_kind(&b.reactor) {
        // Any version of the reactor kind will do: its versions are read in one statement.
        let versions = db::kinds::manifest_versions(&s.pool)
            .await
            .map_err(ApiError::db("look up a kind manifest"))?;
        let pairs = versions
            .into_iter()
            .filter(|(p, _)| p.kind == b.reactor)
            .map(|(p, _)| (p.kind, p.version));
        s.catalog
            .lookup(&s.pool, pairs, true)
            .await
            .map_err(ApiError::db("look up a kind manifest"))?;
        if !s.catalog.load().is_reactor_kind(&b.reactor) {
            push(
                "/reactor",
                format!(
                    "{} is not a registered reactor kind (a manifest declaring only a reactor reaction)",
                    quote(&b.reactor)
                ),
            );
        }
    }
    Ok(errs)
}

/// Create or replace a reactor binding.
///
/// `POST /api/v1/reactor-bindings` → 201 (created) or 200 (replaced) with the binding.
#[utoipa::path(
    post, operation_id = "reactor_bindings_put", path = "/reactor-bindings", tag = "reactor-bindings",
    request_body = BindingBody,
    responses(
        (status = 201, description = "Created.", body = ReactorBinding),
        (status = 200, description = "Replaced.", body = ReactorBinding),
        (status = 404, response = NotFound),
    ),
)]
#[tracing::instrument(skip(s, body), fields(name = %body.name))]
pub async fn put(
    State(s): State<AppState>,
    ApiJson(body): ApiJson<BindingBody>,
) -> Result<impl IntoResponse, ApiError> {
    ApiError::check_fields("invalid reactor binding", check(&s, &body).await?)?;
    // `check` refused any other word (422).
    let transition = body
        .transition
        .parse::<Transition>()
        .map_err(|e| ApiError::invalid("transition", e.to_string()))?;
    let created = db::reactor_bindings::binding_put(
        &s.pool,
        &body.name,
        &body.watch_kind,
        transition,
        &body.reactor,
        &Value::Object(body.label_match.clone()),
        body.enabled,
    )
    .await
    .map_err(ApiError::db("store a reactor binding"))?;
    let b = db::reactor_bindings::binding_get(&s.pool, &body.name)
        .await
        .map_err(ApiError::db("read a reactor binding"))?
        .ok_or_else(|| ApiError::NotFound(format!("binding {} vanished", body.name)))?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(ReactorBinding::from(b))))
}

/// List reactor bindings.
///
/// `GET /api/v1/reactor-bindings[?watch_kind=&reactor=]` → `{items}` by name.
#[utoipa::path(
    get, operation_id = "reactor_bindings_list", path = "/reactor-bindings", tag = "reactor-bindings",
    params(BindingQuery),
    responses((status = 200, description = "Every binding, by name.", body = ReactorBindingList)),
)]
#[tracing::instrument(skip(s))]
pub async fn list(
    State(s): State<AppState>,
    RawQuery(q): RawQuery,
) -> Result<Json<ReactorBindingList>, ApiError> {
    let (mut watch, mut reactor) = (None, None);
    for (k, v) in query_pairs(q.as_deref()) {
        match k.as_str() {
            "watch_kind" => watch = Some(v),
            "reactor" => reactor = Some(v),
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "unknown query parameter {}",
                    quote(&k)
                )));
            }
        }
    }
    let items = db::reactor_bindings::binding_list(&s.pool, watch.as_deref(), reactor.as_deref())
        .await
        .map_err(ApiError::db("list reactor bindings"))?;
    Ok(Json(ReactorBindingList {
        items: items.into_iter().map(ReactorBinding::from).collect(),
    }))
}

/// Read a reactor binding.
///
/// `GET /api/v1/reactor-bindings/{name}`: one binding with its delivery state (pending,
/// failing, the last error and when the next retry runs).
#[utoipa::path(
    get, operation_id = "reactor_bindings_get", path = "/reactor-bindings/{name}", tag = "reactor-bindings",
    params(NamePath),
    responses((status = 200, description = "The binding.", body = ReactorBinding), (status = 404, response = NotFound)),
)]
#[tracing::instrument(skip(s))]
pub async fn get(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<impl IntoResponse, ApiError> {
    let b = db::reactor_bindings::binding_get(&s.pool, &name)
        .await
        .map_err(ApiError::db("read a reactor binding"))?
        .ok_or_else(|| ApiError::NotFound(format!("reactor binding {name} not found")))?;
    Ok(Json(ReactorBinding::from(b)))
}

/// Delete a reactor binding.
///
/// `DELETE /api/v1/reactor-bindings/{name}` → 204 (its undelivered deliveries go with it).
#[utoipa::path(
    delete, operation_id = "reactor_bindings_delete", path = "/reactor-bindings/{name}", tag = "reactor-bindings",
    params(NamePath),
    responses((status = 204, description = "Deleted."), (status = 404, response = NotFound)),
)]
#[tracing::instrument(skip(s))]
pub async fn delete(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    if db::reactor_bindings::binding_delete(&s.pool, &name)
        .await
        .map_err(ApiError::db("delete a reactor binding"))?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(format!(
            "reactor binding {name} not found"
        )))
    }
}
