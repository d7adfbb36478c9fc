//! `POST /api/v1/resources:batch`: many applies in one request. Each item is checked exactly
//! as the single apply checks it (the same 422, 404 or 409, per item) and the valid ones are
//! written set-based (SQL `resource_apply_batch`), so loading a large tree costs a few
//! statements per thousand resources instead of one round trip each.
//!
//! The body is a JSON array (`application/json`) or one JSON object per line
//! (`application/x-ndjson`), at most [`MAX_BATCH_ITEMS`] items. The answer is always one
//! result per item, in item order: `{"index", "status", ...}` with the single apply's fields
//! on success, or `{"index", "status", "error": <problem+json>}` on failure. An item is never
//! half-applied; a failed item does not stop the others.

use std::collections::HashMap;

use axum::{
    Json,
    body::Bytes,
    extract::{State, rejection::BytesRejection},
    http::{HeaderMap, StatusCode, header},
};
use serde_json::{Value, json};

use super::wire::BatchResult;
use super::{
    AppState, auth,
    input::{body_rejection, nul_in_value},
    problem::{ApiError, clipped},
    resources::{ApplyBody, ApplyLookups, applied_json, validate_apply},
};
use crate::db::{self, resources::ApplyItem};

/// The most items one batch may hold.
pub const MAX_BATCH_ITEMS: usize = 10_000;

/// Items written per statement (and transaction): bounds one statement's size and the time
/// its row locks are held.
const WRITE_CHUNK: usize = 1_000;

/// How long a parse error's message may be.
const MAX_MESSAGE: usize = 512;

/// The body format, from `Content-Type`.
enum Format {
    Array,
    Lines,
}

fn format_of(headers: &HeaderMap) -> Result<Format, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "application/json" => Ok(Format::Array),
        "application/x-ndjson" | "application/jsonl" => Ok(Format::Lines),
        _ => Err(ApiError::UnsupportedMedia(
            "expected Content-Type: application/json (an array) or application/x-ndjson \
             (one object per line)"
                .into(),
        )),
    }
}

/// The items of the body: each a JSON value, or the 422 of a line that is not JSON.
fn items_of(format: Format, body: &[u8]) -> Result<Vec<Result<Value, ApiError>>, ApiError> {
    let items: Vec<Result<Value, ApiError>> = match format {
        Format::Array => match serde_json::from_slice::<Value>(body) {
            Ok(Value::Array(items)) => items.into_iter().map(Ok).collect(),
            Ok(_) => return Err(ApiError::invalid("", "expected a JSON array of resources")),
            Err(e) => return Err(ApiError::BadRequest(clipped(MAX_MESSAGE, e))),
        },
        Format::Lines => body
            .split(|b| *b == b'\n')
            .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
            .map(|line| {
                serde_json::from_slice::<Value>(line).map_err(|e| {
                    ApiError::invalid("", clipped(MAX_MESSAGE, format!("not JSON: {e}")))
                })
            })
            .collect(),
    };
    if items.len() > MAX_BATCH_ITEMS {
        return Err(ApiError::invalid(
            "",
            format!(
                "a batch holds at most {MAX_BATCH_ITEMS} items; this one has {} (split it)",
                items.len()
            ),
        ));
    }
    Ok(items)
}

/// One item's answer.
fn failed(index: usize, e: ApiError) -> Value {
    let (status, problem) = e.into_problem();
    json!({ "index": index, "status": status.as_u16(), "error": problem })
}

/// `POST /api/v1/resources:batch`.
#[utoipa::path(
    post, operation_id = "resource_batch_apply_batch", path = "/resources:batch", tag = "resources",
    request_body(
        description = "At most 10,000 apply bodies: a JSON array, or one JSON object per line.",
        content((Vec<ApplyBody> = "application/json"), (String = "application/x-ndjson")),
    ),
    responses((status = 200, description = "One result per item, in item order.", body = BatchResult)),
)]
pub async fn apply_batch(
    State(s): State<AppState>,
    caller: Option<axum::Extension<auth::Caller>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let format = format_of(&headers)?;
    let body = body.map_err(body_rejection)?;
    let items = items_of(format, &body)?;
    drop(body);

    let mut results: Vec<Option<Value>> = vec![None; items.len()];
    // Parallel: the item index in the request and the checked item, for the valid ones.
    let mut positions: Vec<usize> = Vec::new();
    let mut valid: Vec<ApplyItem> = Vec::new();
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    let mut lookups = ApplyLookups::default();
    for (index, item) in items.into_iter().enumerate() {
        let checked = match item {
            Err(e) => Err(e),
            Ok(v) => check_item(&s, v, &mut lookups).await,
        };
        let item = match checked {
            Err(e) => {
                results[index] = Some(failed(index, e));
                continue;
            }
            Ok(item) => item,
        };
        match seen.entry((item.kind.clone(), item.name.clone())) {
            std::collections::hash_map::Entry::Occupied(first) => {
                let e = ApiError::invalid(
                    "/name",
                    format!(
                        "{} {} is also item {} of this batch; a batch applies each resource \
                         once",
                        item.kind,
                        item.name,
                        first.get()
                    ),
                );
                results[index] = Some(failed(index, e));
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(index);
                positions.push(index);
                valid.push(item);
            }
        }
    }
    drop(seen);

    let actor = auth::actor(&caller);
    let mut changed = false;
    for (at, items) in positions.chunks(WRITE_CHUNK).zip(valid.chunks(WRITE_CHUNK)) {
        match db::resources::resource_apply_batch(&s.pool, actor.as_deref(), items).await {
            Ok(applied) => {
                for ((index, item), applied) in at.iter().zip(items).zip(&applied) {
                    changed |= applied.result != "unchanged";
                    let status = if applied.result == "created" {
                        StatusCode::CREATED
                    } else {
                        StatusCode::OK
                    };
                    let mut v = applied_json(item, applied);
                    v["index"] = json!(index);
                    v["status"] = json!(status.as_u16());
                    results[*index] = Some(v);
                }
            }
            Err(e) => {
                let (status, problem) =
                    super::resources::apply_failed("apply a batch of resources")(e).into_problem();
                for index in at {
                    results[*index] = Some(json!({
                        "index": index, "status": status.as_u16(), "error": problem.clone(),
                    }));
                }
            }
        }
    }
    if changed {
        s.work_scheduled();
    }

    let results: Vec<Value> = results.into_iter().flatten().collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for r in &results {
        let key = r["result"].as_str().unwrap_or("failed");
        *counts.entry(key).or_default() += 1;
    }
    let count = |k: &str| counts.get(k).copied().unwrap_or(0);
    Ok(Json(json!({
        "items": results.len(),
        "created": count("created"),
        "configured": count("configured"),
        "unchanged": count("unchanged"),
        "failed": count("failed"),
        "results": results,
    })))
}

/// One item, as the single apply would check its body.
async fn check_item(
    s: &AppState,
    v: Value,
    lookups: &mut ApplyLookups,
) -> Result<ApplyItem, ApiError> {
    if let Some(e) = nul_in_value(&v) {
        return Err(e);
    }
    let body: ApplyBody =
        serde_json::from_value(v).map_err(|e| ApiError::invalid("", clipped(MAX_MESSAGE, e)))?;
    validate_apply(s, body, lookups).await
}
