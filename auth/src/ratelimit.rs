//! Request rate limits: `RATE_LIMIT_PER_PRINCIPAL` and `RATE_LIMIT_PER_ADDRESS`.
//!
//! A setting reads `<N>/<unit>[,burst=<M>]`: N requests per second (`s`), minute (`m`) or
//! hour (`h`), 1..=1,000,000, sustained; a client that was quiet may send up to M at once
//! (default N, 1..=1,000,000). `50/s`, `50/s,burst=100`, `600/m`. Anything else is a boot
//! error naming the setting ([`RateSpec::parse`]).
//!
//! Each key (a principal's name, a client address) gets its own GCRA bucket from the
//! `governor` crate. The buckets live in memory, per process: N pods behind a load
//! balancer let a client N times the rate. Memory is bounded whatever the clients do:
//! a bucket that has refilled is indistinguishable from a new one and is dropped by
//! [`KeyedLimiter::sweep`] (every second, [`KeyedLimiter::keep_swept`]), and a flood of
//! distinct keys between two sweeps is cut at [`MAX_KEYS`]: past it the idle buckets go at
//! once, and if that is not enough every bucket is forgotten (the limiter starts afresh,
//! which lets each of those keys its burst again; memory, not strictness, wins).
//!
//! Addresses are keyed by [`AddressKey`]: an IPv4 address, or the /64 an IPv6 address is
//! in (one host usually holds a whole /64, so keying whole IPv6 addresses would let it
//! rotate through 2^64 keys).

use std::{
    hash::Hash,
    net::{IpAddr, Ipv6Addr},
    num::NonZeroU32,
    sync::Arc,
    time::Duration,
};

use arc_swap::ArcSwap;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter, clock::Clock};
use tokio_util::sync::CancellationToken;

/// Most keys one limiter holds before it drops its idle buckets out of turn (and, when
/// they are all busy, forgets every bucket). 100,000 buckets are a few MiB.
pub const MAX_KEYS: usize = 100_000;

/// How often [`KeyedLimiter::keep_swept`] drops refilled buckets.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// The largest N or burst a setting may name.
const MAX_COUNT: u32 = 1_000_000;

/// A parsed rate setting: `count` requests per `per`, bursts of up to `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateSpec {
    /// Requests per `per`, sustained.
    pub count: NonZeroU32,
    /// The unit: one second, minute or hour.
    pub per: Duration,
    /// Requests a quiet client may send at once.
    pub burst: NonZeroU32,
}

impl RateSpec {
    /// Parses `<N>/<s|m|h>[,burst=<M>]` (spaces around the parts are ignored). The error
    /// says what is wrong, for a message that names the setting.
    pub fn parse(text: &str) -> Result<RateSpec, String> {
        let grammar = "expected <N>/<s|m|h>[,burst=<M>], e.g. 50/s or 50/s,burst=100";
        let (rate, burst) = match text.split_once(',') {
            Some((r, b)) => (r.trim(), Some(b.trim())),
            None => (text.trim(), None),
        };
        let (n, unit) = rate
            .split_once('/')
            .ok_or_else(|| format!("{text:?}: {grammar}"))?;
        let count =
            parse_count(n.trim()).map_err(|e| format!("{text:?}: the rate {e}; {grammar}"))?;
        let per = match unit.trim() {
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            u => return Err(format!("{text:?}: unknown unit {u:?}; {grammar}")),
        };
        let burst = match burst {
            None => count,
            Some(b) => {
                let m = b
                    .strip_prefix("burst")
                    .map(str::trim_start)
                    .and_then(|b| b.strip_prefix('='))
                    .ok_or_else(|| format!("{text:?}: {grammar}"))?;
                parse_count(m.trim()).map_err(|e| format!("{text:?}: the burst {e}; {grammar}"))?
            }
        };
        Ok(RateSpec { count, per, burst })
    }

    /// The `governor` quota: one request back every `per / count`, `burst` at most.
    fn quota(&self) -> Quota {
        // count <= MAX_COUNT and per >= 1 s, so the period is at least 1 µs: never zero.
        let period = self.per / self.count.get();
        Quota::with_period(period)
            .unwrap_or_else(|| Quota::per_second(self.count))
            .allow_burst(self.burst)
    }
}

impl std::fmt::Display for RateSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "m",
            _ => "h",
        };
        write!(f, "{}/{unit},burst={}", self.count, self.burst)
    }
}

fn parse_count(n: &str) -> Result<NonZeroU32, String> {
    n.parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_COUNT).contains(n))
        .and_then(NonZeroU32::new)
        .ok_or_else(|| format!("{n:?} is not a whole number 1..={MAX_COUNT}"))
}

/// A client address as rate limits key it: an IPv4 address (an IPv4-mapped IPv6 address
/// counts as its IPv4 address), or the /64 network of an IPv6 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddressKey(IpAddr);

impl AddressKey {
    /// The key of a client at `ip`.
    pub fn of(ip: IpAddr) -> AddressKey {
        match ip {
            IpAddr::V4(v4) => AddressKey(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => AddressKey(IpAddr::V4(v4)),
                None => {
                    let s = v6.segments();
                    AddressKey(IpAddr::V6(Ipv6Addr::new(
                        s[0], s[1], s[2], s[3], 0, 0, 0, 0,
                    )))
                }
            },
        }
    }
}

/// One bucket per key, each at the same [`RateSpec`], with bounded memory (see the module
/// documentation).
pub struct KeyedLimiter<K: Hash + Eq + Clone> {
    spec: RateSpec,
    buckets: ArcSwap<DefaultKeyedRateLimiter<K>>,
}

impl<K: Hash + Eq + Clone> std::fmt::Debug for KeyedLimiter<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedLimiter")
            .field("spec", &self.spec.to_string())
            .field("keys", &self.buckets.load().len())
            .finish()
    }
}

impl<K: Hash + Eq + Clone + Send + Sync + 'static> KeyedLimiter<K> {
    /// A limiter letting each key `spec`.
    pub fn new(spec: RateSpec) -> Arc<KeyedLimiter<K>> {
        Arc::new(KeyedLimiter {
            spec,
            buckets: ArcSwap::from_pointee(RateLimiter::keyed(spec.quota())),
        })
    }

    /// The rate each key is allowed.
    pub fn spec(&self) -> RateSpec {
        self.spec
    }

    /// Takes one request from `key`'s bucket: `Ok`, or `Err` with how long until the
    /// bucket lets the next one through.
    pub fn check(&self, key: &K) -> Result<(), Duration> {
        let buckets = self.buckets.load();
        if buckets.len() >= MAX_KEYS {
            self.make_room(&buckets);
        }
        let buckets = self.buckets.load();
        buckets
            .check_key(key)
            .map_err(|not_until| not_until.wait_time_from(buckets.clock().now()))
    }

    /// Drops the idle buckets; when most are busy still, forgets them all. Each call
    /// is O(keys), and after it at least [`MAX_KEYS`] / 10 new keys fit, so a flood pays
    /// O(1) per request for it.
    fn make_room(&self, buckets: &DefaultKeyedRateLimiter<K>) {
        buckets.retain_recent();
        if buckets.len() >= MAX_KEYS - MAX_KEYS / 10 {
            tracing::warn!(
                keys = buckets.len(),
                limit = %self.spec,
                "rate limiter full of busy keys: forgetting every bucket"
            );
            self.buckets
                .store(Arc::new(RateLimiter::keyed(self.spec.quota())));
        }
    }

    /// Drops the buckets that have refilled (a new one is the same) and gives their memory
    /// back.
    pub fn sweep(&self) {
        let buckets = self.buckets.load();
        buckets.retain_recent();
        buckets.shrink_to_fit();
    }

    /// Buckets held now (for tests of the memory bound).
    pub fn len(&self) -> usize {
        self.buckets.load().len()
    }

    /// Whether no bucket is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sweeps every [`SWEEP_EVERY`] until `stop`.
    pub async fn keep_swept(self: Arc<Self>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => self.sweep(),
            }
        }
    }
}

/// Whole seconds to tell a refused client in `Retry-After`: `wait` rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar() {
        let s = RateSpec::parse("50/s").unwrap();
        assert_eq!(
            (s.count.get(), s.per, s.burst.get()),
            (50, Duration::from_secs(1), 50)
        );
        let s = RateSpec::parse(" 50/s , burst = 100 ").unwrap();
        assert_eq!(s.burst.get(), 100);
        assert_eq!(s.to_string(), "50/s,burst=100");
        let s = RateSpec::parse("600/m").unwrap();
        assert_eq!(s.per, Duration::from_secs(60));
        assert_eq!(
            RateSpec::parse("1/h").unwrap().per,
            Duration::from_secs(3600)
        );
        for bad in [
            "",
            "50",
            "50/",
            "/s",
            "0/s",
            "-1/s",
            "50/d",
            "50/s,",
            "50/s,burst",
            "50/s,burst=0",
            "50/s,bust=5",
            "1000001/s",
            "50/s,burst=1000001",
            "x/s",
            "50 per s",
        ] {
            let e = RateSpec::parse(bad).unwrap_err();
            assert!(e.contains("<N>/<s|m|h>"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_burst_then_refusals_with_a_wait() {
        let l = KeyedLimiter::new(RateSpec::parse("1/h,burst=3").unwrap());
        for _ in 0..3 {
            l.check(&"a").unwrap();
        }
        let wait = l.check(&"a").unwrap_err();
        assert!(wait > Duration::from_secs(1000) && wait <= Duration::from_secs(3600));
        // Another key has a bucket of its own.
        l.check(&"b").unwrap();
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(2001)), 3);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }

    #[test]
    fn distinct_keys_never_grow_past_the_cap() {
        // Every key's bucket stays busy for an hour: nothing is idle, so past the cap the
        // limiter must forget rather than grow.
        let l = KeyedLimiter::new(RateSpec::parse("1/h").unwrap());
        for i in 0..(MAX_KEYS as u32 * 2 + 7) {
            let _ = l.check(&i);
            assert!(l.len() <= MAX_KEYS, "{} keys after {i}", l.len());
        }
        // Refilled buckets are swept.
        let l = KeyedLimiter::new(RateSpec::parse("1000000/s,burst=1").unwrap());
        for i in 0..1000u32 {
            let _ = l.check(&i);
        }
        // Each bucket refills within a microsecond; poll with a deadline for the clock to
        // pass that.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !l.is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "{} keys left",
                l.len()
            );
            l.sweep();
        }
    }

    #[test]
    fn ipv6_is_keyed_by_its_64() {
        let a = AddressKey::of("2001:db8:1:2:aaaa::1".parse().unwrap());
        let b = AddressKey::of("2001:db8:1:2:bbbb::9".parse().unwrap());
        let c = AddressKey::of("2001:db8:1:3::1".parse().unwrap());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(
            AddressKey::of("::ffff:10.0.0.1".parse().unwrap()),
            AddressKey::of("10.0.0.1".parse().unwrap())
        );
    }
}
