//! A resource's event log: `GET /api/v1/resources/{kind}/{name}/events?cursor=&limit=`,
//! oldest first, paged by the last event's id. Works after the resource is deleted.

use axum::{
    Json,
    extract::{RawQuery, State},
};
use serde_json::{Value, json};

use super::wire::{EventPage, EventQuery, ResourcePath};
use super::{
    AppState,
    input::ApiPath,
    problem::{ApiError, quote},
    query_pairs,
};
use crate::db;

const PAGE: i64 = 100;
const MAX_PAGE: i64 = 1000;

/// `{items, next_cursor}`; `next_cursor` is null on the last page.
#[utoipa::path(
    get, operation_id = "events_list", path = "/resources/{kind}/{name}/events", tag = "resources",
    params(ResourcePath, EventQuery),
    responses((status = 200, description = "One page of its events, oldest first.", body = EventPage)),
)]
#[tracing::instrument(skip(s))]
pub async fn list(
    State(s): State<AppState>,
    ApiPath((kind, name)): ApiPath<(String, String)>,
    RawQuery(q): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let (mut after, mut limit) = (0i64, PAGE);
    for (k, v) in query_pairs(q.as_deref()) {
        let bad = |what: &str| ApiError::BadRequest(format!("{}={}: {what}", quote(&k), quote(&v)));
        match k.as_str() {
            "cursor" => {
                after = v
                    .parse()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| bad("not a cursor from a previous page"))?;
            }
            "limit" => {
                limit = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE).contains(n))
                    .ok_or_else(|| bad(&format!("expected 1..={MAX_PAGE}")))?;
            }
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "unknown query parameter {}",
                    quote(&k)
                )));
            }
        }
    }
    let items = db::events::events_after(&s.pool, &kind, &name, after, limit)
        .await
        .map_err(ApiError::db("read events"))?;
    let next = (items.len() as i64 == limit)
        .then(|| items.last().map(|e| e.id.to_string()))
        .flatten();
    Ok(Json(json!({"items": items, "next_cursor": next})))
}
