//! The reaper: the time-driven backstop. Frees leases whose worker stopped attesting,
//! re-enqueues resources the reactive path missed (crash recovery: the queue is UNLOGGED),
//! advances teardown trees, re-arms stale reactor deliveries, re-pends resync-enabled kinds
//! (drift), and garbage-collects work nobody claimed for a long time and old events.

use std::time::Duration;

use crate::{ids::ShardRange, topology::Shards};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::db;

/// Reaper settings.
#[derive(Debug, Clone)]
pub struct ReaperConfig {
    /// Shards this reaper owns.
    pub shards: Shards,
    /// Tick.
    pub every: Duration,
    /// A lease with no heartbeat for this long is freed.
    pub stale_after: Duration,
    /// A lagging resource quiet for this long without a task is re-enqueued.
    pub requeue_after: Duration,
    /// Unclaimed queue rows older than this are dropped.
    pub unclaimed_delete_after: Duration,
    /// Resource events older than this are deleted.
    pub events_retention: Duration,
    /// How long after this process started stale leases are left alone
    /// (`MEMBER_DEAD_AFTER`): a converge restarted after a long outage finds every lease of
    /// its predecessor stale, and reaping them at once would re-run tasks whose workers are
    /// about to reconnect and hand back their finished results (see `membership`).
    pub boot_grace: Duration,
}

/// How often the reaper looks for a PostgreSQL restart between ticks.
const RESTART_PROBE: Duration = Duration::from_secs(1);

/// Most resources one catch-up statement re-enqueues.
const CATCH_UP_BATCH: i32 = 5000;

/// The reaper loop.
pub struct Reaper {
    cfg: ReaperConfig,
    pool: PgPool,
    /// When it was built (the boot grace counts from here).
    started: tokio::time::Instant,
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
    /// Expired orphans removed.
    pub orphans: i32,
    /// Teardown rows advanced by the backstop sweep.
    pub teardown: i32,
    /// Reactor deliveries re-armed after their claim went stale.
    pub deliveries: i32,
    /// Settled resources re-pended for a resync.
    pub resynced: i32,
}

impl Reaper {
    /// Builds a reaper.
    pub fn new(pool: PgPool, cfg: ReaperConfig) -> Reaper {
        Reaper {
            cfg,
            pool,
            started: tokio::time::Instant::now(),
        }
    }

    /// One pass of every sweep. `requeue` is the shard range the catch-up scans this tick.
    pub async fn tick(
        &self,
        requeue: ShardRange,
        with_gc: bool,
    ) -> Result<TickReport, sqlx::Error> {
        let s = self.cfg.shards.current();
        let reaped = if self.started.elapsed() < self.cfg.boot_grace {
            0
        } else {
            db::sweeps::lease_reap_stale(&self.pool, s, self.cfg.stale_after).await?
        };
        let requeued = db::sweeps::resource_requeue_lagging(
            &self.pool,
            requeue,
            self.cfg.requeue_after,
            CATCH_UP_BATCH,
        )
        .await?;
        let dropped = if with_gc {
            db::sweeps::work_delete_unclaimed(&self.pool, s, self.cfg.unclaimed_delete_after)
                .await?
        } else {
            0
        };
        let orphans = db::sweeps::orphan_sweep_expired(&self.pool, s, 1000).await?;
        let teardown = db::sweeps::teardown_sweep(&self.pool, s, 1000).await?;
        // A reactor claim is heartbeated like a lease; twice the lease window is generous.
        let deliveries =
            db::sweeps::lifecycle_reap_stale(&self.pool, s, self.cfg.stale_after * 2).await?;
        let resynced = self.resync().await?;
        if with_gc {
            db::sweeps::events_gc(&self.pool, self.cfg.events_retention, 10_000).await?;
        }
        Ok(TickReport {
            reaped,
            requeued,
            dropped,
            orphans,
            teardown,
            deliveries,
            resynced,
        })
    }

    /// Drift: re-pends settled resources of every kind that opted into resync and was not
    /// observed for its interval. Kinds without a resync interval cost nothing here but the
    /// one `kind_config` read.
    async fn resync(&self) -> Result<i32, sqlx::Error> {
        let mut n = 0;
        for (kind, version, secs, recompose) in db::sweeps::resync_kinds(&self.pool).await? {
            let every = Duration::from_secs(u64::try_from(secs).unwrap_or(0));
            n +=
                db::sweeps::resync_kind(&self.pool, &kind, version, every, recompose, 1000).await?;
        }
        Ok(n)
    }

    /// The catch-up reads every row behind its spec in the shards it scans (migration 0021's
    /// resource_lag) and probes the queue for those behind longer than the retry window, so a
    /// full scan of a large backlog on every tick would tax the hot path. It sweeps one
    /// partition's worth of shards per tick, and everything at start-up and after a
    /// PostgreSQL restart (the UNLOGGED queue was lost).
    fn requeue_window(&self, tick: u64, full: bool) -> ShardRange {
        let shards = self.cfg.shards.current();
        let ShardRange { lo, hi } = shards;
        if full {
            return shards;
        }
        let width = 16i64;
        let windows = ((i64::from(hi) - i64::from(lo)) / width + 1).max(1);
        let start = i64::from(lo) + (i64::try_from(tick).unwrap_or(0) % windows) * width;
        let end = (start + width - 1).min(i64::from(hi));
        ShardRange {
            lo: i16::try_from(start).unwrap_or(lo),
            hi: i16::try_from(end).unwrap_or(hi),
        }
    }

    /// After a PostgreSQL restart the UNLOGGED queue and outbox may be empty, so a resource
    /// behind its spec lost its task whatever its age: re-enqueue them all now, in batches,
    /// without the quiet window that otherwise spares rows a live task may still be serving
    /// (issue 24: young rows waited 87 s for the windowed sweep).
    async fn after_restart(&self) {
        let mut total = 0;
        loop {
            match db::sweeps::resource_requeue_lagging(
                &self.pool,
                self.cfg.shards.current(),
                Duration::ZERO,
                CATCH_UP_BATCH,
            )
            .await
            {
                Ok(n) => {
                    total += n;
                    if n < CATCH_UP_BATCH {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "catch-up after the restart failed; the windowed sweep will finish it");
                    break;
                }
            }
        }
        tracing::info!(requeued = total, "caught up after the PostgreSQL restart");
    }

    /// Runs until `shutdown`. A tick every `every`; in between, PostgreSQL's start time is
    /// read once a second (a trivial query), so the catch-up after a restart starts within
    /// a second of the server being back rather than at the next tick.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut n: u64 = 0;
        let mut server_started = None;
        let mut last_tick = tokio::time::Instant::now();
        // The GC's window is hours long; once a minute is plenty.
        let gc_every = (60 / self.cfg.every.as_secs().max(1)).max(1);
        let probe = self.cfg.every.min(RESTART_PROBE);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(probe) => {}
            }
            let Ok(started) = db::sweeps::server_started_at(&self.pool).await else {
                continue;
            };
            let restarted = server_started.is_some_and(|s| s != started);
            let first = server_started.is_none();
            server_started = Some(started);
            if restarted {
                tracing::warn!("PostgreSQL restarted; re-enqueueing everything behind its spec");
                self.after_restart().await;
            } else if !first && last_tick.elapsed() < self.cfg.every {
                continue;
            }
            last_tick = tokio::time::Instant::now();
            // At start-up and after a restart the catch-up scans every shard.
            let window = self.requeue_window(n, first || restarted);
            match self.tick(window, n.is_multiple_of(gc_every)).await {
                Ok(r) if r != TickReport::default() => {
                    tracing::info!(
                        reaped = r.reaped,
                        requeued = r.requeued,
                        dropped = r.dropped,
                        orphans = r.orphans,
                        teardown = r.teardown,
                        deliveries = r.deliveries,
                        resynced = r.resynced,
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
