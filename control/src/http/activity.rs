//! `GET /api/v1/events/recent`: the newest events of every resource, newest first, for an
//! activity feed (the web UI's). `GET /api/v1/events` pages the log oldest first from a
//! cursor, which cannot show the latest events without reading all before them; this reads
//! back from the log's safe horizon and answers it, so a client can follow on with
//! `GET /api/v1/events?watch=true&cursor={horizon}` and miss nothing in between.

use axum::{
    Json,
    extract::{RawQuery, State},
};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use super::openapi::Unavailable;
use super::wire::ResourceEvent;
use super::{AppState, problem::ApiError, query_pairs};
use crate::db;

/// Default and largest page.
const PAGE: i64 = 100;
const MAX_PAGE: i64 = 500;

/// The query of `GET /events/recent`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RecentQuery {
    /// How many (default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    /// Only events older than this log position (an item's `id`): the next page back.
    #[param(minimum = 0)]
    pub before: Option<i64>,
}

/// The newest events.
#[derive(ToSchema)]
pub struct RecentEvents {
    /// Newest first, every id at or below `horizon`.
    pub items: Vec<ResourceEvent>,
    /// The log's safe horizon when read: a watch from this cursor sends what came after.
    pub horizon: i64,
}

/// Read the most recent events, newest first.
///
/// `GET /api/v1/events/recent?limit=&before=` → `{items, horizon}`, newest first.
#[utoipa::path(
    get, operation_id = "events_recent", path = "/events/recent", tag = "resources",
    params(RecentQuery),
    responses(
        (status = 200, description = "The newest events, newest first.", body = RecentEvents),
        (status = 503, response = Unavailable),
    ),
)]
#[tracing::instrument(skip(s))]
pub async fn recent(
    State(s): State<AppState>,
    RawQuery(q): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let (mut limit, mut before) = (PAGE, None);
    for (k, v) in query_pairs(q.as_deref()) {
        let bad = |what: &str| ApiError::BadRequest(format!("{k}={v:?}: {what}"));
        match k.as_str() {
            "limit" => {
                limit = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE).contains(n))
                    .ok_or_else(|| bad(&format!("expected 1..={MAX_PAGE}")))?;
            }
            "before" => {
                let n = v.parse().ok().filter(|n: &i64| *n >= 0);
                before = Some(n.ok_or_else(|| bad("expected an event id"))?);
            }
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "unknown query parameter {k:?}"
                )));
            }
        }
    }
    let horizon = s.watches.horizon().await.map_err(super::watch::refused)?;
    let items = db::events::events_newest(&s.pool, horizon, before, limit)
        .await
        .map_err(ApiError::db("read events"))?;
    Ok(Json(json!({"items": items, "horizon": horizon})))
}
