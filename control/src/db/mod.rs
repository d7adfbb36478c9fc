//! All of the control plane's SQL, one file per table family. HTTP handlers and loops call
//! these functions and never hold SQL themselves. The migrator and pool set-up are shared
//! with the broker (`converge_broker::db`).

pub mod events;
pub mod kinds;
pub mod operations;
pub mod providerconfigs;
pub mod reactor_bindings;
pub mod resource_deps;
pub mod resources;
pub mod spec_history;
pub mod sweeps;

pub use converge_broker::db::{EngineSettings, MIGRATOR, connect, migrate};

use sqlx::{PgConnection, PgPool};

/// Runs `f` on one connection, in a transaction stamped with `actor` when there is one: the
/// events it writes (through any trigger) record that principal (`resource_events.actor`,
/// migration 0024). Without an actor it runs as before, one autocommit round trip.
pub async fn acting<T>(
    pool: &PgPool,
    actor: Option<&str>,
    f: impl AsyncFnOnce(&mut PgConnection) -> Result<T, sqlx::Error>,
) -> Result<T, sqlx::Error> {
    match actor {
        None => {
            let mut conn = pool.acquire().await?;
            f(&mut conn).await
        }
        Some(actor) => {
            let mut tx = pool.begin().await?;
            sqlx::query("SELECT set_config('converge.actor', $1, true)")
                .bind(actor)
                .execute(&mut *tx)
                .await?;
            let out = f(&mut tx).await?;
            tx.commit().await?;
            Ok(out)
        }
    }
}

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

/// How many times [`retry_conflicts`] runs an operation before giving up.
const CONFLICT_ATTEMPTS: u32 = 3;

/// Runs `op`, re-running it when PostgreSQL aborted it as a deadlock victim (40P01) or a
/// serialization failure (40001). `op` must be one self-contained transaction (or statement),
/// so a re-run starts from scratch. The one place control retries them (the broker's result
/// writer re-sends a whole batch itself).
pub async fn retry_conflicts<T, F, Fut>(mut op: F) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
{
    let mut attempt = 1;
    loop {
        match op().await {
            Err(e) if attempt < CONFLICT_ATTEMPTS && converge_broker::db::is_conflict(&e) => {
                tracing::debug!(attempt, error = %e, "retrying after a transaction conflict");
                attempt += 1;
            }
            other => return other,
        }
    }
}
