//! All of converge's SQL wrappers, one file per table family, the embedded migrator and the
//! pool set-up. The broker, the HTTP API and the loops call these functions and never hold
//! SQL themselves; the engine's invariants (shard scoping, lock order, epoch fencing) are
//! kept by the plpgsql functions they call.
//!
//! The data layer's one error convention: every function here returns `sqlx::Result` and
//! the caller names the operation that failed when it wraps the error (`Error::db(op)` in
//! the broker, `ApiError::db(op)` in the API).

pub mod cluster;
pub mod compose;
pub mod descendants;
pub mod engine_sql;
pub mod events;
#[cfg(feature = "rds-iam")]
pub mod iam;
pub mod kinds;
pub mod operations;
pub mod plans;
pub mod providerconfigs;
pub mod queue;
pub mod reactor_bindings;
pub mod resource_deps;
pub mod resources;
pub mod signin;
pub mod spec_history;
pub mod stats;
pub mod sweeps;
pub mod tokens;

use std::{str::FromStr, time::Duration};

use sqlx::{
    PgConnection, PgPool,
    migrate::Migrator,
    postgres::{PgConnectOptions, PgPoolOptions},
};

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
            Err(e) if attempt < CONFLICT_ATTEMPTS && is_conflict(&e) => {
                tracing::debug!(attempt, error = %e, "retrying after a transaction conflict");
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Whether PostgreSQL aborted the statement as a deadlock victim (40P01) or a serialization
/// failure (40001): nothing is wrong with the data, and running the same transaction again
/// succeeds. The one place that classification lives.
pub fn is_conflict(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if matches!(d.code().as_deref(), Some("40P01" | "40001")))
}

/// A duration as a PostgreSQL `interval` parameter (saturating at the far future).
pub fn interval(d: Duration) -> sqlx::postgres::types::PgInterval {
    sqlx::postgres::types::PgInterval {
        months: 0,
        days: 0,
        microseconds: i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
    }
}

/// The forward-only migrations in `migrations/`, embedded once.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// Engine settings applied to every pooled connection (read by plpgsql via current_setting).
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// Base of the transient-failure retry backoff.
    pub retry_base: Duration,
    /// Cap of the retry backoff.
    pub retry_max: Duration,
    /// Run `engine_warm_up()` on every new connection (see [`warm_up`]): a serving process's
    /// pool; off for tools and tests.
    pub warm_up: bool,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            retry_base: Duration::from_secs(2),
            retry_max: Duration::from_secs(300),
            warm_up: false,
        }
    }
}

/// Plans the hot path on a new connection before it serves anything: `engine_warm_up()`
/// (`engine/sql/warmup.sql`) runs an apply, a claim, a completion and
/// a drain of a resource of its own and takes all of it back. A backend plans each statement
/// of an engine function the first time it runs it, and the claim and drain statements span
/// the queue's 16 partitions: cold, the first claim on a connection took 10-13 ms against
/// 0.8-1.3 warm, and since the pool hands its connections out in turn, an idle system's
/// first dozens of applies each met a cold one (BENCHMARKS.md, "warm connections"). Never
/// fails the connection: before the engine files exist (a first boot migrates on a pool of
/// its own) or on any error it only logs.
async fn warm_up(conn: &mut sqlx::PgConnection) {
    if let Err(e) = sqlx::query("SELECT engine_warm_up()").execute(conn).await {
        tracing::debug!(error = %e, "could not warm a new database connection");
    }
}

/// Opens a pool to `url` with `max_connections`, stamping the engine settings on every
/// connection (the URL's own password, connections living the default lifetime).
pub async fn connect(
    url: &str,
    max_connections: u32,
    settings: &EngineSettings,
) -> Result<PgPool, sqlx::Error> {
    match connect_signed_in(url, max_connections, settings, &signin::SignIn::default()).await {
        Ok((pool, _)) => Ok(pool),
        Err(ConnectError::Db(e)) => Err(e),
        Err(ConnectError::Password(e)) => Err(sqlx::Error::Configuration(Box::new(e))),
    }
}

/// Why a pool could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// `DATABASE_PASSWORD_COMMAND` or `DB_IAM_AUTH` gave no password.
    #[error(transparent)]
    Password(#[from] signin::PasswordError),
    /// The URL, or PostgreSQL.
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// [`connect`], signing in as `signin` says: the password from its source (asked now; the
/// returned [`signin::PasswordRefresher`] keeps it fresh and must be run by the caller), and
/// each connection retired at its share of the lifetime (`signin`'s module documentation).
pub async fn connect_signed_in(
    url: &str,
    max_connections: u32,
    settings: &EngineSettings,
    signin: &signin::SignIn,
) -> Result<(PgPool, Option<signin::PasswordRefresher>), ConnectError> {
    let base = PgConnectOptions::from_str(url)?
        .application_name("converge")
        .options([
            (
                "converge.retry_base_ms",
                settings.retry_base.as_millis().to_string(),
            ),
            (
                "converge.retry_max_ms",
                settings.retry_max.as_millis().to_string(),
            ),
        ]);
    let pool_opts = PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10));
    signed_pool(base, pool_opts, signin, false, settings.warm_up).await
}

/// A pool of `pool_opts` on `base`, signing in as `signin` says: the password from its
/// source (asked now, so a source that cannot answer fails here, naming its setting; the
/// returned [`signin::PasswordRefresher`] keeps it fresh and must be run by the caller), and
/// each connection retired at its share of the lifetime. `lazy`: no connection is opened
/// until one is needed (a read replica down at boot is no error). `warm`: each new connection
/// runs [`warm_up`] before it is handed out. Shared by the primary's
/// pool ([`connect_signed_in`]) and the API's read replica's (`DATABASE_READ_URL`): one
/// place signs in, whatever the pool.
pub async fn signed_pool(
    base: PgConnectOptions,
    pool_opts: PgPoolOptions,
    signin: &signin::SignIn,
    lazy: bool,
    warm: bool,
) -> Result<(PgPool, Option<signin::PasswordRefresher>), ConnectError> {
    let minter = match &signin.password {
        Some(source) => Some(source.minter(&base).await?),
        None => None,
    };
    let password = match &minter {
        Some(m) => Some(m.password().await?),
        None => None,
    };
    let opts = match &password {
        Some(p) => base.clone().password(p),
        None => base.clone(),
    };
    let connected = std::sync::Arc::new(tokio::sync::Notify::new());
    let lifetime = signin.max_conn_lifetime;
    // Ages are measured from before the first connection opens.
    let _ = signin::origin();
    let mut pool_opts = pool_opts
        .max_lifetime(lifetime)
        .idle_timeout(Duration::from_secs(5 * 60).min(lifetime))
        // Retired at its jittered share of the lifetime when it comes back to the pool.
        .after_release(move |_conn, meta| {
            Box::pin(async move { Ok(!signin::outlived(meta.age, lifetime)) })
        });
    if password.is_some() || warm {
        let hint = password.is_some().then(|| connected.clone());
        pool_opts = pool_opts.after_connect(move |conn, _meta| {
            // The next connection gets a password minted after this one opened.
            if let Some(h) = &hint {
                h.notify_one();
            }
            Box::pin(async move {
                if warm {
                    warm_up(conn).await;
                }
                Ok(())
            })
        });
    }
    let pool = if lazy {
        pool_opts.connect_lazy_with(opts)
    } else {
        pool_opts.connect_with(opts).await?
    };
    let refresher = match (minter, password) {
        (Some(minter), Some(current)) => Some(signin::PasswordRefresher::new(
            pool.clone(),
            base,
            minter,
            current,
            connected,
        )),
        _ => None,
    };
    Ok((pool, refresher))
}

/// Applies pending migrations, then every engine file (`engine/sql/`) whose content changed.
/// Safe to call from many processes at once: see [`engine_sql::migrate`].
pub use engine_sql::{MigrateError, migrate};

#[cfg(test)]
mod tests {
    use super::MIGRATOR;

    /// `migrations/CHECKSUMS` (the baseline's entry, frozen with it) and one file per later
    /// migration in `migrations/checksums/`, each `<version> <description> <sha384>`: the
    /// checksum sqlx records in `_sqlx_migrations` and compares at every boot. Entries are
    /// added as new files, never by editing one, so a ledger change is as visible as a
    /// migration change.
    const CHECKSUMS: &str = include_str!("../../../migrations/CHECKSUMS");
    const CHECKSUMS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations/checksums");

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Every committed `(version, description, checksum)` entry.
    fn committed() -> Vec<(i64, String, String)> {
        let mut text = CHECKSUMS.to_owned();
        let mut files: Vec<_> = std::fs::read_dir(CHECKSUMS_DIR)
            .expect("migrations/checksums")
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.extension().is_none())
            .collect();
        files.sort();
        for f in files {
            text.push('\n');
            text.push_str(&std::fs::read_to_string(&f).expect("a checksum file"));
        }
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let mut f = l.split_whitespace();
                let v = f.next().and_then(|v| v.parse().ok()).expect("a version");
                let d = f.next().expect("a description").to_owned();
                let c = f.next().expect("a checksum").to_owned();
                (v, d, c)
            })
            .collect()
    }

    #[test]
    fn landed_migrations_never_change() {
        let committed = committed();
        let mut problems = Vec::new();
        for m in MIGRATOR.iter() {
            let (desc, sum) = (m.description.replace(' ', "_"), hex(&m.checksum));
            match committed.iter().find(|(v, _, _)| *v == m.version) {
                None => problems.push(format!(
                    "migration {:04}_{desc} is new: write this line to \
                     migrations/checksums/{:04}_{desc} once it lands (from then on neither \
                     changes):\n{:04} {desc} {sum}",
                    m.version, m.version, m.version
                )),
                Some((_, _, c)) if *c != sum => problems.push(format!(
                    "migrations/{:04}_{desc}.sql changed after it landed. A database that \
                     applied it refuses to boot (sqlx compares this checksum): restore the file \
                     and put the change in a new migration instead",
                    m.version
                )),
                Some(_) => {}
            }
        }
        for (v, d, _) in &committed {
            if !MIGRATOR.iter().any(|m| m.version == *v) {
                problems.push(format!(
                    "migrations/{v:04}_{d}.sql has a committed checksum but is gone: a landed \
                     migration is never deleted"
                ));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    }
}
