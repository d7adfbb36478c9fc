//! All of the control plane's SQL, one file per table family. HTTP handlers and loops call
//! these functions and never hold SQL themselves. The migrator and pool set-up are shared
//! with the broker (`converge_broker::db`).

pub mod kinds;
pub mod resources;
pub mod sweeps;

pub use converge_broker::db::{EngineSettings, MIGRATOR, connect, migrate};

use sqlx::PgPool;

/// Pings the primary (readiness).
pub async fn ping(pool: &PgPool) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT 1").execute(pool).await.map(|_| ())
}

/// One applied (or pending) migration, for `converge migrate status`.
#[derive(Debug, Clone)]
pub struct MigrationStatus {
    /// Migration version number.
    pub version: i64,
    /// Its description.
    pub description: String,
    /// Whether the database has it.
    pub applied: bool,
}

/// Lists every embedded migration and whether it is applied.
pub async fn migration_status(pool: &PgPool) -> Result<Vec<MigrationStatus>, sqlx::Error> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(pool)
        .await?;
    let applied: Vec<i64> = if exists {
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
            .fetch_all(pool)
            .await?
    } else {
        Vec::new()
    };
    Ok(MIGRATOR
        .iter()
        .map(|m| MigrationStatus {
            version: m.version,
            description: m.description.to_string(),
            applied: applied.contains(&m.version),
        })
        .collect())
}
