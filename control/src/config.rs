//! The `converge` process configuration: read once from the environment into a typed struct.
//! A malformed value is a loud boot error naming the variable, never a silent default.

use std::{net::SocketAddr, time::Duration};

use converge_proto::duration::parse_duration;

/// Which duties this process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Control plane (API, drainer, reaper) and broker.
    All,
    /// Control plane only.
    Control,
    /// Broker only (probes on HEALTH_ADDR).
    Broker,
}

impl Role {
    /// Whether the control duties run.
    pub fn control(self) -> bool {
        matches!(self, Role::All | Role::Control)
    }
    /// Whether the broker duty runs.
    pub fn broker(self) -> bool {
        matches!(self, Role::All | Role::Broker)
    }
}

/// A bad environment variable.
#[derive(Debug, thiserror::Error)]
#[error("invalid {var}: {reason}")]
pub struct ConfigError {
    /// The variable.
    pub var: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

/// Everything `converge` reads from its environment.
#[derive(Debug, Clone)]
pub struct Config {
    /// ROLE: all | control | broker.
    pub role: Role,
    /// DATABASE_URL; `None` only for `converge dev`, which starts its own database.
    pub database_url: Option<String>,
    /// LISTEN_ADDR: HTTP API (+ UI).
    pub listen_addr: SocketAddr,
    /// BROKER_LISTEN_ADDR: WorkerService gRPC.
    pub broker_listen_addr: SocketAddr,
    /// HEALTH_ADDR: probes of broker-only pods.
    pub health_addr: SocketAddr,
    /// DB_MAX_CONNECTIONS: pool size.
    pub db_max_connections: u32,
    /// SHUTDOWN_DRAIN: how long the broker waits for in-flight results on shutdown.
    pub shutdown_drain: Duration,
    /// RETRY_BASE: first transient-failure backoff (doubles per attempt).
    pub retry_base: Duration,
    /// RETRY_MAX: backoff cap.
    pub retry_max: Duration,
    /// REAPER_EVERY: reaper tick.
    pub reaper_every: Duration,
    /// LEASE_STALE_AFTER: a lease with no heartbeat for this long is reaped.
    pub lease_stale_after: Duration,
    /// UNCLAIMED_DELETE_AFTER: queue rows nobody claimed for this long are dropped.
    pub unclaimed_delete_after: Duration,
    /// EVENTS_RETENTION: resource events older than this are deleted.
    pub events_retention: Duration,
    /// DRAINER_FAILSAFE: poll behind the outbox_ready LISTEN.
    pub drainer_failsafe: Duration,
    /// BROKER_FAILSAFE: poll behind the work_ready LISTEN.
    pub broker_failsafe: Duration,
    /// DRAIN_BATCH: outbox rows per drain statement.
    pub drain_batch: i32,
    /// DRAINERS: concurrent drainers per control process, each over its own shard slice.
    /// Two by default: one drainer is a serial step (one transaction at a time) and a
    /// composite run left the database's second core idle behind it.
    pub drainers: usize,
    /// CLAIM_BATCH: queue rows per claim statement.
    pub claim_batch: usize,
    /// MAX_BODY_BYTES: largest accepted request body.
    pub max_body_bytes: usize,
}

fn addr(v: &str) -> Result<SocketAddr, String> {
    let v = v.trim();
    let full = if v.starts_with(':') {
        format!("0.0.0.0{v}")
    } else {
        v.to_string()
    };
    full.parse()
        .map_err(|_| format!("{v:?} is not host:port (e.g. :8080 or 127.0.0.1:8080)"))
}

fn num<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{v:?} is not a whole number"))
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads configuration through `get` (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        fn read<T>(
            get: &impl Fn(&str) -> Option<String>,
            var: &'static str,
            default: T,
            parse: impl Fn(&str) -> Result<T, String>,
        ) -> Result<T, ConfigError> {
            match get(var).filter(|v| !v.trim().is_empty()) {
                None => Ok(default),
                Some(v) => parse(&v).map_err(|reason| ConfigError { var, reason }),
            }
        }
        let role = read(&get, "ROLE", Role::All, |v| match v.trim() {
            "all" => Ok(Role::All),
            "control" => Ok(Role::Control),
            "broker" => Ok(Role::Broker),
            o => Err(format!("{o:?} is not one of all, control, broker")),
        })?;
        let dur = |v: &str| parse_duration(v);
        let cfg = Config {
            role,
            database_url: get("DATABASE_URL").filter(|v| !v.trim().is_empty()),
            listen_addr: read(&get, "LISTEN_ADDR", addr(":8080").expect("valid"), addr)?,
            broker_listen_addr: read(
                &get,
                "BROKER_LISTEN_ADDR",
                addr(":9090").expect("valid"),
                addr,
            )?,
            health_addr: read(&get, "HEALTH_ADDR", addr(":8081").expect("valid"), addr)?,
            db_max_connections: read(&get, "DB_MAX_CONNECTIONS", 32, num)?,
            shutdown_drain: read(&get, "SHUTDOWN_DRAIN", Duration::from_secs(45), dur)?,
            retry_base: read(&get, "RETRY_BASE", Duration::from_secs(2), dur)?,
            retry_max: read(&get, "RETRY_MAX", Duration::from_secs(300), dur)?,
            reaper_every: read(&get, "REAPER_EVERY", Duration::from_secs(5), dur)?,
            lease_stale_after: read(&get, "LEASE_STALE_AFTER", Duration::from_secs(30), dur)?,
            unclaimed_delete_after: read(
                &get,
                "UNCLAIMED_DELETE_AFTER",
                Duration::from_secs(24 * 3600),
                dur,
            )?,
            events_retention: read(
                &get,
                "EVENTS_RETENTION",
                Duration::from_secs(7 * 24 * 3600),
                dur,
            )?,
            drainer_failsafe: read(&get, "DRAINER_FAILSAFE", Duration::from_secs(2), dur)?,
            broker_failsafe: read(&get, "BROKER_FAILSAFE", Duration::from_secs(1), dur)?,
            drain_batch: read(&get, "DRAIN_BATCH", 1000, num)?,
            drainers: read(&get, "DRAINERS", 2, num)?,
            claim_batch: read(&get, "CLAIM_BATCH", 256, num)?,
            max_body_bytes: read(&get, "MAX_BODY_BYTES", 16 * 1024 * 1024, num)?,
        };
        if cfg.db_max_connections < 2 {
            return Err(ConfigError {
                var: "DB_MAX_CONNECTIONS",
                reason: "must be at least 2".into(),
            });
        }
        if !(1..=100_000).contains(&cfg.drain_batch) {
            return Err(ConfigError {
                var: "DRAIN_BATCH",
                reason: "must be 1..=100000".into(),
            });
        }
        if !(1..=16).contains(&cfg.drainers) {
            return Err(ConfigError {
                var: "DRAINERS",
                reason: "must be 1..=16".into(),
            });
        }
        if !(1..=10_000).contains(&cfg.claim_batch) {
            return Err(ConfigError {
                var: "CLAIM_BATCH",
                reason: "must be 1..=10000".into(),
            });
        }
        if cfg.lease_stale_after < Duration::from_secs(11) {
            // Workers attest every 5 s; anything tighter would reap live tasks.
            return Err(ConfigError {
                var: "LEASE_STALE_AFTER",
                reason: "must be at least 11s".into(),
            });
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.role, Role::All);
        assert_eq!(c.listen_addr.port(), 8080);
        assert_eq!(c.broker_listen_addr.port(), 9090);
        assert_eq!(c.shutdown_drain, Duration::from_secs(45));
        assert_eq!(c.drainers, 2);
    }

    #[test]
    fn malformed_values_name_the_variable() {
        for (k, v) in [
            ("ROLE", "worker"),
            ("LISTEN_ADDR", "eighty"),
            ("RETRY_BASE", "2 days"),
            ("DB_MAX_CONNECTIONS", "x"),
        ] {
            let e = cfg(&[(k, v)]).unwrap_err();
            assert_eq!(e.var, k);
            assert!(e.to_string().contains(k));
        }
    }

    #[test]
    fn bare_port_binds_all_interfaces() {
        let c = cfg(&[("LISTEN_ADDR", ":18080"), ("ROLE", "broker")]).unwrap();
        assert_eq!(c.listen_addr.to_string(), "0.0.0.0:18080");
        assert!(c.role.broker() && !c.role.control());
    }
}
