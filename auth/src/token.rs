//! Bearer tokens: minted from the operating system's random source, identified only by their
//! SHA-256 (the `AUTH_FILE` never holds a token, so reading it grants nothing).

use base64::Engine;
use rand::TryRngCore;
use sha2::{Digest, Sha256};

/// Prefix of every token converge mints, so a leaked one is recognisable (secret scanners,
/// logs) and never mistaken for another system's.
pub const TOKEN_PREFIX: &str = "cvg_";

/// A fresh token: the prefix and 32 random bytes, base64url without padding (256 bits).
pub fn mint() -> Result<String, rand::rand_core::OsError> {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.try_fill_bytes(&mut bytes)?;
    Ok(format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

/// SHA-256 of the token's UTF-8 bytes.
pub fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// [`digest`] as the lowercase hex an `AUTH_FILE` holds.
pub fn digest_hex(token: &str) -> String {
    hex::encode(digest(token))
}

/// The token of an `Authorization: Bearer <token>` value (scheme case-insensitive, as
/// RFC 7235 says), or `None` when the value is not a bearer credential.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    let token = rest.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_tokens_are_long_distinct_and_prefixed() {
        let (a, b) = (mint().unwrap(), mint().unwrap());
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX));
        assert_eq!(a.len(), TOKEN_PREFIX.len() + 43);
    }

    #[test]
    fn digest_is_sha256_hex() {
        assert_eq!(
            digest_hex("test"),
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        );
    }

    #[test]
    fn bearer_parses_the_scheme_case_insensitively() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("abc"), None);
    }
}
