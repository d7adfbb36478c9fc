//! `WorkerConfig`: the worker's typed configuration, parsed once from the environment.
//!
//! A malformed value is an error naming the variable, never a silent default. `BROKER_ADDR`
//! may list several brokers; the runtime dials them in order and fails over (see
//! `runtime::failover`). The broker's credentials (token, CA, client certificate) are named
//! here by value or file; the files are read when a connection is made (see
//! `runtime::dial`), so a rotated token or certificate is picked up at the next reconnect
//! without a restart.

use converge_proto::{
    duration::parse_duration,
    wire::{
        self, COMPRESSION_VAR, MAX_MESSAGE_BYTES_CEILING, MAX_MESSAGE_BYTES_FLOOR,
        MAX_MESSAGE_BYTES_VAR,
    },
};
use std::{fmt, path::PathBuf, time::Duration};

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
/// The longest wait between reconnect (or config-prime) attempts, jitter included, and the
/// most [`WorkerConfig::reconnect_max`] may be: a broker that comes back, or another broker
/// of the list, is found within seconds rather than after a long sleep.
pub const RECONNECT_CAP: Duration = Duration::from_secs(5);
/// Default reconnect (and config-prime) backoff ceiling: [`RECONNECT_CAP`].
pub const DEFAULT_RECONNECT_MAX: Duration = RECONNECT_CAP;

/// Whether the worker compresses the messages it sends (`GRPC_COMPRESSION`). The broker
/// answers in kind: a gzip worker gets gzip frames back, a plain one plain frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Compression {
    /// Plain frames (`none`, the default): cheapest on a local network.
    #[default]
    None,
    /// gzip both ways (`gzip`): for large compose results or rollup pages over a slow link.
    Gzip,
}

/// Where the worker's bearer token comes from. Its `Debug` never shows a token.
#[derive(Clone, PartialEq, Eq)]
pub enum WorkerToken {
    /// The token itself (`WORKER_TOKEN`).
    Value(String),
    /// A file holding it, whitespace-trimmed and re-read at every (re)connect so a rotated
    /// token is picked up (`WORKER_TOKEN_FILE`).
    File(PathBuf),
}

impl fmt::Debug for WorkerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Value(_) => f.write_str("Value(<redacted>)"),
            Self::File(p) => f.debug_tuple("File").field(p).finish(),
        }
    }
}

impl WorkerToken {
    /// The variable this token is read from, for error messages.
    pub(crate) fn var(&self) -> &'static str {
        match self {
            Self::Value(_) => "WORKER_TOKEN",
            Self::File(_) => "WORKER_TOKEN_FILE",
        }
    }

    /// The current token: the value, or the file's contents trimmed. Errors name the
    /// variable and never carry the token.
    pub(crate) fn read(&self) -> Result<String, ConfigError> {
        let token = match self {
            Self::Value(v) => v.trim().to_string(),
            Self::File(p) => std::fs::read_to_string(p)
                .map_err(|e| {
                    ConfigError::invalid(
                        "WORKER_TOKEN_FILE",
                        p.display(),
                        format!("cannot read it: {e}"),
                    )
                })?
                .trim()
                .to_string(),
        };
        if token.is_empty() {
            return Err(ConfigError::InvalidSecret {
                var: self.var().into(),
                reason: "the token is empty".into(),
            });
        }
        // It travels as an HTTP/2 header value: visible ASCII only (no spaces inside).
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ConfigError::InvalidSecret {
                var: self.var().into(),
                reason: "the token may hold only visible ASCII characters".into(),
            });
        }
        Ok(token)
    }
}

/// How a worker connects and how much work it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// The brokers (`BROKER_ADDR`, comma-separated), dialled in order: the worker moves on to
    /// the next on a connect failure and whenever a stream ends, wrapping around. Each is
    /// `https://host:port` (TLS, server name = that entry's host) or `http://host:port`
    /// (plaintext h2c; `BROKER_ADDR` also takes a bare `host:port`); TLS and plaintext
    /// entries cannot be mixed. A host name with several DNS records is tried record by
    /// record at each connect (hyper's connector).
    pub broker_addrs: Vec<String>,
    /// The bearer token sent as `authorization: Bearer <token>` on WorkStream and
    /// GetProviderConfig (`WORKER_TOKEN` or `WORKER_TOKEN_FILE`; default none).
    pub token: Option<WorkerToken>,
    /// PEM roots trusted for an `https://` broker (`BROKER_CA_FILE`); without it the
    /// webpki (Mozilla) roots. Re-read at every connect.
    pub broker_ca_file: Option<PathBuf>,
    /// PEM client certificate chain for mutual TLS (`WORKER_CERT_FILE`); needs `key_file`.
    /// Re-read at every connect.
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file` (`WORKER_KEY_FILE`). Re-read at every connect.
    pub key_file: Option<PathBuf>,
    /// Most tasks run at once (`WORKER_MAX_PARALLEL`, default 16).
    pub max_parallel: usize,
    /// How long shutdown waits for in-flight work (`WORKER_DRAIN_TIMEOUT`, default 50 s).
    pub drain_timeout: Duration,
    /// Serve only these kinds of the registry (`WORKER_KINDS`, default all).
    pub kinds: Option<Vec<String>>,
    /// Advisory display name (`WORKER_NAME`, default `<hostname>-<pid>`).
    pub worker_name: String,
    /// Largest message sent or accepted, decompressed (`GRPC_MAX_MESSAGE_BYTES`, 4 MiB to
    /// 512 MiB, default 64 MiB). Raise it together with the broker's for compose results
    /// past 64 MiB (a 1,000,000-child bill of materials is about 280 MB).
    pub max_message_bytes: usize,
    /// Whether sent messages are gzipped (`GRPC_COMPRESSION`: `gzip` or `none`, default
    /// none).
    pub compression: Compression,
    /// Interval of the coalesced heartbeat of running tasks (5 s).
    pub heartbeat_every: Duration,
    /// Interval of the `Provider::ready` poll (2 s).
    pub readiness_poll: Duration,
    /// First reconnect backoff (1 s); it doubles after each failed round of the broker
    /// list up to `reconnect_max`, and every wait is jittered ±25 %.
    pub reconnect_min: Duration,
    /// Reconnect backoff ceiling (5 s); at most [`RECONNECT_CAP`], which no jittered wait
    /// exceeds either.
    pub reconnect_max: Duration,
}

impl WorkerConfig {
    /// A config with every default and one broker address (push more onto
    /// [`WorkerConfig::broker_addrs`] for failover).
    pub fn new(broker_addr: impl Into<String>) -> Self {
        Self::with_defaults(vec![broker_addr.into()])
    }

    fn with_defaults(broker_addrs: Vec<String>) -> Self {
        Self {
            broker_addrs,
            token: None,
            broker_ca_file: None,
            cert_file: None,
            key_file: None,
            max_parallel: DEFAULT_MAX_PARALLEL,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            kinds: None,
            worker_name: default_worker_name(),
            max_message_bytes: wire::DEFAULT_MAX_MESSAGE_BYTES,
            compression: Compression::None,
            heartbeat_every: DEFAULT_HEARTBEAT_EVERY,
            readiness_poll: DEFAULT_READINESS_POLL,
            reconnect_min: DEFAULT_RECONNECT_MIN,
            reconnect_max: DEFAULT_RECONNECT_MAX,
        }
    }

    /// Reads `BROKER_ADDR` (required: one broker or a comma-separated list of them, all TLS or
    /// all plaintext), `WORKER_TOKEN` or `WORKER_TOKEN_FILE`,
    /// `BROKER_CA_FILE`, `WORKER_CERT_FILE` + `WORKER_KEY_FILE`, `WORKER_MAX_PARALLEL`,
    /// `WORKER_DRAIN_TIMEOUT`, `WORKER_KINDS`, `WORKER_NAME`, `GRPC_MAX_MESSAGE_BYTES` and
    /// `GRPC_COMPRESSION` from the process environment.
    ///
    /// Both token variables, one of the client certificate pair without the other, or TLS
    /// files with a non-`https://` address are errors naming the variables. The files
    /// themselves are read (and their errors reported) when the worker starts.
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
        let mut cfg = Self::with_defaults(parse_broker_addrs("BROKER_ADDR", &broker_addr)?);
        cfg.token = match (get("WORKER_TOKEN")?, get("WORKER_TOKEN_FILE")?) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::Conflict {
                    var: "WORKER_TOKEN".into(),
                    message: "WORKER_TOKEN and WORKER_TOKEN_FILE are both set: set only one".into(),
                });
            }
            (Some(v), None) => Some(WorkerToken::Value(v.trim().to_string())),
            (None, Some(p)) => Some(WorkerToken::File(p.trim().into())),
            (None, None) => None,
        };
        let path = |var: &str| -> Result<Option<PathBuf>, ConfigError> {
            Ok(get(var)?.map(|p| PathBuf::from(p.trim())))
        };
        cfg.broker_ca_file = path("BROKER_CA_FILE")?;
        cfg.cert_file = path("WORKER_CERT_FILE")?;
        cfg.key_file = path("WORKER_KEY_FILE")?;
        cfg.check_tls_vars((
            "BROKER_ADDR",
            "BROKER_CA_FILE",
            "WORKER_CERT_FILE",
            "WORKER_KEY_FILE",
        ))?;
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
        if let Some(v) = get(MAX_MESSAGE_BYTES_VAR)? {
            cfg.max_message_bytes = wire::parse_max_message_bytes(&v)
                .map_err(|reason| ConfigError::invalid(MAX_MESSAGE_BYTES_VAR, &v, reason))?;
        }
        if let Some(v) = get(COMPRESSION_VAR)? {
            cfg.compression = match wire::parse_compression(&v) {
                Ok(true) => Compression::Gzip,
                Ok(false) => Compression::None,
                Err(reason) => return Err(ConfigError::invalid(COMPRESSION_VAR, &v, reason)),
            };
        }
        Ok(cfg)
    }

    /// Whether the brokers are dialled over TLS (the list is all `https://` or all
    /// plaintext; `validate` refuses a mix).
    pub(crate) fn is_tls(&self) -> bool {
        self.broker_addrs
            .first()
            .is_some_and(|a| a.starts_with("https://"))
    }

    /// The certificate pair must be complete, and TLS files need an `https://` address
    /// (a CA file beside a plaintext address would silently protect nothing). `names` are
    /// how the address and the three files are called in errors.
    fn check_tls_vars(&self, names: (&str, &str, &str, &str)) -> Result<(), ConfigError> {
        let (addr, ca, cert, key) = names;
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => {
                return Err(ConfigError::Conflict {
                    var: key.into(),
                    message: format!("{cert} is set without {key}: mutual TLS needs both"),
                });
            }
            (None, Some(_)) => {
                return Err(ConfigError::Conflict {
                    var: cert.into(),
                    message: format!("{key} is set without {cert}: mutual TLS needs both"),
                });
            }
            _ => {}
        }
        if !self.is_tls() {
            let set = [
                (ca, self.broker_ca_file.is_some()),
                (cert, self.cert_file.is_some()),
            ];
            if let Some((var, _)) = set.iter().find(|(_, is_set)| *is_set) {
                return Err(ConfigError::Conflict {
                    var: (*var).into(),
                    message: format!(
                        "{var} is set but {addr}={:?} is plaintext: TLS files need https://host:port brokers",
                        self.broker_addrs.join(",")
                    ),
                });
            }
        }
        Ok(())
    }

    /// Checks the values `run_worker` relies on (positive intervals, a usable address,
    /// consistent TLS settings...).
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.broker_addrs.is_empty() {
            return Err(ConfigError::invalid(
                "broker_addrs",
                "[]",
                "needs at least one broker address",
            ));
        }
        let shown = self.broker_addrs.join(",");
        let n = self.broker_addrs.len();
        for (i, addr) in self.broker_addrs.iter().enumerate() {
            check_broker_addr(addr)
                .map_err(|reason| entry_error("broker_addrs", &shown, (i, n, addr), reason))?;
        }
        check_one_scheme("broker_addrs", &shown, &self.broker_addrs)?;
        self.check_tls_vars(("broker_addrs", "broker_ca_file", "cert_file", "key_file"))?;
        if self.max_parallel == 0 || self.max_parallel > MAX_PARALLEL_LIMIT {
            return Err(ConfigError::invalid(
                "max_parallel",
                self.max_parallel,
                format!("must be between 1 and {MAX_PARALLEL_LIMIT}"),
            ));
        }
        if !(MAX_MESSAGE_BYTES_FLOOR..=MAX_MESSAGE_BYTES_CEILING).contains(&self.max_message_bytes)
        {
            return Err(ConfigError::invalid(
                "max_message_bytes",
                self.max_message_bytes,
                format!(
                    "must be between {MAX_MESSAGE_BYTES_FLOOR} and {MAX_MESSAGE_BYTES_CEILING} \
                     (4 MiB to 512 MiB)"
                ),
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
        if self.reconnect_max > RECONNECT_CAP {
            return Err(ConfigError::invalid(
                "reconnect_max",
                format!("{:?}", self.reconnect_max),
                format!(
                    "must not exceed {RECONNECT_CAP:?}, so an outage is noticed to be over within seconds"
                ),
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

/// Parses a comma-separated broker list (`BROKER_ADDR`): a bare `host:port` becomes
/// `http://host:port` (plaintext h2c, as every SDK reads it). An empty entry is an error
/// rather than skipped (`a:1,,b:1` usually means a templated address came out empty), and
/// TLS and plaintext entries cannot be mixed.
fn parse_broker_addrs(var: &str, raw: &str) -> Result<Vec<String>, ConfigError> {
    let raw = raw.trim();
    let entries: Vec<&str> = raw.split(',').map(str::trim).collect();
    let n = entries.len();
    let mut addrs = Vec::with_capacity(n);
    for (i, entry) in entries.into_iter().enumerate() {
        if entry.is_empty() {
            return Err(entry_error(
                var,
                raw,
                (i, n, entry),
                "is empty: separate broker addresses with single commas".into(),
            ));
        }
        let addr = if entry.contains("://") {
            entry.to_string()
        } else {
            format!("http://{entry}")
        };
        check_broker_addr(&addr).map_err(|reason| entry_error(var, raw, (i, n, entry), reason))?;
        addrs.push(addr);
    }
    check_one_scheme(var, raw, &addrs)?;
    Ok(addrs)
}

/// An invalid list entry `(index, list length, entry)`, numbered and quoted when the list
/// has more than one.
fn entry_error(var: &str, raw: &str, at: (usize, usize, &str), reason: String) -> ConfigError {
    let (i, n, entry) = at;
    let reason = match (n, entry.is_empty()) {
        (1, _) => format!("the address {reason}"),
        (_, true) => format!("entry {} of {n} {reason}", i + 1),
        (_, false) => format!("entry {} of {n} ({entry:?}) {reason}", i + 1),
    };
    ConfigError::invalid(var, raw, reason)
}

/// One set of TLS files and one token policy serve the whole list, so a list mixing TLS and
/// plaintext brokers is a mistake (it would also silently downgrade after a failover).
fn check_one_scheme(var: &str, shown: &str, addrs: &[String]) -> Result<(), ConfigError> {
    let tls = addrs.iter().filter(|a| a.starts_with("https://")).count();
    if tls != 0 && tls != addrs.len() {
        return Err(ConfigError::invalid(
            var,
            shown,
            "mixes https:// (TLS) and plaintext (http:// or bare host:port) brokers: use one scheme for every entry",
        ));
    }
    Ok(())
}

/// Why `addr` (with its scheme) cannot be dialled, if it cannot.
fn check_broker_addr(addr: &str) -> Result<(), String> {
    let Some(rest) = addr
        .strip_prefix("http://")
        .or_else(|| addr.strip_prefix("https://"))
    else {
        return Err(
            "is not host:port, an http:// URL (h2c) or an https:// URL (TLS), e.g. 127.0.0.1:9090"
                .into(),
        );
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err("is missing its host".into());
    }
    tonic::transport::Endpoint::from_shared(addr.to_string())
        .map_err(|e| format!("is not a usable URL: {e}"))?;
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

    #[test]
    fn token_debug_is_redacted() {
        let t = WorkerToken::Value("s3cr3t-token".into());
        assert_eq!(format!("{t:?}"), "Value(<redacted>)");
        let mut cfg = WorkerConfig::new("https://b:1");
        cfg.token = Some(t);
        let dbg = format!("{cfg:?} {cfg:#?}");
        assert!(!dbg.contains("s3cr3t"), "{dbg}");
        assert!(dbg.contains("<redacted>"), "{dbg}");
        let f = WorkerToken::File("/run/secrets/token".into());
        assert_eq!(format!("{f:?}"), "File(\"/run/secrets/token\")");
    }

    #[test]
    fn token_read_trims_and_rejects_without_leaking() {
        assert_eq!(
            WorkerToken::Value(" abc.DEF-123 \n".into()).read().unwrap(),
            "abc.DEF-123"
        );
        for (bad, reason) in [
            ("   ", "empty"),
            ("two words", "visible ASCII"),
            ("tök", "visible ASCII"),
        ] {
            let e = WorkerToken::Value(bad.into()).read().unwrap_err();
            assert_eq!(e.var(), "WORKER_TOKEN");
            let msg = e.to_string();
            assert!(msg.contains(reason), "{msg}");
            assert!(
                bad.trim().is_empty() || !msg.contains(bad.trim()),
                "leaks the token: {msg}"
            );
        }
        let e = WorkerToken::File("/nonexistent/token".into())
            .read()
            .unwrap_err();
        assert_eq!(e.var(), "WORKER_TOKEN_FILE");
        assert!(e.to_string().contains("/nonexistent/token"), "{e}");
    }
}
