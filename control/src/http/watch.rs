//! The `?watch=true` answers: Server-Sent Events (axum's `Sse`, with keep-alives) fed by a
//! [`Watch`] of the process's one event-log tail ([`crate::app::watch`]). Each message's SSE
//! `id` is an event-log position, so a client that reconnects with `Last-Event-ID` resumes
//! with no gap and no duplicate. Watches are reads: the auth guard treats them as any GET.
//!
//! A watch outlives the check its request passed, so it re-checks its caller: once the
//! caller's principal is removed from `AUTH_FILE` (or its role or kinds change), the stream
//! ends as soon as converge has reloaded the file ([`revoked`]); a client
//! that reconnects then meets the guard's 401.

use std::{convert::Infallible, sync::Arc, time::Duration};

use converge_auth::Authenticator;

use axum::{
    http::HeaderMap,
    response::{
        IntoResponse, Response,
        sse::{Event as SseEvent, KeepAlive, Sse},
    },
};
use futures::{Stream, StreamExt, stream};
use serde::Serialize;

use super::{
    AppState,
    auth::Caller,
    problem::{ApiError, quote},
};
use crate::{
    app::watch::{OpenError, Watch},
    db::events::{Event, EventFilter},
};

/// How often an idle watch sends a keep-alive comment: well under the smallest
/// `IDLE_TIMEOUT` (10 s), so the connection budget never closes a quiet watch as idle, and
/// proxies see bytes.
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// The `watch` query parameter: `true` or `false` (absent: false).
pub fn parse_watch(v: &str) -> Result<bool, ApiError> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ApiError::BadRequest(format!(
            "watch={}: expected true or false",
            quote(v)
        ))),
    }
}

/// The `Last-Event-ID` header: the last log position the client received.
pub fn last_event_id(headers: &HeaderMap) -> Result<Option<i64>, ApiError> {
    let Some(v) = headers.get("last-event-id") else {
        return Ok(None);
    };
    v.to_str()
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|n| *n >= 0)
        .map(Some)
        .ok_or_else(|| {
            ApiError::BadRequest(
                "Last-Event-ID: not an id this server sent (a non-negative integer)".into(),
            )
        })
}

/// Opens a watch, or the 503 that says the server holds as many as it allows.
pub async fn open(
    s: &AppState,
    filter: EventFilter,
    cursor: Option<i64>,
) -> Result<Watch, ApiError> {
    s.watches.open(filter, cursor).await.map_err(refused)
}

/// The problem a watch (or a read of the log's horizon) answers when it cannot be had.
pub fn refused(e: OpenError) -> ApiError {
    match e {
        OpenError::Full(_) => {
            tracing::warn!(error = %e, "watch refused");
            ApiError::Unavailable(format!("{e}; retry later"))
        }
        OpenError::Stopping | OpenError::HeldBack => ApiError::Unavailable(e.to_string()),
        OpenError::Db(source) => ApiError::Internal {
            op: "read the event log",
            source,
        },
    }
}

/// One SSE message: `data` as JSON, `id` the log position.
pub fn message(id: i64, data: &impl Serialize) -> SseEvent {
    SseEvent::default()
        .id(id.to_string())
        .json_data(data)
        .unwrap_or_else(|_| SseEvent::default().comment("unserialisable message"))
}

/// The stream of a watch: every batch of events mapped to messages by `render` (which may read
/// the database; an error there, or in the watch, ends the stream and the client resumes).
pub fn messages<F, Fut>(watch: Watch, render: F) -> impl Stream<Item = SseEvent>
where
    F: Fn(Vec<Arc<Event>>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Vec<SseEvent>, ApiError>> + Send,
{
    let render = Arc::new(render);
    stream::unfold(watch, move |mut w| {
        let render = render.clone();
        async move {
            let batch = match w.next().await? {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %e, "watch: reading the event log failed; ending it");
                    return None;
                }
            };
            match render(batch).await {
                Ok(msgs) => Some((stream::iter(msgs), w)),
                Err(e) => {
                    tracing::warn!(error = %e, "watch: rendering failed; ending it");
                    None
                }
            }
        }
    })
    .flatten()
}

/// Resolves once `caller` is no longer listed in `AUTH_FILE` as it was when its request was
/// let in (removed, or its role or kinds changed), or its token expires (an API token's, an
/// OIDC token's); never when authentication is off. Woken by
/// the authenticator's change signal ([`Authenticator::subscribe`]: the moment a reload
/// changes the principals), and checked once at the start, since a reload may have come
/// between the request's authentication and the subscription.
pub async fn revoked(auth: Option<Arc<Authenticator>>, caller: Option<Caller>) {
    let (Some(auth), Some(Caller(principal))) = (auth, caller) else {
        return std::future::pending().await;
    };
    let mut changes = auth.subscribe();
    loop {
        if !auth.still_valid(&principal) {
            tracing::info!(principal = %principal.name, "watch closed: the principal was removed or changed in AUTH_FILE, or its API token was revoked or expired");
            return;
        }
        // An OIDC principal is in no list: its token's expiry ends the watch.
        let expiry = async {
            match principal
                .expires
                .and_then(|e| e.duration_since(std::time::SystemTime::now()).ok())
            {
                Some(left) => tokio::time::sleep(left).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = changes.changed() => if changed.is_err() {
                // The authenticator is gone (shutdown): nothing can revoke the caller any more.
                return std::future::pending().await;
            },
            () = expiry => {}
        }
    }
}

/// The `text/event-stream` answer to `caller`: it ends when the server stops, the watch
/// fails, or the caller is revoked ([`revoked`]).
pub fn respond<S>(s: &AppState, caller: Option<Caller>, messages: S) -> Response
where
    S: Stream<Item = SseEvent> + Send + 'static,
{
    let revoked = Box::pin(revoked(s.auth.clone(), caller));
    Sse::new(messages.take_until(revoked).map(Ok::<_, Infallible>))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_and_last_event_id_parse_strictly() {
        assert!(parse_watch("true").unwrap());
        assert!(!parse_watch("false").unwrap());
        assert!(parse_watch("yes").is_err());
        let mut h = HeaderMap::new();
        assert_eq!(last_event_id(&h).unwrap(), None);
        h.insert("last-event-id", "42".parse().unwrap());
        assert_eq!(last_event_id(&h).unwrap(), Some(42));
        for bad in ["-1", "x", "1.5"] {
            h.insert("last-event-id", bad.parse().unwrap());
            assert!(last_event_id(&h).is_err(), "{bad}");
        }
    }
}
