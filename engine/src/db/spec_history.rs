//! Spec history of roots (`spec_versions`) and rollback to a recorded generation.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{FromRow, PgPool};
use uuid::Uuid;

/// One recorded spec.
#[derive(Debug, Clone, FromRow, Serialize)]
pub struct SpecVersion {
    /// The generation it was the spec of.
    pub generation: i64,
    /// The spec.
    pub spec: serde_json::Value,
    /// When it was recorded.
    pub created_at: DateTime<Utc>,
}

/// The recorded specs of a resource, newest first.
pub async fn spec_history(pool: &PgPool, id: Uuid) -> Result<Vec<SpecVersion>, sqlx::Error> {
    sqlx::query_as(
        "SELECT generation, spec, created_at FROM spec_versions
         WHERE resource_id = $1 ORDER BY generation DESC",
    )
    .bind(id)
    .fetch_all(pool)
    .await
}

/// The spec recorded for one generation.
pub async fn spec_at(
    pool: &PgPool,
    id: Uuid,
    generation: i64,
) -> Result<Option<serde_json::Value>, sqlx::Error> {
    sqlx::query_scalar("SELECT spec FROM spec_versions WHERE resource_id = $1 AND generation = $2")
        .bind(id)
        .bind(generation)
        .fetch_optional(pool)
        .await
}

/// Re-applies the spec of `generation` as a new generation. `None` when that generation is
/// not recorded; otherwise the resulting generation and whether the spec changed.
pub async fn rollback(
    pool: &PgPool,
    actor: Option<&str>,
    id: Uuid,
    generation: i64,
) -> Result<Option<(i64, bool)>, sqlx::Error> {
    super::acting(pool, actor, async |c| {
        sqlx::query_as("SELECT * FROM resource_rollback($1, $2)")
            .bind(id)
            .bind(generation)
            .fetch_optional(c)
            .await
    })
    .await
}
