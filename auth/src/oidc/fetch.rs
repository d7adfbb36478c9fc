//! The one HTTP exchange OIDC needs: `GET` a JSON document (the issuer's discovery document,
//! its JWKS) over HTTP/1.1, on TCP or TLS (rustls with the ring provider; roots from
//! `OIDC_CA_FILE`, else the webpki roots), with a deadline on the whole exchange and a cap
//! on the body, and no redirect followed (an issuer's URLs are its own).
//!
//! Not reqwest: its rustls features would reach every reqwest client built together with
//! this crate (the server's tests, the examples, the bench), and each of those would panic
//! for want of an installed crypto provider. Here the provider is passed to the config,
//! nothing global (as conctl's transport does).

use std::{net::IpAddr, path::Path, sync::Arc, time::Duration};

use http_body_util::{BodyExt, Empty, Limited};
use hyper::{Request, StatusCode, body::Bytes, header};
use hyper_util::rt::TokioIo;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpStream,
};
use tokio_rustls::TlsConnector;
use url::{Host, Url};

/// How long one exchange (connect, TLS, request, whole body) may take.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest document read (a JWKS of a few dozen keys is a few tens of KiB).
pub const MAX_BODY: usize = 1024 * 1024;

/// Why a document could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Connecting, the TLS handshake or the exchange failed.
    #[error("GET {url}: {reason}")]
    Io {
        /// What was asked for.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The server answered something other than 200 with JSON of the expected shape.
    #[error("GET {url}: {reason}")]
    Answer {
        /// What was asked for.
        url: String,
        /// What was wrong with the answer.
        reason: String,
    },
}

/// An HTTP(S) client for the issuer's documents.
#[derive(Clone)]
pub struct Client {
    tls: TlsConnector,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("oidc::fetch::Client")
    }
}

impl Client {
    /// A client trusting the PEM certificates of `ca_file`, else the webpki roots.
    pub fn new(ca_file: Option<&Path>) -> Result<Client, String> {
        let mut roots = RootCertStore::empty();
        match ca_file {
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
            Some(path) => {
                let certs = CertificateDer::pem_file_iter(path)
                    .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                if certs.is_empty() {
                    return Err(format!("{} holds no PEM certificate", path.display()));
                }
                for c in certs {
                    roots
                        .add(c)
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                }
            }
        }
        let mut cfg =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(roots)
                .with_no_client_auth();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Client {
            tls: TlsConnector::from(Arc::new(cfg)),
        })
    }

    /// `GET url` and parse its body as JSON (the caller checked the URL's scheme).
    pub async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        url: &Url,
    ) -> Result<T, FetchError> {
        let body = tokio::time::timeout(TIMEOUT, self.get(url))
            .await
            .map_err(|_| FetchError::Io {
                url: url.to_string(),
                reason: format!("no complete answer within {TIMEOUT:?}"),
            })??;
        serde_json::from_slice(&body).map_err(|e| FetchError::Answer {
            url: url.to_string(),
            reason: format!("not the JSON expected: {e}"),
        })
    }

    async fn get(&self, url: &Url) -> Result<Bytes, FetchError> {
        let io = |reason: String| FetchError::Io {
            url: url.to_string(),
            reason,
        };
        let host = url.host().ok_or_else(|| io("no host".into()))?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| io("no port".into()))?;
        let dial = match &host {
            Host::Domain(d) => d.to_string(),
            Host::Ipv4(a) => a.to_string(),
            Host::Ipv6(a) => a.to_string(),
        };
        let tcp = TcpStream::connect((dial.as_str(), port))
            .await
            .map_err(|e| io(format!("connect: {e}")))?;
        let _ = tcp.set_nodelay(true);
        if url.scheme() == "https" {
            let name = match host {
                Host::Domain(d) => ServerName::try_from(d.to_string()),
                Host::Ipv4(a) => Ok(ServerName::IpAddress(IpAddr::V4(a).into())),
                Host::Ipv6(a) => Ok(ServerName::IpAddress(IpAddr::V6(a).into())),
            }
            .map_err(|e| io(format!("server name: {e}")))?;
            let tls = self
                .tls
                .connect(name, tcp)
                .await
                .map_err(|e| io(format!("TLS: {e}")))?;
            exchange(tls, url).await
        } else {
            exchange(tcp, url).await
        }
    }
}

async fn exchange<S>(stream: S, url: &Url) -> Result<Bytes, FetchError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = |reason: String| FetchError::Io {
        url: url.to_string(),
        reason,
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| io(e.to_string()))?;
    // Ends with the exchange (the sender is dropped with this function).
    tokio::spawn(conn);
    let mut target = url.path().to_string();
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    let authority = match url.port() {
        Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_string(),
    };
    let req = Request::get(target)
        .header(header::HOST, authority)
        .header(header::ACCEPT, "application/json")
        .header(
            header::USER_AGENT,
            concat!("converge/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::<Bytes>::new())
        .map_err(|e| io(e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| io(e.to_string()))?;
    if resp.status() != StatusCode::OK {
        return Err(FetchError::Answer {
            url: url.to_string(),
            reason: format!(
                "answered {} (want 200; redirects are not followed)",
                resp.status()
            ),
        });
    }
    let body = Limited::new(resp.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| FetchError::Answer {
            url: url.to_string(),
            reason: format!("body unread or over {MAX_BODY} bytes: {e}"),
        })?;
    Ok(body.to_bytes())
}
