//! The `converge` process configuration: read once from the environment into a typed struct.
//! A malformed value is a loud boot error naming the variable, never a silent default.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use converge_auth::{ratelimit::RateSpec, tls::TlsFiles};
use converge_engine::{
    db::{iam, signin},
    sealing,
};
use converge_proto::{duration::parse_duration, wire};

/// Which duties this process runs: `ROLE` spells it as `cluster_members.role` records it
/// (one word list, `converge_engine::words`).
pub use converge_engine::words::MemberRole as Role;

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
    /// DATABASE_READ_URL: a streaming replica of DATABASE_URL for the API's lists, summaries,
    /// graphs, event feeds and cluster view (`app::reads`); unset: every read on the primary.
    pub database_read_url: Option<String>,
    /// READ_MAX_LAG: a replica behind the primary by more than this is bypassed (default 5 s,
    /// 100ms..=1h).
    pub read_max_lag: Duration,
    /// LISTEN_ADDR: HTTP API (+ UI).
    pub listen_addr: SocketAddr,
    /// BROKER_LISTEN_ADDR: WorkerService gRPC.
    pub broker_listen_addr: SocketAddr,
    /// HEALTH_ADDR: probes of broker-only pods.
    pub health_addr: SocketAddr,
    /// DATABASE_PASSWORD_COMMAND: a shell command printing the database password, run at
    /// boot and kept fresh for every new connection (`converge_engine::db::signin`).
    pub database_password_command: Option<String>,
    /// DB_IAM_AUTH=true: the password of every new connection is an RDS/Aurora IAM token
    /// minted in process from the AWS credential chain (`converge_engine::db::iam`);
    /// DB_IAM_REGION overrides the chain's region.
    pub database_iam_auth: bool,
    /// DB_IAM_REGION: the region IAM tokens are signed for (default: the AWS chain's).
    pub database_iam_region: Option<String>,
    /// SECRETS_KEY_FILE, SECRETS_KEY_COMMAND and SECRETS_OLD_KEY_FILES: where the keys that
    /// seal provider configs' writeOnly values come from (`converge_engine::sealing`).
    pub secrets: sealing::KeySettings,
    /// DATABASE_MAX_CONN_LIFETIME: each pooled connection lives 75-100 % of this (default
    /// 30 min, 1s..=24h), so a rotated credential is in use without a restart.
    pub database_max_conn_lifetime: Duration,
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
    /// MEMBER_DEAD_AFTER: how long a process's `cluster_members` row may go unstamped
    /// before the others release its leases (default 6 s, 3s..=10m). Longer keeps a
    /// restarting broker's leases for its workers to resume with their finished results;
    /// shorter lets other brokers re-run its tasks sooner.
    pub member_dead_after: Duration,
    /// MEMBER_GC_AFTER: how long the row of a process that stopped stamping stays listed
    /// (NotReady in the cluster view) before it is removed (default 5 min; longer than
    /// MEMBER_DEAD_AFTER, at most 7 days). Routing ignores it after MEMBER_DEAD_AFTER.
    pub member_gc_after: Duration,
    /// PLAN_DRY_RUN_TIMEOUT: how long `POST /api/v1/resources:plan` waits for the dry runs of
    /// composers that run on a worker (default 10 s, 100ms..=60s); past it the plan answers
    /// without their children, with a warning.
    pub plan_dry_run_timeout: Duration,
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
    /// MAX_BUNDLE_BYTES: largest provider-config bundle (`data`, decoded), 1 KiB..=256 MiB,
    /// default 10 MiB. WASM components built from JavaScript or Python carry their language's
    /// engine (12-20 MB); their base64 upload needs a MAX_BODY_BYTES of 4/3 of the bundle.
    pub max_bundle_bytes: usize,
    /// MAX_WATCHERS: `?watch=true` streams open at once (503 beyond).
    pub max_watchers: usize,
    /// MAX_KINDS_PER_STREAM: most kinds one worker stream's Subscribe (or one
    /// GetProviderConfig) may name, 1..=100000, default 1,000 (INVALID_ARGUMENT beyond).
    pub max_kinds_per_stream: usize,
    /// GRPC_MAX_MESSAGE_BYTES: largest WorkerService message the broker accepts or sends
    /// (decompressed), 4 MiB..=512 MiB, default 64 MiB (`converge_proto::wire`).
    pub grpc_max_message_bytes: usize,
    /// MAX_CONNECTIONS: connections open at once over every listener (default: the
    /// descriptor limit less a reserve, see `converge_auth::listen::Limits::from_nofile`).
    pub max_connections: Option<usize>,
    /// MAX_CONNECTIONS_PER_PEER: connections open at once from one IP (default: half the
    /// budget).
    pub max_connections_per_peer: Option<usize>,
    /// IDLE_TIMEOUT: a connection with no byte either way for this long is closed.
    pub idle_timeout: Duration,
    /// RATE_LIMIT_PER_PRINCIPAL: requests to `/api/v1` each authenticated principal may
    /// make (`50/s,burst=100`, see `converge_auth::ratelimit`); unset: no limit.
    pub rate_limit_per_principal: Option<RateSpec>,
    /// RATE_LIMIT_PER_ADDRESS: HTTP requests each client address may make (probes and
    /// `/metrics` exempt), and WorkerService calls with bad credentials; unset: no limit.
    pub rate_limit_per_address: Option<RateSpec>,
    /// How callers are authenticated (AUTH_FILE / AUTH).
    pub auth: AuthMode,
    /// OIDC_ISSUER and the other OIDC_* settings: people sign in through an OIDC issuer
    /// (`converge_auth::oidc`); needs AUTH_FILE. `None`: unset.
    pub oidc: Option<converge_auth::oidc::Settings>,
    /// TLS_CERT_FILE + TLS_KEY_FILE (+ TLS_CLIENT_CA_FILE): serve TLS on every listener.
    pub tls: Option<TlsFiles>,
    /// Print the where-is-everything banner once every listener is bound (`converge dev`
    /// sets it; a server's logs say the same in fields).
    pub banner: bool,
}

/// How callers are authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthMode {
    /// AUTH_FILE: principals with tokens or SPIFFE IDs; every door checks them.
    File(PathBuf),
    /// Neither AUTH_FILE nor AUTH: open, allowed on loopback listeners only.
    Loopback,
    /// AUTH=none: open on any listener, by explicit choice (warned at every start).
    NoneExplicit,
}

impl Config {
    /// How the process signs in to PostgreSQL (DATABASE_PASSWORD_COMMAND or DB_IAM_AUTH,
    /// DATABASE_MAX_CONN_LIFETIME).
    pub fn signin(&self) -> signin::SignIn {
        let password = if self.database_iam_auth {
            Some(signin::PasswordSource::Iam {
                region: self.database_iam_region.clone(),
            })
        } else {
            self.database_password_command
                .clone()
                .map(|c| signin::PasswordSource::Command(signin::PasswordCommand::new(c)))
        };
        signin::SignIn {
            password,
            max_conn_lifetime: self.database_max_conn_lifetime,
        }
    }

    /// The connection limits for a process whose descriptor limit is `nofile`: the defaults
    /// of `converge_auth::listen::Limits::from_nofile`, with MAX_CONNECTIONS,
    /// MAX_CONNECTIONS_PER_PEER and IDLE_TIMEOUT applied.
    pub fn connection_limits(&self, nofile: u64) -> converge_auth::listen::Limits {
        let mut l = converge_auth::listen::Limits::from_nofile(nofile);
        if let Some(max) = self.max_connections {
            l.max = max;
            l.max_per_peer = (max / 2).max(8);
        }
        if let Some(p) = self.max_connections_per_peer {
            l.max_per_peer = p;
        }
        l.idle_timeout = self.idle_timeout;
        l
    }

    /// The listeners that carry the API or the WorkerService (probes and metrics are open
    /// by design and do not count).
    pub fn guarded_listeners(&self) -> Vec<(&'static str, SocketAddr)> {
        let mut out = Vec::new();
        if self.role.control() {
            out.push(("LISTEN_ADDR", self.listen_addr));
        }
        if self.role.broker() {
            out.push(("BROKER_LISTEN_ADDR", self.broker_listen_addr));
        }
        out
    }

    /// `converge dev`'s defaults: a listener whose variable `get` does not set binds
    /// 127.0.0.1, so a laptop demo is never an open door to the network it sits on.
    pub fn dev_loopback(&mut self, get: impl Fn(&str) -> Option<String>) {
        let lo = std::net::Ipv4Addr::LOCALHOST.into();
        let unset = |var: &str| get(var).is_none_or(|v| v.trim().is_empty());
        for (var, addr) in [
            ("LISTEN_ADDR", &mut self.listen_addr),
            ("BROKER_LISTEN_ADDR", &mut self.broker_listen_addr),
            ("HEALTH_ADDR", &mut self.health_addr),
        ] {
            if unset(var) {
                addr.set_ip(lo);
            }
        }
    }

    /// Refuses an open door that is reachable from another host: without AUTH_FILE, every
    /// guarded listener must be loopback unless AUTH=none says otherwise.
    pub fn check_exposure(&self) -> Result<(), ConfigError> {
        if self.auth != AuthMode::Loopback {
            return Ok(());
        }
        let exposed: Vec<String> = self
            .guarded_listeners()
            .into_iter()
            .filter(|(_, a)| !a.ip().is_loopback())
            .map(|(v, a)| format!("{v}={a}"))
            .collect();
        if exposed.is_empty() {
            return Ok(());
        }
        Err(ConfigError {
            var: "AUTH_FILE",
            reason: format!(
                "is unset and {} reach beyond loopback, where anyone could apply resources and \
                 read every spec: set AUTH_FILE to a principals file \
                 (see `converge token new`), bind to 127.0.0.1, or set AUTH=none to run \
                 open on purpose",
                exposed.join(" and ")
            ),
        })
    }
}

/// The OIDC_* settings (`None` without OIDC_ISSUER; any other OIDC_* without it is an error,
/// since it would silently do nothing).
fn oidc_settings(
    get: &impl Fn(&str) -> Option<String>,
) -> Result<Option<converge_auth::oidc::Settings>, ConfigError> {
    use converge_auth::oidc;
    const VARS: [&str; 9] = [
        "OIDC_AUDIENCE",
        "OIDC_ROLES_CLAIM",
        "OIDC_ROLE_MAP",
        "OIDC_CLIENT_ID",
        "OIDC_SCOPES",
        "OIDC_INSECURE_HTTP",
        "OIDC_CA_FILE",
        "OIDC_JWKS_REFRESH",
        "OIDC_JWKS_COOLDOWN",
    ];
    let val = |var: &str| {
        get(var)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let Some(issuer) = val("OIDC_ISSUER") else {
        if let Some(var) = VARS.into_iter().find(|v| val(v).is_some()) {
            return Err(ConfigError {
                var,
                reason: "is set without OIDC_ISSUER, which it needs".into(),
            });
        }
        return Ok(None);
    };
    let insecure_http = match val("OIDC_INSECURE_HTTP").as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(o) => {
            return Err(ConfigError {
                var: "OIDC_INSECURE_HTTP",
                reason: format!("{o:?} is not true or false"),
            });
        }
    };
    oidc::check_url("OIDC_ISSUER", &issuer, insecure_http).map_err(|reason| ConfigError {
        var: "OIDC_ISSUER",
        reason,
    })?;
    let client_id = val("OIDC_CLIENT_ID");
    let audiences: Vec<String> = val("OIDC_AUDIENCE")
        .or_else(|| client_id.clone())
        .map(|a| {
            a.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    if audiences.is_empty() {
        return Err(ConfigError {
            var: "OIDC_AUDIENCE",
            reason: "is required with OIDC_ISSUER (the `aud` converge's tokens carry; \
                     defaults to OIDC_CLIENT_ID when that is set)"
                .into(),
        });
    }
    let role_map = match val("OIDC_ROLE_MAP") {
        None => Default::default(),
        Some(m) => oidc::parse_role_map(&m).map_err(|reason| ConfigError {
            var: "OIDC_ROLE_MAP",
            reason,
        })?,
    };
    let window = |var: &'static str, default: Duration| -> Result<Duration, ConfigError> {
        let d = match val(var) {
            None => default,
            Some(v) => parse_duration(&v).map_err(|reason| ConfigError { var, reason })?,
        };
        if !(Duration::from_secs(1)..=Duration::from_secs(24 * 3600)).contains(&d) {
            return Err(ConfigError {
                var,
                reason: "must be 1s..=24h".into(),
            });
        }
        Ok(d)
    };
    Ok(Some(oidc::Settings {
        issuer,
        audiences,
        roles_claim: val("OIDC_ROLES_CLAIM").unwrap_or_else(|| oidc::DEFAULT_ROLES_CLAIM.into()),
        role_map,
        client_id,
        scopes: val("OIDC_SCOPES").unwrap_or_else(|| oidc::DEFAULT_SCOPES.into()),
        insecure_http,
        ca_file: val("OIDC_CA_FILE").map(PathBuf::from),
        refresh_every: window("OIDC_JWKS_REFRESH", oidc::DEFAULT_REFRESH)?,
        cooldown: window("OIDC_JWKS_COOLDOWN", oidc::DEFAULT_COOLDOWN)?,
    }))
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
        let role = read(&get, "ROLE", Role::All, |v| {
            let v = v.trim();
            Role::parse(v).ok_or_else(|| format!("{v:?} is not one of {}", Role::TEXTS.join(", ")))
        })?;
        let dur = |v: &str| parse_duration(v);
        let nonempty = |var: &str| get(var).filter(|v| !v.trim().is_empty());
        let auth = match (nonempty("AUTH_FILE"), nonempty("AUTH")) {
            (Some(f), None) => AuthMode::File(PathBuf::from(f)),
            (None, None) => AuthMode::Loopback,
            (None, Some(a)) if a.trim() == "none" => AuthMode::NoneExplicit,
            (None, Some(a)) => {
                return Err(ConfigError {
                    var: "AUTH",
                    reason: format!(
                        "{a:?}: the only value is none (to run without authentication on purpose); \
                         for tokens set AUTH_FILE"
                    ),
                });
            }
            (Some(_), Some(_)) => {
                return Err(ConfigError {
                    var: "AUTH",
                    reason: "is set together with AUTH_FILE: choose one".into(),
                });
            }
        };
        let tls = match (
            nonempty("TLS_CERT_FILE"),
            nonempty("TLS_KEY_FILE"),
            nonempty("TLS_CLIENT_CA_FILE"),
        ) {
            (Some(cert), Some(key), ca) => Some(TlsFiles {
                cert: cert.into(),
                key: key.into(),
                client_ca: ca.map(PathBuf::from),
            }),
            (None, None, None) => None,
            (Some(_), None, _) => {
                return Err(ConfigError {
                    var: "TLS_KEY_FILE",
                    reason: "is required when TLS_CERT_FILE is set".into(),
                });
            }
            (None, Some(_), _) => {
                return Err(ConfigError {
                    var: "TLS_CERT_FILE",
                    reason: "is required when TLS_KEY_FILE is set".into(),
                });
            }
            (None, None, Some(_)) => {
                return Err(ConfigError {
                    var: "TLS_CLIENT_CA_FILE",
                    reason: "needs TLS_CERT_FILE and TLS_KEY_FILE (client certificates are \
                             verified inside a TLS handshake)"
                        .into(),
                });
            }
        };
        let mut cfg = Config {
            role,
            database_url: get("DATABASE_URL").filter(|v| !v.trim().is_empty()),
            database_read_url: get("DATABASE_READ_URL").filter(|v| !v.trim().is_empty()),
            read_max_lag: read(
                &get,
                "READ_MAX_LAG",
                crate::app::reads::DEFAULT_MAX_LAG,
                dur,
            )?,
            listen_addr: read(&get, "LISTEN_ADDR", addr(":8080").expect("valid"), addr)?,
            broker_listen_addr: read(
                &get,
                "BROKER_LISTEN_ADDR",
                addr(":9090").expect("valid"),
                addr,
            )?,
            health_addr: read(&get, "HEALTH_ADDR", addr(":8081").expect("valid"), addr)?,
            database_password_command: get(signin::PASSWORD_COMMAND_VAR)
                .filter(|v| !v.trim().is_empty()),
            database_iam_auth: read(&get, iam::IAM_AUTH_VAR, false, |v| match v.trim() {
                "true" => Ok(true),
                "false" => Ok(false),
                v => Err(format!("{v:?} is not true or false")),
            })?,
            database_iam_region: get(iam::IAM_REGION_VAR)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()),
            secrets: sealing::KeySettings {
                key_file: get(sealing::KEY_FILE_VAR)
                    .filter(|v| !v.trim().is_empty())
                    .map(PathBuf::from),
                key_command: get(sealing::KEY_COMMAND_VAR).filter(|v| !v.trim().is_empty()),
                old_key_files: get(sealing::OLD_KEY_FILES_VAR)
                    .map(|v| {
                        v.split(',')
                            .map(str::trim)
                            .filter(|p| !p.is_empty())
                            .map(PathBuf::from)
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            database_max_conn_lifetime: read(
                &get,
                signin::MAX_CONN_LIFETIME_VAR,
                signin::DEFAULT_MAX_CONN_LIFETIME,
                dur,
            )?,
            db_max_connections: read(&get, "DB_MAX_CONNECTIONS", 32, num)?,
            shutdown_drain: read(&get, "SHUTDOWN_DRAIN", Duration::from_secs(45), dur)?,
            retry_base: read(&get, "RETRY_BASE", Duration::from_secs(2), dur)?,
            retry_max: read(&get, "RETRY_MAX", Duration::from_secs(300), dur)?,
            reaper_every: read(&get, "REAPER_EVERY", Duration::from_secs(5), dur)?,
            lease_stale_after: read(&get, "LEASE_STALE_AFTER", Duration::from_secs(30), dur)?,
            member_dead_after: read(
                &get,
                "MEMBER_DEAD_AFTER",
                converge_engine::membership::DEAD_AFTER,
                dur,
            )?,
            plan_dry_run_timeout: read(&get, "PLAN_DRY_RUN_TIMEOUT", Duration::from_secs(10), dur)?,
            member_gc_after: read(
                &get,
                "MEMBER_GC_AFTER",
                converge_engine::membership::GC_AFTER,
                dur,
            )?,
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
            max_bundle_bytes: read(&get, "MAX_BUNDLE_BYTES", 10 * 1024 * 1024, num)?,
            max_watchers: read(&get, "MAX_WATCHERS", 256, num)?,
            max_kinds_per_stream: read(&get, "MAX_KINDS_PER_STREAM", 1_000, num)?,
            grpc_max_message_bytes: read(
                &get,
                wire::MAX_MESSAGE_BYTES_VAR,
                wire::DEFAULT_MAX_MESSAGE_BYTES,
                wire::parse_max_message_bytes,
            )?,
            max_connections: read(&get, "MAX_CONNECTIONS", None, |v| num(v).map(Some))?,
            max_connections_per_peer: read(&get, "MAX_CONNECTIONS_PER_PEER", None, |v| {
                num(v).map(Some)
            })?,
            idle_timeout: read(&get, "IDLE_TIMEOUT", Duration::from_secs(60), dur)?,
            rate_limit_per_principal: read(&get, "RATE_LIMIT_PER_PRINCIPAL", None, |v| {
                RateSpec::parse(v).map(Some)
            })?,
            rate_limit_per_address: read(&get, "RATE_LIMIT_PER_ADDRESS", None, |v| {
                RateSpec::parse(v).map(Some)
            })?,
            oidc: oidc_settings(&get)?,
            auth,
            tls,
            banner: false,
        };
        if cfg.oidc.is_some() && !matches!(cfg.auth, AuthMode::File(_)) {
            return Err(ConfigError {
                var: "OIDC_ISSUER",
                reason: "needs AUTH_FILE: OIDC lets people in beside the principals file (the \
                         workers' and the break-glass admin's tokens); an empty list \
                         (`principals: []`) will do"
                    .into(),
            });
        }
        if cfg.database_iam_auth && cfg.database_password_command.is_some() {
            return Err(ConfigError {
                var: iam::IAM_AUTH_VAR,
                reason: format!(
                    "is set together with {}: one source gives the database password, \
                     choose one",
                    signin::PASSWORD_COMMAND_VAR
                ),
            });
        }
        if cfg.database_iam_region.is_some() && !cfg.database_iam_auth {
            return Err(ConfigError {
                var: iam::IAM_REGION_VAR,
                reason: "is only read with DB_IAM_AUTH=true".into(),
            });
        }
        if !(Duration::from_secs(1)..=Duration::from_secs(24 * 3600))
            .contains(&cfg.database_max_conn_lifetime)
        {
            return Err(ConfigError {
                var: signin::MAX_CONN_LIFETIME_VAR,
                reason: "must be 1s..=24h".into(),
            });
        }
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
        if !(1024..=256 << 20).contains(&cfg.max_bundle_bytes) {
            return Err(ConfigError {
                var: "MAX_BUNDLE_BYTES",
                reason: "must be 1024..=268435456 (1 KiB to 256 MiB)".into(),
            });
        }
        if !(1..=100_000).contains(&cfg.max_watchers) {
            return Err(ConfigError {
                var: "MAX_WATCHERS",
                reason: "must be 1..=100000".into(),
            });
        }
        if !(1..=100_000).contains(&cfg.max_kinds_per_stream) {
            return Err(ConfigError {
                var: "MAX_KINDS_PER_STREAM",
                reason: "must be 1..=100000".into(),
            });
        }
        if cfg.max_connections.is_some_and(|n| n < 16) {
            return Err(ConfigError {
                var: "MAX_CONNECTIONS",
                reason: "must be at least 16".into(),
            });
        }
        if cfg.max_connections_per_peer == Some(0) {
            return Err(ConfigError {
                var: "MAX_CONNECTIONS_PER_PEER",
                reason: "must be at least 1".into(),
            });
        }
        if cfg.idle_timeout < Duration::from_secs(10) {
            // The broker pings every 5 s; a live gRPC connection must never look idle.
            return Err(ConfigError {
                var: "IDLE_TIMEOUT",
                reason: "must be at least 10s".into(),
            });
        }
        if !(Duration::from_secs(3)..=Duration::from_secs(600)).contains(&cfg.member_dead_after) {
            // Members stamp every second: under three missed stamps a slow statement would
            // read as a death.
            return Err(ConfigError {
                var: "MEMBER_DEAD_AFTER",
                reason: "must be 3s..=10m".into(),
            });
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(60))
            .contains(&cfg.plan_dry_run_timeout)
        {
            // A request holds its connection while it waits.
            return Err(ConfigError {
                var: "PLAN_DRY_RUN_TIMEOUT",
                reason: "must be 100ms..=60s".into(),
            });
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&cfg.read_max_lag) {
            return Err(ConfigError {
                var: "READ_MAX_LAG",
                reason: "must be 100ms..=1h".into(),
            });
        }
        if get("MEMBER_GC_AFTER").is_none() {
            // The default outlives any liveness window (MEMBER_DEAD_AFTER may be 10 min).
            cfg.member_gc_after = cfg.member_gc_after.max(cfg.member_dead_after * 2);
        }
        if cfg.member_gc_after <= cfg.member_dead_after
            || cfg.member_gc_after > Duration::from_secs(7 * 24 * 3600)
        {
            // A row must outlive the liveness window (it is listed NotReady in between).
            return Err(ConfigError {
                var: "MEMBER_GC_AFTER",
                reason: "must be longer than MEMBER_DEAD_AFTER and at most 7d".into(),
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
    fn oidc_settings_are_checked_and_bad_ones_name_their_variable() {
        let base = [
            ("AUTH_FILE", "/p.yaml"),
            ("OIDC_ISSUER", "https://idp.example/realms/c"),
        ];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut v: Vec<(&str, &str)> = base.to_vec();
            v.extend_from_slice(extra);
            cfg(&v)
        };
        let ok = with(&[("OIDC_CLIENT_ID", "converge-ui")]).unwrap();
        let o = ok.oidc.unwrap();
        assert_eq!(
            o.audiences,
            vec!["converge-ui".to_string()],
            "aud defaults to the client id"
        );
        assert_eq!(
            (o.roles_claim.as_str(), o.scopes.as_str()),
            ("roles", "openid profile email")
        );
        let o = with(&[("OIDC_AUDIENCE", "a, b"), ("OIDC_ROLE_MAP", "ops=admin")])
            .unwrap()
            .oidc
            .unwrap();
        assert_eq!(o.audiences, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(o.role_map.get("ops"), Some(&converge_auth::Role::Admin));
        let var = |r: Result<Config, ConfigError>| r.unwrap_err().var;
        assert_eq!(var(with(&[])), "OIDC_AUDIENCE");
        assert_eq!(
            var(with(&[
                ("OIDC_AUDIENCE", "a"),
                ("OIDC_ROLE_MAP", "ops=root")
            ])),
            "OIDC_ROLE_MAP"
        );
        assert_eq!(
            var(with(&[
                ("OIDC_AUDIENCE", "a"),
                ("OIDC_JWKS_COOLDOWN", "0s")
            ])),
            "OIDC_JWKS_COOLDOWN"
        );
        assert_eq!(
            var(with(&[
                ("OIDC_AUDIENCE", "a"),
                ("OIDC_INSECURE_HTTP", "yes")
            ])),
            "OIDC_INSECURE_HTTP"
        );
        assert_eq!(
            var(cfg(&[
                ("AUTH_FILE", "/p"),
                ("OIDC_ISSUER", "not a url"),
                ("OIDC_AUDIENCE", "a")
            ])),
            "OIDC_ISSUER"
        );
        assert_eq!(
            var(cfg(&[
                ("AUTH_FILE", "/p"),
                ("OIDC_ISSUER", "http://idp.example"),
                ("OIDC_AUDIENCE", "a")
            ])),
            "OIDC_ISSUER"
        );
        assert_eq!(
            var(cfg(&[
                ("OIDC_ISSUER", "https://idp.example"),
                ("OIDC_AUDIENCE", "a")
            ])),
            "OIDC_ISSUER",
            "needs AUTH_FILE"
        );
        assert_eq!(
            var(cfg(&[("OIDC_AUDIENCE", "a")])),
            "OIDC_AUDIENCE",
            "set without OIDC_ISSUER"
        );
        assert!(cfg(&[]).unwrap().oidc.is_none());
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
    fn connection_limits_follow_the_descriptor_limit_unless_set() {
        let l = cfg(&[]).unwrap().connection_limits(1024);
        assert_eq!((l.max, l.max_per_peer), (768, 384));
        assert_eq!(l.idle_timeout, Duration::from_secs(60));
        let l = cfg(&[("MAX_CONNECTIONS", "100"), ("IDLE_TIMEOUT", "2m")])
            .unwrap()
            .connection_limits(1024);
        assert_eq!((l.max, l.max_per_peer), (100, 50));
        assert_eq!(l.idle_timeout, Duration::from_secs(120));
        let l = cfg(&[("MAX_CONNECTIONS_PER_PEER", "7")])
            .unwrap()
            .connection_limits(1024);
        assert_eq!(l.max_per_peer, 7);
        for (k, v) in [
            ("MAX_CONNECTIONS", "15"),
            ("MAX_CONNECTIONS_PER_PEER", "0"),
            ("IDLE_TIMEOUT", "5s"),
        ] {
            assert_eq!(cfg(&[(k, v)]).unwrap_err().var, k);
        }
    }

    #[test]
    fn an_open_door_beyond_loopback_is_refused() {
        let e = cfg(&[]).unwrap().check_exposure().unwrap_err().to_string();
        assert!(e.contains("AUTH_FILE") && e.contains("AUTH=none"), "{e}");
        assert!(e.contains("LISTEN_ADDR=0.0.0.0:8080"), "{e}");
        let local = [
            ("LISTEN_ADDR", "127.0.0.1:8080"),
            ("BROKER_LISTEN_ADDR", "127.0.0.1:9090"),
        ];
        cfg(&local).unwrap().check_exposure().unwrap();
        cfg(&[("AUTH", "none")]).unwrap().check_exposure().unwrap();
        cfg(&[("AUTH_FILE", "/x")])
            .unwrap()
            .check_exposure()
            .unwrap();
        // A broker-only pod's probes (HEALTH_ADDR) are open by design.
        let broker = [("ROLE", "broker"), ("BROKER_LISTEN_ADDR", "127.0.0.1:9090")];
        cfg(&broker).unwrap().check_exposure().unwrap();
        assert_eq!(cfg(&[("AUTH", "off")]).unwrap_err().var, "AUTH");
        assert_eq!(
            cfg(&[("AUTH", "none"), ("AUTH_FILE", "/x")])
                .unwrap_err()
                .var,
            "AUTH"
        );
    }

    #[test]
    fn dev_binds_loopback_unless_told_otherwise() {
        let mut c = cfg(&[]).unwrap();
        c.dev_loopback(|_| None);
        assert_eq!(c.listen_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(c.broker_listen_addr.to_string(), "127.0.0.1:9090");
        assert_eq!(c.health_addr.to_string(), "127.0.0.1:8081");
        c.check_exposure().unwrap();
        // An address the user named is kept, and then the exposure rule applies to it.
        let set = [("LISTEN_ADDR", ":18080")];
        let mut c = cfg(&set).unwrap();
        c.dev_loopback(|v| (v == "LISTEN_ADDR").then(|| ":18080".to_string()));
        assert_eq!(c.listen_addr.to_string(), "0.0.0.0:18080");
        assert_eq!(c.broker_listen_addr.to_string(), "127.0.0.1:9090");
        assert_eq!(c.check_exposure().unwrap_err().var, "AUTH_FILE");
    }

    #[test]
    fn tls_files_come_in_pairs() {
        assert_eq!(
            cfg(&[("TLS_CERT_FILE", "/c")]).unwrap_err().var,
            "TLS_KEY_FILE"
        );
        assert_eq!(
            cfg(&[("TLS_KEY_FILE", "/k")]).unwrap_err().var,
            "TLS_CERT_FILE"
        );
        assert_eq!(
            cfg(&[("TLS_CLIENT_CA_FILE", "/ca")]).unwrap_err().var,
            "TLS_CLIENT_CA_FILE"
        );
        let t = cfg(&[("TLS_CERT_FILE", "/c"), ("TLS_KEY_FILE", "/k")])
            .unwrap()
            .tls
            .unwrap();
        assert!(t.client_ca.is_none());
    }

    #[test]
    fn member_dead_after_is_bounded() {
        assert_eq!(cfg(&[]).unwrap().member_dead_after, Duration::from_secs(6));
        let c = cfg(&[("MEMBER_DEAD_AFTER", "60s")]).unwrap();
        assert_eq!(c.member_dead_after, Duration::from_secs(60));
        for v in ["2s", "11m", "soon"] {
            assert_eq!(
                cfg(&[("MEMBER_DEAD_AFTER", v)]).unwrap_err().var,
                "MEMBER_DEAD_AFTER"
            );
        }
    }

    #[test]
    fn plan_dry_run_timeout_is_bounded() {
        assert_eq!(
            cfg(&[]).unwrap().plan_dry_run_timeout,
            Duration::from_secs(10)
        );
        let c = cfg(&[("PLAN_DRY_RUN_TIMEOUT", "2s")]).unwrap();
        assert_eq!(c.plan_dry_run_timeout, Duration::from_secs(2));
        for v in ["50ms", "61s", "soon"] {
            assert_eq!(
                cfg(&[("PLAN_DRY_RUN_TIMEOUT", v)]).unwrap_err().var,
                "PLAN_DRY_RUN_TIMEOUT"
            );
        }
    }

    #[test]
    fn member_gc_after_outlives_the_liveness_window() {
        assert_eq!(cfg(&[]).unwrap().member_gc_after, Duration::from_secs(300));
        let c = cfg(&[("MEMBER_GC_AFTER", "30s"), ("MEMBER_DEAD_AFTER", "3s")]).unwrap();
        assert_eq!(c.member_gc_after, Duration::from_secs(30));
        let c = cfg(&[("MEMBER_DEAD_AFTER", "10m")]).unwrap();
        assert_eq!(c.member_gc_after, Duration::from_secs(1200));
        for v in ["6s", "5s", "8d"] {
            assert_eq!(
                cfg(&[("MEMBER_GC_AFTER", v)]).unwrap_err().var,
                "MEMBER_GC_AFTER"
            );
        }
    }

    #[test]
    fn the_read_replica_is_optional_and_its_lag_bounded() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.database_read_url, None);
        assert_eq!(c.read_max_lag, Duration::from_secs(5));
        let c = cfg(&[
            ("DATABASE_READ_URL", "postgres://r/x"),
            ("READ_MAX_LAG", "1s"),
        ])
        .unwrap();
        assert_eq!(c.database_read_url.as_deref(), Some("postgres://r/x"));
        assert_eq!(c.read_max_lag, Duration::from_secs(1));
        for v in ["0s", "2h", "soon"] {
            assert_eq!(cfg(&[("READ_MAX_LAG", v)]).unwrap_err().var, "READ_MAX_LAG");
        }
    }

    #[test]
    fn kinds_per_stream_is_bounded() {
        assert_eq!(cfg(&[]).unwrap().max_kinds_per_stream, 1_000);
        let c = cfg(&[("MAX_KINDS_PER_STREAM", "5000")]).unwrap();
        assert_eq!(c.max_kinds_per_stream, 5_000);
        for v in ["0", "100001", "many"] {
            assert_eq!(
                cfg(&[("MAX_KINDS_PER_STREAM", v)]).unwrap_err().var,
                "MAX_KINDS_PER_STREAM"
            );
        }
    }

    #[test]
    fn bundle_limit_is_bounded() {
        assert_eq!(cfg(&[]).unwrap().max_bundle_bytes, 10 << 20);
        let c = cfg(&[("MAX_BUNDLE_BYTES", "33554432")]).unwrap();
        assert_eq!(c.max_bundle_bytes, 32 << 20);
        for v in ["1023", "268435457", "32MiB"] {
            assert_eq!(
                cfg(&[("MAX_BUNDLE_BYTES", v)]).unwrap_err().var,
                "MAX_BUNDLE_BYTES"
            );
        }
    }

    #[test]
    fn grpc_message_limit_is_bounded() {
        assert_eq!(cfg(&[]).unwrap().grpc_max_message_bytes, 64 << 20);
        let c = cfg(&[("GRPC_MAX_MESSAGE_BYTES", "536870912")]).unwrap();
        assert_eq!(c.grpc_max_message_bytes, 512 << 20);
        for v in ["536870913", "1024", "64MiB"] {
            let e = cfg(&[("GRPC_MAX_MESSAGE_BYTES", v)]).unwrap_err();
            assert_eq!(e.var, "GRPC_MAX_MESSAGE_BYTES");
            assert!(e.to_string().contains("GRPC_MAX_MESSAGE_BYTES"), "{e}");
        }
    }

    #[test]
    fn rate_limits_are_off_unless_set_and_parsed_at_boot() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.rate_limit_per_principal, None);
        assert_eq!(c.rate_limit_per_address, None);
        let c = cfg(&[
            ("RATE_LIMIT_PER_PRINCIPAL", "50/s,burst=100"),
            ("RATE_LIMIT_PER_ADDRESS", "600/m"),
        ])
        .unwrap();
        assert_eq!(c.rate_limit_per_principal.unwrap().burst.get(), 100);
        assert_eq!(
            c.rate_limit_per_address.unwrap().per,
            Duration::from_secs(60)
        );
        for var in ["RATE_LIMIT_PER_PRINCIPAL", "RATE_LIMIT_PER_ADDRESS"] {
            for v in ["50", "0/s", "50/s,burst=x", "fast"] {
                let e = cfg(&[(var, v)]).unwrap_err();
                assert_eq!(e.var, var);
                assert!(e.to_string().contains(var), "{e}");
            }
        }
    }

    #[test]
    fn the_password_command_and_the_connections_lifetime() {
        let c = cfg(&[]).unwrap();
        assert!(c.signin().password.is_none());
        assert_eq!(c.signin().max_conn_lifetime, Duration::from_secs(1800));
        let c = cfg(&[
            ("DATABASE_PASSWORD_COMMAND", "cat /run/secrets/pw"),
            ("DATABASE_MAX_CONN_LIFETIME", "10m"),
        ])
        .unwrap();
        assert!(matches!(
            c.signin().password,
            Some(signin::PasswordSource::Command(_))
        ));
        assert_eq!(c.database_max_conn_lifetime, Duration::from_secs(600));
        for v in ["0s", "25h", "often"] {
            assert_eq!(
                cfg(&[("DATABASE_MAX_CONN_LIFETIME", v)]).unwrap_err().var,
                "DATABASE_MAX_CONN_LIFETIME"
            );
        }
    }

    #[test]
    fn iam_auth_is_one_password_source() {
        let c = cfg(&[("DB_IAM_AUTH", "true"), ("DB_IAM_REGION", "eu-west-1")]).unwrap();
        assert!(matches!(
            c.signin().password,
            Some(signin::PasswordSource::Iam { region: Some(r) }) if r == "eu-west-1"
        ));
        assert!(
            cfg(&[("DB_IAM_AUTH", "false")])
                .unwrap()
                .signin()
                .password
                .is_none()
        );
        for (pairs, var, says) in [
            (
                &[
                    ("DB_IAM_AUTH", "true"),
                    ("DATABASE_PASSWORD_COMMAND", "cat /pw"),
                ][..],
                "DB_IAM_AUTH",
                "DATABASE_PASSWORD_COMMAND",
            ),
            (
                &[("DB_IAM_AUTH", "yes")][..],
                "DB_IAM_AUTH",
                "true or false",
            ),
            (
                &[("DB_IAM_REGION", "eu-west-1")][..],
                "DB_IAM_REGION",
                "DB_IAM_AUTH",
            ),
        ] {
            let e = cfg(pairs).unwrap_err();
            assert_eq!(e.var, var);
            assert!(e.to_string().contains(says), "{e}");
        }
    }

    #[test]
    fn bare_port_binds_all_interfaces() {
        let c = cfg(&[("LISTEN_ADDR", ":18080"), ("ROLE", "broker")]).unwrap();
        assert_eq!(c.listen_addr.to_string(), "0.0.0.0:18080");
        assert!(c.role.broker() && !c.role.control());
    }
}
