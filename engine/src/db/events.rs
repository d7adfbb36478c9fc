//! The resource event log (`resource_events`): phase transitions (with failure messages),
//! creation, deletion and operations, in order. Events outlive their resource.
//!
//! It is also the cursor of the API's watches, read up to a *safe horizon*: see [`log_head`]
//! for why a plain `WHERE id > cursor` would skip events, and how the horizon is found.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{FromRow, PgPool};
use uuid::Uuid;

use crate::words::Phase;

/// One event.
#[derive(Debug, Clone, FromRow, Serialize)]
pub struct Event {
    /// Position in the log (the cursor).
    pub id: i64,
    /// The resource (a deleted one keeps its id here).
    pub resource_id: Uuid,
    /// The resource's kind.
    pub kind: String,
    /// The resource's name.
    pub name: String,
    /// When.
    pub at: DateTime<Utc>,
    /// created | phase | deleted | operation.
    #[serde(rename = "type")]
    #[sqlx(rename = "type")]
    pub type_: String,
    /// Phase before (phase, deleted).
    pub from_phase: Option<Phase>,
    /// Phase after (created, phase).
    pub to_phase: Option<Phase>,
    /// The generation at the time.
    pub generation: Option<i64>,
    /// A failure message, an operation's verb and state.
    pub message: Option<String>,
    /// The principal whose API call wrote it; `null` for the engine's own work (or an API
    /// running without AUTH_FILE).
    pub actor: Option<String>,
}

const COLUMNS: &str =
    "id, resource_id, kind, name, at, type, from_phase, to_phase, generation, message, actor";

/// Events of (kind, name) after `after` (ascending, up to `limit`).
pub async fn events_after(
    pool: &PgPool,
    kind: &str,
    name: &str,
    after: i64,
    limit: i64,
) -> Result<Vec<Event>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM resource_events
         WHERE kind = $1 AND name = $2 AND id > $3 ORDER BY id LIMIT $4"
    )))
    .bind(kind)
    .bind(name)
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// The newest `limit` events of (kind, name), newest first.
pub async fn events_recent(
    pool: &PgPool,
    kind: &str,
    name: &str,
    limit: i64,
) -> Result<Vec<Event>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM resource_events
         WHERE kind = $1 AND name = $2 ORDER BY id DESC LIMIT $3"
    )))
    .bind(kind)
    .bind(name)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// The newest `limit` events of every resource with `id <= upto` and, given `before`,
/// `id < before`, newest first (the activity feed: `upto` is the log's safe horizon).
pub async fn events_newest(
    pool: &PgPool,
    upto: i64,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Event>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM resource_events
         WHERE id <= $1 AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $3"
    )))
    .bind(upto)
    .bind(before)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// Which events a read or a watch wants: all, one kind's, or one resource's (kind and name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Only this kind.
    pub kind: Option<String>,
    /// Only this name (with `kind`: one resource, deleted or not).
    pub name: Option<String>,
}

impl EventFilter {
    /// Whether `e` passes.
    pub fn matches(&self, e: &Event) -> bool {
        self.kind.as_ref().is_none_or(|k| *k == e.kind)
            && self.name.as_ref().is_none_or(|n| *n == e.name)
    }
}

/// Events passing `filter` with `after < id <= upto`, ascending, at most `limit`.
pub async fn events_between(
    pool: &PgPool,
    filter: &EventFilter,
    after: i64,
    upto: i64,
    limit: i64,
) -> Result<Vec<Event>, sqlx::Error> {
    // One statement per filter shape, so each plans on its own index: `(kind, name, id)` for
    // a resource or a kind, the primary key for everything.
    let by = match (&filter.kind, &filter.name) {
        (Some(_), Some(_)) => "AND kind = $4 AND name = $5",
        (Some(_), None) => "AND kind = $4",
        (None, Some(_)) => "AND name = $4",
        (None, None) => "",
    };
    let sql = format!(
        "SELECT {COLUMNS} FROM resource_events
         WHERE id > $1 AND id <= $2 {by} ORDER BY id LIMIT $3"
    );
    let mut q = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(after)
        .bind(upto)
        .bind(limit);
    for v in [&filter.kind, &filter.name].into_iter().flatten() {
        q = q.bind(v.as_str());
    }
    q.fetch_all(pool).await
}

/// The last id the event log's sequence handed out (0 before the first event): every event
/// that is or will be in the log at this moment has an id at or below it.
///
/// **Why the log needs a horizon.** `resource_events.id` is a bigserial: an id is handed out
/// when a row is inserted, not when its transaction commits, so a reader can see id 11
/// committed while id 10 is still in flight and commits later. A watch that sent everything
/// `> cursor` would move its cursor past 10 and never send it. So the API's watches and its
/// log pages read only up to a *safe horizon*: an id at or below which every event that will
/// ever commit has committed. `converge_control::app::watch` finds one with the three reads
/// here, and needs no lock on the writers and no column of their own:
///
/// 1. `head = log_head()`: every id `<= head` has been handed out.
/// 2. `fence = xact_fence()`, afterwards: a transaction id newer than every transaction that
///    drew one of those ids. An event records a change its transaction made first to
///    `resources` or `resource_operations` (the triggers in events.sql run after that write;
///    a result's rows are locked, by the drain's `apply_results` or by `work_complete`, in a
///    statement before the one that inserts its events), and a transaction gets its id at
///    its first write or row lock, so
///    the writer of an id `<= head` had its transaction id before `head` was read, below
///    `fence`.
/// 3. Once `oldest_running_xact() >= fence`, no transaction below `fence` is still running: each
///    id `<= head` is committed and visible to any later read, or never will be. `head` is safe.
///
/// (A snapshot's in-progress list alone is not enough: its `xmax` is the last *completed*
/// transaction plus one, so a transaction that took its id later but has not finished is in
/// neither the list nor below `xmax`.) The sequence must hand out ids one at a time (`CACHE
/// 1`, bigserial's default): a cached block would let a session insert an id `<= head` long
/// after `head` was read. The cost is latency, never a gap: a long transaction holds the
/// horizon, and so every watch, until it ends, even one in another database of the server.
pub async fn log_head(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT coalesce(pg_sequence_last_value(
                    pg_get_serial_sequence('resource_events', 'id')::regclass), 0)",
    )
    .fetch_one(pool)
    .await
}

/// A new transaction id (step 2 of [`log_head`]'s horizon): one statement in a transaction of
/// its own, so it takes an id (and commits at once). A watch pays one per poll that found new
/// events, none while the log is quiet.
pub async fn xact_fence(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT pg_current_xact_id()::text::bigint")
        .fetch_one(pool)
        .await
}

/// The oldest transaction id still running on the server (step 3 of [`log_head`]'s horizon);
/// the next one to be handed out when none runs.
pub async fn oldest_running_xact(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
        .fetch_one(pool)
        .await
}
