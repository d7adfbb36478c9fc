//! `WorkerConfig`: the worker's typed configuration, parsed once from the environment.
//!
//! A malformed value is an error naming the variable, never a silent default.

use converge_proto::duration::parse_duration;
use std::time::Duration;

use crate::error::ConfigError;

/// Default number of tasks run at once.
pub const DEFAULT_MAX_PARALLEL: usize = 16;
/// Default time allowed for in-flight work at shutdown.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(50);
/// Default interval of the coalesced task heartbeat.
pub const DEFAULT_HEARTBEAT_EVERY: Duration = Duration::from_secs(5);
/// Default interval of the readiness poll.
pub const DEFAULT_READINESS_POLL: Duration = Duration::from_secs(2);
/// Default first reconnect (and config-prime) backoff.
pub const DEFAULT_RECONNECT_MIN: Duration = Duration::from_secs(1);
/// Default reconnect (and config-prime) backoff ceiling.
pub const DEFAULT_RECONNECT_MAX: Duration = Duration::from_secs(30);

/// How a worker connects and how much work it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// The broker's URL, e.g. `http://127.0.0.1:9090` (`BROKER_ADDR`).
    pub broker_addr: String,
    /// Most tasks run at once (`WORKER_MAX_PARALLEL`, default 16).
    pub max_parallel: usize,
    /// How long shutdown waits for in-flight work (`WORKER_DRAIN_TIMEOUT`, default 50 s).
    pub drain_timeout: Duration,
    /// Serve only these kinds of the registry (`WORKER_KINDS`, default all).
    pub kinds: Option<Vec<String>>,
    /// Advisory display name (`WORKER_NAME`, default `<hostname>-<pid>`).
    pub worker_name: String,
    /// Interval of the coalesced heartbeat of running tasks (5 s).
    pub heartbeat_every: Duration,
    /// Interval of the `Provider::ready` poll (2 s).
    pub readiness_poll: Duration,
    /// First reconnect backoff (1 s).
    pub reconnect_min: Duration,
    /// Reconnect backoff ceiling (30 s).
    pub reconnect_max: Duration,
}

impl WorkerConfig {
    /// A config with every default and the given broker address.
    pub fn new(broker_addr: impl Into<String>) -> Self {
        Self {
            broker_addr: broker_addr.into(),
            max_parallel: DEFAULT_MAX_PARALLEL,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            kinds: None,
            worker_name: default_worker_name(),
            heartbeat_every: DEFAULT_HEARTBEAT_EVERY,
            readiness_poll: DEFAULT_READINESS_POLL,
            reconnect_min: DEFAULT_RECONNECT_MIN,
            reconnect_max: DEFAULT_RECONNECT_MAX,
        }
    }

    /// Reads `BROKER_ADDR` (required), `WORKER_MAX_PARALLEL`, `WORKER_DRAIN_TIMEOUT`,
    /// `WORKER_KINDS` and `WORKER_NAME` from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| match std::env::var(name) {
            Ok(v) => Ok(Some(v)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(ConfigError::NotUnicode {
                var: name.to_string(),
            }),
        })
    }

    /// Like [`WorkerConfig::from_env`], reading variables through `lookup` (for tests and
    /// embedders with their own configuration source).
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Result<Option<String>, ConfigError>,
    ) -> Result<Self, ConfigError> {
        // An empty variable counts as unset, as in a shell `VAR= cmd`.
        let get = |name: &str| -> Result<Option<String>, ConfigError> {
            Ok(lookup(name)?.filter(|v| !v.trim().is_empty()))
        };
        let broker_addr = get("BROKER_ADDR")?.ok_or_else(|| ConfigError::Missing {
            var: "BROKER_ADDR".into(),
        })?;
        // A bare `host:port` means plaintext h2c, as every SDK reads it.
        let broker_addr = broker_addr.trim();
        let broker_addr = if broker_addr.contains("://") {
            broker_addr.to_string()
        } else {
            format!("http://{broker_addr}")
        };
        let mut cfg = Self::new(broker_addr);
        validate_broker_addr("BROKER_ADDR", &cfg.broker_addr)?;
        if let Some(v) = get("WORKER_MAX_PARALLEL")? {
            cfg.max_parallel = parse_max_parallel("WORKER_MAX_PARALLEL", &v)?;
        }
        if let Some(v) = get("WORKER_DRAIN_TIMEOUT")? {
            cfg.drain_timeout = parse_duration(&v)
                .map_err(|reason| ConfigError::invalid("WORKER_DRAIN_TIMEOUT", &v, reason))?;
        }
        if let Some(v) = get("WORKER_KINDS")? {
            let kinds: Vec<String> = v
                .split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(String::from)
                .collect();
            if kinds.is_empty() {
                return Err(ConfigError::invalid(
                    "WORKER_KINDS",
                    &v,
                    "expected a comma-separated list of kinds",
                ));
            }
            cfg.kinds = Some(kinds);
        }
        if let Some(v) = get("WORKER_NAME")? {
            cfg.worker_name = v.trim().to_string();
        }
        Ok(cfg)
    }

    /// Checks the values `run_worker` relies on (positive intervals, a usable address...).
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        validate_broker_addr("broker_addr", &self.broker_addr)?;
        if self.max_parallel == 0 || self.max_parallel > MAX_PARALLEL_LIMIT {
            return Err(ConfigError::invalid(
                "max_parallel",
                self.max_parallel,
                format!("must be between 1 and {MAX_PARALLEL_LIMIT}"),
            ));
        }
        for (name, d) in [
            ("heartbeat_every", self.heartbeat_every),
            ("readiness_poll", self.readiness_poll),
            ("reconnect_min", self.reconnect_min),
        ] {
            if d.is_zero() {
                return Err(ConfigError::invalid(
                    name,
                    format!("{d:?}"),
                    "must be positive",
                ));
            }
        }
        if self.reconnect_max < self.reconnect_min {
            return Err(ConfigError::invalid(
                "reconnect_max",
                format!("{:?}", self.reconnect_max),
                "must not be below reconnect_min",
            ));
        }
        Ok(())
    }
}

/// Upper bound of `max_parallel`: it travels as a `uint32` and sizes a semaphore.
const MAX_PARALLEL_LIMIT: usize = 1 << 20;

fn parse_max_parallel(var: &str, v: &str) -> Result<usize, ConfigError> {
    let n: usize = v
        .trim()
        .parse()
        .map_err(|_| ConfigError::invalid(var, v, "expected a positive integer"))?;
    if n == 0 || n > MAX_PARALLEL_LIMIT {
        return Err(ConfigError::invalid(
            var,
            v,
            format!("must be between 1 and {MAX_PARALLEL_LIMIT}"),
        ));
    }
    Ok(n)
}

fn validate_broker_addr(var: &str, addr: &str) -> Result<(), ConfigError> {
    let Some(rest) = addr.strip_prefix("http://") else {
        let reason = if addr.starts_with("https://") {
            "TLS is not supported by this SDK build; use an http:// (h2c) address"
        } else {
            "expected host:port or an http:// URL, e.g. 127.0.0.1:9090"
        };
        return Err(ConfigError::invalid(var, addr, reason));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(ConfigError::invalid(var, addr, "missing host"));
    }
    tonic::transport::Endpoint::from_shared(addr.to_string())
        .map_err(|e| ConfigError::invalid(var, addr, e.to_string()))?;
    Ok(())
}

/// `<hostname>-<pid>`, the default display name of a worker.
fn default_worker_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_string());
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_name_has_pid() {
        assert!(default_worker_name().ends_with(&format!("-{}", std::process::id())));
    }
}
