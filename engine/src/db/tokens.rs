//! API tokens (`api_tokens`): bearer tokens minted through the API, stored as their SHA-256
//! only. Every write that changes who may authenticate (a mint, a revoke) notifies
//! [`CHANNEL`] in its own transaction, so every process re-reads the rows the moment it
//! commits; `last_used_at` writes ([`touch`]) do not notify (they change nobody's access).

use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgPool};

/// The channel a mint or a revoke notifies; each process's token follower LISTENs on it.
pub const CHANNEL: &str = "api_tokens_changed";

/// One token as the principal index needs it (the hash, never a secret).
#[derive(Debug, Clone, FromRow)]
pub struct TokenKey {
    /// Row identity: a re-minted name is a new id (and so a new principal).
    pub id: i64,
    /// The principal's name.
    pub name: String,
    /// SHA-256 of the token.
    pub token_sha256: Vec<u8>,
    /// `viewer`, `operator`, `admin` or `worker`.
    pub role: String,
    /// A worker's kind globs (empty otherwise).
    pub kinds: Vec<String>,
    /// When it stops authenticating (`None`: never).
    pub expires_at: Option<DateTime<Utc>>,
}

/// One token as `GET /api/v1/tokens` lists it (no hash).
#[derive(Debug, Clone, FromRow)]
pub struct TokenInfo {
    /// The principal's name.
    pub name: String,
    /// Its role.
    pub role: String,
    /// A worker's kind globs.
    pub kinds: Vec<String>,
    /// Minted at.
    pub created_at: DateTime<Utc>,
    /// The principal that minted it.
    pub created_by: Option<String>,
    /// When it stops authenticating.
    pub expires_at: Option<DateTime<Utc>>,
    /// Last authenticated use seen (coalesced: up to a minute late).
    pub last_used_at: Option<DateTime<Utc>>,
}

/// The listed columns (a macro, so each statement stays one literal string).
macro_rules! info_columns {
    () => {
        "name, role, kinds, created_at, created_by, expires_at, last_used_at"
    };
}

/// Every token the index should hold: those not expired by the database's clock (the
/// index checks expiry again at each lookup with the process's clock).
pub async fn keys(pool: &PgPool) -> sqlx::Result<Vec<TokenKey>> {
    sqlx::query_as(
        "SELECT id, name, token_sha256, role, kinds, expires_at FROM api_tokens \
         WHERE expires_at IS NULL OR expires_at > now() ORDER BY id",
    )
    .fetch_all(pool)
    .await
}

/// Stores a new token (`expires_in` seconds from now, if any); `None` when the name is
/// taken. Notifies [`CHANNEL`] on success.
pub async fn insert(
    pool: &PgPool,
    name: &str,
    token_sha256: &[u8; 32],
    role: &str,
    kinds: &[String],
    expires_in_secs: Option<i64>,
    created_by: Option<&str>,
) -> sqlx::Result<Option<TokenInfo>> {
    let mut tx = pool.begin().await?;
    let row: Option<TokenInfo> = sqlx::query_as(concat!(
        "INSERT INTO api_tokens (name, token_sha256, role, kinds, created_by, expires_at) \
         VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6::bigint)) \
         ON CONFLICT (name) DO NOTHING RETURNING ",
        info_columns!()
    ))
    .bind(name)
    .bind(&token_sha256[..])
    .bind(role)
    .bind(kinds)
    .bind(created_by)
    .bind(expires_in_secs)
    .fetch_optional(&mut *tx)
    .await?;
    if row.is_some() {
        notify(&mut tx).await?;
    }
    tx.commit().await?;
    Ok(row)
}

/// Every token, by name.
pub async fn list(pool: &PgPool) -> sqlx::Result<Vec<TokenInfo>> {
    sqlx::query_as(concat!(
        "SELECT ",
        info_columns!(),
        " FROM api_tokens ORDER BY name"
    ))
    .fetch_all(pool)
    .await
}

/// Revokes (deletes) the token `name`; false when there was none. Notifies [`CHANNEL`].
pub async fn delete(pool: &PgPool, name: &str) -> sqlx::Result<bool> {
    let mut tx = pool.begin().await?;
    let gone = sqlx::query("DELETE FROM api_tokens WHERE name = $1")
        .bind(name)
        .execute(&mut *tx)
        .await?
        .rows_affected()
        > 0;
    if gone {
        notify(&mut tx).await?;
    }
    tx.commit().await?;
    Ok(gone)
}

/// Records uses seen by this process: each `(id, at)` moves the token's `last_used_at`
/// forward (never back: another process may have seen a later use). One statement.
pub async fn touch(pool: &PgPool, uses: &[(i64, DateTime<Utc>)]) -> sqlx::Result<()> {
    if uses.is_empty() {
        return Ok(());
    }
    let (ids, ats): (Vec<i64>, Vec<DateTime<Utc>>) = uses.iter().copied().unzip();
    sqlx::query(
        "UPDATE api_tokens t \
         SET last_used_at = GREATEST(t.last_used_at, u.at) \
         FROM unnest($1::bigint[], $2::timestamptz[]) AS u(id, at) \
         WHERE t.id = u.id",
    )
    .bind(&ids)
    .bind(&ats)
    .execute(pool)
    .await?;
    Ok(())
}

async fn notify(tx: &mut sqlx::PgConnection) -> sqlx::Result<()> {
    sqlx::query("SELECT pg_notify($1, '')")
        .bind(CHANNEL)
        .execute(tx)
        .await
        .map(|_| ())
}
