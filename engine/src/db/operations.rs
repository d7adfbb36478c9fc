//! Operations (`resource_operations`): a verb with an input, run once by the kind's
//! operation reaction as an operate task, with its state and output recorded.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{FromRow, PgPool};
use uuid::Uuid;

/// The identity of a resource an action targets.
#[derive(Debug, Clone, FromRow)]
pub struct Target {
    /// Its id.
    pub id: Uuid,
    /// Its kind version (selects the manifest).
    pub kind_version: i32,
    /// Whether it is being deleted.
    pub deleting: bool,
}

/// Looks up the resource an action targets.
pub async fn target(pool: &PgPool, kind: &str, name: &str) -> Result<Option<Target>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, kind_version, deletion_requested_at IS NOT NULL AS deleting
         FROM resources WHERE kind = $1 AND name = $2",
    )
    .bind(kind)
    .bind(name)
    .fetch_optional(pool)
    .await
}

/// One operation.
#[derive(Debug, Clone, FromRow, Serialize)]
pub struct OperationRow {
    /// Its uid.
    pub uid: Uuid,
    /// The verb.
    pub verb: String,
    /// The input JSON.
    pub input: Option<serde_json::Value>,
    /// Its state.
    pub state: crate::words::OperationState,
    /// The reaction's output (succeeded).
    pub output: Option<serde_json::Value>,
    /// The last failure message.
    pub error: Option<String>,
    /// Attempts so far.
    pub attempts: i32,
    /// Who asked for it.
    pub requested_by: String,
    /// When it was requested.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// When it succeeded or failed for good.
    pub finished_at: Option<DateTime<Utc>>,
}

const COLUMNS: &str = "uid, verb, input, state, output, error, attempts, requested_by, \
                       created_at, updated_at, finished_at";

/// Records an operation and queues its task, and returns it as recorded (`pending`). `None`
/// when the resource vanished or started deleting in the meantime.
///
/// One transaction: read after the commit, a broker that claimed the task in between would
/// already have marked it running.
pub async fn operation_request(
    pool: &PgPool,
    id: Uuid,
    verb: &str,
    input: Option<&serde_json::Value>,
    requested_by: &str,
) -> Result<Option<OperationRow>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    // The operation's event records who asked (resource_events.actor, migration 0024).
    sqlx::query("SELECT set_config('converge.actor', $1, true)")
        .bind(requested_by)
        .execute(&mut *tx)
        .await?;
    let uid: Option<Uuid> = sqlx::query_scalar("SELECT operation_request($1, $2, $3, $4)")
        .bind(id)
        .bind(verb)
        .bind(input)
        .bind(requested_by)
        .fetch_one(&mut *tx)
        .await?;
    let Some(uid) = uid else {
        return Ok(None);
    };
    let op = operation_get(&mut *tx, id, uid).await?;
    tx.commit().await?;
    Ok(op)
}

/// One operation of a resource.
pub async fn operation_get(
    db: impl sqlx::PgExecutor<'_>,
    id: Uuid,
    uid: Uuid,
) -> Result<Option<OperationRow>, sqlx::Error> {
    let sql =
        format!("SELECT {COLUMNS} FROM resource_operations WHERE resource_id = $1 AND uid = $2");
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(uid)
        .fetch_optional(db)
        .await
}

/// The newest `limit` operations of a resource, newest first.
pub async fn operation_list(
    pool: &PgPool,
    id: Uuid,
    limit: i64,
) -> Result<Vec<OperationRow>, sqlx::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM resource_operations WHERE resource_id = $1
         ORDER BY created_at DESC, uid DESC LIMIT $2"
    );
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(limit)
        .fetch_all(pool)
        .await
}
