//! Reactor bindings (`reactor_bindings`): "when a `watch_kind` resource crosses `transition`
//! (and its labels contain `label_match`), run reactor kind `reactor`". Live: the emit reads
//! them in the same transaction that records the transition.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{FromRow, PgPool};

use crate::words::Transition;

/// One binding.
#[derive(Debug, Clone, FromRow, Serialize)]
pub struct Binding {
    /// Operator-chosen identity.
    pub name: String,
    /// The kind whose transitions fire it.
    pub watch_kind: String,
    /// The transition that fires it.
    pub transition: Transition,
    /// The reactor kind that runs.
    pub reactor: String,
    /// Labels the watched resource must carry.
    pub label_match: serde_json::Value,
    /// A disabled binding never fires.
    pub enabled: bool,
    /// Created at.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Deliveries not yet acked.
    pub pending: i64,
    /// Of those, the ones whose last attempt failed (waiting for their retry).
    pub failing: i64,
    /// The error of the most recent failed attempt among the failing deliveries.
    pub last_error: Option<String>,
    /// How many attempts that delivery has had.
    pub last_error_attempts: Option<i32>,
    /// When the next failing delivery is due to be retried.
    pub next_retry_at: Option<DateTime<Utc>>,
}

/// The binding's columns and the state of its deliveries: counted in one pass over its
/// `lifecycle_outbox` rows, plus the newest failure's error (a failed attempt sets
/// `not_before` to now plus its backoff, so the latest `not_before` is close to the latest
/// failure). A delivery that keeps failing is visible here, not only in the outbox.
const SELECT: &str = "SELECT b.name, b.watch_kind, b.transition, b.reactor, b.label_match, \
     b.enabled, b.created_at, b.updated_at, d.pending, d.failing, e.last_error, \
     e.attempts AS last_error_attempts, d.next_retry_at \
     FROM reactor_bindings b \
     CROSS JOIN LATERAL ( \
         SELECT count(*) AS pending, \
                count(*) FILTER (WHERE l.last_error IS NOT NULL) AS failing, \
                min(l.not_before) FILTER (WHERE l.last_error IS NOT NULL \
                                          AND l.claim_token IS NULL) AS next_retry_at \
         FROM lifecycle_outbox l WHERE l.binding_name = b.name) d \
     LEFT JOIN LATERAL ( \
         SELECT l.last_error, l.attempts FROM lifecycle_outbox l \
         WHERE l.binding_name = b.name AND l.last_error IS NOT NULL \
         ORDER BY l.not_before DESC LIMIT 1) e ON true";

/// Creates or replaces a binding by name; true when created.
pub async fn binding_put(
    pool: &PgPool,
    name: &str,
    watch_kind: &str,
    transition: Transition,
    reactor: &str,
    label_match: &serde_json::Value,
    enabled: bool,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO reactor_bindings AS b (name, watch_kind, transition, reactor, label_match, enabled)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (name) DO UPDATE
             SET watch_kind = EXCLUDED.watch_kind, transition = EXCLUDED.transition,
                 reactor = EXCLUDED.reactor, label_match = EXCLUDED.label_match,
                 enabled = EXCLUDED.enabled, updated_at = now()
         RETURNING (xmax = 0)",
    )
    .bind(name)
    .bind(watch_kind)
    .bind(transition)
    .bind(reactor)
    .bind(label_match)
    .bind(enabled)
    .fetch_one(pool)
    .await
}

/// One binding.
pub async fn binding_get(pool: &PgPool, name: &str) -> Result<Option<Binding>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!("{SELECT} WHERE b.name = $1")))
        .bind(name)
        .fetch_optional(pool)
        .await
}

/// Every binding, optionally of one watched kind or one reactor, by name.
pub async fn binding_list(
    pool: &PgPool,
    watch_kind: Option<&str>,
    reactor: Option<&str>,
) -> Result<Vec<Binding>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{SELECT}
         WHERE ($1::text IS NULL OR b.watch_kind = $1) AND ($2::text IS NULL OR b.reactor = $2)
         ORDER BY b.name"
    )))
    .bind(watch_kind)
    .bind(reactor)
    .fetch_all(pool)
    .await
}

/// Deletes a binding and its undelivered deliveries; false when it did not exist.
pub async fn binding_delete(pool: &PgPool, name: &str) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let n = sqlx::query("DELETE FROM reactor_bindings WHERE name = $1")
        .bind(name)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    sqlx::query("DELETE FROM lifecycle_outbox WHERE binding_name = $1")
        .bind(name)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(n > 0)
}

/// Whether any manifest of `kind` exists (any version).
pub async fn kind_known(pool: &PgPool, kind: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM kind_manifest WHERE kind = $1)")
        .bind(kind)
        .fetch_one(pool)
        .await
}
