//! Keeps the broker's caches fresh: one LISTEN connection (`work_ready`, `lifecycle_ready`,
//! `kind_manifest_changed`, `providerconfig_changed`, `lease_revoked`) plus a failsafe re-read
//! of manifests and default provider configs every `cache_refresh`.
//!
//! It is given the two caches, the revocation handler and the dispatcher's wake-up, nothing
//! else: a wake for work is passed on, a revoked lease goes to `revoke` (the broker's one
//! LISTEN connection serves it too), a change marks its cache dirty, and the loop re-reads
//! what is dirty.

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

use crate::{configs::Configs, manifests::Manifests, revoke::Revocations};

/// The LISTEN + cache refresh loop.
pub(crate) struct CacheRefresh {
    pool: PgPool,
    manifests: Arc<Manifests>,
    configs: Arc<Configs>,
    /// Where `lease_revoked` payloads go.
    revocations: Arc<Revocations>,
    /// The dispatcher's wake-up: work may be claimable.
    dispatch: Arc<Notify>,
    /// Failsafe re-read of both caches.
    every: Duration,
}

impl CacheRefresh {
    /// A loop that keeps `manifests` and `configs` fresh, hands revocations to
    /// `revocations` and wakes `dispatch`.
    pub fn new(
        pool: PgPool,
        manifests: Arc<Manifests>,
        configs: Arc<Configs>,
        revocations: Arc<Revocations>,
        dispatch: Arc<Notify>,
        every: Duration,
    ) -> Self {
        CacheRefresh {
            pool,
            manifests,
            configs,
            revocations,
            dispatch,
            every,
        }
    }

    /// Runs the LISTEN connection and the refresh loop until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        let refresh = Arc::new(Notify::new());
        let manifests_dirty = Arc::new(AtomicBool::new(false));
        let configs_dirty = Arc::new(AtomicBool::new(false));
        let listener = {
            let (dispatch, refresh, md, cd, revocations, stop) = (
                self.dispatch.clone(),
                refresh.clone(),
                manifests_dirty.clone(),
                configs_dirty.clone(),
                self.revocations.clone(),
                stop.clone(),
            );
            let pool = self.pool.clone();
            tokio::spawn(async move {
                wake::listen(
                    pool,
                    &[
                        "work_ready",
                        "lifecycle_ready",
                        "kind_manifest_changed",
                        "providerconfig_changed",
                        "lease_revoked",
                    ],
                    move |channel, payload| match channel {
                        "work_ready" | "lifecycle_ready" => dispatch.notify_one(),
                        "lease_revoked" => revocations.on_notice(payload),
                        "kind_manifest_changed" => {
                            md.store(true, Ordering::Relaxed);
                            refresh.notify_one();
                        }
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
        loop {
            let timed_out = tokio::select! {
                _ = stop.cancelled() => break,
                _ = refresh.notified() => false,
                _ = tokio::time::sleep(self.every) => true,
            };
            if timed_out || manifests_dirty.swap(false, Ordering::Relaxed) {
                if let Err(e) = self.manifests.reload().await {
                    tracing::warn!(error = %e, "manifest refresh failed");
                }
                // A new manifest may make queued work claimable.
                self.dispatch.notify_one();
            }
            if (timed_out || configs_dirty.swap(false, Ordering::Relaxed))
                && let Err(e) = self.configs.refresh().await
            {
                tracing::warn!(error = %e, "provider config refresh failed");
            }
        }
        let _ = listener.await;
    }
}
