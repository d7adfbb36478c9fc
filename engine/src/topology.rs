//! Dynamic sharding, no leader: the shard ranges this process works, re-read from live
//! membership (`cluster_tiling`, engine/sql/cluster.sql) on every `cluster_changed` NOTIFY
//! and every [`REFRESH_EVERY`] behind it.
//!
//! A [`Topology`] answers two questions: which shards this member's control loops (drainers,
//! express drainer, reaper) work, [`Topology::control`], and which shards its broker claims a
//! pair's tasks in, [`Topology::claim`]. Both answer [`ShardRange::ALL`] until the tiling
//! names this member for that duty (a process just started, a pair whose worker the tiling
//! has not seen yet): working too much is safe (claims and drains lock rows with `SKIP
//! LOCKED`, results are fenced by claim epoch), working too little would strand work.
//!
//! When ranges move, work already claimed keeps its lease; only new claims and passes use the
//! new range. Mid-reshard two members may briefly overlap (one re-read first); they never
//! leave a gap for longer than one re-read, because each member's new range is computed from
//! the same rows.
//!
//! [`Shards`] is what a loop is configured with: a fixed range (tests, a single-shard tool)
//! or a slice of this member's control range, read afresh on every pass.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
    time::Duration,
};

use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::{
    db::cluster::{self, Tile},
    ids::{KindPair, ShardRange},
    wake,
};

/// The failsafe re-read behind the NOTIFY: a crashed member notifies nobody, so the others
/// see it leave the liveness window on their next re-read.
pub const REFRESH_EVERY: Duration = Duration::from_secs(1);

/// What this member was assigned by the last re-read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Assigned {
    control: Option<ShardRange>,
    claims: HashMap<KindPair, ShardRange>,
}

/// This member's shard ranges, kept fresh by [`Topology::follow`].
#[derive(Debug)]
pub struct Topology {
    me: String,
    assigned: RwLock<Assigned>,
    /// Woken after a re-read that moved a range (a dispatcher claims in its new range now).
    moved: Arc<Notify>,
}

impl Topology {
    /// The ranges of member `me`: every shard until the first re-read.
    pub fn new(me: impl Into<String>) -> Arc<Self> {
        Arc::new(Topology {
            me: me.into(),
            assigned: RwLock::default(),
            moved: Arc::new(Notify::new()),
        })
    }

    /// The shards this member's control loops work.
    pub fn control(&self) -> ShardRange {
        self.read().control.unwrap_or(ShardRange::ALL)
    }

    /// The shards this member's broker claims `pair`'s tasks in.
    pub fn claim(&self, pair: &KindPair) -> ShardRange {
        self.read()
            .claims
            .get(pair)
            .copied()
            .unwrap_or(ShardRange::ALL)
    }

    /// Woken whenever a re-read moved one of this member's ranges.
    pub fn moved(&self) -> Arc<Notify> {
        self.moved.clone()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Assigned> {
        self.assigned.read().expect("topology lock poisoned")
    }

    /// Adopts this member's share of `tiles`; true when a range moved.
    pub fn adopt(&self, tiles: &[Tile]) -> bool {
        let mut next = Assigned::default();
        for t in tiles.iter().filter(|t| t.member_id == self.me) {
            let range = ShardRange { lo: t.lo, hi: t.hi };
            match (t.duty.as_str(), &t.kind, t.kind_version) {
                ("control", _, _) => next.control = Some(range),
                ("claim", Some(kind), Some(version)) => {
                    next.claims
                        .insert(KindPair::new(kind.clone(), version), range);
                }
                _ => {}
            }
        }
        let mut assigned = self.assigned.write().expect("topology lock poisoned");
        if *assigned == next {
            return false;
        }
        tracing::info!(
            member = %self.me,
            control = ?next.control.map(|r| (r.lo, r.hi)),
            claims = next.claims.len(),
            "shard ranges re-tiled"
        );
        *assigned = next;
        drop(assigned);
        self.moved.notify_waiters();
        true
    }

    /// Re-reads the tiling on every `cluster_changed` and every [`REFRESH_EVERY`] until
    /// `stop`, counting members stamped within `liveness` (the dead-after window).
    pub async fn follow(
        self: Arc<Self>,
        pool: PgPool,
        liveness: Duration,
        stop: CancellationToken,
    ) {
        let changed = Arc::new(Notify::new());
        let listener = {
            let (pool, changed, stop) = (pool.clone(), changed.clone(), stop.clone());
            tokio::spawn(async move {
                wake::listen(
                    pool,
                    &["cluster_changed"],
                    move |_, _| changed.notify_one(),
                    stop,
                )
                .await;
            })
        };
        loop {
            match cluster::tiling(&pool, liveness).await {
                Ok(tiles) => {
                    self.adopt(&tiles);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the shard tiling; keeping the last ranges")
                }
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = changed.notified() => {}
                _ = tokio::time::sleep(REFRESH_EVERY) => {}
            }
        }
        let _ = listener.await;
    }
}

/// The shards a loop works, read on every pass.
#[derive(Debug, Clone)]
pub enum Shards {
    /// Always the same range.
    Fixed(ShardRange),
    /// Slice `slice` of `of` equal slices of this member's control range (the drainers
    /// divide it between them).
    Control {
        /// The member's ranges.
        topology: Arc<Topology>,
        /// Which slice.
        slice: usize,
        /// How many slices.
        of: usize,
    },
}

impl Shards {
    /// The range now.
    pub fn current(&self) -> ShardRange {
        match self {
            Shards::Fixed(r) => *r,
            Shards::Control {
                topology,
                slice,
                of,
            } => topology.control().split(*of)[(*slice).min(of.saturating_sub(1))],
        }
    }
}

impl From<ShardRange> for Shards {
    fn from(r: ShardRange) -> Self {
        Shards::Fixed(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tile(member: &str, duty: &str, pair: Option<(&str, i32)>, lo: i16, hi: i16) -> Tile {
        Tile {
            member_id: member.into(),
            duty: duty.into(),
            kind: pair.map(|p| p.0.to_owned()),
            kind_version: pair.map(|p| p.1),
            lo,
            hi,
        }
    }

    #[test]
    fn a_member_works_every_shard_until_the_tiling_names_it() {
        let t = Topology::new("a");
        let hello = KindPair::new("hello", 1);
        assert_eq!(t.control(), ShardRange::ALL);
        assert_eq!(t.claim(&hello), ShardRange::ALL);
        let moved = t.adopt(&[
            tile("a", "control", None, 0, 127),
            tile("b", "control", None, 128, 255),
            tile("a", "claim", Some(("hello", 1)), 128, 255),
            tile("b", "claim", Some(("hello", 1)), 0, 127),
        ]);
        assert!(moved);
        assert_eq!(t.control(), ShardRange { lo: 0, hi: 127 });
        assert_eq!(t.claim(&hello), ShardRange { lo: 128, hi: 255 });
        // A pair the tiling does not list for this member: every shard.
        assert_eq!(t.claim(&KindPair::new("other", 1)), ShardRange::ALL);
        // The same tiling again moves nothing.
        assert!(!t.adopt(&[
            tile("a", "control", None, 0, 127),
            tile("a", "claim", Some(("hello", 1)), 128, 255),
        ]));
    }

    #[test]
    fn control_slices_tile_the_control_range() {
        let t = Topology::new("a");
        t.adopt(&[tile("a", "control", None, 100, 199)]);
        let slices: Vec<ShardRange> = (0..3)
            .map(|i| {
                Shards::Control {
                    topology: t.clone(),
                    slice: i,
                    of: 3,
                }
                .current()
            })
            .collect();
        assert_eq!(slices[0].lo, 100);
        assert_eq!(slices[2].hi, 199);
        for w in slices.windows(2) {
            assert_eq!(w[0].hi + 1, w[1].lo);
        }
    }
}
