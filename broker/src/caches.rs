//! Keeps the broker's provider-config cache fresh and its dispatcher awake: one LISTEN
//! connection (`work_ready`, `lifecycle_ready`, `providerconfig_changed`, `lease_revoked`,
//! `plan_requested`) plus a failsafe re-read of default provider configs every `cache_refresh`.
//!
//! Kinds are not its concern: the process's kind catalog has its own follower (the one
//! LISTEN on `kind_manifest_changed`, `converge_kinds::CatalogFollower`). This loop only
//! watches the catalog's generation and wakes the dispatcher when it moves, since a new
//! manifest may make queued work claimable.
//!
//! It is given the config cache, the catalog's generation, the revocation handler and the
//! dispatcher's wake-up, nothing else: a wake for work is passed on, a revoked lease goes to
//! `revoke` (the broker's one LISTEN connection serves it too), a config change marks the
//! cache dirty, and the loop re-reads it.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use converge_engine::wake;

use crate::{configs::Configs, dryrun::DryRuns, revoke::Revocations};

/// The LISTEN + cache refresh loop.
pub(crate) struct CacheRefresh {
    pool: PgPool,
    /// The kind catalog's generation: a change may make queued work claimable.
    kinds: tokio::sync::watch::Receiver<u64>,
    configs: Arc<Configs>,
    /// Where `lease_revoked` payloads go.
    revocations: Arc<Revocations>,
    /// Woken by `plan_requested`.
    dry_runs: Arc<DryRuns>,
    /// The dispatcher's wake-up: work may be claimable.
    dispatch: Arc<Notify>,
    /// Failsafe re-read of the configs.
    every: Duration,
}

impl CacheRefresh {
    /// A loop that keeps `configs` fresh, hands revocations to `revocations` and wakes
    /// `dispatch` (also whenever `kinds`, the catalog's generation, moves).
    pub fn new(
        pool: PgPool,
        kinds: tokio::sync::watch::Receiver<u64>,
        configs: Arc<Configs>,
        revocations: Arc<Revocations>,
        dry_runs: Arc<DryRuns>,
        dispatch: Arc<Notify>,
        every: Duration,
    ) -> Self {
        CacheRefresh {
            pool,
            kinds,
            configs,
            revocations,
            dry_runs,
            dispatch,
            every,
        }
    }

    /// Runs the LISTEN connection and the refresh loop until `stop`.
    pub async fn run(mut self, stop: CancellationToken) {
        let refresh = Arc::new(Notify::new());
        let configs_dirty = Arc::new(AtomicBool::new(false));
        let listener = {
            let (dispatch, refresh, cd, revocations, dry_runs, stop) = (
                self.dispatch.clone(),
                refresh.clone(),
                configs_dirty.clone(),
                self.revocations.clone(),
                self.dry_runs.clone(),
                stop.clone(),
            );
            let pool = self.pool.clone();
            tokio::spawn(async move {
                wake::listen(
                    pool,
                    &[
                        "work_ready",
                        "lifecycle_ready",
                        "providerconfig_changed",
                        "lease_revoked",
                        converge_engine::db::plans::REQUESTED,
                    ],
                    move |channel, payload| match channel {
                        "work_ready" | "lifecycle_ready" => dispatch.notify_one(),
                        "lease_revoked" => revocations.on_notice(payload),
                        converge_engine::db::plans::REQUESTED => dry_runs.wake(),
                        _ => {
                            cd.store(true, Ordering::Relaxed);
                            refresh.notify_one();
                        }
                    },
                    stop,
                )
                .await;
            })
        };
        let mut kinds_open = true;
        loop {
            let timed_out = tokio::select! {
                _ = stop.cancelled() => break,
                _ = refresh.notified() => false,
                changed = self.kinds.changed(), if kinds_open => {
                    // A new manifest may make queued work claimable. (The catalog gone means
                    // the process is stopping.)
                    kinds_open = changed.is_ok();
                    self.dispatch.notify_one();
                    continue;
                }
                _ = tokio::time::sleep(self.every) => true,
            };
            if (timed_out || configs_dirty.swap(false, Ordering::Relaxed))
                && let Err(e) = self.configs.refresh().await
            {
                tracing::warn!(error = %e, "provider config refresh failed");
            }
        }
        let _ = listener.await;
    }
}
