//! This process's membership of the cluster: its `cluster_members` row, stamped every
//! [`BEAT_EVERY`], and the release of what a member silent for [`DEAD_AFTER`] (by default;
//! `MEMBER_DEAD_AFTER`) held (a
//! SIGKILLed pod, a partitioned node). Its leases are claimable again within about
//! `DEAD_AFTER + BEAT_EVERY` (7 s) instead of the 30 s lease staleness, which stays as the
//! backstop when no member is left to notice. Every member checks, so silent members are
//! released whatever the roles still running; the stamp and the check use the database's
//! clock, so skew between pods does not matter. On stop the row is deleted.
//!
//! **The dead stay visible.** A silent member's row is not deleted when its leases are
//! released: it is stamped `released_at` and listed NotReady by the cluster view, and any
//! member removes it [`GC_AFTER`] (`MEMBER_GC_AFTER`) after its last stamp. Routing ignores it
//! from the moment its heartbeat is older than `DEAD_AFTER`, the liveness window.
//!
//! A broker hands its [`Roster`]: the worker list is rewritten at once when a worker connects
//! or leaves, and with a heartbeat when only in-flight counts moved, at most every
//! [`WORKERS_REFRESH`], so the cost is one small UPDATE a second, never a write per task.
//!
//! **Boot grace.** A process releases nobody's leases during its first `DEAD_AFTER`. A lone
//! converge restarted after an outage longer than `DEAD_AFTER` finds its predecessor's row
//! silent for that long already; released at once, every task its workers were finishing
//! (or had finished, holding the result for the reconnect) would run a second time (64 of
//! 64 in issue 41). With the grace, the workers reconnect (their backoff is capped at 5 s)
//! and resume their leases (`lease_adopt` moves them to the new broker), and only what no
//! worker took back is released when the grace ends. In a cluster the other members, up all
//! along, release a dead member's leases as before.
//!
//! A member paused longer than `DEAD_AFTER` (a frozen VM) finds its row released (or gone,
//! past the TTL) on its next beat, and is live again from that beat:
//! its leases were released and re-claimed meanwhile, and the epoch fence refuses whatever it
//! still delivers for them, so nothing runs twice to completion unnoticed.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::db::cluster::{self, Member, WorkerInfo};

/// How often a member stamps its row.
pub const BEAT_EVERY: Duration = Duration::from_secs(1);
/// How long a row may go unstamped before the other members presume it dead: six missed
/// stamps, so a slow statement or a busy runtime is not mistaken for a death.
pub const DEAD_AFTER: Duration = Duration::from_secs(6);
/// How long a silent member's row stays listed (NotReady) before it is removed.
pub const GC_AFTER: Duration = Duration::from_secs(300);
/// Longest the stored worker list may lag in-flight counts that moved.
pub const WORKERS_REFRESH: Duration = Duration::from_secs(5);
/// After a worker connects or leaves, how long to wait for the next ones before writing (a
/// broker restart reconnects its workers all at once: one write, not one each).
const SETTLE: Duration = Duration::from_millis(50);

/// A broker's connected workers, as the membership loop publishes them.
pub trait Roster: Send + Sync {
    /// Changes whenever a worker connects or leaves or its readiness flips (not when its
    /// in-flight count moves).
    fn generation(&self) -> u64;
    /// The connected workers now.
    fn workers(&self) -> Vec<WorkerInfo>;
    /// Woken when [`Roster::generation`] changed.
    fn changed(&self) -> Arc<Notify>;
}

/// The membership loop of one process.
pub struct Membership {
    pool: PgPool,
    me: Member,
    roster: Option<Arc<dyn Roster>>,
    /// Woken when a dead member's leases were released (a co-located dispatcher).
    on_release: Option<Arc<Notify>>,
    /// How long another member's row may go unstamped before it is presumed dead (and
    /// ignored by routing: the liveness window).
    dead_after: Duration,
    /// How long a silent member's row stays listed before it is removed.
    gc_after: Duration,
}

/// What was last written of the roster.
struct Written {
    generation: u64,
    workers: Vec<WorkerInfo>,
    at: Instant,
}

impl Membership {
    /// The loop for member `me`.
    pub fn new(pool: PgPool, me: Member) -> Self {
        Membership {
            pool,
            me,
            roster: None,
            on_release: None,
            dead_after: DEAD_AFTER,
            gc_after: GC_AFTER,
        }
    }

    /// Removes rows silent for `gc_after` instead of [`GC_AFTER`] (`MEMBER_GC_AFTER`).
    pub fn with_gc_after(mut self, gc_after: Duration) -> Self {
        self.gc_after = gc_after;
        self
    }

    /// Presumes other members dead after `dead_after` without a stamp instead of
    /// [`DEAD_AFTER`] (`MEMBER_DEAD_AFTER`): longer keeps a restarting broker's leases for its
    /// workers to resume, shorter frees them sooner for other brokers.
    pub fn with_dead_after(mut self, dead_after: Duration) -> Self {
        self.dead_after = dead_after;
        self
    }

    /// Publishes `roster` with the row, and wakes `on_release` when a dead member's leases
    /// come back (for a broker in this process).
    pub fn with_roster(mut self, roster: Arc<dyn Roster>, on_release: Arc<Notify>) -> Self {
        self.roster = Some(roster);
        self.on_release = Some(on_release);
        self
    }

    /// Stamps this member's row, releases dead members' leases and removes the rows silent
    /// past the TTL until `stop`, then deletes its own row. Stop it after a broker in the process drained, so its row outlives its leases.
    pub async fn run(self, stop: CancellationToken) {
        // Without a roster nothing ever wakes this.
        let changed = self
            .roster
            .as_ref()
            .map_or_else(|| Arc::new(Notify::new()), |r| r.changed());
        let mut written: Option<Written> = None;
        let mut first = true;
        // The boot grace (see the module's docs) counts from here.
        let booted = Instant::now();
        let mut tick = tokio::time::interval(BEAT_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let on_tick = tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => true,
                _ = changed.notified() => {
                    tokio::time::sleep(SETTLE).await;
                    false
                }
            };
            self.stamp(&mut written, &mut first).await;
            if on_tick && booted.elapsed() >= self.dead_after {
                self.release_dead().await;
            }
            if on_tick {
                // One DELETE on a table of a few rows a second: cheaper than a timer of its own.
                self.gc().await;
            }
        }
        if let Err(e) = cluster::leave(&self.pool, &self.me.id).await {
            tracing::warn!(error = %e, "could not remove this process's cluster_members row");
        }
    }

    /// One stamp, with the worker list when it is due.
    async fn stamp(&self, written: &mut Option<Written>, first: &mut bool) {
        let due = self.roster.as_ref().and_then(|r| {
            let generation = r.generation();
            let workers = r.workers();
            let due = match written.as_ref() {
                None => true,
                Some(w) if w.generation != generation => true,
                Some(w) => w.workers != workers && w.at.elapsed() >= WORKERS_REFRESH,
            };
            due.then_some((generation, workers))
        });
        let sent = due.as_ref().map(|(_, w)| w.as_slice());
        match cluster::beat(&self.pool, &self.me, sent).await {
            Ok(created) => {
                if created && !*first {
                    tracing::warn!(
                        member = %self.me.id,
                        "this process was presumed dead (no cluster_members stamp within the other members' MEMBER_DEAD_AFTER); its leases were released"
                    );
                    // The row was made anew: its worker list must be written again.
                    if sent.is_none() {
                        *written = None;
                    }
                }
                *first = false;
                if let Some((generation, workers)) = due {
                    *written = Some(Written {
                        generation,
                        workers,
                        at: Instant::now(),
                    });
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not stamp this process's cluster_members row")
            }
        }
    }

    /// Removes the rows of members released and silent past the TTL.
    async fn gc(&self) {
        match cluster::gc(&self.pool, self.gc_after).await {
            Ok(gone) if !gone.is_empty() => {
                tracing::info!(members = ?gone, "removed cluster members silent past MEMBER_GC_AFTER");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not remove long-silent cluster members"),
        }
    }

    async fn release_dead(&self) {
        match cluster::release_dead(&self.pool, &self.me.id, self.dead_after).await {
            Ok((dead, freed)) if !dead.is_empty() => {
                tracing::warn!(members = ?dead, released = freed, "released the leases of cluster members that stopped stamping (listed NotReady until MEMBER_GC_AFTER)");
                if let Some(n) = &self.on_release {
                    n.notify_one();
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not check the other members' heartbeats"),
        }
    }
}
