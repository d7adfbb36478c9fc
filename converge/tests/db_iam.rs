//! `DB_IAM_AUTH=true` (issue 46, item 5) against the real `converge` binary.
//!
//! - The boot stops, naming the setting, when DB_IAM_AUTH is set with
//!   DATABASE_PASSWORD_COMMAND, when DATABASE_URL does not ask for TLS, when the AWS chain
//!   names no region, and when it gives no credentials (`serve` and `migrate` alike).
//! - Credentials from the environment (`AWS_ACCESS_KEY_ID`, ...; instance metadata off, so
//!   nothing waits on it) sign the token, and a fresh token is the password of every new
//!   physical connection as connections are recycled (`DATABASE_MAX_CONN_LIFETIME`), over
//!   TLS, for `migrate` and `serve`; neither a token nor the secret key is ever logged.
//!
//! Nothing here can verify an IAM token: only RDS/Aurora holds the key material behind
//! `rds-db:connect`, and end-to-end sign-in against a real RDS cannot run in this test suite.
//! So converge signs in through [`TlsFront`], a PostgreSQL front end of the test's own: it
//! terminates TLS with a certificate of a test CA (converge checks it: `sslmode=verify-full`),
//! asks for a password as RDS does (cleartext, inside TLS), records what it gets, and hands
//! the session on to the test PostgreSQL, which lets the role in without a password (trust).
//! The test then checks every recorded password is the token AWS's signer makes for those
//! credentials, host, port, user and region at the token's own signing time.

mod common;

use std::{
    collections::BTreeSet,
    path::Path,
    str::FromStr,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use aws_credential_types::Credentials;
use common::{free_port, wait_for};
use converge_control::testing::TestDb;
use converge_engine::db::iam::{self, Endpoint};
use sqlx::postgres::PgConnectOptions;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// AWS's documented example keys (never a real account's).
const AKID: &str = "AKIDEXAMPLE";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const SESSION: &str = "FQoGZXIvYXdzEXAMPLESESSIONTOKEN/+==";
const REGION: &str = "eu-west-1";

/// The environment of an AWS chain that holds nothing: no profile files (an empty HOME and
/// files that do not exist), instance metadata off, no container or web-identity endpoint.
fn empty_aws_chain(dir: &Path) -> Vec<(&'static str, String)> {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    vec![
        ("HOME", home.display().to_string()),
        (
            "AWS_CONFIG_FILE",
            dir.join("no-config").display().to_string(),
        ),
        (
            "AWS_SHARED_CREDENTIALS_FILE",
            dir.join("no-credentials").display().to_string(),
        ),
        ("AWS_EC2_METADATA_DISABLED", "true".into()),
    ]
}

/// The chain with the example keys in the environment, and a region.
fn env_credentials(dir: &Path) -> Vec<(&'static str, String)> {
    let mut env = empty_aws_chain(dir);
    env.extend([
        ("AWS_ACCESS_KEY_ID", AKID.to_string()),
        ("AWS_SECRET_ACCESS_KEY", SECRET.to_string()),
        ("AWS_SESSION_TOKEN", SESSION.to_string()),
        ("AWS_REGION", REGION.to_string()),
    ]);
    env
}

/// `converge serve` (free loopback ports) or `converge migrate up` on `url` with `env`,
/// its output captured.
fn converge(serve: bool, url: &str, env: &[(&str, String)]) -> tokio::process::Command {
    let bin = env!("CARGO_BIN_EXE_converge");
    let mut cmd = if serve {
        converge_testkit::serve_on(bin, url, free_port(), free_port())
    } else {
        let mut cmd = converge_testkit::clean_command(bin);
        cmd.args(["migrate", "up"]).env("DATABASE_URL", url);
        cmd
    };
    cmd.envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// A boot that must stop: its name, DATABASE_URL, environment and the words of its error.
type Case = (
    &'static str,
    &'static str,
    Vec<(&'static str, String)>,
    &'static [&'static str],
);

#[tokio::test]
async fn the_boot_stops_naming_what_is_missing() {
    let dir = converge_auth::testing::scratch_dir("dbiam-boot");
    // Nothing listens there: every case must stop before connecting.
    let tls_url = "postgres://app@127.0.0.1:1/app?sslmode=verify-full";
    let mut no_region = env_credentials(&dir);
    no_region.retain(|(k, _)| *k != "AWS_REGION");
    let mut no_credentials = empty_aws_chain(&dir);
    no_credentials.push(("AWS_REGION", REGION.into()));
    let mut with_command = env_credentials(&dir);
    with_command.push(("DATABASE_PASSWORD_COMMAND", "echo pw".into()));
    let cases: [Case; 5] = [
        (
            "with DATABASE_PASSWORD_COMMAND",
            tls_url,
            with_command,
            &["DB_IAM_AUTH", "DATABASE_PASSWORD_COMMAND"],
        ),
        (
            "no sslmode",
            "postgres://app@127.0.0.1:1/app",
            env_credentials(&dir),
            &["DATABASE_URL", "sslmode", "DB_IAM_AUTH"],
        ),
        (
            "sslmode=prefer",
            "postgres://app@127.0.0.1:1/app?sslmode=prefer",
            env_credentials(&dir),
            &["DATABASE_URL", "sslmode"],
        ),
        ("no region", tls_url, no_region, &["DB_IAM_AUTH", "region"]),
        (
            "no credentials",
            tls_url,
            no_credentials,
            &["DB_IAM_AUTH", "credentials"],
        ),
    ];
    for (case, url, mut env, words) in cases {
        env.push(("DB_IAM_AUTH", "true".into()));
        for serve in [true, false] {
            let what = format!("{case} ({})", if serve { "serve" } else { "migrate" });
            let out = tokio::time::timeout(
                Duration::from_secs(120),
                converge(serve, url, &env).output(),
            )
            .await
            .unwrap_or_else(|_| panic!("{what}: converge must stop by itself"))
            .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{what}: must fail\n{err}");
            // One line says it all, naming the setting.
            assert!(
                err.lines().any(|l| words.iter().all(|w| l.contains(w))),
                "{what}: a line naming {words:?}\n{err}"
            );
            assert!(!err.contains(SECRET), "{what}: the secret key in\n{err}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The TLS front end converge signs in through (see the module documentation): the
/// password of every connection, in order.
struct TlsFront {
    port: u16,
    passwords: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsFront {
    /// Listens on a loopback port with a certificate of `ca` for 127.0.0.1, and hands each
    /// session on to `upstream` (host:port of a PostgreSQL trusting the role).
    async fn start(ca: &converge_auth::testing::TestCa, upstream: String) -> TlsFront {
        use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
        let pem = ca.server("db-front");
        let certs = CertificateDer::pem_slice_iter(pem.cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(pem.key.as_bytes()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let passwords = Arc::new(Mutex::new(Vec::new()));
        let seen = passwords.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, upstream, seen) = (acceptor.clone(), upstream.clone(), seen.clone());
                tokio::spawn(async move {
                    if let Err(e) = front_session(tcp, acceptor, &upstream, &seen).await {
                        eprintln!("TLS front: a session ended: {e}");
                    }
                });
            }
        });
        TlsFront {
            port,
            passwords,
            task,
        }
    }

    fn passwords(&self) -> Vec<String> {
        self.passwords.lock().unwrap().clone()
    }
}

/// One PostgreSQL message body after its 4-byte length (the length counts itself).
async fn read_body(s: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Vec<u8>> {
    let len = s.read_u32().await? as usize;
    if !(4..=64 * 1024).contains(&len) {
        return Err(std::io::Error::other(format!("message length {len}")));
    }
    let mut body = vec![0; len - 4];
    s.read_exact(&mut body).await?;
    Ok(body)
}

/// One session through the front: TLS required (a client that does not ask for it is
/// dropped), the startup message read, a cleartext password asked for and recorded, then
/// the startup message replayed to the upstream PostgreSQL and the two ends joined.
async fn front_session(
    mut tcp: TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    upstream: &str,
    seen: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    const SSL_REQUEST: [u8; 4] = 80877103u32.to_be_bytes();
    let first = read_body(&mut tcp).await?;
    if first != SSL_REQUEST {
        return Err(std::io::Error::other("a session without TLS"));
    }
    tcp.write_all(b"S").await?;
    let mut tls = acceptor.accept(tcp).await?;
    let startup = read_body(&mut tls).await?;
    // AuthenticationCleartextPassword.
    tls.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 3]).await?;
    tls.flush().await?;
    let mut tag = [0u8; 1];
    tls.read_exact(&mut tag).await?;
    let body = read_body(&mut tls).await?;
    if tag[0] != b'p' {
        return Err(std::io::Error::other("no password message"));
    }
    let password = String::from_utf8_lossy(body.strip_suffix(&[0]).unwrap_or(&body)).into_owned();
    seen.lock().unwrap().push(password);
    let mut up = TcpStream::connect(upstream).await?;
    up.write_all(&(startup.len() as u32 + 4).to_be_bytes())
        .await?;
    up.write_all(&startup).await?;
    tokio::io::copy_bidirectional(&mut tls, &mut up).await?;
    Ok(())
}

/// What `token` must be: AWS's signer's token for the example credentials and `endpoint`
/// at the token's own X-Amz-Date (whole seconds).
fn expected_token(token: &str, endpoint: &Endpoint) -> String {
    let date = token
        .split('&')
        .find_map(|p| p.strip_prefix("X-Amz-Date="))
        .unwrap_or_else(|| panic!("no X-Amz-Date in {token}"));
    let at = chrono::NaiveDateTime::parse_from_str(date, "%Y%m%dT%H%M%SZ")
        .unwrap()
        .and_utc();
    let creds = Credentials::new(AKID, SECRET, Some(SESSION.into()), None, "test");
    iam::auth_token(endpoint, REGION, &creds, SystemTime::from(at)).unwrap()
}

#[tokio::test]
async fn every_new_connection_signs_in_with_a_fresh_token_from_env_credentials() {
    let dir = converge_auth::testing::scratch_dir("dbiam");
    let db = TestDb::new().await;
    let real = PgConnectOptions::from_str(&db.url).unwrap();
    let ca = converge_auth::testing::TestCa::new("converge test database CA");
    let ca_file = ca.write(&dir, "db-ca");
    let front = TlsFront::start(&ca, format!("{}:{}", real.get_host(), real.get_port())).await;
    let user = real.get_username().to_string();
    let url = format!(
        "postgres://{user}@127.0.0.1:{}/{}?sslmode=verify-full&sslrootcert={}",
        front.port,
        real.get_database().unwrap(),
        ca_file.display()
    );
    let endpoint = Endpoint {
        host: "127.0.0.1".into(),
        port: front.port,
        user: user.clone(),
    };
    let mut env = env_credentials(&dir);
    env.extend([
        ("DB_IAM_AUTH", "true".to_string()),
        ("DATABASE_MAX_CONN_LIFETIME", "2s".to_string()),
        // Everything converge logs, down to debug, must hold no token and no secret.
        ("LOG_LEVEL", "debug".to_string()),
    ]);

    // `converge migrate` signs in with a token too.
    let out = converge(false, &url, &env).output().await.unwrap();
    let migrate_log =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "migrate: {migrate_log}");
    assert!(
        !front.passwords().is_empty(),
        "migrate signed in without a password"
    );

    // `converge serve`: its connections live 2 s (75-100 %), and each new one must carry a
    // token minted for it.
    let http_port = free_port();
    let mut cmd =
        converge_testkit::serve_on(env!("CARGO_BIN_EXE_converge"), &url, http_port, free_port());
    cmd.envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let log = Arc::new(Mutex::new(Vec::<u8>::new()));
    let mut readers = Vec::new();
    for mut pipe in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn AsyncRead + Unpin + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let log = log.clone();
        readers.push(tokio::spawn(async move {
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                log.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        }));
    }
    let http = format!("http://127.0.0.1:{http_port}");
    wait_for(
        Duration::from_secs(60),
        "converge ready on IAM tokens",
        || async {
            reqwest::get(format!("{http}/readyz"))
                .await
                .ok()
                .filter(|r| r.status() == 200)
                .map(|_| ())
        },
    )
    .await;
    let at_boot = front.passwords().len();
    // Connections are recycled: new ones keep coming, each with a token, and the tokens
    // change (a new one is minted after each connection opens, signed at its own second).
    wait_for(
        Duration::from_secs(60),
        "new connections with fresh tokens",
        || async {
            let all = front.passwords();
            let distinct: BTreeSet<&String> = all[at_boot..].iter().collect();
            (all.len() >= at_boot + 6 && distinct.len() >= 3).then_some(())
        },
    )
    .await;
    child.kill().await.unwrap();
    for r in readers {
        let _ = r.await;
    }

    let passwords = front.passwords();
    let log = String::from_utf8_lossy(&log.lock().unwrap()).into_owned() + &migrate_log;
    let prefix = format!(
        "127.0.0.1:{}/?Action=connect&DBUser={user}&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F",
        front.port
    );
    for token in &passwords {
        assert!(token.starts_with(&prefix), "{token}");
        assert!(
            token.contains("%2Feu-west-1%2Frds-db%2Faws4_request&")
                && token.contains("&X-Amz-Expires=900&")
                && token.contains("&X-Amz-Security-Token="),
            "{token}"
        );
        assert_eq!(token, &expected_token(token, &endpoint));
        // The signature is the secret part of a token; no log line holds it.
        let signature = token.rsplit_once("X-Amz-Signature=").unwrap().1;
        assert!(!log.contains(signature), "a token was logged");
    }
    assert!(!log.contains(SECRET), "the secret key was logged");
    assert!(!log.contains(SESSION), "the session token was logged");
    drop(front);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}
