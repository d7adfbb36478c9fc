//! Claiming ahead of free slots: how many tasks a claim takes beyond what the broker's
//! workers can start at once.
//!
//! A claim statement costs about as much for one row as for a hundred (it sets up a plan
//! over the queue's partitions and walks an index into each one), so a broker whose workers
//! have few slots, or that shares the work with other brokers, would otherwise pay that cost
//! for a handful of tasks each time a few slots free. Instead, while the workers are taking
//! tasks quickly, a claim also takes about [`WINDOW`]'s worth of them ahead; those wait in
//! the registry ([`crate::registry::Registry::assign_or_hold`]) and go out as slots free,
//! and the next claim comes only when half of them are gone. Measured in BENCHMARKS.md
//! ("claims ahead of free slots").
//!
//! What holds it in check:
//! - The depth follows the pace: tasks handed out in the last [`WINDOW`], at most the claim
//!   batch. A slow worker (a task a second) gets next to nothing ahead; an idle pair none.
//! - A task waits at most [`MAX_WAIT`] (and at most a quarter of its deadline, whose clock
//!   runs from the claim); then, or when no stream serves its kind any more, or when the
//!   broker drains, its lease is released and the task goes back to the queue, as an
//!   unplaced one always did. Its lease is a real one all along: fenced, revocable (a revoked
//!   waiting task is dropped unsent), and released by the membership loop if the broker dies.
//! - Only a plain leaf's tasks are claimed ahead (each is one stage a slot runs); a
//!   composite's pipeline or a reactor's delivery is placed on its own path, which sends back
//!   to the queue what finds no slot.
//! - A capped kind (`kind_config.max_inflight`) is never claimed ahead: the claim function
//!   drops the ahead part (`work_claim`'s `p_ahead`), since its budget counts leases and a
//!   waiting task would hold a slot of it that a worker elsewhere could use.
//! - The fallback claim over every shard (a broker's own range came back short) takes only
//!   free slots' worth: no broker hoards another's range.

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
    time::{Duration, Instant},
};

use converge_engine::ids::KindPair;

/// How much work a claim takes ahead: what the pair's workers started in this long.
pub(crate) const WINDOW: Duration = Duration::from_millis(250);

/// Longest a task claimed ahead waits for a slot before its lease is released (far inside
/// `LEASE_STALE_AFTER`, since no worker heartbeats a waiting task's lease).
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(1);

/// Tasks handed out per pair over the last [`WINDOW`].
#[derive(Default)]
pub(crate) struct Pace {
    per_pair: Mutex<HashMap<KindPair, VecDeque<(Instant, usize)>>>,
}

impl Pace {
    /// Records `n` tasks of `pair` handed to streams now.
    pub fn record(&self, pair: &KindPair, n: usize) {
        if n == 0 {
            return;
        }
        let mut m = self.per_pair.lock().expect("pace lock poisoned");
        let q = m.entry(pair.clone()).or_default();
        q.push_back((Instant::now(), n));
        forget_before(q, Instant::now());
    }

    /// Tasks of `pair` handed out over the last [`WINDOW`].
    pub fn recent(&self, pair: &KindPair) -> usize {
        let mut m = self.per_pair.lock().expect("pace lock poisoned");
        let Some(q) = m.get_mut(pair) else { return 0 };
        forget_before(q, Instant::now());
        let n = q.iter().map(|(_, n)| n).sum();
        if q.is_empty() {
            m.remove(pair);
        }
        n
    }
}

fn forget_before(q: &mut VecDeque<(Instant, usize)>, now: Instant) {
    while q
        .front()
        .is_some_and(|(t, _)| now.duration_since(*t) > WINDOW)
    {
        q.pop_front();
    }
}

/// How many rows to claim for a pair (those beyond `free` are ahead), given its `free`
/// slots, the `waiting` tasks already claimed ahead, the tasks it handed out over the last
/// window (`recent`), and the most rows one claim takes (`batch`). 0: no claim, enough waits.
pub(crate) fn claim_size(free: usize, waiting: usize, recent: usize, batch: usize) -> usize {
    let depth = recent.min(batch);
    if free == 0 && waiting * 2 >= depth {
        return 0;
    }
    (free + depth).saturating_sub(waiting).min(batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_or_slow_pair_claims_its_free_slots_only() {
        // Nothing handed out lately: exactly the free slots, as without claiming ahead.
        assert_eq!(claim_size(16, 0, 0, 256), 16);
        assert_eq!(claim_size(0, 0, 0, 256), 0);
        // A slow worker (3 tasks in the window): 3 ahead at most.
        assert_eq!(claim_size(2, 0, 3, 256), 5);
    }

    #[test]
    fn a_busy_pair_claims_a_windows_worth_ahead_and_waits_until_half_is_used() {
        // 64 slots just freed, 900 handed out in the window: a full batch, 192 of it ahead.
        assert_eq!(claim_size(64, 0, 900, 256), 256);
        // Slots all taken, 192 waiting: no claim until fewer than half of 256 wait.
        assert_eq!(claim_size(0, 192, 900, 256), 0);
        assert_eq!(claim_size(0, 128, 900, 256), 0);
        assert_eq!(claim_size(0, 127, 900, 256), 129);
        // Never more than a batch, however many slots are free.
        assert_eq!(claim_size(300, 0, 900, 256), 256);
    }

    #[test]
    fn the_pace_counts_the_last_window_only() {
        let p = Pace::default();
        let pair = KindPair::new("vpc", 1);
        p.record(&pair, 10);
        p.record(&pair, 5);
        p.record(&pair, 0);
        assert_eq!(p.recent(&pair), 15);
        assert_eq!(p.recent(&KindPair::new("vpc", 2)), 0);
        std::thread::sleep(WINDOW + Duration::from_millis(20));
        assert_eq!(p.recent(&pair), 0);
        assert!(
            p.per_pair.lock().unwrap().is_empty(),
            "an idle pair is forgotten"
        );
    }
}
