//! The drainer: applies task results from `work_outbox` to `resources` in batches
//! (`drain_outbox_batch`) and advances teardown trees (`sweep_deletable`), woken by
//! `outbox_ready` (coalesced NOTIFY), by in-process hints from a co-located broker, and by a
//! failsafe poll. An express drainer applies only composites' results (the engine puts
//! every result of a kind with a rollup in that lane, and the bulk drainers never take them),
//! so a root's Ready never waits behind a bulk batch of its children's results.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use crate::{
    metrics::{LaneLabel, metrics},
    topology::Shards,
    wake::WakeLoop,
};
use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::db;

/// Drainer settings.
#[derive(Debug, Clone)]
pub struct DrainerConfig {
    /// Shards this drainer owns.
    pub shards: Shards,
    /// Outbox rows per statement.
    pub batch: i32,
    /// Poll behind the LISTEN.
    pub failsafe: Duration,
    /// The express lane: only rows marked express, and no teardown sweep (the bulk
    /// drainers of the same shards run it).
    pub express: bool,
}

/// The only way in: wake the drainer.
#[derive(Clone)]
pub struct DrainerHandle {
    notify: Arc<Notify>,
}

impl DrainerHandle {
    /// Asks for a drain pass soon.
    pub fn wake(&self) {
        self.notify.notify_one();
    }

    /// The underlying notify (to hand to a broker as its outbox hook).
    pub fn notify(&self) -> Arc<Notify> {
        self.notify.clone()
    }
}

/// The drain loop.
pub struct Drainer {
    cfg: DrainerConfig,
    pool: PgPool,
    notify: Arc<Notify>,
    /// Woken after a pass that applied results (they may have scheduled new work).
    on_drained: Option<Arc<Notify>>,
}

impl Drainer {
    /// Builds a drainer and its handle. `on_drained` is the co-located broker's dispatch hint.
    pub fn new(
        pool: PgPool,
        cfg: DrainerConfig,
        on_drained: Option<Arc<Notify>>,
    ) -> (Drainer, DrainerHandle) {
        let notify = Arc::new(Notify::new());
        (
            Drainer {
                cfg,
                pool,
                notify: notify.clone(),
                on_drained,
            },
            DrainerHandle { notify },
        )
    }

    /// Runs until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let listener = crate::wake::spawn_listen_notify(
            self.pool.clone(),
            &["outbox_ready"],
            self.notify.clone(),
            shutdown.clone(),
        );
        let mut wake = WakeLoop::new(self.notify.clone(), self.cfg.failsafe);
        // Pause after a failed batch: doubles while the database keeps failing (an outage
        // should not flood the log), back to the minimum after a success.
        let mut backoff = RETRY_MIN;
        loop {
            let mut total = 0i64;
            let mut failed = false;
            loop {
                let started = Instant::now();
                let drained = db::sweeps::outbox_drain(
                    &self.pool,
                    self.cfg.shards.current(),
                    self.cfg.batch,
                    self.cfg.express,
                )
                .await;
                match drained {
                    Ok(n) => {
                        backoff = RETRY_MIN;
                        total += i64::from(n);
                        if n > 0 {
                            // Only batches that applied something: an empty poll says
                            // nothing about how long applying results takes.
                            metrics()
                                .drain_batch
                                .get_or_create(&LaneLabel { lane: self.lane() })
                                .observe(started.elapsed().as_secs_f64());
                            // Close any straddle after each of this drainer's own commits,
                            // while the roots it armed are still behind. Left to pile up over
                            // a long backlog, a recheck running after a root's rollup had
                            // landed would run that rollup a second time.
                            total += self.recheck_rollups().await;
                            // The batch may have pended dependents and composites: tell the
                            // broker now, not after the backlog (the gated `work_ready` NOTIFY
                            // comes at most every 50 ms).
                            self.wake_dispatch();
                        }
                        if n < self.cfg.batch {
                            break;
                        }
                    }
                    Err(e) => {
                        // E.g. a deadlock with another drainer (their cascades can lock each
                        // other's rows); the batch rolled back and its results are still
                        // queued.
                        tracing::warn!(error = %e, retry_in = ?backoff, "drain failed; retrying");
                        tokio::select! {
                            _ = shutdown.cancelled() => {}
                            _ = tokio::time::sleep(backoff) => {}
                        }
                        backoff = (backoff * 2).min(self.cfg.failsafe.max(RETRY_MIN));
                        failed = true;
                        break;
                    }
                }
                if shutdown.is_cancelled() {
                    break;
                }
            }
            // The express lane leaves teardown to the bulk drainers of the same shards.
            if !self.cfg.express {
                total += self.teardown().await;
            }
            if total > 0 {
                tracing::debug!(applied = total, "drained results");
                self.wake_dispatch();
            }
            // A failed batch left results queued whose wake-up is already spent: retry now
            // rather than at the failsafe poll.
            if failed && !shutdown.is_cancelled() {
                continue;
            }
            if !wake.wait(&shutdown).await {
                break;
            }
        }
        let _ = listener.await;
    }

    /// Teardown: a result stripped a finalizer, or a delete marked a tree (both wake this
    /// loop). Sweeps while rows progress (each removal can unblock the next layer), then
    /// closes any straddle its commits left; returns a "did anything" count.
    async fn teardown(&self) -> i64 {
        let mut total = 0;
        for _ in 0..64 {
            match db::sweeps::teardown_sweep(&self.pool, self.cfg.shards.current(), 1000).await {
                Ok(0) => break,
                Ok(_) => total += 1,
                Err(e) => {
                    tracing::warn!(error = %e, "teardown sweep failed");
                    break;
                }
            }
        }
        total + self.recheck_rollups().await
    }

    /// This drainer's lane, as the `lane` label names it.
    fn lane(&self) -> &'static str {
        if self.cfg.express { "express" } else { "bulk" }
    }

    /// Hints the co-located broker that drained results may have made work claimable.
    fn wake_dispatch(&self) {
        if let Some(n) = &self.on_drained {
            n.notify_one();
        }
    }

    /// Re-evaluates every root armed in this drainer's shards (the straddle close-out);
    /// returns 1 when one was re-pended, for the pass's "did anything" total.
    async fn recheck_rollups(&self) -> i64 {
        match db::sweeps::rollup_recheck_drain(&self.pool, self.cfg.shards.current()).await {
            Ok(n) if n > 0 => 1,
            Ok(_) => 0,
            Err(e) => {
                tracing::warn!(error = %e, "rollup recheck failed");
                0
            }
        }
    }
}

/// First pause after a failed drain batch.
const RETRY_MIN: Duration = Duration::from_millis(200);
