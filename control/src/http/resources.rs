//! Resources: apply (create or update by kind + name), read, and the keyset-paged list.

use axum::{
    Json,
    extract::{Path, RawQuery, State},
    http::{HeaderMap, HeaderValue, StatusCode},
    response::IntoResponse,
};
use base64::Engine;
use chrono::{DateTime, Utc};
use converge_proto::manifest::{PHASES, is_valid_resource_name};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    AppState,
    problem::{ApiError, ApiJson},
    query_pairs,
};
use crate::{app::schemas::FieldError, db};

/// The apply body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplyBody {
    /// Optional discriminator for CLI files; must be "resource" when present.
    #[serde(rename = "type")]
    pub type_: Option<String>,
    /// Kind.
    pub kind: String,
    /// Kind version (required, 1..=32767).
    #[serde(default)]
    pub kind_version: i32,
    /// Name, unique within the kind.
    pub name: String,
    /// Labels (string values).
    #[serde(default)]
    pub labels: serde_json::Map<String, Value>,
    /// Spec (a JSON object).
    #[serde(default = "empty_object")]
    pub spec: Value,
    /// Attached provider config (per-resource override).
    #[serde(default)]
    pub provider_config_ref: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

const MAX_LABELS: usize = 64;

fn check_labels(labels: &serde_json::Map<String, Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if labels.len() > MAX_LABELS {
        errs.push(FieldError {
            location: "/labels".into(),
            message: format!("at most {MAX_LABELS} labels"),
        });
    }
    for (k, v) in labels {
        let loc = format!("/labels/{}", k.replace('~', "~0").replace('/', "~1"));
        if k.is_empty() || k.len() > 253 {
            errs.push(FieldError {
                location: loc.clone(),
                message: "label keys must be 1-253 characters".into(),
            });
        }
        match v.as_str() {
            Some(s) if s.len() <= 1024 => {}
            Some(_) => errs.push(FieldError {
                location: loc,
                message: "label values must be at most 1024 characters".into(),
            }),
            None => errs.push(FieldError {
                location: loc,
                message: "label values must be strings".into(),
            }),
        }
    }
    errs
}

/// `POST /api/v1/resources`: validates against the kind's spec schema (422 naming every
/// failing pointer, nothing written), then creates or updates; `X-Apply-Result` says which.
pub async fn apply(
    State(s): State<AppState>,
    ApiJson(body): ApiJson<ApplyBody>,
) -> Result<impl IntoResponse, ApiError> {
    if let Some(t) = body.type_.as_deref().filter(|t| *t != "resource") {
        return Err(ApiError::invalid(
            "/type",
            format!("expected \"resource\", got {t:?}"),
        ));
    }
    if !(1..=32767).contains(&body.kind_version) {
        return Err(ApiError::invalid(
            "/kind_version",
            "kind_version is required and must be 1..=32767",
        ));
    }
    let mut errors = Vec::new();
    if !is_valid_resource_name(&body.name) {
        errors.push(FieldError {
            location: "/name".into(),
            message: "name must be 1-253 printable ASCII characters without '/' or spaces".into(),
        });
    }
    if !body.spec.is_object() {
        errors.push(FieldError {
            location: "/spec".into(),
            message: "spec must be a JSON object".into(),
        });
    }
    errors.extend(check_labels(&body.labels));
    let mut schemas = s.schemas.get(&body.kind, body.kind_version);
    if schemas.is_none() {
        // Another pod may have just applied the manifest: re-read once before refusing.
        s.schemas
            .reload(&s.pool)
            .await
            .map_err(ApiError::db("reload kind manifests"))?;
        schemas = s.schemas.get(&body.kind, body.kind_version);
    }
    let Some(schemas) = schemas else {
        return Err(ApiError::NotFound(format!(
            "kind {:?} version {} is not registered (apply its manifest first)",
            body.kind, body.kind_version
        )));
    };
    if schemas.manifest.is_reactor() {
        return Err(ApiError::invalid(
            "/kind",
            format!(
                "{:?} is a reactor kind; it is bound, not created",
                body.kind
            ),
        ));
    }
    if body.spec.is_object() {
        errors.extend(schemas.validate_spec(&body.spec, "/spec"));
    }
    if !errors.is_empty() {
        let detail = format!(
            "{} does not satisfy kind {:?}: {}",
            body.name,
            body.kind,
            errors
                .iter()
                .map(|e| format!("{} {}", e.location, e.message))
                .collect::<Vec<_>>()
                .join("; ")
        );
        return Err(ApiError::Invalid { detail, errors });
    }
    let labels = Value::Object(body.labels);
    let applied = db::resources::resource_apply(
        &s.pool,
        &body.kind,
        body.kind_version,
        &body.name,
        &body.spec,
        &labels,
        body.provider_config_ref.as_deref(),
    )
    .await
    .map_err(ApiError::db("apply a resource"))?;
    if applied.result != "unchanged" {
        s.work_scheduled();
    }
    let status = if applied.result == "created" {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut h = HeaderMap::new();
    h.insert(
        "x-apply-result",
        HeaderValue::from_str(&applied.result).expect("ascii"),
    );
    Ok((
        status,
        h,
        Json(json!({
            "uid": applied.id, "kind": body.kind, "kind_version": body.kind_version,
            "name": body.name, "generation": applied.generation, "result": applied.result,
        })),
    ))
}

/// `GET /api/v1/resources/{kind}/{name}`: the full read with conditions and the live claim.
pub async fn get(
    State(s): State<AppState>,
    Path((kind, name)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let (row, conditions, work) = db::resources::resource_get(&s.pool, &kind, &name)
        .await
        .map_err(ApiError::db("read a resource"))?
        .ok_or_else(|| ApiError::NotFound(format!("resource {kind}/{name} not found")))?;
    let mut v = serde_json::to_value(&row).expect("row serialises");
    let o = v.as_object_mut().expect("object");
    let owner = match (o.remove("owner_kind"), o.remove("owner_name")) {
        (Some(Value::String(k)), Some(Value::String(n))) => json!({"kind": k, "name": n}),
        _ => Value::Null,
    };
    o.insert("owner".into(), owner);
    o.insert(
        "conditions".into(),
        serde_json::to_value(conditions).expect("serialises"),
    );
    o.insert(
        "work".into(),
        serde_json::to_value(work.into_iter().next()).expect("serialises"),
    );
    Ok(Json(v))
}

fn encode_cursor(t: DateTime<Utc>, id: Uuid) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!(
        "{}|{id}",
        t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
    ))
}

fn decode_cursor(c: &str) -> Option<(DateTime<Utc>, Uuid)> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(c)
        .ok()?;
    let s = String::from_utf8(raw).ok()?;
    let (t, id) = s.rsplit_once('|')?;
    Some((
        DateTime::parse_from_rfc3339(t).ok()?.with_timezone(&Utc),
        Uuid::parse_str(id).ok()?,
    ))
}

/// `GET /api/v1/resources?kind=..&phase=..&limit=..&cursor=..`: one keyset page (repeated
/// `kind`/`phase` values union), `X-Next-Cursor` for the next page (empty on the last).
pub async fn list(
    State(s): State<AppState>,
    RawQuery(q): RawQuery,
) -> Result<impl IntoResponse, ApiError> {
    let mut f = db::resources::ListFilter {
        limit: 100,
        ..Default::default()
    };
    for (k, v) in query_pairs(q.as_deref()) {
        match k.as_str() {
            "kind" => f.kinds.push(v),
            "phase" => {
                if !PHASES.contains(&v.as_str()) {
                    return Err(ApiError::invalid(
                        "phase",
                        format!("{v:?} is not one of {}", PHASES.join(", ")),
                    ));
                }
                f.phases.push(v);
            }
            "limit" => {
                f.limit = v
                    .parse::<i64>()
                    .ok()
                    .filter(|n| (1..=500).contains(n))
                    .ok_or_else(|| ApiError::invalid("limit", "limit must be 1..=500"))?;
            }
            // A malformed cursor restarts from the first page rather than failing.
            "cursor" => f.after = decode_cursor(&v),
            _ => {}
        }
    }
    let mut rows = db::resources::resource_list(&s.pool, &f)
        .await
        .map_err(ApiError::db("list resources"))?;
    let more = rows.len() as i64 > f.limit;
    rows.truncate(f.limit as usize);
    let next = match rows.last() {
        Some(last) if more => encode_cursor(last.created_at, last.uid),
        _ => String::new(),
    };
    let mut h = HeaderMap::new();
    h.insert(
        "x-next-cursor",
        HeaderValue::from_str(&next).expect("base64 is ascii"),
    );
    Ok((h, Json(json!({"resources": rows}))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trip() {
        let t = Utc::now();
        let id = Uuid::new_v4();
        let c = encode_cursor(t, id);
        assert_eq!(decode_cursor(&c), Some((t, id)));
        assert_eq!(decode_cursor("not a cursor"), None);
    }
}
