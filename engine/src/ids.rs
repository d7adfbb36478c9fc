//! Newtypes for the identifiers that cross module boundaries, so a lease token is never
//! confused with a resource id or an epoch with a generation.

use std::fmt;

use uuid::Uuid;

/// A resource's id (the `resources.id` UUID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId(pub Uuid);

/// The lease of one claim of a queue row (random per claim).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseToken(pub Uuid);

/// The fencing epoch of a queue row; strictly increases each time the row becomes claimable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimEpoch(pub i64);

/// A logical shard (0..=255) of the resource id space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardId(pub i16);

/// A contiguous, inclusive range of logical shards owned by one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardRange {
    /// Lowest shard.
    pub lo: i16,
    /// Highest shard (inclusive).
    pub hi: i16,
}

impl ShardRange {
    /// Every shard.
    pub const ALL: ShardRange = ShardRange { lo: 0, hi: 255 };

    /// `n` (at least 1) contiguous slices of this range, in order, that tile it exactly;
    /// when `n` exceeds its width the extra slices are empty (`lo > hi`, matching nothing).
    pub fn split(self, n: usize) -> Vec<ShardRange> {
        let n = i64::try_from(n.max(1)).unwrap_or(1);
        let (lo, len) = (
            i64::from(self.lo),
            i64::from(self.hi) - i64::from(self.lo) + 1,
        );
        (0..n)
            .map(|i| ShardRange {
                lo: i16::try_from(lo + len * i / n).unwrap_or(self.lo),
                hi: i16::try_from(lo + len * (i + 1) / n - 1).unwrap_or(self.hi),
            })
            .collect()
    }
}

/// (kind, kind_version): the routing key of tasks and subscriptions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KindPair {
    /// The kind.
    pub kind: String,
    /// The kind version (at least 1).
    pub version: i32,
}

impl KindPair {
    /// Builds a pair; a version below 1 means 1 (the wire default for older clients).
    pub fn new(kind: impl Into<String>, version: i32) -> Self {
        KindPair {
            kind: kind.into(),
            version: version.max(1),
        }
    }
}

impl fmt::Display for KindPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/v{}", self.kind, self.version)
    }
}

impl fmt::Display for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_tiles_the_range() {
        for range in [ShardRange::ALL, ShardRange { lo: 100, hi: 102 }] {
            for n in [1, 2, 3, 7, 16] {
                let parts = range.split(n);
                assert_eq!(parts.len(), n);
                assert_eq!(parts[0].lo, range.lo);
                assert_eq!(parts[n - 1].hi, range.hi);
                for w in parts.windows(2) {
                    assert_eq!(w[0].hi + 1, w[1].lo, "contiguous, no overlap: {parts:?}");
                }
            }
        }
    }
}
