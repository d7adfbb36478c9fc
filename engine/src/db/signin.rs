//! How converge signs in to PostgreSQL when the password is not a static string:
//! `DATABASE_PASSWORD_COMMAND`, `DB_IAM_AUTH` and `DATABASE_MAX_CONN_LIFETIME`.
//!
//! A password comes from one [`PasswordSource`]: the operator's command (below), or an
//! RDS/Aurora IAM token minted in process (`DB_IAM_AUTH`, [`super::iam`], with the
//! `rds-iam` feature). Both are kept fresh by the one [`PasswordRefresher`].
//!
//! The command is the operator's own setting, run as `sh -c "$DATABASE_PASSWORD_COMMAND"`
//! (so `vault read -field=password db/creds/converge` or `cat /var/run/secrets/db-password`
//! work as written); nothing from a request or the database is ever put into it. Its
//! standard output, less a trailing newline, is the password; a non-zero exit, no output,
//! more than [`MAX_OUTPUT`] bytes or [`RUN_TIMEOUT`] without an answer is an error naming
//! the setting (fatal at boot, logged and retried later once running). The password is
//! never logged.
//!
//! sqlx opens connections with the pool's current options and has no hook that runs before
//! a connect, so the password lives in those options and is kept fresh
//! ([`PasswordRefresher`], whatever the source): minted at boot (a failure stops the boot), again as soon as a
//! new physical connection has opened (so the next one gets a fresh password, as an IAM
//! token minter wants), and at least every [`REFRESH_EVERY`] (so a rotated password is in
//! use within seconds, even while no connection opens). A new password is swapped in with
//! `Pool::set_connect_options`; open connections keep their session (PostgreSQL checks a
//! password only at sign-in) until they are recycled.
//!
//! Recycling: a connection is closed once it has lived its lifetime, a share of
//! `DATABASE_MAX_CONN_LIFETIME` between 75 % and 100 % drawn per connection (from the
//! instant it opened), so the connections a pool opened together at boot do not all
//! reconnect in the same second; sqlx's own `max_lifetime` closes idle ones at 100 %.

use std::{
    hash::{BuildHasher, Hasher},
    process::Stdio,
    sync::Arc,
    time::{Duration, Instant},
};

use sqlx::{PgPool, postgres::PgConnectOptions};
use tokio::{io::AsyncReadExt, sync::Notify};
use tokio_util::sync::CancellationToken;

/// The setting naming the command.
pub const PASSWORD_COMMAND_VAR: &str = "DATABASE_PASSWORD_COMMAND";
/// The setting naming the connections' lifetime.
pub const MAX_CONN_LIFETIME_VAR: &str = "DATABASE_MAX_CONN_LIFETIME";
/// How long a pooled connection lives by default (before its jitter).
pub const DEFAULT_MAX_CONN_LIFETIME: Duration = Duration::from_secs(30 * 60);
/// How long the command may take.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest password the command may print (an RDS IAM token is about 1.5 KiB).
pub const MAX_OUTPUT: usize = 64 * 1024;
/// The longest a password is used after the command would have printed another.
pub const REFRESH_EVERY: Duration = Duration::from_secs(5);
/// The share of the lifetime a connection may be retired early by (its jitter).
const JITTER: f64 = 0.25;

/// Why a setting's command gave no answer. Each message names the setting
/// (`DATABASE_PASSWORD_COMMAND`, `SECRETS_KEY_COMMAND`) and never what the command printed
/// on its standard output (a password, a key).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// `sh` could not be started, or its output not read.
    #[error("{0} could not be run: {1}")]
    Run(&'static str, std::io::Error),
    /// The command exited with a failure.
    #[error("{setting} failed ({status}): {stderr}")]
    Failed {
        /// The setting that names the command.
        setting: &'static str,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The start of what it printed on standard error.
        stderr: String,
    },
    /// It did not finish within [`RUN_TIMEOUT`].
    #[error("{0} did not finish within {1:?} (it was killed)")]
    Timeout(&'static str, Duration),
    /// It printed nothing (or only a newline).
    #[error("{0} printed nothing on its standard output")]
    Empty(&'static str),
    /// It printed more than [`MAX_OUTPUT`] bytes.
    #[error("{0} printed more than {MAX_OUTPUT} bytes")]
    TooLarge(&'static str),
    /// What it printed is not text.
    #[error("{0} printed bytes that are not UTF-8")]
    NotText(&'static str),
}

/// Why `DATABASE_PASSWORD_COMMAND` gave no password.
pub type PasswordCommandError = CommandError;

/// A setting whose value is a shell command line, run by `sh -c`, whose standard output is
/// the answer: `DATABASE_PASSWORD_COMMAND` (a password) and `SECRETS_KEY_COMMAND` (a key).
/// It runs for at most [`RUN_TIMEOUT`] and may print at most [`MAX_OUTPUT`] bytes.
#[derive(Clone)]
pub struct SettingCommand {
    setting: &'static str,
    line: String,
}

impl std::fmt::Debug for SettingCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple(self.setting).field(&self.line).finish()
    }
}

impl SettingCommand {
    /// The command `line` of the setting named `setting`.
    pub fn new(setting: &'static str, line: impl Into<String>) -> SettingCommand {
        SettingCommand {
            setting,
            line: line.into(),
        }
    }

    /// Runs the command once and returns what it printed on its standard output, whole (a
    /// raw key may hold any byte); an exit other than success, a timeout and an output over
    /// [`MAX_OUTPUT`] are errors naming the setting.
    pub async fn output(&self) -> Result<Vec<u8>, CommandError> {
        let setting = self.setting;
        let io = |e| CommandError::Run(setting, e);
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&self.line)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(io)?;
        let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
        let run = async {
            let mut stdout = Vec::new();
            let mut stderr = Vec::new();
            // One byte past the cap is enough to know it is too large.
            let read_out = async {
                match out.as_mut() {
                    Some(o) => o.take(MAX_OUTPUT as u64 + 1).read_to_end(&mut stdout).await,
                    None => Ok(0),
                }
            };
            let read_err = async {
                match err.as_mut() {
                    Some(e) => e.take(4096).read_to_end(&mut stderr).await,
                    None => Ok(0),
                }
            };
            let (o, e) = tokio::join!(read_out, read_err);
            o?;
            e?;
            let status = child.wait().await?;
            Ok::<_, std::io::Error>((status, stdout, stderr))
        };
        let (status, stdout, stderr) = tokio::time::timeout(RUN_TIMEOUT, run)
            .await
            .map_err(|_| CommandError::Timeout(setting, RUN_TIMEOUT))?
            .map_err(io)?;
        if !status.success() {
            let mut stderr = String::from_utf8_lossy(&stderr).trim().to_string();
            stderr.truncate(stderr.floor_char_boundary(512));
            return Err(CommandError::Failed {
                setting,
                status,
                stderr,
            });
        }
        if stdout.len() > MAX_OUTPUT {
            return Err(CommandError::TooLarge(setting));
        }
        if stdout.is_empty() {
            return Err(CommandError::Empty(setting));
        }
        Ok(stdout)
    }
}

/// `DATABASE_PASSWORD_COMMAND`: a shell command line printing the database password.
#[derive(Clone, Debug)]
pub struct PasswordCommand(SettingCommand);

impl PasswordCommand {
    /// The command `line`, run by `sh -c`.
    pub fn new(line: impl Into<String>) -> PasswordCommand {
        PasswordCommand(SettingCommand::new(PASSWORD_COMMAND_VAR, line))
    }

    /// Runs the command once and returns the password it printed (less a trailing newline).
    pub async fn password(&self) -> Result<String, PasswordCommandError> {
        let stdout = self.0.output().await?;
        let text =
            String::from_utf8(stdout).map_err(|_| CommandError::NotText(PASSWORD_COMMAND_VAR))?;
        let password = text
            .strip_suffix('\n')
            .map(|t| t.strip_suffix('\r').unwrap_or(t))
            .unwrap_or(&text);
        if password.is_empty() {
            return Err(CommandError::Empty(PASSWORD_COMMAND_VAR));
        }
        Ok(password.to_string())
    }
}

/// Where the password of each new connection comes from (when not from the URL).
#[derive(Debug, Clone)]
pub enum PasswordSource {
    /// `DATABASE_PASSWORD_COMMAND`: what the operator's command prints.
    Command(PasswordCommand),
    /// `DB_IAM_AUTH=true`: an RDS/Aurora IAM token for `DATABASE_URL`'s host, port and
    /// user, signed with the AWS chain's credentials (`super::iam`); `region` is
    /// `DB_IAM_REGION`, over the chain's.
    #[cfg(feature = "rds-iam")]
    Iam {
        /// `DB_IAM_REGION` (`None`: the AWS chain's region).
        region: Option<String>,
    },
}

/// Why a password source gave no password. Each message names the setting and never holds
/// a password, a token or a key.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// `DATABASE_PASSWORD_COMMAND` failed.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// `DB_IAM_AUTH`: no region, no credentials, a URL that cannot carry a token.
    #[cfg(feature = "rds-iam")]
    #[error(transparent)]
    Iam(#[from] super::iam::IamError),
}

/// A [`PasswordSource`] made ready for one pool's URL: what [`PasswordRefresher`] asks.
#[derive(Clone)]
pub(crate) enum Minter {
    Command(PasswordCommand),
    #[cfg(feature = "rds-iam")]
    Iam(Arc<super::iam::IamAuth>),
}

impl PasswordSource {
    /// Readies the source for the pool of `url` (`DB_IAM_AUTH`: TLS checked, region and
    /// credentials resolved, each failure an error naming the setting).
    #[cfg_attr(
        not(feature = "rds-iam"),
        expect(unused_variables, reason = "only the IAM source reads the URL")
    )]
    pub(crate) async fn minter(&self, url: &PgConnectOptions) -> Result<Minter, PasswordError> {
        match self {
            PasswordSource::Command(c) => Ok(Minter::Command(c.clone())),
            #[cfg(feature = "rds-iam")]
            PasswordSource::Iam { region } => {
                let endpoint = super::iam::check_url(url)?;
                let auth = super::iam::IamAuth::from_chain(endpoint, region.clone()).await?;
                Ok(Minter::Iam(auth))
            }
        }
    }
}

impl Minter {
    /// A password now.
    pub(crate) async fn password(&self) -> Result<String, PasswordError> {
        match self {
            Minter::Command(c) => Ok(c.password().await?),
            #[cfg(feature = "rds-iam")]
            Minter::Iam(a) => Ok(a.token().await?),
        }
    }

    /// The setting the password comes from.
    pub(crate) fn setting(&self) -> &'static str {
        match self {
            Minter::Command(_) => PASSWORD_COMMAND_VAR,
            #[cfg(feature = "rds-iam")]
            Minter::Iam(_) => super::iam::IAM_AUTH_VAR,
        }
    }
}

/// How a pool signs in and how long its connections live.
#[derive(Debug, Clone)]
pub struct SignIn {
    /// `DATABASE_PASSWORD_COMMAND` or `DB_IAM_AUTH` (`None`: the URL's own password, if any).
    pub password: Option<PasswordSource>,
    /// `DATABASE_MAX_CONN_LIFETIME` (each connection lives 75-100 % of it).
    pub max_conn_lifetime: Duration,
}

impl Default for SignIn {
    fn default() -> Self {
        SignIn {
            password: None,
            max_conn_lifetime: DEFAULT_MAX_CONN_LIFETIME,
        }
    }
}

/// Whether a connection that opened `age` ago has outlived its share of `lifetime`
/// ([`retire_age`] of the instant it opened: stable for the connection, different between
/// connections opened even a millisecond apart).
pub(crate) fn outlived(age: Duration, lifetime: Duration) -> bool {
    let now = Instant::now();
    let opened = now.checked_sub(age).unwrap_or(now);
    age >= retire_age(
        opened.saturating_duration_since(origin()).as_millis(),
        lifetime,
    )
}

/// The age at which a connection opened `opened_ms` after [`origin`] is retired: between
/// 75 % and 100 % of `lifetime`, by a hash of that instant.
fn retire_age(opened_ms: u128, lifetime: Duration) -> Duration {
    let mut h = std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::new()
        .build_hasher();
    h.write_u128(opened_ms);
    let frac = (h.finish() % 10_000) as f64 / 10_000.0;
    lifetime.mul_f64(1.0 - JITTER * frac)
}

/// The instant connection ages are measured from: set when the first pool is made, before
/// any connection opens.
pub(crate) fn origin() -> Instant {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Keeps a pool's password fresh from its source (see the module documentation).
pub struct PasswordRefresher {
    pool: PgPool,
    base: PgConnectOptions,
    minter: Minter,
    current: String,
    connected: Arc<Notify>,
}

impl PasswordRefresher {
    pub(crate) fn new(
        pool: PgPool,
        base: PgConnectOptions,
        minter: Minter,
        current: String,
        connected: Arc<Notify>,
    ) -> PasswordRefresher {
        PasswordRefresher {
            pool,
            base,
            minter,
            current,
            connected,
        }
    }

    /// The setting the password comes from (`DATABASE_PASSWORD_COMMAND`, `DB_IAM_AUTH`).
    pub fn setting(&self) -> &'static str {
        self.minter.setting()
    }

    /// Asks the source after each new connection and every [`REFRESH_EVERY`], swapping a
    /// changed password into the pool's options, until `stop`.
    pub async fn run(mut self, stop: CancellationToken) {
        let mut tick = tokio::time::interval(REFRESH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.reset();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
                _ = self.connected.notified() => {}
            }
            let setting = self.minter.setting();
            match self.minter.password().await {
                Ok(p) if p == self.current => {}
                Ok(p) => {
                    self.pool
                        .set_connect_options(self.base.clone().password(&p));
                    self.current = p;
                    match &self.minter {
                        // A token is new at every mint (it carries its signing time): news
                        // for a debug log only.
                        #[cfg(feature = "rds-iam")]
                        Minter::Iam(_) => tracing::debug!(
                            "a new database IAM token (DB_IAM_AUTH) is used for new connections"
                        ),
                        Minter::Command(_) => tracing::info!(
                            "a new database password from {setting} is used for new connections"
                        ),
                    }
                }
                Err(e) => tracing::warn!(
                    error = %e,
                    "keeping the last database password; will ask {setting} again"
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_command_prints_the_password() {
        let p = PasswordCommand::new("printf 'pw-1\\n'");
        assert_eq!(p.password().await.unwrap(), "pw-1");
        let p = PasswordCommand::new("printf 'with space\\r\\n'");
        assert_eq!(p.password().await.unwrap(), "with space");
        for (line, want) in [
            ("exit 3", "failed"),
            ("echo nope >&2; exit 1", "nope"),
            ("true", "printed nothing"),
            ("echo", "printed nothing"),
            ("head -c 70000 /dev/zero | tr '\\0' a", "more than"),
            ("printf '\\377\\376'", "UTF-8"),
        ] {
            let e = PasswordCommand::new(line).password().await.unwrap_err();
            let e = e.to_string();
            assert!(
                e.contains(PASSWORD_COMMAND_VAR) && e.contains(want),
                "{line}: {e}"
            );
        }
    }

    #[test]
    fn lifetimes_are_spread_over_the_last_quarter() {
        let life = Duration::from_secs(100);
        assert!(!outlived(Duration::from_secs(74), life));
        assert!(outlived(Duration::from_secs(100), life));
        // Connections opened a millisecond apart retire at different ages, each within
        // the last quarter of the lifetime, and one connection always at the same age.
        let ages: std::collections::BTreeSet<u64> = (0..50u128)
            .map(|ms| {
                let age = retire_age(ms, life);
                assert!(age >= life.mul_f64(0.75) && age <= life, "{age:?}");
                assert_eq!(age, retire_age(ms, life));
                age.as_secs()
            })
            .collect();
        assert!(ages.len() > 5, "{ages:?}");
    }
}
