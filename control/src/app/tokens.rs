//! The tokens minted through the API (`api_tokens`), followed into the process's principal
//! index (`converge_auth::Authenticator`): one LISTEN on [`db::tokens::CHANNEL`] (a mint or a
//! revoke notifies it in its transaction) plus a failsafe re-read, so every pod refuses a
//! revoked token within milliseconds of its commit, and within the failsafe if a NOTIFY is
//! lost. The loop also wakes at the soonest expiry, so an expired token's open streams and
//! watches close then (a lookup refuses it at once either way), and writes the tokens'
//! `last_used_at` coalesced: at most once per [`USE_FLUSH_EVERY`] per token, off the
//! request path. Runs in every process when authentication is on (the broker's worker
//! streams need it as much as the API).

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use converge_auth::{Authenticator, MintedToken, Role};
use converge_engine::{db, wake};
use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How often a process writes the uses it saw of minted tokens (one UPDATE for all of them).
pub const USE_FLUSH_EVERY: Duration = Duration::from_secs(60);

/// Re-reads the stored tokens into `auth`; `Ok(true)` when the set in force changed.
pub async fn reload(pool: &PgPool, auth: &Authenticator) -> sqlx::Result<bool> {
    let rows = db::tokens::keys(pool).await?;
    let tokens = rows
        .into_iter()
        .filter_map(|r| {
            // The table's CHECKs hold both; a row that still fails is skipped, never widened.
            let role = r.role.parse::<Role>().ok()?;
            let token_sha256: [u8; 32] = r.token_sha256.as_slice().try_into().ok()?;
            Some(MintedToken {
                id: r.id,
                name: r.name,
                role,
                kinds: r.kinds,
                token_sha256,
                expires_at: r.expires_at.map(SystemTime::from),
            })
        })
        .collect();
    Ok(auth.set_minted(tokens))
}

/// The loop that keeps an [`Authenticator`]'s minted tokens fresh.
pub struct TokenFollower {
    pool: PgPool,
    auth: Arc<Authenticator>,
    failsafe: Duration,
}

impl TokenFollower {
    /// Follows `pool`'s tokens into `auth`, re-reading at least every `failsafe`.
    pub fn new(pool: PgPool, auth: Arc<Authenticator>, failsafe: Duration) -> Self {
        TokenFollower {
            pool,
            auth,
            failsafe,
        }
    }

    /// Runs until `stop`, then writes the uses not written yet.
    pub async fn run(self, stop: CancellationToken) {
        let notify = Arc::new(Notify::new());
        let listener = wake::spawn_listen_notify(
            self.pool.clone(),
            &[db::tokens::CHANNEL],
            notify.clone(),
            stop.clone(),
        );
        let mut next_flush = tokio::time::Instant::now() + USE_FLUSH_EVERY;
        let mut last_error = String::new();
        loop {
            // The failsafe, or sooner: the next expiry (to close its streams on time) or the
            // next flush of uses.
            let mut wait = self.failsafe;
            if let Some(at) = self.auth.next_expiry() {
                let until = at
                    .duration_since(SystemTime::now())
                    .unwrap_or(Duration::ZERO);
                wait = wait.min(until);
            }
            let deadline = (tokio::time::Instant::now() + wait).min(next_flush);
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = notify.notified() => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
            if self.auth.prune_expired() {
                tracing::info!("an API token expired; its open streams re-check");
            }
            // Whatever woke the loop, the rows are re-read (one small indexed read).
            match reload(&self.pool, &self.auth).await {
                Ok(changed) => {
                    last_error.clear();
                    if changed {
                        tracing::info!("API tokens reloaded");
                    }
                }
                Err(e) => {
                    let msg = e.to_string();
                    if msg != last_error {
                        tracing::error!(error = %msg, "API tokens not reloaded; the previous set stays in force");
                        last_error = msg;
                    }
                }
            }
            if tokio::time::Instant::now() >= next_flush {
                self.flush_uses().await;
                next_flush = tokio::time::Instant::now() + USE_FLUSH_EVERY;
            }
        }
        self.flush_uses().await;
        let _ = listener.await;
    }

    async fn flush_uses(&self) {
        let uses: Vec<_> = self
            .auth
            .take_uses()
            .into_iter()
            .map(|(id, at)| (id, chrono::DateTime::<chrono::Utc>::from(at)))
            .collect();
        if let Err(e) = db::tokens::touch(&self.pool, &uses).await {
            // Advisory data: a lost batch only makes `last_used_at` older than it should be.
            tracing::warn!(error = %e, tokens = uses.len(), "could not record API token uses");
        }
    }
}
