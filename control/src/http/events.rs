//! The event log: one resource's (`GET /api/v1/resources/{kind}/{name}/events?cursor=&limit=`,
//! oldest first, paged by the last event's id; works after the resource is deleted), and
//! everyone's (`GET /api/v1/events`), paged or watched as Server-Sent Events.

use axum::{
    Json,
    extract::{RawQuery, State},
    http::HeaderMap,
    response::{IntoResponse, Response},
};

use super::openapi::Unavailable;
use super::wire::{
    EventLogStream, EventPage, EventQuery, LogQuery, ResourceEvent, ResourcePath, WatchResume,
};
use super::{
    AppState,
    input::ApiPath,
    problem::{ApiError, quote},
    query_pairs,
};
use crate::db::{self, events::EventFilter};

use crate::app::reads::ReadFrom;

const PAGE: i64 = 100;
const MAX_PAGE: i64 = 1000;

/// Read a resource's events.
///
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
) -> Result<Json<EventPage>, ApiError> {
    let s = s.reading(ReadFrom::Replica);
    let mut page = Page::default();
    for (k, v) in query_pairs(q.as_deref()) {
        if !page.take(&k, &v)? {
            return Err(unknown(&k));
        }
    }
    let items =
        db::events::events_after(&s.pool, &kind, &name, page.after.unwrap_or(0), page.limit)
            .await
            .map_err(ApiError::db("read events"))?;
    Ok(Json(page.answer(items)))
}

/// The paging parameters both event lists read: `cursor` and `limit`.
struct Page {
    after: Option<i64>,
    limit: i64,
}

impl Default for Page {
    fn default() -> Self {
        Page {
            after: None,
            limit: PAGE,
        }
    }
}

impl Page {
    /// Reads `k=v` if it is a paging parameter (`Ok(false)` if it is not).
    fn take(&mut self, k: &str, v: &str) -> Result<bool, ApiError> {
        let bad = |what: &str| ApiError::BadRequest(format!("{}={}: {what}", quote(k), quote(v)));
        match k {
            "cursor" => {
                let after = v.parse().ok().filter(|n: &i64| *n >= 0);
                self.after = Some(after.ok_or_else(|| bad("not a cursor from a previous page"))?);
            }
            "limit" => {
                self.limit = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE).contains(n))
                    .ok_or_else(|| bad(&format!("expected 1..={MAX_PAGE}")))?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `{items, next_cursor}`: `next_cursor` is null on the last page.
    fn answer(&self, items: Vec<db::events::Event>) -> EventPage {
        let next_cursor = (items.len() as i64 == self.limit)
            .then(|| items.last().map(|e| e.id.to_string()))
            .flatten();
        EventPage {
            items: items.into_iter().map(ResourceEvent::from).collect(),
            next_cursor,
        }
    }
}

fn unknown(k: &str) -> ApiError {
    ApiError::BadRequest(format!("unknown query parameter {}", quote(k)))
}

/// Read the whole event log.
///
/// `GET /api/v1/events`: every resource's events (or one kind's, `kind`; or one name's,
/// `name`) after `cursor`, oldest first, `{items, next_cursor}`. A page ends at the log's
/// safe horizon, never at an id whose predecessors may still commit, so following
/// `next_cursor` (or the last id) later skips nothing. With `watch=true`: a `text/event-stream`
/// of the same events as they commit, from `cursor`, `Last-Event-ID`, or now.
#[utoipa::path(
    get, operation_id = "events_log", path = "/events", tag = "resources",
    params(LogQuery, WatchResume),
    responses(
        (status = 200, description = "One page of events, oldest first; with `watch=true`, a \
            stream of Server-Sent Events, one per event (each `data` a `ResourceEvent`, each \
            `id` its log position).",
            content((EventPage = "application/json"), (EventLogStream = "text/event-stream"))),
        (status = 503, response = Unavailable),
    ),
)]
#[tracing::instrument(skip(s, caller, headers))]
pub async fn log(
    State(s): State<AppState>,
    caller: Option<axum::Extension<super::auth::Caller>>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (mut filter, mut page, mut watch) = (EventFilter::default(), Page::default(), false);
    for (k, v) in query_pairs(q.as_deref()) {
        match k.as_str() {
            "kind" => filter.kind = Some(v),
            "name" => filter.name = Some(v),
            "watch" => watch = super::watch::parse_watch(&v)?,
            _ if page.take(&k, &v)? => {}
            _ => return Err(unknown(&k)),
        }
    }
    if watch {
        let from = super::watch::last_event_id(&headers)?.or(page.after);
        let w = super::watch::open(&s, filter, from).await?;
        let msgs = super::watch::messages(w, |batch| async move {
            Ok(batch
                .iter()
                .map(|e| super::watch::message(e.id, &ResourceEvent::from(e.as_ref().clone())))
                .collect())
        });
        return Ok(super::watch::respond(&s, caller.map(|c| c.0), msgs));
    }
    let upto = s.watches.horizon().await.map_err(super::watch::refused)?;
    // The horizon is the primary's: the replica may serve the page only once it has replayed
    // everything the primary holds now, or the page would skip events below the horizon that
    // the replica has not seen yet (a cursor never goes back for them).
    let from = if s.runtime.reads.replica_caught_up(&s.pool).await {
        ReadFrom::Replica
    } else {
        ReadFrom::Primary
    };
    let s = s.reading(from);
    let items =
        db::events::events_between(&s.pool, &filter, page.after.unwrap_or(0), upto, page.limit)
            .await
            .map_err(ApiError::db("read events"))?;
    Ok(Json(page.answer(items)).into_response())
}
