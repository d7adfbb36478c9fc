//! The `hello` provider: a leaf kind that greets its resource, with knobs to fail or to be
//! slow on purpose so tests and benchmarks can exercise retries, terminal failures and
//! deadlines.

use std::time::Duration;

use converge_sdk::{Condition, HandlerError, KindVersion, Outcome, Provider, ReactionRequest};
use serde::Deserialize;
use serde_json::json;

/// The `hello` kind's spec (see `kind-hello.json` for its schema).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HelloSpec {
    /// The greeting; `hello` when absent.
    pub greeting: Option<String>,
    /// Fail transiently while `attempt <= fail_attempts`.
    pub fail_attempts: i64,
    /// Always fail, terminally or transiently.
    pub fail: Option<FailMode>,
    /// Sleep this long first (cut short when the task is cancelled).
    pub sleep_ms: u64,
}

/// How `spec.fail` makes every attempt fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailMode {
    /// A terminal failure: no retries until the spec changes.
    Terminal,
    /// A transient failure: retried with backoff.
    Transient,
}

/// Serves kind `hello` version 1.
#[derive(Debug, Default, Clone)]
pub struct Hello {
    /// Reported in status as `worker` (which worker reconciled the resource).
    pub worker: String,
    /// When set, one line per handler start and success is appended here
    /// (`start|done <resource> <attempt> <unix ms>`), so tests can count executions.
    pub log: Option<std::path::PathBuf>,
}

impl Hello {
    /// Reads `WORKER_NAME` and `HELLO_LOG` from the environment.
    pub fn from_env() -> Hello {
        Hello {
            worker: std::env::var("WORKER_NAME").unwrap_or_default(),
            log: std::env::var_os("HELLO_LOG").map(Into::into),
        }
    }

    fn record(&self, event: &str, req: &ReactionRequest) {
        let Some(path) = &self.log else { return };
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let line = format!("{event} {} {} {ms}\n", req.resource.name, req.attempt);
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
        if let Err(e) = written {
            tracing::warn!(error = %e, path = %path.display(), "cannot write HELLO_LOG");
        }
    }
}

impl Provider for Hello {
    fn kind(&self) -> KindVersion {
        KindVersion::new("hello", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let spec: HelloSpec = req.spec()?;
        self.record("start", &req);
        if spec.sleep_ms > 0 {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(spec.sleep_ms)) => {}
                () = req.cancel.cancelled() => {
                    return Err(HandlerError::transient("cancelled while sleeping"));
                }
            }
        }
        match spec.fail {
            Some(FailMode::Terminal) => {
                return Err(HandlerError::terminal(
                    "spec.fail asks for a terminal failure",
                ));
            }
            Some(FailMode::Transient) => {
                return Err(HandlerError::transient(
                    "spec.fail asks for a transient failure",
                ));
            }
            None => {}
        }
        if i64::from(req.attempt) <= spec.fail_attempts {
            return Err(HandlerError::transient(format!(
                "failing attempt {} of {} on purpose (spec.fail_attempts)",
                req.attempt, spec.fail_attempts
            )));
        }
        let greeting = spec.greeting.as_deref().unwrap_or("hello");
        tracing::debug!(resource = %req.resource.name, attempt = req.attempt, "greeting");
        self.record("done", &req);
        Ok(Outcome::status(json!({
            "message": format!("{greeting}, {}!", req.resource.name),
            "observed_generation": req.generation,
            "attempt": req.attempt,
            "worker": self.worker,
        }))
        .with_condition(Condition::ready(true, "Greeted", "the greeting is ready")))
    }
}
