//! The live engine SQL and the migrate step: `engine/sql/*.sql` embedded in their apply order,
//! and [`migrate`], which runs the schema migrations and then applies every engine file whose
//! content changed since it was last applied (repeatable migrations), all under the migration
//! advisory lock. The rules for the files are in `engine/sql/README.md`.

use sha2::{Digest, Sha256};
use sqlx::{
    Connection, PgConnection, PgPool,
    migrate::{Migrate, Migration, Migrator},
};

use super::MIGRATOR;

/// One engine file: its name in `engine/sql/` and its content.
#[derive(Debug, Clone, Copy)]
pub struct EngineFile<'a> {
    /// File name in `engine/sql/` (the key of its `engine_sql` row).
    pub name: &'a str,
    /// The SQL, run as one transaction.
    pub sql: &'a str,
}

impl EngineFile<'_> {
    /// Hex sha256 of the content: what `engine_sql.sha256` records once it is applied.
    pub fn sha256(&self) -> String {
        hex::encode(Sha256::digest(self.sql.as_bytes()))
    }
}

macro_rules! engine_files {
    ($($name:literal),* $(,)?) => {
        &[$(EngineFile { name: $name, sql: include_str!(concat!("../../sql/", $name)) }),*]
    };
}

/// The engine files in apply order: the list of `engine/sql/ORDER` (a test keeps the two
/// equal). A `LANGUAGE sql` function is checked when it is created, so what it calls must come
/// earlier in this list.
pub static ENGINE_FILES: &[EngineFile<'static>] = engine_files![
    "kinds.sql",
    "lag.sql",
    "flows.sql",
    "queue.sql",
    "schedule.sql",
    "cascade.sql",
    "drain.sql",
    "compose.sql",
    "teardown.sql",
    "operations.sql",
    "reactors.sql",
    "events.sql",
    "reaper.sql",
    "api.sql",
    "cluster.sql",
    "problems.sql",
    "warmup.sql",
];

/// Why a migrate failed.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The sqlx migrations refused or failed (a changed landed migration, a failed step).
    #[error("failed to run the schema migrations")]
    Migrations(#[source] sqlx::migrate::MigrateError),
    /// An engine file failed to apply; its transaction rolled back, nothing of it remains.
    #[error("failed to apply engine/sql/{file}")]
    EngineFile {
        /// The file's name.
        file: String,
        /// What PostgreSQL said.
        #[source]
        source: sqlx::Error,
    },
    /// Taking the lock, reading the records or adopting an old history failed.
    #[error("failed to migrate the database")]
    Database(#[from] sqlx::Error),
}

impl From<sqlx::migrate::MigrateError> for MigrateError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        MigrateError::Migrations(e)
    }
}

/// Brings the database to this binary's schema and engine: runs the pending migrations, then
/// applies each engine file whose sha256 differs from the one recorded in `engine_sql`.
///
/// Safe to call from many processes at once: everything runs on one connection holding the
/// migration advisory lock (the key sqlx's migrator takes, so an older binary's migrator
/// waits too), so exactly one process applies and the others wait, then find nothing to do.
/// Each engine file is applied in its own transaction together with its `engine_sql` row: a
/// file is applied and recorded, or neither.
pub async fn migrate(pool: &PgPool) -> Result<(), MigrateError> {
    migrate_files(pool, ENGINE_FILES).await.map(|_| ())
}

/// [`migrate`] with `files` in place of [`ENGINE_FILES`] (tests change a file this way).
/// Returns the names of the files it applied, in order.
pub async fn migrate_files(
    pool: &PgPool,
    files: &[EngineFile<'_>],
) -> Result<Vec<String>, MigrateError> {
    let mut conn = pool.acquire().await?;
    conn.lock().await?;
    let out = migrate_locked(&mut conn, files).await;
    if let Err(e) = conn.unlock().await {
        // A session lock dies with its session: close this connection instead of pooling it.
        drop(conn.detach());
        return Err(out.err().unwrap_or(e.into()));
    }
    out
}

async fn migrate_locked(
    conn: &mut PgConnection,
    files: &[EngineFile<'_>],
) -> Result<Vec<String>, MigrateError> {
    if adopt_pre_baseline(conn).await? {
        tracing::info!("adopted a database migrated before the baseline: history replaced");
    }
    // The lock is held here already; sqlx's own would wait on this very session's lock from
    // another pooled connection, so this migrator does not take it.
    let mut migrator = Migrator::with_migrations(MIGRATOR.iter().cloned().collect());
    migrator.set_locking(false);
    let before = applied_versions(conn).await?;
    // `run_direct` on the connection itself: `run(&mut *conn)` goes through `Acquire`, whose
    // future is not `Send` for every lifetime (sqlx's own note on `run_direct`).
    migrator.run_direct(None, &mut *conn, false).await?;
    let ran: Vec<i64> = applied_versions(conn)
        .await?
        .into_iter()
        .filter(|v| !before.contains(v))
        .collect();
    if !ran.is_empty() {
        // Which process of a rollout applied them (the others wait on the lock, then find
        // nothing to do).
        tracing::info!(versions = ?ran, "schema migrations applied");
    }

    let mut applied = Vec::new();
    for file in files {
        let sha = file.sha256();
        let recorded: Option<String> =
            sqlx::query_scalar("SELECT sha256 FROM engine_sql WHERE file = $1")
                .bind(file.name)
                .fetch_optional(&mut *conn)
                .await?;
        if recorded.as_deref() == Some(sha.as_str()) {
            continue;
        }
        apply_file(conn, file, &sha)
            .await
            .map_err(|source| MigrateError::EngineFile {
                file: file.name.to_owned(),
                source,
            })?;
        tracing::info!(file = file.name, sha256 = %sha, "engine file applied");
        applied.push(file.name.to_owned());
    }
    Ok(applied)
}

/// The migration versions recorded as applied (none before the first migrate).
async fn applied_versions(conn: &mut PgConnection) -> sqlx::Result<Vec<i64>> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(&mut *conn)
        .await?;
    if !exists {
        return Ok(Vec::new());
    }
    sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
        .fetch_all(&mut *conn)
        .await
}

async fn apply_file(conn: &mut PgConnection, file: &EngineFile<'_>, sha: &str) -> sqlx::Result<()> {
    let mut tx = conn.begin().await?;
    // `DROP TRIGGER IF EXISTS` on a fresh database says "does not exist, skipping".
    sqlx::query("SET LOCAL client_min_messages = warning")
        .execute(&mut *tx)
        .await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(file.sql))
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO engine_sql (file, sha256, applied_at) VALUES ($1, $2, now()) \
         ON CONFLICT (file) DO UPDATE SET sha256 = EXCLUDED.sha256, applied_at = now()",
    )
    .bind(file.name)
    .bind(sha)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// The `_sqlx_migrations` history of a database migrated by the migrations before the
/// baseline squash (0001-0025): `<version> <description> <sha384>` lines.
const PRE_BASELINE: &str = include_str!("pre_baseline_checksums");

/// Adopts a database migrated before the baseline squash: when its recorded history is
/// exactly the old 0001-0025 (versions and checksums), it is replaced by the baseline's row,
/// and the one table the old migrations did not create (`engine_sql`) is created, in one
/// transaction. Any other history is left for sqlx to accept or refuse. Returns whether it
/// adopted.
///
/// Safe because the schemas are equal: when the baseline was made, `pg_dump --schema-only`
/// of a database built by the old 0001-0025 and of one built by the baseline plus
/// `engine/sql/` differed by the `engine_sql` table only (see engine/sql/README.md), and the
/// engine files, applied right after this, replace every function and trigger anyway (the
/// schema test migrates the committed pre-baseline fixture and compares it with
/// engine/schema.sql).
async fn adopt_pre_baseline(conn: &mut PgConnection) -> sqlx::Result<bool> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(&mut *conn)
        .await?;
    if !exists {
        return Ok(false);
    }
    let recorded: Vec<(i64, Vec<u8>, bool)> =
        sqlx::query_as("SELECT version, checksum, success FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&mut *conn)
            .await?;
    let old: Vec<(i64, String)> = PRE_BASELINE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let version = f.next()?.parse().ok()?;
            Some((version, f.nth(1)?.to_owned()))
        })
        .collect();
    let is_old = recorded.len() == old.len()
        && recorded
            .iter()
            .zip(&old)
            .all(|((v, sum, ok), (ov, osum))| *ok && v == ov && hex::encode(sum) == *osum);
    if !is_old {
        return Ok(false);
    }
    let baseline: &Migration = MIGRATOR
        .iter()
        .find(|m| m.version == 1)
        .expect("the baseline migration is embedded");
    let mut tx = conn.begin().await?;
    sqlx::query("DELETE FROM _sqlx_migrations")
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ($1, $2, true, $3, -1)",
    )
    .bind(baseline.version)
    .bind(&*baseline.description)
    .bind(&*baseline.checksum)
    .execute(&mut *tx)
    .await?;
    // As in migrations/0001_baseline.sql.
    sqlx::query(
        "CREATE TABLE engine_sql (
            file       text        PRIMARY KEY,
            sha256     text        NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        )",
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// Where an engine file stands in a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineFileState {
    /// Applied with this content.
    Applied,
    /// Applied with other content: the next migrate applies it again.
    Changed,
    /// Never applied: the next migrate applies it.
    New,
}

/// One engine file's state, for `converge migrate status`.
#[derive(Debug, Clone)]
pub struct EngineFileStatus {
    /// File name in `engine/sql/`.
    pub file: &'static str,
    /// Applied, changed or new.
    pub state: EngineFileState,
    /// When the recorded content was applied (None when new).
    pub applied_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The state of every engine file of this binary in the database behind `pool`.
pub async fn engine_file_status(pool: &PgPool) -> sqlx::Result<Vec<EngineFileStatus>> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('engine_sql') IS NOT NULL")
        .fetch_one(pool)
        .await?;
    let recorded: Vec<(String, String, chrono::DateTime<chrono::Utc>)> = if exists {
        sqlx::query_as("SELECT file, sha256, applied_at FROM engine_sql")
            .fetch_all(pool)
            .await?
    } else {
        Vec::new()
    };
    Ok(ENGINE_FILES
        .iter()
        .map(|f| {
            let row = recorded.iter().find(|(name, _, _)| name == f.name);
            let state = match row {
                None => EngineFileState::New,
                Some((_, sha, _)) if *sha == f.sha256() => EngineFileState::Applied,
                Some(_) => EngineFileState::Changed,
            };
            EngineFileStatus {
                file: f.name,
                state,
                applied_at: row.map(|(_, _, at)| *at),
            }
        })
        .collect())
}
