//! Keeps the broker's caches fresh: one LISTEN connection (`work_ready`, `lifecycle_ready`,
//! `kind_manifest_changed`, `providerconfig_changed`) plus a failsafe re-read of manifests
//! and default provider configs every `cache_refresh`.
//!
//! It is given the two caches and the dispatcher's wake-up, nothing else: a wake for work is
//! passed on, a change marks its cache dirty, and the loop re-reads what is dirty.

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

use crate::{configs::Configs, manifests::Manifests};

/// The LISTEN + cache refresh loop.
pub(crate) struct CacheRefresh {
    pool: PgPool,
    manifests: Arc<Manifests>,
    configs: Arc<Configs>,
    /// The dispatcher's wake-up: work may be claimable.
    dispatch: Arc<Notify>,
    /// Failsafe re-read of both caches.
    every: Duration,
}

impl CacheRefresh {
    /// A loop that keeps `manifests` and `configs` fresh and wakes `dispatch`.
    pub fn new(
        pool: PgPool,
        manifests: Arc<Manifests>,
        configs: Arc<Configs>,
        dispatch: Arc<Notify>,
        every: Duration,
    ) -> Self {
        CacheRefresh {
            pool,
            manifests,
            configs,
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
            let (dispatch, refresh, md, cd, stop) = (
                self.dispatch.clone(),
                refresh.clone(),
                manifests_dirty.clone(),
                configs_dirty.clone(),
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
                    ],
                    move |channel, _payload| match channel {
                        "work_ready" | "lifecycle_ready" => dispatch.notify_one(),
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
