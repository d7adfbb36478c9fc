//! Which broker of `BROKER_ADDR` to dial next, and how long to wait first.
//!
//! The list is walked in order, wrapping around, the way gRPC's connection backoff treats
//! an address list: an attempt that gets no stream moves straight on to the next address,
//! and only once every address has failed in a row does the worker sleep (one jittered
//! backoff per failed round, doubling to the ceiling). A stream that opened and later ended
//! also moves on to the next address, after one jittered wait so that the workers of a
//! broker that died or drained do not all land on the next one in the same instant.
//!
//! The backoff starts over when a stream opens after failures (a failover, or the one broker
//! back from an outage) and when an ended stream had outlived the current backoff. A broker
//! that keeps accepting streams and dropping them at once therefore still escalates.

use std::time::Duration;

use super::backoff::Backoff;

/// The dialling position in the broker list and the backoff it shares across the list.
#[derive(Debug)]
pub(crate) struct Failover {
    len: usize,
    current: usize,
    /// Attempts in a row that got no stream (or no config) since the last success.
    failures: usize,
    backoff: Backoff,
}

impl Failover {
    /// Starts at the first of `len` addresses (at least one).
    pub(crate) fn new(len: usize, min: Duration, max: Duration) -> Self {
        Self {
            len: len.max(1),
            current: 0,
            failures: 0,
            backoff: Backoff::new(min, max),
        }
    }

    /// The index of the address to dial now.
    pub(crate) fn current(&self) -> usize {
        self.current
    }

    /// A stream (or a config pull) succeeded on the current address. After failures this is
    /// a recovery, so the backoff starts over: a stream lost soon after a failover is
    /// retried within `min`, not after the escalated wait of the outage.
    pub(crate) fn succeeded(&mut self) {
        if self.failures > 0 {
            self.failures = 0;
            self.backoff.reset();
        }
    }

    /// The attempt on the current address failed before a stream opened (no connection,
    /// refused, bad credentials): moves on to the next address and returns how long to wait
    /// before dialling it, zero while this round still has untried addresses.
    pub(crate) fn failed(&mut self) -> Duration {
        self.failures += 1;
        self.advance();
        if self.failures.is_multiple_of(self.len) {
            self.backoff.next_delay()
        } else {
            Duration::ZERO
        }
    }

    /// A stream that had opened on the current address ended after `lived`: moves on to the
    /// next address and returns the jittered wait before dialling it.
    pub(crate) fn ended(&mut self, lived: Duration) -> Duration {
        self.succeeded();
        if lived > self.backoff.current() {
            self.backoff.reset();
        }
        self.advance();
        self.backoff.next_delay()
    }

    fn advance(&mut self) {
        self.current = (self.current + 1) % self.len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(1);
    const MAX: Duration = Duration::from_secs(5);

    /// Whether `d` is a jittered sleep around `raw` (±25 %, never above MAX).
    fn around(d: Duration, raw: Duration) -> bool {
        d >= raw.mul_f64(0.75) && d <= raw.mul_f64(1.25).min(MAX)
    }

    #[test]
    fn failures_walk_the_list_in_order_and_sleep_once_per_round() {
        let mut f = Failover::new(3, MIN, MAX);
        let mut order = vec![f.current()];
        let mut sleeps = Vec::new();
        for _ in 0..9 {
            sleeps.push(f.failed());
            order.push(f.current());
        }
        assert_eq!(order, [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]);
        // Straight on within a round; one growing, jittered sleep after each full round.
        for (i, d) in sleeps.iter().enumerate() {
            match i {
                2 => assert!(around(*d, MIN), "{d:?}"),
                5 => assert!(around(*d, 2 * MIN), "{d:?}"),
                8 => assert!(around(*d, 4 * MIN), "{d:?}"),
                _ => assert_eq!(*d, Duration::ZERO, "sleep {i}"),
            }
        }
    }

    #[test]
    fn an_ended_stream_moves_on_after_a_jittered_wait() {
        let mut f = Failover::new(2, MIN, MAX);
        let d = f.ended(Duration::from_secs(60));
        assert_eq!(f.current(), 1, "rotates even after a healthy stream");
        assert!(around(d, MIN), "{d:?}");
        let d = f.ended(Duration::from_secs(60));
        assert_eq!(f.current(), 0, "wraps around");
        assert!(
            around(d, MIN),
            "a long-lived stream resets the backoff: {d:?}"
        );
    }

    #[test]
    fn a_stream_dropped_at_once_escalates() {
        let mut f = Failover::new(1, MIN, MAX);
        let raws: Vec<Duration> = (0..5)
            .map(|_| {
                let d = f.ended(Duration::ZERO);
                assert_eq!(f.current(), 0, "one address: always the same");
                d
            })
            .collect();
        assert!(around(raws[0], MIN), "{:?}", raws[0]);
        assert!(around(raws[1], 2 * MIN), "{:?}", raws[1]);
        assert!(around(raws[4], MAX), "{:?}", raws[4]);
    }

    #[test]
    fn a_failover_that_connects_resets_the_backoff() {
        let mut f = Failover::new(2, MIN, MAX);
        // Both brokers down for a while: the backoff climbs to the ceiling.
        for _ in 0..10 {
            f.failed();
        }
        assert_eq!(f.current(), 0);
        // The first is still down, the second answers: its stream then drops at once.
        assert_eq!(f.failed(), Duration::ZERO);
        assert_eq!(f.current(), 1);
        let d = f.ended(Duration::from_millis(10));
        assert!(around(d, MIN), "the recovery reset the backoff: {d:?}");
        assert_eq!(f.current(), 0);
    }

    #[test]
    fn a_config_pull_success_counts_as_a_recovery() {
        let mut f = Failover::new(2, MIN, MAX);
        for _ in 0..6 {
            f.failed();
        }
        f.succeeded();
        assert_eq!(f.current(), 0, "success does not move");
        // The round count starts over: one failure moves on without a wait.
        assert_eq!(f.failed(), Duration::ZERO);
        assert!(around(f.failed(), MIN), "the backoff starts over");
    }
}
