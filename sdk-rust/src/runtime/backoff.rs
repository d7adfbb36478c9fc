//! Exponential reconnect backoff with ±25 % jitter applied to the sleep only, never above
//! the ceiling.

use std::time::Duration;

use rand::Rng;

/// Doubles from `min` to `max`. The escalation uses the raw value; only the returned sleep is
/// jittered, so jitter never compounds.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    current: Duration,
}

impl Backoff {
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        Self {
            min,
            max: max.max(min),
            current: min,
        }
    }

    /// The raw (unjittered) delay the next call to [`Backoff::next_delay`] is based on.
    pub(crate) fn current(&self) -> Duration {
        self.current
    }

    /// Back to `min`, after a healthy session or a recovery.
    pub(crate) fn reset(&mut self) {
        self.current = self.min;
    }

    /// The next sleep, escalating the raw value for the one after: uniform in
    /// [current × 0.75, current × 1.25], the upper end clipped at `max`. Clipping the range
    /// rather than the drawn value keeps the sleeps at the ceiling spread out (workers that
    /// lost the same broker do not all come back in the same instant) and never above it.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let base = self.current;
        self.current = (self.current.saturating_mul(2)).min(self.max);
        let lo = base.mul_f64(0.75).as_secs_f64();
        let hi = base.mul_f64(1.25).min(self.max).as_secs_f64();
        Duration::from_secs_f64(rand::rng().random_range(lo..=hi))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DEFAULT_RECONNECT_MAX, DEFAULT_RECONNECT_MIN, RECONNECT_CAP};

    #[test]
    fn doubles_to_the_ceiling_and_resets() {
        let mut b = Backoff::new(DEFAULT_RECONNECT_MIN, DEFAULT_RECONNECT_MAX);
        let mut raws = Vec::new();
        for _ in 0..6 {
            let raw = b.current();
            raws.push(raw.as_secs());
            let d = b.next_delay();
            assert!(
                d >= raw.mul_f64(0.75) && d <= raw.mul_f64(1.25),
                "{d:?} for {raw:?}"
            );
        }
        assert_eq!(raws, [1, 2, 4, 5, 5, 5]);
        b.reset();
        assert_eq!(b.current(), Duration::from_secs(1));
    }

    #[test]
    fn never_sleeps_beyond_the_cap_and_is_jittered() {
        let mut b = Backoff::new(DEFAULT_RECONNECT_MIN, RECONNECT_CAP);
        let mut at_cap = Vec::new();
        for i in 0..2000 {
            let d = b.next_delay();
            assert!(d <= RECONNECT_CAP, "sleep {i} is {d:?}");
            assert!(d >= Duration::from_millis(750), "sleep {i} is {d:?}");
            if i >= 4 {
                at_cap.push(d);
            }
        }
        // At the ceiling the sleeps still spread over [3.75 s, 5 s], not all on 5 s.
        let (lo, hi) = (
            at_cap.iter().min().copied().unwrap_or_default(),
            at_cap.iter().max().copied().unwrap_or_default(),
        );
        assert!(lo < Duration::from_millis(4000), "lowest {lo:?}");
        assert!(hi > Duration::from_millis(4700), "highest {hi:?}");
        assert!(lo >= Duration::from_millis(3750), "lowest {lo:?}");
        let distinct: std::collections::HashSet<_> = at_cap.iter().collect();
        assert!(
            distinct.len() > at_cap.len() / 2,
            "sleeps repeat: not jittered"
        );
    }
}
