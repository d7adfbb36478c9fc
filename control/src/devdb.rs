//! The embedded default database of `converge dev`: a private PostgreSQL cluster run from the
//! system's PostgreSQL server binaries in a data directory (`.converge/` by default).
//!
//! Layout of the data directory:
//! - `pgdata/` — the cluster, created by `initdb` on first start only (into `pgdata.initdb/`,
//!   renamed when complete, so an interrupted `initdb` never leaves a half-made cluster);
//! - `run/` — the server's unix socket;
//! - `postgres.log` — the server's output, appended across runs.
//!
//! The server listens on 127.0.0.1 (trust authentication, superuser `converge`) and is meant for
//! one developer's machine only. It runs in its own process group so that a Ctrl-C in the
//! terminal reaches `converge` first and `converge` decides when the database stops. initdb and
//! postgres refuse to run as root, so as root both run as `postgres` (or else `nobody`) and the
//! data directory is handed to that user.
//!
//! The cluster's definition (superuser, initdb flags, listen address, fast settings, users,
//! timeouts) is `scripts/pg-cluster-defs.sh`, embedded here and sourced by the test cluster's
//! `scripts/pg-test-cluster.sh`, so a setting is defined once.

use std::{
    fmt, io,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    process::{ExitStatus, Stdio},
    sync::LazyLock,
    time::Duration,
};

use sqlx::{Connection, PgConnection};
use tokio::process::{Child, Command};
use tracing::{info, warn};

/// Longest unix socket path the kernel accepts (`sun_path` minus its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// The cluster definition shared with `scripts/pg-test-cluster.sh`, which sources the same file.
const CLUSTER_DEFS_FILE: &str = include_str!("../../scripts/pg-cluster-defs.sh");

/// [`CLUSTER_DEFS_FILE`], parsed on first use (a unit test proves it parses).
static DEFS: LazyLock<ClusterDefs> = LazyLock::new(|| {
    ClusterDefs::parse(CLUSTER_DEFS_FILE)
        .unwrap_or_else(|e| panic!("scripts/pg-cluster-defs.sh: {e}"))
});

/// What `scripts/pg-cluster-defs.sh` defines (its comments say what each value is for).
#[derive(Debug)]
struct ClusterDefs {
    /// `PG_SUPERUSER`: the user every connection uses.
    superuser: &'static str,
    /// `PG_INITDB_ARGS`: initdb flags besides `-D` and `-U`.
    initdb_args: Vec<&'static str>,
    /// `PG_LISTEN_ADDRESS`: the only TCP address the server listens on.
    listen_address: &'static str,
    /// `PG_FAST_SETTINGS`: `name=value` settings turned on by `DEVDB_FAST`.
    fast_settings: Vec<&'static str>,
    /// `PG_START_ATTEMPTS`: starts tried on fresh free ports.
    start_attempts: usize,
    /// `PG_READY_TIMEOUT_SECS`: how long the server gets to accept connections.
    ready_timeout: Duration,
    /// `PG_STOP_TIMEOUT_SECS`: how long a fast shutdown may take.
    stop_timeout: Duration,
    /// `PG_RUN_AS_USERS`: users tried, in order, to run PostgreSQL as when we are root.
    run_as_users: Vec<&'static str>,
    /// `PG_VERSIONS_DIR`: holds one `<major>/bin` per installed version.
    versions_dir: &'static str,
}

impl ClusterDefs {
    /// Parses the `KEY=value` / `KEY="value"` lines of the defs file. Values the shell would
    /// expand or unquote differently (`$`, quotes, backslashes, backquotes) are refused, so
    /// bash and this parser always read the same thing.
    fn parse(text: &'static str) -> Result<ClusterDefs, String> {
        let mut values = std::collections::HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, raw) = line
                .split_once('=')
                .ok_or_else(|| format!("line {}: expected KEY=value", n + 1))?;
            let value = raw
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(raw);
            if key.is_empty() || !key.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                return Err(format!("line {}: bad key {key:?}", n + 1));
            }
            if value.contains(['$', '`', '\\', '\'', '"']) || value.contains('#') {
                return Err(format!(
                    "line {}: {key} has shell syntax in its value",
                    n + 1
                ));
            }
            if (value.contains(' ') || value.is_empty()) && !raw.starts_with('"') {
                return Err(format!("line {}: {key} needs double quotes", n + 1));
            }
            values.insert(key, value);
        }
        let get = |key: &str| {
            values
                .get(key)
                .copied()
                .ok_or_else(|| format!("{key} is not defined"))
        };
        let list = |key: &str| get(key).map(|v| v.split_whitespace().collect::<Vec<_>>());
        let number = |key: &str| {
            get(key)?
                .parse::<u64>()
                .map_err(|e| format!("{key} is not a number: {e}"))
        };
        Ok(ClusterDefs {
            superuser: get("PG_SUPERUSER")?,
            initdb_args: list("PG_INITDB_ARGS")?,
            listen_address: get("PG_LISTEN_ADDRESS")?,
            fast_settings: list("PG_FAST_SETTINGS")?,
            start_attempts: usize::try_from(number("PG_START_ATTEMPTS")?)
                .map_err(|e| e.to_string())?,
            ready_timeout: Duration::from_secs(number("PG_READY_TIMEOUT_SECS")?),
            stop_timeout: Duration::from_secs(number("PG_STOP_TIMEOUT_SECS")?),
            run_as_users: list("PG_RUN_AS_USERS")?,
            versions_dir: get("PG_VERSIONS_DIR")?,
        })
    }
}

/// Where and how to run the development database.
#[derive(Debug, Clone)]
pub struct DevDbConfig {
    /// Directory holding the cluster, its socket and its log; created if missing.
    pub data_dir: PathBuf,
    /// Loopback port to listen on; `None` picks a free one at each start.
    pub port: Option<u16>,
    /// Extra server settings (`name=value`), after those of `CONVERGE_DEV_PG_SETTINGS`.
    pub settings: Vec<String>,
}

impl Default for DevDbConfig {
    fn default() -> Self {
        DevDbConfig {
            data_dir: PathBuf::from(".converge"),
            port: None,
            settings: Vec::new(),
        }
    }
}

/// Why the development database could not be started or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DevDbError {
    /// No directory with the PostgreSQL server binaries was found.
    #[error(
        "PostgreSQL server binaries (initdb, postgres) not found (searched: {searched}); \
         install PostgreSQL or set PG_BIN_DIR"
    )]
    BinariesNotFound {
        /// The places that were searched.
        searched: String,
    },
    /// Running as root, and no unprivileged user exists to run PostgreSQL as.
    #[error("running as root, but no unprivileged user ({tried}) exists to run PostgreSQL as")]
    NoUnprivilegedUser {
        /// The users looked for, comma-separated.
        tried: String,
    },
    /// The unprivileged user PostgreSQL runs as cannot use the data directory.
    #[error(
        "user {user} cannot write {path}; its parent directories must be traversable by that \
         user, or choose a data directory elsewhere"
    )]
    DataDirInaccessible {
        /// The user PostgreSQL runs as.
        user: String,
        /// The data directory.
        path: PathBuf,
    },
    /// The cluster was created by another PostgreSQL major version than the binaries found.
    #[error(
        "{path} was created by PostgreSQL {found}, but the server binaries are PostgreSQL \
         {expected}; point PG_BIN_DIR at PostgreSQL {found}, or delete {path} (losing its data)"
    )]
    VersionMismatch {
        /// The cluster directory.
        path: PathBuf,
        /// The major version recorded in the cluster.
        found: String,
        /// The major version of the server binaries.
        expected: String,
    },
    /// The cluster directory exists but holds something other than a PostgreSQL cluster.
    #[error("{path} exists but is not a PostgreSQL data directory")]
    NotADataDir {
        /// The cluster directory.
        path: PathBuf,
    },
    /// Another server is running on the same cluster.
    #[error("a PostgreSQL server (pid {pid}) is already running on {path}; stop it first")]
    AlreadyRunning {
        /// The running postmaster.
        pid: u32,
        /// The cluster directory.
        path: PathBuf,
    },
    /// `initdb` failed.
    #[error("initdb failed ({status}); its output:\n{output}")]
    InitDb {
        /// initdb's exit status.
        status: ExitStatus,
        /// The tail of initdb's output.
        output: String,
    },
    /// The server exited before it accepted connections.
    #[error("PostgreSQL exited during start-up ({status}); server log tail:\n{log_tail}")]
    Exited {
        /// The server's exit status.
        status: ExitStatus,
        /// The tail of what the server logged during this start.
        log_tail: String,
    },
    /// The server did not accept connections in time.
    #[error("PostgreSQL did not accept connections within {secs}s; server log tail:\n{log_tail}")]
    NotReady {
        /// The time allowed.
        secs: u64,
        /// The tail of what the server logged during this start.
        log_tail: String,
        /// The last connection error, if any.
        #[source]
        last_error: Option<sqlx::Error>,
    },
    /// `DEVDB_FAST` holds something other than a boolean.
    #[error("invalid DEVDB_FAST value {0:?}; expected 1, true, 0 or false")]
    InvalidFastFlag(String),
    /// An item of `CONVERGE_DEV_PG_SETTINGS` is not `name=value`.
    #[error(
        "invalid CONVERGE_DEV_PG_SETTINGS item {0:?}; expected space-separated name=value \
         settings, e.g. shared_preload_libraries=pg_stat_statements"
    )]
    InvalidSetting(String),
    /// The `converge` database could not be created.
    #[error("failed to create the converge database")]
    CreateDatabase(#[source] sqlx::Error),
    /// The server did not shut down in time.
    #[error("PostgreSQL did not shut down within {secs}s")]
    StopTimeout {
        /// The time allowed.
        secs: u64,
    },
    /// A file-system or process operation failed.
    #[error("failed to {action}")]
    Io {
        /// What was being done.
        action: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

fn io_err(action: impl fmt::Display) -> impl FnOnce(io::Error) -> DevDbError {
    move |source| DevDbError::Io {
        action: action.to_string(),
        source,
    }
}

/// A running development database. Stop it with [`DevDb::stop`]; dropping it stops the server
/// best-effort (blocking the current thread for up to a few seconds).
#[derive(Debug)]
pub struct DevDb {
    port: u16,
    pgdata: PathBuf,
    log_path: PathBuf,
    log_offset: u64,
    child: Option<Child>,
}

/// The unprivileged account PostgreSQL runs as when we are root.
#[derive(Debug, Clone)]
struct RunAs {
    name: String,
    uid: u32,
    gid: u32,
}

impl DevDb {
    /// Starts the development database, creating the cluster on first use, and returns once it
    /// accepts connections and the `converge` database exists.
    ///
    /// The PostgreSQL bin dir is `PG_BIN_DIR`, else `pg_config --bindir`, else the newest
    /// `/usr/lib/postgresql/*/bin`, else the directory of `initdb` on `PATH`. `DEVDB_FAST=1`
    /// turns off `fsync`, `synchronous_commit` and `full_page_writes` (a crash may then lose or
    /// corrupt the dev data). `CONVERGE_DEV_PG_SETTINGS` adds server settings (space-separated
    /// `name=value`, e.g. `shared_preload_libraries=pg_stat_statements` to profile statements).
    /// A `postmaster.pid` left by a killed run is removed when its process
    /// is gone; a live server on the same cluster is an error. Cancelling this future stops a
    /// server it already spawned.
    pub async fn start(cfg: DevDbConfig) -> Result<DevDb, DevDbError> {
        let fast = fast_flag()?;
        let mut extra_settings = extra_settings()?;
        extra_settings.extend(cfg.settings.iter().cloned());
        tokio::fs::create_dir_all(&cfg.data_dir)
            .await
            .map_err(io_err(format_args!("create {}", cfg.data_dir.display())))?;
        let data_dir = tokio::fs::canonicalize(&cfg.data_dir)
            .await
            .map_err(io_err(format_args!("resolve {}", cfg.data_dir.display())))?;
        let pgdata = data_dir.join("pgdata");
        let run_dir = data_dir.join("run");
        let log_path = data_dir.join("postgres.log");
        tokio::fs::create_dir_all(&run_dir)
            .await
            .map_err(io_err(format_args!("create {}", run_dir.display())))?;

        let bin_dir = find_bin_dir().await?;
        let run_as = if current_uid().await? == 0 {
            Some(unprivileged_user()?)
        } else {
            None
        };
        if let Some(user) = &run_as {
            let dir = data_dir.clone();
            let (uid, gid) = (user.uid, user.gid);
            tokio::task::spawn_blocking(move || chown_tree(&dir, uid, gid))
                .await
                .map_err(|e| DevDbError::Io {
                    action: "hand the data directory over".into(),
                    source: io::Error::other(e),
                })?
                .map_err(io_err(format_args!(
                    "chown {} to {}",
                    data_dir.display(),
                    user.name
                )))?;
            check_access(user, &data_dir).await?;
        }

        let expected = server_major_version(&bin_dir).await?;
        ensure_cluster(&bin_dir, &data_dir, &pgdata, run_as.as_ref(), &expected).await?;
        clear_stale_pid(&pgdata).await?;

        let mut attempts = if cfg.port.is_some() {
            1
        } else {
            DEFS.start_attempts
        };
        loop {
            attempts -= 1;
            let port = match cfg.port {
                Some(port) => port,
                None => free_port()?,
            };
            let socket_dir = socket_dir(&run_dir, port);
            let log_offset = tokio::fs::metadata(&log_path)
                .await
                .map(|m| m.len())
                .unwrap_or(0);
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .map_err(io_err(format_args!("open {}", log_path.display())))?;
            let log_err = log
                .try_clone()
                .map_err(io_err("duplicate the log file handle"))?;

            let mut cmd = Command::new(bin_dir.join("postgres"));
            cmd.arg("-D")
                .arg(&pgdata)
                .arg("-p")
                .arg(port.to_string())
                .arg("-c")
                .arg(format!("listen_addresses={}", DEFS.listen_address))
                .arg("-c")
                .arg(format!("unix_socket_directories={socket_dir}"));
            if fast {
                for setting in &DEFS.fast_settings {
                    cmd.arg("-c").arg(setting);
                }
            }
            for setting in &extra_settings {
                cmd.arg("-c").arg(setting);
            }
            cmd.current_dir(&pgdata)
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(log_err)
                // Our own process group: a terminal Ctrl-C reaches converge, which then stops
                // the database after it has shut itself down.
                .process_group(0)
                .kill_on_drop(false);
            if let Some(user) = &run_as {
                cmd.uid(user.uid).gid(user.gid);
            }
            let child = cmd.spawn().map_err(io_err(format_args!(
                "start {}",
                bin_dir.join("postgres").display()
            )))?;

            // From here on, dropping `db` (an error below, or cancellation) stops the server.
            let mut db = DevDb {
                port,
                pgdata: pgdata.clone(),
                log_path: log_path.clone(),
                log_offset,
                child: Some(child),
            };
            match db.wait_ready().await {
                Ok(()) => {}
                Err(DevDbError::Exited { log_tail, .. })
                    if attempts > 0 && log_tail.contains("could not bind") =>
                {
                    warn!(
                        port,
                        "port taken while PostgreSQL started; retrying on another port"
                    );
                    continue;
                }
                Err(e) => return Err(e),
            }
            db.create_database().await?;
            info!(port, data_dir = %data_dir.display(), "PostgreSQL listening on {}:{port}", DEFS.listen_address);
            return Ok(db);
        }
    }

    /// The URL of the `converge` database.
    pub fn url(&self) -> String {
        let ClusterDefs {
            superuser,
            listen_address,
            ..
        } = *DEFS;
        format!(
            "postgres://{superuser}@{listen_address}:{}/converge",
            self.port
        )
    }

    /// The URL of the `postgres` maintenance database (for creating and dropping databases).
    pub fn admin_url(&self) -> String {
        let ClusterDefs {
            superuser,
            listen_address,
            ..
        } = *DEFS;
        format!(
            "postgres://{superuser}@{listen_address}:{}/postgres",
            self.port
        )
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server with a fast shutdown (open sessions are disconnected, the cluster is
    /// checkpointed) and waits for it to exit; after `PG_STOP_TIMEOUT_SECS` it is shut down
    /// immediately instead (recovery then runs at the next start).
    pub async fn stop(mut self) -> Result<(), DevDbError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if child
            .try_wait()
            .map_err(io_err("check on PostgreSQL"))?
            .is_some()
        {
            return Ok(());
        }
        if let Some(pid) = child.id() {
            signal(pid, "INT").await;
        }
        match tokio::time::timeout(DEFS.stop_timeout, child.wait()).await {
            Ok(status) => {
                status.map_err(io_err("wait for PostgreSQL to exit"))?;
                Ok(())
            }
            Err(_) => {
                if let Some(pid) = child.id() {
                    signal(pid, "QUIT").await;
                }
                let waited = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                if waited.is_err() {
                    let _ = child.kill().await;
                }
                Err(DevDbError::StopTimeout {
                    secs: DEFS.stop_timeout.as_secs(),
                })
            }
        }
    }

    /// Stops the server the way a crash would: an immediate shutdown (SIGQUIT), no
    /// checkpoint, so the next start runs crash recovery — which empties every UNLOGGED
    /// table. For tests of converge's crash recovery.
    pub async fn crash(mut self) -> Result<(), DevDbError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if let Some(pid) = child.id() {
            signal(pid, "QUIT").await;
        }
        if tokio::time::timeout(DEFS.stop_timeout, child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
        Ok(())
    }

    /// Polls until the server accepts connections, it exits, or `PG_READY_TIMEOUT_SECS` pass.
    async fn wait_ready(&mut self) -> Result<(), DevDbError> {
        let deadline = tokio::time::Instant::now() + DEFS.ready_timeout;
        let mut last_error = None;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait().map_err(io_err("check on PostgreSQL"))?
            {
                self.child = None;
                return Err(DevDbError::Exited {
                    status,
                    log_tail: self.log_tail().await,
                });
            }
            match tokio::time::timeout(
                Duration::from_secs(5),
                PgConnection::connect(&self.admin_url()),
            )
            .await
            {
                Ok(Ok(conn)) => {
                    let _ = conn.close().await;
                    return Ok(());
                }
                Ok(Err(e)) => last_error = Some(e),
                Err(_) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(DevDbError::NotReady {
                    secs: DEFS.ready_timeout.as_secs(),
                    log_tail: self.log_tail().await,
                    last_error,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Creates the `converge` database unless it exists.
    async fn create_database(&self) -> Result<(), DevDbError> {
        let mut conn = PgConnection::connect(&self.admin_url())
            .await
            .map_err(DevDbError::CreateDatabase)?;
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'converge')",
        )
        .fetch_one(&mut conn)
        .await
        .map_err(DevDbError::CreateDatabase)?;
        if !exists {
            match sqlx::query("CREATE DATABASE converge")
                .execute(&mut conn)
                .await
            {
                Ok(_) => {}
                // Someone else created it between our check and now.
                Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P04") => {}
                Err(e) => return Err(DevDbError::CreateDatabase(e)),
            }
        }
        let _ = conn.close().await;
        Ok(())
    }

    /// The last lines the server logged since this start.
    async fn log_tail(&self) -> String {
        match tokio::fs::read(&self.log_path).await {
            Ok(bytes) => {
                let from = usize::try_from(self.log_offset)
                    .unwrap_or(0)
                    .min(bytes.len());
                tail_lines(&String::from_utf8_lossy(&bytes[from..]), 30)
            }
            Err(e) => format!("(could not read {}: {e})", self.log_path.display()),
        }
    }
}

impl Drop for DevDb {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        let Some(pid) = child.id() else { return };
        warn!(pid, pgdata = %self.pgdata.display(), "development database dropped while running; stopping it");
        let _ = std::process::Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        // Give the fast shutdown a moment so a quick restart finds the cluster free.
        for _ in 0..100 {
            if !matches!(child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Reads `DEVDB_FAST`.
fn fast_flag() -> Result<bool, DevDbError> {
    match std::env::var("DEVDB_FAST") {
        Err(_) => Ok(false),
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "" | "0" | "false" => Ok(false),
            "1" | "true" => Ok(true),
            _ => Err(DevDbError::InvalidFastFlag(v)),
        },
    }
}

/// Reads `CONVERGE_DEV_PG_SETTINGS`: extra `name=value` server settings.
fn extra_settings() -> Result<Vec<String>, DevDbError> {
    let raw = std::env::var("CONVERGE_DEV_PG_SETTINGS").unwrap_or_default();
    parse_settings(&raw)
}

fn parse_settings(raw: &str) -> Result<Vec<String>, DevDbError> {
    raw.split_whitespace()
        .map(|item| match item.split_once('=') {
            Some((name, _)) if !name.is_empty() => Ok(item.to_owned()),
            _ => Err(DevDbError::InvalidSetting(item.to_owned())),
        })
        .collect()
}

/// Finds the directory holding `initdb` and `postgres`.
async fn find_bin_dir() -> Result<PathBuf, DevDbError> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("PG_BIN_DIR").filter(|d| !d.is_empty()) {
        // An explicit choice is the only candidate: silently using another version would
        // defeat its purpose.
        let dir = PathBuf::from(dir);
        return if has_server_binaries(&dir) {
            Ok(dir)
        } else {
            Err(DevDbError::BinariesNotFound {
                searched: format!("PG_BIN_DIR={}", dir.display()),
            })
        };
    }
    if let Ok(out) = Command::new("pg_config")
        .arg("--bindir")
        .stderr(Stdio::null())
        .output()
        .await
        && out.status.success()
    {
        candidates.push(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    }
    if let Ok(entries) = std::fs::read_dir(DEFS.versions_dir) {
        let mut versions: Vec<(u32, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                Some((
                    e.file_name().to_str()?.parse::<u32>().ok()?,
                    e.path().join("bin"),
                ))
            })
            .collect();
        versions.sort_by_key(|(major, _)| std::cmp::Reverse(*major));
        candidates.extend(versions.into_iter().map(|(_, dir)| dir));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    candidates
        .into_iter()
        .find(|dir| has_server_binaries(dir))
        .ok_or_else(|| DevDbError::BinariesNotFound {
            searched: format!(
                "PG_BIN_DIR, pg_config --bindir, {}/*/bin, PATH",
                DEFS.versions_dir
            ),
        })
}

fn has_server_binaries(dir: &Path) -> bool {
    ["initdb", "postgres"].iter().all(|bin| {
        std::fs::metadata(dir.join(bin)).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
    })
}

/// The major version of the server binaries (`postgres --version`), e.g. `15`.
async fn server_major_version(bin_dir: &Path) -> Result<String, DevDbError> {
    let postgres = bin_dir.join("postgres");
    let out = Command::new(&postgres)
        .arg("--version")
        .output()
        .await
        .map_err(io_err(format_args!("run {} --version", postgres.display())))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_major_version(&text).ok_or_else(|| DevDbError::Io {
        action: format!("read the version of {}", postgres.display()),
        source: io::Error::other(format!("unexpected output {:?}", text.trim())),
    })
}

/// `postgres (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)` → `15`; `9.6.24` → `9.6`.
fn parse_major_version(text: &str) -> Option<String> {
    let version = text
        .split_whitespace()
        .find(|t| t.starts_with(|c: char| c.is_ascii_digit()))?;
    let mut parts = version.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next()?.parse().ok()?;
    if major >= 10 {
        Some(major.to_string())
    } else {
        Some(format!("{major}.{}", parts.next()?))
    }
}

/// The effective user id of this process.
async fn current_uid() -> Result<u32, DevDbError> {
    let out = Command::new("id")
        .arg("-u")
        .output()
        .await
        .map_err(io_err("run id -u"))?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|e| DevDbError::Io {
            action: "read our user id".into(),
            source: io::Error::other(e),
        })
}

/// The first of `PG_RUN_AS_USERS` that exists in `/etc/passwd` with a non-zero uid.
fn unprivileged_user() -> Result<RunAs, DevDbError> {
    let passwd = std::fs::read_to_string("/etc/passwd").map_err(io_err("read /etc/passwd"))?;
    DEFS.run_as_users
        .iter()
        .find_map(|name| passwd_entry(&passwd, name).filter(|u| u.uid != 0))
        .ok_or_else(|| DevDbError::NoUnprivilegedUser {
            tried: DEFS.run_as_users.join(", "),
        })
}

/// Looks `name` up in the text of an `/etc/passwd` file.
fn passwd_entry(passwd: &str, name: &str) -> Option<RunAs> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        if fields.next()? != name {
            return None;
        }
        let _password = fields.next()?;
        let uid = fields.next()?.parse().ok()?;
        let gid = fields.next()?.parse().ok()?;
        Some(RunAs {
            name: name.to_owned(),
            uid,
            gid,
        })
    })
}

/// Gives `dir` and everything below it to `uid:gid` (symlinks themselves, never their targets).
fn chown_tree(dir: &Path, uid: u32, gid: u32) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(dir)?;
    if meta.uid() != uid || meta.gid() != gid {
        std::os::unix::fs::lchown(dir, Some(uid), Some(gid))?;
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(dir)? {
            chown_tree(&entry?.path(), uid, gid)?;
        }
    }
    Ok(())
}

/// Checks that `user` can write `dir` (it also needs to traverse every parent).
async fn check_access(user: &RunAs, dir: &Path) -> Result<(), DevDbError> {
    let status = Command::new("sh")
        .args(["-c", r#"test -w "$1" && test -x "$1""#, "sh"])
        .arg(dir)
        .current_dir("/")
        .uid(user.uid)
        .gid(user.gid)
        .status()
        .await
        .map_err(io_err(format_args!(
            "check that {} can use {}",
            user.name,
            dir.display()
        )))?;
    if status.success() {
        Ok(())
    } else {
        Err(DevDbError::DataDirInaccessible {
            user: user.name.clone(),
            path: dir.to_owned(),
        })
    }
}

/// Makes sure `pgdata` holds a cluster of the `expected` major version, running `initdb` if
/// there is none yet.
async fn ensure_cluster(
    bin_dir: &Path,
    data_dir: &Path,
    pgdata: &Path,
    run_as: Option<&RunAs>,
    expected: &str,
) -> Result<(), DevDbError> {
    let version_file = pgdata.join("PG_VERSION");
    match tokio::fs::read_to_string(&version_file).await {
        Ok(found) => {
            let found = found.trim();
            return if found == expected {
                Ok(())
            } else {
                Err(DevDbError::VersionMismatch {
                    path: pgdata.to_owned(),
                    found: found.to_owned(),
                    expected: expected.to_owned(),
                })
            };
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(format_args!("read {}", version_file.display()))(e)),
    }
    if tokio::fs::try_exists(pgdata).await.unwrap_or(false) {
        // An empty directory (made by hand) is fine to replace; anything else is not ours.
        tokio::fs::remove_dir(pgdata)
            .await
            .map_err(|_| DevDbError::NotADataDir {
                path: pgdata.to_owned(),
            })?;
    }

    info!(pgdata = %pgdata.display(), "initialising PostgreSQL data directory");
    let staging = data_dir.join("pgdata.initdb");
    if tokio::fs::try_exists(&staging).await.unwrap_or(false) {
        tokio::fs::remove_dir_all(&staging)
            .await
            .map_err(io_err(format_args!(
                "remove the leftover {}",
                staging.display()
            )))?;
    }
    let mut cmd = Command::new(bin_dir.join("initdb"));
    cmd.arg("-D")
        .arg(&staging)
        .arg("-U")
        .arg(DEFS.superuser)
        .args(&DEFS.initdb_args)
        .current_dir(data_dir)
        .stdin(Stdio::null());
    if let Some(user) = run_as {
        cmd.uid(user.uid).gid(user.gid);
    }
    let out = cmd.output().await.map_err(io_err(format_args!(
        "run {}",
        bin_dir.join("initdb").display()
    )))?;
    if !out.status.success() {
        let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
        output.push_str(&String::from_utf8_lossy(&out.stderr));
        let _ = tokio::fs::remove_dir_all(&staging).await;
        return Err(DevDbError::InitDb {
            status: out.status,
            output: tail_lines(&output, 30),
        });
    }
    tokio::fs::rename(&staging, pgdata)
        .await
        .map_err(io_err(format_args!(
            "rename {} to {}",
            staging.display(),
            pgdata.display()
        )))
}

/// Removes a `postmaster.pid` whose server is gone (a killed previous run); refuses if a
/// PostgreSQL process still owns it.
async fn clear_stale_pid(pgdata: &Path) -> Result<(), DevDbError> {
    let pid_file = pgdata.join("postmaster.pid");
    let text = match tokio::fs::read_to_string(&pid_file).await {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(format_args!("read {}", pid_file.display()))(e)),
    };
    if let Some(pid) = text
        .lines()
        .next()
        .and_then(|l| l.trim().parse::<u32>().ok())
        && is_postgres_process(pid).await
    {
        return Err(DevDbError::AlreadyRunning {
            pid,
            path: pgdata.to_owned(),
        });
    }
    warn!(pid_file = %pid_file.display(), "removing stale postmaster.pid left by a previous run");
    tokio::fs::remove_file(&pid_file)
        .await
        .map_err(io_err(format_args!("remove {}", pid_file.display())))
}

/// Whether `pid` is a live PostgreSQL process (on systems without `/proc`: any live process).
async fn is_postgres_process(pid: u32) -> bool {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    if Path::new("/proc/self").exists() {
        return match tokio::fs::read_to_string(proc_dir.join("comm")).await {
            Ok(comm) => comm.trim() == "postgres" || comm.trim() == "postmaster",
            Err(_) => false,
        };
    }
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}

/// Sends `SIGNAL` to `pid` with the `kill` command, ignoring failure (the process may be gone).
async fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
}

/// A loopback port nothing listens on right now (a race with other processes is retried by
/// the caller).
fn free_port() -> Result<u16, DevDbError> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(io_err("find a free loopback port"))?;
    let port = listener
        .local_addr()
        .map_err(io_err("find a free loopback port"))?
        .port();
    Ok(port)
}

/// The socket directory to pass to the server: `run_dir`, or none when the socket path would
/// exceed the kernel's limit (the server then listens on TCP only).
fn socket_dir(run_dir: &Path, port: u16) -> String {
    let dir = run_dir.display().to_string();
    if dir.len() + "/.s.PGSQL.".len() + port.to_string().len() > MAX_SOCKET_PATH {
        warn!(run_dir = %dir, "data directory path too long for a unix socket; listening on TCP only");
        String::new()
    } else {
        dir
    }
}

fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_defs_parse_to_the_known_definition() {
        let defs = &*DEFS;
        assert_eq!(defs.superuser, "converge");
        assert_eq!(
            defs.initdb_args,
            ["--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"]
        );
        assert_eq!(defs.listen_address, "127.0.0.1");
        assert_eq!(
            defs.fast_settings,
            [
                "fsync=off",
                "synchronous_commit=off",
                "full_page_writes=off"
            ]
        );
        assert_eq!(defs.start_attempts, 5);
        assert_eq!(defs.ready_timeout, Duration::from_secs(60));
        assert_eq!(defs.stop_timeout, Duration::from_secs(30));
        assert_eq!(defs.run_as_users, ["postgres", "nobody"]);
        assert_eq!(defs.versions_dir, "/usr/lib/postgresql");
    }

    /// The script sources the same file: bash must read every value exactly as we do.
    #[test]
    fn bash_reads_the_cluster_defs_as_we_do() {
        let defs = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/pg-cluster-defs.sh");
        let out = std::process::Command::new("bash")
            .args([
                "-c",
                r#"set -eu; . "$1"; for v in "${!PG_@}"; do printf '%s=%s\n' "$v" "${!v}"; done"#,
                "bash",
                defs,
            ])
            .env_clear()
            .output()
            .expect("run bash");
        assert!(out.status.success(), "{out:?}");
        let mut from_bash: Vec<String> = String::from_utf8(out.stdout)
            .expect("utf-8")
            .lines()
            .map(str::to_owned)
            .collect();
        from_bash.sort();
        let mut from_us: Vec<String> = CLUSTER_DEFS_FILE
            .lines()
            .filter(|l| l.starts_with("PG_"))
            .map(|l| l.replace('"', ""))
            .collect();
        from_us.sort();
        assert_eq!(from_bash, from_us);
    }

    #[test]
    fn cluster_defs_refuse_shell_syntax() {
        assert!(ClusterDefs::parse("PG_SUPERUSER=$USER").is_err());
        assert!(ClusterDefs::parse("PG_SUPERUSER=a b").is_err());
        assert!(ClusterDefs::parse("pg_superuser=converge").is_err());
        assert!(ClusterDefs::parse("PG_SUPERUSER=converge").is_err_and(|e| e.contains("PG_")));
    }

    #[test]
    fn start_can_run_on_a_multi_threaded_runtime() {
        fn assert_send<T: Send>(_: &T) {}
        assert_send(&DevDb::start(DevDbConfig::default()));
    }

    #[test]
    fn extra_settings_are_name_value_items() {
        assert_eq!(parse_settings("").unwrap(), Vec::<String>::new());
        assert_eq!(
            parse_settings("  shared_preload_libraries=pg_stat_statements  work_mem=64MB ")
                .unwrap(),
            [
                "shared_preload_libraries=pg_stat_statements",
                "work_mem=64MB"
            ]
        );
        assert!(matches!(
            parse_settings("work_mem"),
            Err(DevDbError::InvalidSetting(s)) if s == "work_mem"
        ));
        assert!(matches!(
            parse_settings("=64MB"),
            Err(DevDbError::InvalidSetting(_))
        ));
    }

    #[test]
    fn parses_major_versions() {
        assert_eq!(
            parse_major_version("postgres (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)\n")
                .as_deref(),
            Some("15")
        );
        assert_eq!(
            parse_major_version("postgres (PostgreSQL) 17beta1").as_deref(),
            Some("17")
        );
        assert_eq!(
            parse_major_version("postgres (PostgreSQL) 9.6.24").as_deref(),
            Some("9.6")
        );
        assert_eq!(parse_major_version("garbage"), None);
    }

    #[test]
    fn finds_passwd_entries() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      postgresql:x:5:5::/:/bin/sh\n\
                      nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
        let nobody = passwd_entry(passwd, "nobody").expect("nobody");
        assert_eq!((nobody.uid, nobody.gid), (65534, 65534));
        assert!(passwd_entry(passwd, "postgres").is_none());
        assert_eq!(passwd_entry(passwd, "root").map(|u| u.uid), Some(0));
    }

    #[test]
    fn keeps_the_last_lines() {
        assert_eq!(tail_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail_lines("a", 5), "a");
    }

    #[test]
    fn drops_a_socket_dir_that_is_too_long() {
        assert_eq!(socket_dir(Path::new("/tmp/x/run"), 5432), "/tmp/x/run");
        let long = PathBuf::from(format!("/{}", "d".repeat(100)));
        assert_eq!(socket_dir(&long, 5432), "");
    }
}
