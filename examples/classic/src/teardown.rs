//! The leaves' simulated teardown (STAGE_DELETE, run once per leaf when it is deleted, after
//! everything that depends on it is gone). Tuned by the environment, read once:
//!
//! - `CLASSIC_DELETE_DELAY_MS`: how long a teardown takes (default 0), cut short by
//!   cancellation; makes the reverse-dependency order visible in the UI.
//! - `CLASSIC_DELETE_LOG`: a file that gets one `kind/name` line per successful teardown, in
//!   the order they finished (tests read it to check the order).
//! - `CLASSIC_STUCK_DELETE`: comma-separated resource names whose teardown always fails
//!   (transiently): a stuck finalizer that keeps everything above it Deleting.

use std::{io::Write, sync::OnceLock, time::Duration};

use converge_sdk::{HandlerError, Outcome, ReactionRequest};

/// Teardown settings.
#[derive(Debug, Clone, Default)]
pub struct Teardown {
    /// Simulated teardown time.
    pub delay: Duration,
    /// Where finished teardowns are recorded.
    pub log: Option<std::path::PathBuf>,
    /// Names whose teardown never succeeds.
    pub stuck: Vec<String>,
}

impl Teardown {
    /// Reads the settings from the environment; a malformed delay is ignored with a warning.
    pub fn from_env() -> Teardown {
        let delay = std::env::var("CLASSIC_DELETE_DELAY_MS")
            .ok()
            .and_then(|v| match v.trim().parse::<u64>() {
                Ok(ms) => Some(Duration::from_millis(ms)),
                Err(e) => {
                    tracing::warn!(value = %v, error = %e, "CLASSIC_DELETE_DELAY_MS ignored");
                    None
                }
            })
            .unwrap_or_default();
        Teardown {
            delay,
            log: std::env::var_os("CLASSIC_DELETE_LOG").map(Into::into),
            stuck: std::env::var("CLASSIC_STUCK_DELETE")
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        }
    }

    /// The process-wide settings.
    pub fn global() -> &'static Teardown {
        static T: OnceLock<Teardown> = OnceLock::new();
        T.get_or_init(Teardown::from_env)
    }

    /// Tears down the simulated cloud resource of `req`.
    pub async fn run(&self, req: &ReactionRequest) -> Result<Outcome, HandlerError> {
        let name = req.resource.name.as_str();
        if !self.delay.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(self.delay) => {}
                () = req.cancel.cancelled() => {
                    return Err(HandlerError::transient("cancelled while tearing down"));
                }
            }
        }
        if self.stuck.iter().any(|s| s == name) {
            return Err(HandlerError::transient(format!(
                "teardown of {}/{name} is stuck (CLASSIC_STUCK_DELETE)",
                req.kind
            )));
        }
        if let Some(path) = &self.log {
            let line = format!("{}/{name}\n", req.kind);
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(line.as_bytes()));
            if let Err(e) = written {
                return Err(HandlerError::transient(format!(
                    "could not record the teardown: {e}"
                )));
            }
        }
        Ok(Outcome::default())
    }
}
