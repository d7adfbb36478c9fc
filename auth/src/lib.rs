//! Who may knock on converge's doors.
//!
//! - [`principals`]: the `AUTH_FILE` format, roles and kind globs;
//! - [`store`]: the live principal index, re-read when the file changes (no restart), with
//!   the tokens minted through the API handed in by their follower, and the change signal
//!   long-lived doors re-check their principal on;
//! - [`watch`]: re-reading a file when its directory reports a change, with a failsafe;
//! - [`token`]: minting bearer tokens and hashing them (only hashes are ever stored);
//! - [`oidc`]: people signed in through an OIDC issuer: bearer JWTs verified against the
//!   issuer's keys (fetched, cached and rotated by `kid`), roles from a claim;
//! - [`tls`]: TLS listeners whose certificates reload when their files change, and the
//!   SPIFFE identity of an mTLS peer;
//! - [`ratelimit`]: request rate limits per principal and per client address, with bounded
//!   memory;
//! - [`listen`]: the accept loop of every port, with the connection budget, timeouts and
//!   accept backoff that keep a flood of idle peers from taking a process down.

pub mod listen;
pub mod oidc;
pub mod principals;
pub mod ratelimit;
pub mod store;
pub mod tls;
pub mod token;
pub mod watch;

pub use principals::{Principal, Role};
pub use store::{Authenticator, MintedToken};

/// Calls `reload` (on a blocking thread: it reads files) every `every` until `stop`. A failure
/// is logged once per distinct message, with `kept` saying what stays in force meanwhile.
pub async fn poll_reload<E>(
    every: std::time::Duration,
    stop: tokio_util::sync::CancellationToken,
    kept: &'static str,
    reload: impl Fn() -> Result<bool, E> + Clone + Send + 'static,
) where
    E: std::error::Error + Send + 'static,
{
    let mut last_error = String::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        match tokio::task::spawn_blocking(reload.clone()).await {
            Ok(Ok(_)) => last_error.clear(),
            Ok(Err(e)) => {
                let msg = error_chain(&e);
                if msg != last_error {
                    tracing::error!(error = %msg, "{kept}");
                    last_error = msg;
                }
            }
            Err(e) => tracing::error!(error = %e, "reload task failed"),
        }
    }
}

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
