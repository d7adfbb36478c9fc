//! Exponential reconnect backoff with ±25 % jitter applied to the sleep only.

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

    /// Back to `min`, after a healthy session.
    pub(crate) fn reset(&mut self) {
        self.current = self.min;
    }

    /// The next sleep (current ±25 %), escalating the raw value for the one after.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let base = self.current;
        self.current = (self.current.saturating_mul(2)).min(self.max);
        base.mul_f64(rand::rng().random_range(0.75..=1.25))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_ceiling_and_resets() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        let mut raws = Vec::new();
        for _ in 0..7 {
            raws.push(b.current().as_secs());
            let d = b.next_delay();
            let raw = *raws.last().unwrap_or(&0) as f64;
            assert!(d.as_secs_f64() >= raw * 0.75 - 1e-9 && d.as_secs_f64() <= raw * 1.25 + 1e-9);
        }
        assert_eq!(raws, [1, 2, 4, 8, 16, 30, 30]);
        b.reset();
        assert_eq!(b.current(), Duration::from_secs(1));
    }
}
