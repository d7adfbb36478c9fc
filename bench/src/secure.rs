//! `--split` and `--secure`: the broker in a process of its own (`ROLE=broker` beside
//! `converge dev` as `ROLE=control`), and with `--secure` the broker behind TLS and bearer
//! tokens, its workers dialling `https://` with a worker token, the API behind an admin token.
//! `--split` alone is the baseline that `--secure` is compared with: the same two processes,
//! open and in clear.

use std::path::{Path, PathBuf};

use converge_auth::{testing::TestCa, token};
use converge_sdk::{WorkerConfig, WorkerToken};

/// The credentials and certificates of a `--secure` run.
pub struct Secure {
    /// Bearer token of the admin principal (the bench's HTTP calls).
    pub admin_token: String,
    worker_token: String,
    auth_file: PathBuf,
    ca_file: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    /// The CA certificate, PEM (to probe the broker's HTTPS health port).
    pub ca_pem: String,
}

impl Secure {
    /// Mints tokens and a throwaway CA with a server certificate for 127.0.0.1 into `dir`.
    pub fn new(dir: &Path) -> anyhow::Result<Secure> {
        let admin_token = token::mint()?;
        let worker_token = token::mint()?;
        let auth_file = dir.join("auth.yaml");
        std::fs::write(
            &auth_file,
            format!(
                "principals:\n  - {{name: bench-admin, role: admin, token_sha256: \"{}\"}}\n  \
                 - {{name: bench-worker, role: worker, token_sha256: \"{}\", kinds: [\"*\"]}}\n",
                token::digest_hex(&admin_token),
                token::digest_hex(&worker_token)
            ),
        )?;
        let ca = TestCa::new("converge-bench CA");
        let (cert, key) = ca.server("converge-bench").write(dir, "server");
        Ok(Secure {
            admin_token,
            worker_token,
            auth_file,
            ca_file: ca.write(dir, "ca"),
            cert,
            key,
            ca_pem: ca.pem(),
        })
    }

    /// Environment of the control process: tokens on the API (plain HTTP on loopback, so the
    /// bench's client stays reqwest without TLS).
    pub fn control_env(&self) -> Vec<(&'static str, String)> {
        vec![("AUTH_FILE", self.auth_file.display().to_string())]
    }

    /// Environment of the broker process: tokens and TLS.
    pub fn broker_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AUTH_FILE", self.auth_file.display().to_string()),
            ("TLS_CERT_FILE", self.cert.display().to_string()),
            ("TLS_KEY_FILE", self.key.display().to_string()),
        ]
    }

    /// The same for a worker process of another form (its environment).
    pub fn worker_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("WORKER_TOKEN", self.worker_token.clone()),
            ("BROKER_CA_FILE", self.ca_file.display().to_string()),
        ]
    }

    /// Points a worker at the TLS broker with the worker token.
    pub fn worker(&self, cfg: &mut WorkerConfig) {
        cfg.token = Some(WorkerToken::Value(self.worker_token.clone()));
        cfg.broker_ca_file = Some(self.ca_file.clone());
    }
}
