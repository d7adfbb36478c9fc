//! Kind manifests: apply (`PUT /api/v1/kinds/{kind}/manifest`), read and list.

use std::sync::OnceLock;

use axum::{
    Json,
    extract::{RawQuery, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::IntoResponse,
};
use converge_proto::{
    compat::breaking_changes,
    manifest::{EXEC_OVERRIDE_FORBIDDEN, KindManifest},
};
use serde_json::{Value, json};

use super::openapi::{Conflict, NotFound};
use super::wire::{
    KindConfig, KindConfigEdit, KindList, KindManifestIn, KindManifestOut, KindPath, KindSummary,
    KindVersionPath, ManifestApplied, ManifestPutQuery, ManifestQuery,
};
use super::{
    AppState,
    input::{ApiJson, ApiPath},
    problem::{ApiError, FieldError, MAX_MESSAGE, clipped, field_errors, quote},
    query_pairs,
};
use crate::db;
use converge_engine::words::ApplyResult;

use crate::app::reads::ReadFrom;

/// Register or update a kind version's manifest.
///
/// `PUT /api/v1/kinds/{kind}/manifest[?force=true]`: checks the manifest against its own
/// schema (`GET /api/v1/schemas/manifest`: an unknown field anywhere is refused), every
/// legality rule, every JSON Schema it holds and the value flows of its static `edges`, then
/// stores it (identical → no-op). One 422 lists every problem, each at its JSON pointer; a
/// flow joining a kind not registered yet is a `warnings` entry of the answer; 409 lists the
/// breaking changes when resources already use this kind version (make a new version
/// instead, or force it), and the value flows other kinds' manifests declare that this one
/// would break (whatever the resources). Every check is the kind catalog's
/// (`converge_kinds`); this handler turns its answers into 422 and 409 problems.
#[utoipa::path(
    put, operation_id = "kinds_put_manifest", path = "/kinds/{kind}/manifest", tag = "kinds",
    params(KindPath, ManifestPutQuery),
    request_body = KindManifestIn,
    responses(
        (status = 201, description = "Stored a new kind version.", body = ManifestApplied, headers(("x-apply-result" = String, description = "created"))),
        (status = 200, description = "Changed or unchanged.", body = ManifestApplied, headers(("x-apply-result" = String, description = "configured or unchanged"))),
        (status = 409, response = Conflict),
    ),
)]
pub async fn put_manifest(
    State(s): State<AppState>,
    ApiPath(kind): ApiPath<String>,
    RawQuery(q): RawQuery,
    ApiJson(body): ApiJson<Value>,
) -> Result<impl IntoResponse, ApiError> {
    let force = query_pairs(q.as_deref())
        .iter()
        .any(|(k, v)| k == "force" && (v == "true" || v == "1"));
    let (checked, warnings) = s
        .catalog
        .check_manifest(&s.pool, body, &kind)
        .await
        .map_err(ApiError::db("look up kind manifests"))?
        .map_err(|p| {
            ApiError::fields(
                &format!("manifest for kind {} is invalid", quote(&kind)),
                field_errors(p.errors),
                0,
            )
        })?;
    let manifest = checked.manifest.clone();
    if !force {
        refuse_breaking_change(&s, &manifest).await?;
    }
    refuse_broken_flows(&s, &manifest)?;
    refuse_exec_offenders(&s, &manifest).await?;
    let doc = serde_json::to_value(&manifest).expect("a manifest serialises");
    let (result, version) =
        db::kinds::manifest_put(&s.pool, &manifest.kind, manifest.kind_version, &doc)
            .await
            .map_err(|e| match &e {
                sqlx::Error::Database(d) if d.is_check_violation() => {
                    ApiError::invalid("", format!("manifest refused by the database: {d}"))
                }
                _ => ApiError::Internal {
                    op: "store a kind manifest",
                    source: e,
                },
            })?;
    s.catalog.install(checked, version);
    s.work_scheduled();
    let status = match result {
        ApplyResult::Created => StatusCode::CREATED,
        ApplyResult::Configured | ApplyResult::Unchanged => StatusCode::OK,
    };
    let word = result.as_str();
    let mut h = HeaderMap::new();
    h.insert("x-apply-result", HeaderValue::from_static(word));
    let answer = ManifestApplied {
        kind: manifest.kind,
        kind_version: manifest.kind_version,
        manifest_version: version,
        result,
        warnings,
    };
    Ok((status, h, Json(answer)))
}

/// Delete a kind version.
///
/// `DELETE /api/v1/kinds/{kind}/versions/{version}`: deletes a kind version (its manifest,
/// live config and provider configs). 409 while resources of that version exist (the
/// problem says how many: delete them first), or, for the kind's last version, while reactor
/// bindings name the kind. A resource applied at the same moment is either counted or
/// refused, never left behind with no kind (see SQL `kind_version_delete`).
#[utoipa::path(
    delete, operation_id = "kinds_delete_version", path = "/kinds/{kind}/versions/{version}", tag = "kinds",
    params(KindVersionPath),
    responses(
        (status = 204, description = "Deleted."),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
    ),
)]
pub async fn delete_version(
    State(s): State<AppState>,
    ApiPath((kind, version)): ApiPath<(String, i32)>,
) -> Result<StatusCode, ApiError> {
    use db::kinds::KindVersionDelete as D;
    match db::kinds::kind_version_delete(&s.pool, &kind, version)
        .await
        .map_err(ApiError::db("delete a kind version"))?
    {
        D::Deleted => {
            s.catalog.remove(&kind, version);
            Ok(StatusCode::NO_CONTENT)
        }
        D::NotFound => Err(ApiError::NotFound(format!(
            "kind {} version {version} is not registered",
            quote(&kind)
        ))),
        D::InUse {
            resources,
            bindings,
        } => {
            // (singular, plural) of the noun and of its verb.
            let count = |n: i64, one: (&str, &str), many: (&str, &str)| {
                let (noun, verb) = if n == 1 { one } else { many };
                format!("{n} {noun} {verb}")
            };
            let mut uses = Vec::new();
            if resources > 0 {
                let (one, many) = (
                    ("resource of this version", "exists"),
                    ("resources of this version", "exist"),
                );
                uses.push(format!(
                    "{} (delete them, or move them to another version, first)",
                    count(resources, one, many)
                ));
            }
            if bindings > 0 {
                let (one, many) = (("reactor binding", "names"), ("reactor bindings", "name"));
                uses.push(format!(
                    "{} the kind, and this is its last version (delete them first)",
                    count(bindings, one, many)
                ));
            }
            Err(ApiError::Conflict(format!(
                "kind {} version {version} is in use: {}",
                quote(&kind),
                uses.join("; ")
            )))
        }
    }
}

/// Read the kind manifest's JSON Schema.
///
/// `GET /api/v1/schemas/manifest`: the kind manifest's own JSON Schema (2020-12), the one
/// `PUT /kinds/{kind}/manifest` checks every manifest against (also committed as
/// `proto/manifest.schema.json`). Point an editor at it to catch a misspelt field as you type.
#[utoipa::path(
    get, operation_id = "schemas_get_manifest", path = "/schemas/manifest", tag = "kinds",
    responses((status = 200, description = "The manifest's JSON Schema.", body = Object, content_type = "application/schema+json")),
)]
pub async fn manifest_schema() -> impl IntoResponse {
    static TEXT: OnceLock<String> = OnceLock::new();
    let text = TEXT.get_or_init(|| {
        serde_json::to_string_pretty(&converge_proto::manifest::manifest_schema())
            .expect("the manifest schema serialises")
    });
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/schema+json"),
        )],
        text.as_str(),
    )
}

/// 409 when `new` changes the stored manifest of its version incompatibly
/// ([`breaking_changes`]: its reactions, finalizer, spec or status schema) while resources
/// of that version exist.
async fn refuse_breaking_change(s: &AppState, new: &KindManifest) -> Result<(), ApiError> {
    let Some(old) = s
        .catalog
        .fetch(&s.pool, &new.kind, new.kind_version)
        .await
        .map_err(ApiError::db("read a kind manifest"))?
    else {
        return Ok(());
    };
    let breaks = breaking_changes(&old.manifest, new);
    if breaks.is_empty() {
        return Ok(());
    }
    let in_use = db::kinds::version_in_use(&s.pool, &new.kind, new.kind_version)
        .await
        .map_err(ApiError::db("check a kind version's use"))?;
    if !in_use {
        return Ok(());
    }
    Err(ApiError::Conflict(format!(
        "kind {} version {} is in use and this manifest breaks it: {}; apply it as a new \
         kind_version (and flip resources to it), or add ?force=true",
        new.kind,
        new.kind_version,
        breaks.join("; ")
    )))
}

/// 409 when `new` would break a value flow another kind's manifest declares in its `edges`
/// ([`converge_kinds::Snapshot::flows_broken_by`]): a flow that could no longer type-check,
/// or whose source (a status property) or target (a spec property) `new` removes or
/// retypes. Whatever the resources: a declared flow is a promise between two kinds, so the
/// manifest declaring it changes first (`?force=true` does not skip this).
fn refuse_broken_flows(s: &AppState, new: &KindManifest) -> Result<(), ApiError> {
    let broken = s.catalog.load().flows_broken_by(new);
    if broken.is_empty() {
        return Ok(());
    }
    Err(ApiError::Conflict(clipped(
        MAX_MESSAGE * 2,
        format_args!(
            "kind {} version {} would break value flows other kinds declare: {}; change or \
             remove those edges first (or keep what they read and fill)",
            new.kind,
            new.kind_version,
            broken.join("; ")
        ),
    )))
}

/// 409 when `m` declares `provider: exec` while configs that act as overrides of its kind
/// version set what an exec override may not (`program`, `args`, `env`, `timeout_secs`):
/// they would be refused at every task. Remove those fields first.
async fn refuse_exec_offenders(s: &AppState, m: &KindManifest) -> Result<(), ApiError> {
    if !m.is_exec() {
        return Ok(());
    }
    let offenders = db::providerconfigs::override_offenders(
        &s.pool,
        &m.kind,
        m.kind_version,
        &EXEC_OVERRIDE_FORBIDDEN,
    )
    .await
    .map_err(ApiError::db("check a kind's override configs"))?;
    if offenders.is_empty() {
        return Ok(());
    }
    let list = offenders
        .iter()
        .map(|(name, fields)| format!("{name:?} sets {}", fields.join(", ")))
        .collect::<Vec<_>>()
        .join("; ");
    Err(ApiError::Conflict(format!(
        "kind {} version {} declares provider exec, whose overrides may set only settings, but \
         {list}; remove those fields (or stop naming the default config in provider_config_ref)",
        m.kind, m.kind_version
    )))
}

fn manifest_body(m: db::kinds::StoredManifest) -> Json<Value> {
    let mut v = m.manifest;
    if let Some(o) = v.as_object_mut() {
        o.insert("manifest_version".into(), json!(m.manifest_version));
    }
    Json(v)
}

/// Read a kind's latest manifest.
///
/// `GET /api/v1/kinds/{kind}/manifest[?kind_version=N]` (highest version by default).
#[utoipa::path(
    get, operation_id = "kinds_get_manifest", path = "/kinds/{kind}/manifest", tag = "kinds",
    params(KindPath, ManifestQuery),
    responses((status = 200, description = "The manifest.", body = KindManifestOut), (status = 404, response = NotFound)),
)]
pub async fn get_manifest(
    State(s): State<AppState>,
    ApiPath(kind): ApiPath<String>,
    RawQuery(q): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let mut version = None;
    for (k, v) in query_pairs(q.as_deref()) {
        if k == "kind_version" {
            version = Some(v.parse::<i32>().map_err(|_| {
                ApiError::BadRequest(format!("kind_version {} is not a number", quote(&v)))
            })?);
        }
    }
    fetch(&s, &kind, version).await
}

/// Read one kind version's manifest.
///
/// `GET /api/v1/kinds/{kind}/versions/{version}/manifest`: the manifest of that version as
/// it was registered (older versions stay readable while resources use them).
#[utoipa::path(
    get, operation_id = "kinds_get_manifest_version", path = "/kinds/{kind}/versions/{version}/manifest", tag = "kinds",
    params(KindVersionPath),
    responses((status = 200, description = "The manifest.", body = KindManifestOut), (status = 404, response = NotFound)),
)]
pub async fn get_manifest_version(
    State(s): State<AppState>,
    ApiPath((kind, version)): ApiPath<(String, i32)>,
) -> Result<Json<Value>, ApiError> {
    fetch(&s, &kind, Some(version)).await
}

async fn fetch(s: &AppState, kind: &str, version: Option<i32>) -> Result<Json<Value>, ApiError> {
    db::kinds::manifest_get(&s.pool, kind, version)
        .await
        .map_err(ApiError::db("read a kind manifest"))?
        .map(manifest_body)
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "kind {} has no manifest{}",
                quote(kind),
                version
                    .map(|v| format!(" at version {v}"))
                    .unwrap_or_default()
            ))
        })
}

/// List the registered kind versions.
///
/// `GET /api/v1/kinds`: every kind version with its reactions, live operational config, and
/// how many connected workers serve it.
#[utoipa::path(
    get, operation_id = "kinds_list", path = "/kinds", tag = "kinds",
    responses((status = 200, description = "Every kind version.", body = KindList)),
)]
pub async fn list(State(s): State<AppState>) -> Result<Json<KindList>, ApiError> {
    let s = s.reading(ReadFrom::Replica);
    let manifests = db::kinds::manifest_list(&s.pool)
        .await
        .map_err(ApiError::db("list kind manifests"))?;
    let configs = db::kinds::kind_config_list(&s.pool)
        .await
        .map_err(ApiError::db("list kind configs"))?;
    let coverage = super::cluster::coverage(&s).await?;
    let kinds = manifests
        .into_iter()
        .map(|m| {
            let op = configs
                .iter()
                .find(|c| c.kind == m.pair.kind && c.kind_version == m.pair.version);
            let served = coverage.get(&m.pair);
            let field = |k: &str| m.manifest.get(k).cloned().unwrap_or(Value::Null);
            KindSummary {
                description: field("description"),
                reactions: field("reactions"),
                finalizer_name: m
                    .manifest
                    .get("finalizer_name")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                manifest_version: m.manifest_version,
                operational: op.cloned().map(KindConfig::from),
                workers: served.map_or(0, |c| c.workers),
                ready_workers: served.map_or(0, |c| c.ready),
                kind: m.pair.kind,
                kind_version: m.pair.version,
            }
        })
        .collect();
    Ok(Json(KindList { kinds }))
}

/// Edit a kind version's operational config.
///
/// `PUT /api/v1/kinds/{kind}/versions/{version}/config`: replaces the live operational config
/// (every field required, all ≥ 0); no restart needed.
#[utoipa::path(
    put, operation_id = "kinds_put_config", path = "/kinds/{kind}/versions/{version}/config", tag = "kinds",
    params(KindVersionPath),
    request_body = KindConfigEdit,
    responses((status = 200, description = "The config now in force.", body = KindConfig), (status = 404, response = NotFound)),
)]
pub async fn put_config(
    State(s): State<AppState>,
    ApiPath((kind, version)): ApiPath<(String, i32)>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<KindConfig>, ApiError> {
    let edit: db::kinds::KindConfigEdit = serde_json::from_value(body).map_err(|e| {
        ApiError::invalid(
            "",
            clipped(MAX_MESSAGE, format_args!("invalid kind config: {e}")),
        )
    })?;
    let fields = [
        ("/max_inflight", edit.max_inflight),
        ("/task_deadline_seconds", edit.task_deadline_seconds),
        ("/resync_interval_seconds", edit.resync_interval_seconds),
        ("/orphan_grace_seconds", edit.orphan_grace_seconds),
        ("/max_transient_attempts", edit.max_transient_attempts),
    ];
    let errors: Vec<FieldError> = fields
        .iter()
        .filter(|(_, v)| *v < 0)
        .map(|(l, _)| FieldError::new((*l).to_string(), "must not be negative".into()))
        .collect();
    ApiError::check_fields("kind config values must not be negative", errors)?;
    let c = db::kinds::kind_config_put(&s.pool, &kind, version, &edit)
        .await
        .map_err(ApiError::db("update a kind config"))?
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "kind {} version {version} is not registered",
                quote(&kind)
            ))
        })?;
    Ok(Json(KindConfig::from(c)))
}

/// Read a kind version's operational config.
///
/// `GET /api/v1/kinds/{kind}/versions/{version}/config`: the live operational settings of a
/// kind version (global `max_inflight`, task deadline, retries, resync), seeded from its
/// manifest and editable with `PUT` without re-registering it.
#[utoipa::path(
    get, operation_id = "kinds_get_config", path = "/kinds/{kind}/versions/{version}/config", tag = "kinds",
    params(KindVersionPath),
    responses((status = 200, description = "The config in force.", body = KindConfig), (status = 404, response = NotFound)),
)]
pub async fn get_config(
    State(s): State<AppState>,
    ApiPath((kind, version)): ApiPath<(String, i32)>,
) -> Result<Json<KindConfig>, ApiError> {
    let c = db::kinds::kind_config_get(&s.pool, &kind, version)
        .await
        .map_err(ApiError::db("read a kind config"))?
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "kind {} version {version} is not registered",
                quote(&kind)
            ))
        })?;
    Ok(Json(KindConfig::from(c)))
}
