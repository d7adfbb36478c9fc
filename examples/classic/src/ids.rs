//! Deterministic fake cloud ids: the same inputs always give the same id, in any process, so
//! a re-run of a leaf reports exactly the status it reported before.

/// `<prefix>-<12 hex digits>` from a 64-bit FNV-1a hash of `parts` (each part terminated by a
/// NUL byte, so `["ab", "c"]` and `["a", "bc"]` differ).
pub(crate) fn fake_id(prefix: &str, parts: &[&str]) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    for part in parts {
        for b in part.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(PRIME);
        }
    }
    format!("{prefix}-{:012x}", h >> 16)
}

#[cfg(test)]
mod tests {
    use super::fake_id;

    #[test]
    fn ids_are_stable_and_separate_parts() {
        let a = fake_id("vpc", &["payments-alpha-vpc", "10.0.0.0/16"]);
        assert_eq!(a, fake_id("vpc", &["payments-alpha-vpc", "10.0.0.0/16"]));
        assert_eq!(a.len(), "vpc-".len() + 12);
        assert!(a[4..].chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(fake_id("x", &["ab", "c"]), fake_id("x", &["a", "bc"]));
    }
}
