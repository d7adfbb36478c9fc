//! Dialling a broker: the endpoint (h2c or TLS with the configured roots and client
//! certificate) and the bearer token, both prepared afresh for every connection so a
//! rotated token, CA or certificate file is picked up at the next reconnect.
//!
//! Each address of the list gets its own endpoint, so the TLS server name is that entry's
//! host. The connector (hyper's) resolves a host name to all its records and tries them one
//! by one within the connect timeout, so a name with several brokers behind it needs
//! nothing more here. HTTP/2 keepalive pings notice a dead or black-holed broker within
//! `KEEPALIVE_INTERVAL + KEEPALIVE_TIMEOUT` instead of at the kernel's TCP timeout.
//!
//! The files are also read once when the worker starts ([`check`]), so a typo in a path or
//! a file that is not PEM fails `run_worker` at once, naming the variable, instead of
//! turning into an endless reconnect loop.

use std::{path::Path, time::Duration};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use tonic::{
    metadata::{AsciiMetadataValue, MetadataMap},
    transport::{Certificate, ClientTlsConfig, Endpoint, Identity},
};

use crate::{config::WorkerConfig, error::ConfigError};

/// Bound on one connect (TCP and TLS handshake), shared by every DNS record of the host.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often an HTTP/2 PING goes out, idle or not (the broker does not limit pings).
pub(crate) const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// How long a PING may wait for its answer before the connection is dropped.
pub(crate) const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// What one connection needs: where to dial and the `authorization` value to send.
pub(crate) struct Dial {
    pub(crate) endpoint: Endpoint,
    bearer: Option<AsciiMetadataValue>,
}

impl Dial {
    /// Reads the token and TLS files as they are now and builds the endpoint of `addr`
    /// (one entry of `cfg.broker_addrs`).
    pub(crate) fn prepare(cfg: &WorkerConfig, addr: &str) -> Result<Self, ConfigError> {
        let mut endpoint = Endpoint::from_shared(addr.to_string())
            .map_err(|e| ConfigError::invalid("BROKER_ADDR", addr, e.to_string()))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true);
        if cfg.is_tls() {
            endpoint = endpoint.tls_config(tls_config(cfg)?).map_err(|e| {
                // The files parsed; what is left is mostly the pair not fitting together.
                let (var, value) = match &cfg.cert_file {
                    Some(p) => ("WORKER_CERT_FILE", p.display().to_string()),
                    None => ("BROKER_ADDR", addr.to_string()),
                };
                ConfigError::invalid(
                    var,
                    value,
                    format!("cannot set up TLS: {}", crate::runtime::session::chain(&e)),
                )
            })?;
        }
        let bearer = match &cfg.token {
            None => None,
            Some(t) => {
                let mut v = AsciiMetadataValue::try_from(format!("Bearer {}", t.read()?)).map_err(
                    |_| ConfigError::InvalidSecret {
                        var: t.var().into(),
                        reason: "the token is not a valid header value".into(),
                    },
                )?;
                // Keeps it out of `Debug` output of the request (http's sensitive flag).
                v.set_sensitive(true);
                Some(v)
            }
        };
        Ok(Self { endpoint, bearer })
    }

    /// The `authorization` value sent with every call, if a token is configured.
    pub(crate) fn bearer(&self) -> Option<AsciiMetadataValue> {
        self.bearer.clone()
    }

    /// Adds the credentials to a request's metadata.
    pub(crate) fn authorize(&self, metadata: &mut MetadataMap) {
        if let Some(b) = &self.bearer {
            metadata.insert("authorization", b.clone());
        }
    }
}

/// Everything `run_worker` must refuse before the first connection: unreadable or
/// malformed token, CA, certificate or key files, or an address no endpoint can be built
/// for.
pub(crate) fn check(cfg: &WorkerConfig) -> Result<(), ConfigError> {
    for addr in &cfg.broker_addrs {
        Dial::prepare(cfg, addr)?;
    }
    Ok(())
}

fn read_file(var: &str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path)
        .map_err(|e| ConfigError::invalid(var, path.display(), format!("cannot read it: {e}")))
}

/// The PEM certificates in `pem`, each a well-formed X.509 certificate; at least one.
fn certificates(var: &str, path: &Path, pem: &[u8]) -> Result<(), ConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError::invalid(var, path.display(), format!("not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(ConfigError::invalid(
            var,
            path.display(),
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
        ));
    }
    // A root store refuses what is not a certificate; tonic would skip it silently and
    // leave a worker that trusts nothing.
    let mut roots = rustls::RootCertStore::empty();
    for c in certs {
        roots.add(c).map_err(|e| {
            ConfigError::invalid(
                var,
                path.display(),
                format!("not a usable certificate: {e}"),
            )
        })?;
    }
    Ok(())
}

fn tls_config(cfg: &WorkerConfig) -> Result<ClientTlsConfig, ConfigError> {
    // The server name is the address's host (tonic's default), as every SDK does.
    let mut tls = ClientTlsConfig::new();
    tls = match &cfg.broker_ca_file {
        Some(path) => {
            let pem = read_file("BROKER_CA_FILE", path)?;
            certificates("BROKER_CA_FILE", path, &pem)?;
            tls.ca_certificate(Certificate::from_pem(pem))
        }
        None => tls.with_webpki_roots(),
    };
    if let (Some(cert_path), Some(key_path)) = (&cfg.cert_file, &cfg.key_file) {
        let cert = read_file("WORKER_CERT_FILE", cert_path)?;
        certificates("WORKER_CERT_FILE", cert_path, &cert)?;
        let key = read_file("WORKER_KEY_FILE", key_path)?;
        // The parser's own error is left out: it could quote a line of the key.
        PrivateKeyDer::from_pem_slice(&key).map_err(|_| {
            ConfigError::invalid(
                "WORKER_KEY_FILE",
                key_path.display(),
                "holds no usable PEM private key (PKCS#8, PKCS#1 or SEC1)",
            )
        })?;
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    Ok(tls)
}
