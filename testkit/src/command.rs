//! The commands a test starts: the `converge` binary and `converge serve` with a clean
//! environment, so nothing from the developer's shell leaks into a test.

use std::{ffi::OsStr, path::PathBuf, process::Stdio};

use tokio::process::Command;

/// The `converge` binary a test outside the `converge` crate starts: `CONVERGE_BIN`, else
/// `${CARGO_TARGET_DIR:-~/.cache/converge-target}/debug/converge` (`cargo build --workspace
/// --bins` in the main workspace makes it). Tests of the `converge` crate itself use
/// `env!("CARGO_BIN_EXE_converge")` instead.
///
/// # Panics
/// If that file does not exist: the test cannot run, and says what to build.
pub fn converge_bin() -> PathBuf {
    let bin = std::env::var_os("CONVERGE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                        .join(".cache/converge-target")
                })
                .join("debug/converge")
        });
    assert!(
        bin.exists(),
        "{} is missing: build converge (`cargo build --workspace --bins`) or set CONVERGE_BIN",
        bin.display()
    );
    bin
}

/// The `LOG_LEVEL` a process started by a test gets: `TEST_LOG_LEVEL`, else `warn`.
pub fn log_level() -> String {
    std::env::var("TEST_LOG_LEVEL").unwrap_or_else(|_| "warn".into())
}

/// `program` with an empty environment but `PATH` and [`log_level`], the test's stdout and
/// stderr, and killed when the handle drops (a failing test leaves no process behind).
pub fn clean_command(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("LOG_LEVEL", log_level())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    cmd
}

/// The key every test's converge seals provider config secrets with (`SECRETS_KEY_FILE`):
/// a file under the temporary directory holding the base64 of a fixed test key (never a
/// key of anything real), written once (by rename, so parallel tests never read half a
/// file).
///
/// # Panics
/// If the file cannot be written.
pub fn test_secrets_key_file() -> PathBuf {
    // base64 of 32 bytes 0x2a.
    const KEY: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";
    let path = std::env::temp_dir().join("converge-test-secrets.key");
    if std::fs::read(&path).is_ok_and(|b| b == KEY.as_bytes()) {
        return path;
    }
    let tmp = path.with_extension(format!("key.{}", std::process::id()));
    std::fs::write(&tmp, KEY).expect("write the test secrets key");
    std::fs::rename(&tmp, &path).expect("place the test secrets key");
    path
}

/// `bin serve` on `db_url` ([`clean_command`]) with fast retries (200 ms to 1 s), a 2 s
/// shutdown drain, 10 database connections and the test secrets key
/// ([`test_secrets_key_file`]); no listen address, for a caller that sets its own
/// (`HEALTH_ADDR` of a broker-only process). Environment the caller adds afterwards
/// overrides these (`SECRETS_KEY_FILE=""`: no key).
pub fn serve_command(bin: impl AsRef<OsStr>, db_url: &str) -> Command {
    let mut cmd = clean_command(bin);
    cmd.arg("serve")
        .env("DATABASE_URL", db_url)
        .env("SECRETS_KEY_FILE", test_secrets_key_file())
        .env("RETRY_BASE", "200ms")
        .env("RETRY_MAX", "1s")
        .env("SHUTDOWN_DRAIN", "2s")
        .env("DB_MAX_CONNECTIONS", "10");
    cmd
}

/// [`serve_command`] with the HTTP API on `127.0.0.1:http_port` and the broker on
/// `127.0.0.1:grpc_port`.
pub fn serve_on(bin: impl AsRef<OsStr>, db_url: &str, http_port: u16, grpc_port: u16) -> Command {
    let mut cmd = serve_command(bin, db_url);
    cmd.env("LISTEN_ADDR", format!("127.0.0.1:{http_port}"))
        .env("BROKER_LISTEN_ADDR", format!("127.0.0.1:{grpc_port}"));
    cmd
}

/// The environment of a converge serving TLS on both listeners with an `AUTH_FILE`: a
/// server certificate from `ca` (for 127.0.0.1 and localhost) and `principals` as the
/// auth file, written to `dir`; pairs `TLS_CERT_FILE`, `TLS_KEY_FILE`, `AUTH_FILE`.
///
/// # Panics
/// If a file cannot be written.
#[cfg(feature = "tls")]
pub fn secure_env(
    dir: &std::path::Path,
    ca: &converge_auth::testing::TestCa,
    principals: &serde_json::Value,
) -> Vec<(&'static str, PathBuf)> {
    let (cert, key) = ca.server("converge").write(dir, "server");
    let auth_file = dir.join("auth.json");
    std::fs::write(&auth_file, principals.to_string()).expect("write the AUTH_FILE");
    vec![
        ("TLS_CERT_FILE", cert),
        ("TLS_KEY_FILE", key),
        ("AUTH_FILE", auth_file),
    ]
}

/// The PostgreSQL bin dir (where `pg_dump` is): `PG_BIN_DIR`, else what
/// `scripts/pg-test-cluster.sh bindir` finds (the install the test cluster runs from).
///
/// # Panics
/// If there is none.
pub fn pg_bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PG_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository root")
        .join("scripts/pg-test-cluster.sh");
    let out = std::process::Command::new(script)
        .arg("bindir")
        .output()
        .expect("run scripts/pg-test-cluster.sh bindir");
    assert!(
        out.status.success(),
        "no PostgreSQL bin dir (pg_dump): set PG_BIN_DIR"
    );
    PathBuf::from(String::from_utf8(out.stdout).expect("a path").trim())
}
