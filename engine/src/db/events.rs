//! The resource event log (`resource_events`): phase transitions (with failure messages),
//! creation, deletion and operations, in order. Events outlive their resource.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{FromRow, PgPool};
use uuid::Uuid;

/// One event.
#[derive(Debug, Clone, FromRow, Serialize)]
pub struct Event {
    /// Position in the log (the cursor).
    pub id: i64,
    /// The resource (a deleted one keeps its id here).
    pub resource_id: Uuid,
    /// When.
    pub at: DateTime<Utc>,
    /// created | phase | deleted | operation.
    #[serde(rename = "type")]
    #[sqlx(rename = "type")]
    pub type_: String,
    /// Phase before (phase, deleted).
    pub from_phase: Option<String>,
    /// Phase after (created, phase).
    pub to_phase: Option<String>,
    /// The generation at the time.
    pub generation: Option<i64>,
    /// A failure message, an operation's verb and state.
    pub message: Option<String>,
    /// The principal whose API call wrote it; `null` for the engine's own work (or an API
    /// running without AUTH_FILE).
    pub actor: Option<String>,
}

const COLUMNS: &str = "id, resource_id, at, type, from_phase, to_phase, generation, message, actor";

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
