//! The reaper: the time-driven backstop. Frees leases whose worker stopped attesting,
//! re-enqueues resources the reactive path missed (crash recovery: the queue is UNLOGGED),
//! and garbage-collects work nobody claimed for a long time.

use std::time::Duration;

use converge_broker::ids::ShardRange;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::db;

/// Reaper settings.
#[derive(Debug, Clone)]
pub struct ReaperConfig {
    /// Shards this reaper owns.
    pub shards: ShardRange,
    /// Tick.
    pub every: Duration,
    /// A lease with no heartbeat for this long is freed.
    pub stale_after: Duration,
    /// A lagging resource quiet for this long without a task is re-enqueued.
    pub requeue_after: Duration,
    /// Unclaimed queue rows older than this are dropped.
    pub unclaimed_delete_after: Duration,
}

/// The reaper loop.
pub struct Reaper {
    cfg: ReaperConfig,
    pool: PgPool,
}

/// Counts from one reaper tick.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TickReport {
    /// Leases freed.
    pub reaped: i32,
    /// Resources re-enqueued.
    pub requeued: i32,
    /// Unclaimed rows dropped.
    pub dropped: i32,
}

impl Reaper {
    /// Builds a reaper.
    pub fn new(pool: PgPool, cfg: ReaperConfig) -> Reaper {
        Reaper { cfg, pool }
    }

    /// One pass of every sweep.
    pub async fn tick(&self, with_gc: bool) -> Result<TickReport, sqlx::Error> {
        let s = self.cfg.shards;
        let reaped = db::sweeps::lease_reap_stale(&self.pool, s, self.cfg.stale_after).await?;
        let requeued =
            db::sweeps::resource_requeue_lagging(&self.pool, s, self.cfg.requeue_after, 5000)
                .await?;
        let dropped = if with_gc {
            db::sweeps::work_delete_unclaimed(&self.pool, s, self.cfg.unclaimed_delete_after)
                .await?
        } else {
            0
        };
        Ok(TickReport {
            reaped,
            requeued,
            dropped,
        })
    }

    /// Runs until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut n: u64 = 0;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.cfg.every) => {}
            }
            // The GC's window is hours long; once a minute is plenty.
            let gc_every = (60 / self.cfg.every.as_secs().max(1)).max(1);
            match self.tick(n.is_multiple_of(gc_every)).await {
                Ok(r) if r != TickReport::default() => {
                    tracing::info!(
                        reaped = r.reaped,
                        requeued = r.requeued,
                        dropped = r.dropped,
                        "reaper tick"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "reaper tick failed"),
            }
            n += 1;
        }
    }
}
