//! Who may knock on converge's doors.
//!
//! - [`principals`]: the `AUTH_FILE` format, roles and kind globs;
//! - [`store`]: the live principal index, re-read when the file changes (no restart);
//! - [`token`]: minting bearer tokens and hashing them (only hashes are ever stored);
//! - [`tls`]: TLS listeners whose certificates reload when their files change, and the
//!   SPIFFE identity of an mTLS peer.

pub mod principals;
pub mod store;
pub mod tls;
pub mod token;

pub use principals::{Principal, Role};
pub use store::Authenticator;

/// `e` and its sources, joined with ": " (for one log line or one boot error).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

#[cfg(feature = "test-util")]
pub mod testing;
