//! conctl's wire: one HTTP/1.1 exchange per call over TCP, or over TLS for an `https://`
//! server (rustls with the ring provider; roots from `--ca-file`, else the webpki roots). An
//! exchange reads the whole answer; [`Endpoint::open`] hands back its body to read as it comes
//! (a watch's event stream).
//!
//! Not reqwest: its rustls features would reach every reqwest client built together with this
//! crate (the server's tests, the examples, the bench), and each of those would panic for want
//! of an installed crypto provider. Here the provider is passed to the config, nothing global.

use std::{path::Path, sync::Arc};

use anyhow::{Context, anyhow, bail};
use http_body_util::{BodyExt, Full};
use hyper::{
    HeaderMap, Request, Response, StatusCode,
    body::{Bytes, Incoming},
    http::uri::Authority,
};
use hyper_util::rt::TokioIo;
use rustls_pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpStream,
};
use tokio_rustls::TlsConnector;

/// Where the converge API is, parsed from `--server`.
pub struct Endpoint {
    /// The TLS client and the name to verify for an `https://` server; `None` for `http://`.
    tls: Option<(TlsConnector, ServerName<'static>)>,
    /// Host to dial (an IPv6 literal without its brackets).
    host: String,
    port: u16,
    /// `host[:port]` as written, for the `Host` header.
    authority: String,
    /// A path the API sits under (e.g. `/converge` behind a proxy); empty for `/`.
    pub prefix: String,
}

/// What went wrong on the wire, for the caller to word with the server's address.
pub enum WireError {
    /// The TCP connection was refused, unreachable or not resolvable.
    Connect(std::io::Error),
    /// The TLS handshake failed.
    Tls(std::io::Error),
    /// The HTTP exchange failed after connecting.
    Http(hyper::Error),
}

impl Endpoint {
    /// Parses `http://host[:port][/prefix]`, `https://...`, or a bare `host:port` (plain
    /// HTTP, as for `BROKER_ADDR`). `ca_file` holds the PEM roots to trust and needs https.
    pub fn parse(server: &str, ca_file: Option<&Path>) -> anyhow::Result<Endpoint> {
        let server = server.trim();
        let (https, rest) = if let Some(rest) = server.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = server.strip_prefix("http://") {
            (false, rest)
        } else if server.contains("://") {
            bail!("--server {server:?} must start with http:// or https://");
        } else {
            (false, server)
        };
        let rest = rest.trim_end_matches('/');
        let (authority, prefix) = match rest.find(['/', '?', '#']) {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if prefix.contains(['?', '#']) {
            bail!("--server {server:?} may hold a path but no query or fragment");
        }
        let parsed: Authority = authority
            .parse()
            .map_err(|_| anyhow!("--server {server:?} does not name a host (host:port)"))?;
        if authority.contains('@') {
            bail!("--server {server:?} holds credentials; pass a token with --token instead");
        }
        let host = parsed.host().trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            bail!("--server {server:?} does not name a host (host:port)");
        }
        let port = parsed.port_u16().unwrap_or(if https { 443 } else { 80 });
        let tls = if https {
            let name = ServerName::try_from(host.to_string())
                .map_err(|_| anyhow!("--server {server:?}: {host:?} is not a valid TLS name"))?;
            Some((TlsConnector::from(Arc::new(client_config(ca_file)?)), name))
        } else {
            if let Some(ca) = ca_file {
                bail!(
                    "--ca-file (CONVERGE_CA_FILE) {} is for an https:// server, but --server is \
                     {server}",
                    ca.display()
                );
            }
            None
        };
        Ok(Endpoint {
            tls,
            host: host.to_string(),
            port,
            authority: authority.to_string(),
            prefix: prefix.to_string(),
        })
    }

    /// Whether this endpoint speaks TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The `Host` header's value.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// Sends `req` on a new connection and reads the whole answer.
    pub async fn exchange(
        &self,
        req: Request<Full<Bytes>>,
    ) -> Result<(StatusCode, HeaderMap, Bytes), WireError> {
        let (parts, body) = self.open(req).await?.into_parts();
        let body = body.collect().await.map_err(WireError::Http)?.to_bytes();
        Ok((parts.status, parts.headers, body))
    }

    /// Sends `req` on a new connection and returns the answer once its head is in; the body
    /// is read by the caller, as it arrives.
    pub async fn open(&self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, WireError> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(WireError::Connect)?;
        // One small request each way: do not hold it back waiting for more bytes.
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => send(tcp, req).await,
            Some((tls, name)) => {
                let stream = tls
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(WireError::Tls)?;
                send(stream, req).await
            }
        }
    }
}

async fn send<S>(stream: S, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, WireError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(WireError::Http)?;
    // The connection task ends when the answer is read and `sender` dropped; its own error
    // (if any) also fails `send_request` or the body's read, which is where it is reported.
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender.send_request(req).await.map_err(WireError::Http)
}

/// The TLS client config: only the roots in `ca_file` when given (a private CA), else the
/// webpki roots; HTTP/1.1 by ALPN.
fn client_config(ca_file: Option<&Path>) -> anyhow::Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let pem = std::fs::read(path).with_context(|| {
                format!(
                    "cannot read --ca-file (CONVERGE_CA_FILE) {}",
                    path.display()
                )
            })?;
            let certs = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| anyhow!("--ca-file {}: not valid PEM: {e}", path.display()))?;
            if certs.is_empty() {
                bail!(
                    "--ca-file {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                    path.display()
                );
            }
            for cert in certs {
                roots.add(cert).map_err(|e| {
                    anyhow!(
                        "--ca-file {}: a certificate cannot be used as a root: {e}",
                        path.display()
                    )
                })?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_with_default_ports_prefixes_and_ipv6() {
        let e = Endpoint::parse("http://localhost:8080/", None).unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.is_tls()),
            ("localhost", 8080, false)
        );
        assert_eq!((e.authority(), e.prefix.as_str()), ("localhost:8080", ""));
        let e = Endpoint::parse("127.0.0.1:9000", None).unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.is_tls()),
            ("127.0.0.1", 9000, false)
        );
        let e = Endpoint::parse("https://converge.example.org/ops/", None).unwrap();
        assert_eq!((e.port, e.is_tls()), (443, true));
        assert_eq!(e.prefix, "/ops");
        let e = Endpoint::parse("http://[::1]:8080", None).unwrap();
        assert_eq!((e.host.as_str(), e.authority()), ("::1", "[::1]:8080"));
        let e = Endpoint::parse("https://[::1]", None).unwrap();
        assert_eq!((e.host.as_str(), e.port), ("::1", 443));
    }

    #[test]
    fn bad_addresses_and_a_ca_file_without_https_are_refused() {
        for (server, want) in [
            ("ftp://x:1", "must start with http:// or https://"),
            ("http://", "does not name a host"),
            ("http://a b:1", "does not name a host"),
            ("http://u:p@host:1", "holds credentials"),
            ("http://host:1/?q=1", "no query"),
        ] {
            let e = match Endpoint::parse(server, None) {
                Ok(_) => panic!("{server} was accepted"),
                Err(e) => e.to_string(),
            };
            assert!(e.contains(want), "{server}: {e}");
        }
        let e = Endpoint::parse("http://localhost:8080", Some(Path::new("/tmp/ca.pem")))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("--ca-file (CONVERGE_CA_FILE) /tmp/ca.pem is for an https:// server"),
            "{e}"
        );
    }

    #[test]
    fn a_ca_file_must_exist_and_hold_pem_certificates() {
        let dir = std::env::temp_dir().join(format!("conctl-ca-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.pem");
        let e = format!(
            "{:#}",
            Endpoint::parse("https://h:1", Some(&missing))
                .err()
                .unwrap()
        );
        assert!(
            e.contains("cannot read --ca-file") && e.contains("missing.pem"),
            "{e}"
        );
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = Endpoint::parse("https://h:1", Some(&empty))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("holds no PEM certificate"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
