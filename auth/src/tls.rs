//! TLS listeners for the HTTP API and the broker.
//!
//! [`ServerTls`] holds the rustls configuration built from `TLS_CERT_FILE`, `TLS_KEY_FILE`
//! and (for the broker) `TLS_CLIENT_CA_FILE`, and rebuilds it when any of those files'
//! content changes, so a renewed certificate is served to new connections without a
//! restart (connections already open keep the one they negotiated).
//!
//! [`accept_tls`] handshakes the connections a [`GuardedListener`] admits. Each handshake
//! runs in a task of its own with a deadline, so a peer that connects and sends nothing holds
//! one socket for at most that long and never delays anyone else's connection. Finished connections come out as
//! [`TlsConn`]s, usable by axum (through [`TlsListener`]) and by tonic (through
//! [`TlsListener::into_stream`]), each carrying its peer's [`PeerInfo`].

use std::{
    io,
    net::SocketAddr,
    path::{Path, PathBuf},
    pin::Pin,
    sync::{Arc, RwLock},
    task::{Context, Poll},
    time::Duration,
};

use rustls::{RootCertStore, ServerConfig, server::WebPkiClientVerifier};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use sha2::{Digest, Sha256};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    sync::mpsc,
};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::listen::{Guarded, GuardedListener};

/// The PEM files a TLS listener is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `TLS_CERT_FILE`: the server's certificate chain, leaf first.
    pub cert: PathBuf,
    /// `TLS_KEY_FILE`: its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// `TLS_CLIENT_CA_FILE`: when set, clients must present a certificate from this CA
    /// (the broker only; the HTTP API authenticates with tokens).
    pub client_ca: Option<PathBuf>,
}

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no PEM object of the expected type.
    #[error("{what} {path}: {reason}")]
    File {
        /// Which variable's file.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// rustls refused the material (a key that does not match the certificate, ...).
    #[error("the TLS material is unusable")]
    Rustls(#[from] rustls::Error),
    /// The client CA could not be used to verify clients.
    #[error("TLS_CLIENT_CA_FILE cannot verify clients: {0}")]
    ClientCa(String),
}

fn read_certs(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let fail = |reason: String| TlsError::File {
        what,
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| fail(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(e.to_string()))?;
    if certs.is_empty() {
        return Err(fail("holds no PEM certificate".into()));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| TlsError::File {
        what: "TLS_KEY_FILE",
        path: path.to_path_buf(),
        reason: format!("no usable PEM private key ({e})"),
    })
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn build(files: &TlsFiles, alpn: &[&[u8]]) -> Result<ServerConfig, TlsError> {
    let certs = read_certs("TLS_CERT_FILE", &files.cert)?;
    let key = read_key(&files.key)?;
    let builder =
        ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let mut cfg = match &files.client_ca {
        None => builder.with_no_client_auth().with_single_cert(certs, key)?,
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in read_certs("TLS_CLIENT_CA_FILE", ca)? {
                roots
                    .add(c)
                    .map_err(|e| TlsError::ClientCa(e.to_string()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| TlsError::ClientCa(e.to_string()))?;
            builder
                .with_client_cert_verifier(verifier)
                .with_single_cert(certs, key)?
        }
    };
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(cfg)
}

/// Fingerprint of the files' content: a reload happens only when it changes.
fn fingerprint(files: &TlsFiles) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in [
        Some(&files.cert),
        Some(&files.key),
        files.client_ca.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        // An unreadable file hashes as empty; the rebuild then reports it.
        h.update(std::fs::read(p).unwrap_or_default());
        h.update([0u8]);
    }
    h.finalize().into()
}

/// A server TLS configuration that follows its files.
pub struct ServerTls {
    files: TlsFiles,
    alpn: Vec<Vec<u8>>,
    current: RwLock<(Arc<ServerConfig>, [u8; 32])>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("files", &self.files)
            .finish()
    }
}

/// ALPN for a gRPC listener (HTTP/2 only).
pub const ALPN_GRPC: &[&[u8]] = &[b"h2"];
/// ALPN for the HTTP API (HTTP/2 preferred, HTTP/1.1 for curl and browsers that ask).
pub const ALPN_HTTP: &[&[u8]] = &[b"h2", b"http/1.1"];

impl ServerTls {
    /// Builds the configuration from `files` now; an error names the file at fault.
    pub fn load(files: TlsFiles, alpn: &[&[u8]]) -> Result<Arc<Self>, TlsError> {
        let fp = fingerprint(&files);
        let cfg = build(&files, alpn)?;
        Ok(Arc::new(ServerTls {
            files,
            alpn: alpn.iter().map(|p| p.to_vec()).collect(),
            current: RwLock::new((Arc::new(cfg), fp)),
        }))
    }

    /// Whether clients must present a certificate.
    pub fn verifies_clients(&self) -> bool {
        self.files.client_ca.is_some()
    }

    /// The acceptor for a new connection (the newest good configuration).
    pub fn acceptor(&self) -> TlsAcceptor {
        let cur = self
            .current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        TlsAcceptor::from(cur.0.clone())
    }

    /// Rebuilds from the files if their content changed; `Ok(true)` when it did. On error
    /// the previous configuration stays in force.
    pub fn reload(&self) -> Result<bool, TlsError> {
        let fp = fingerprint(&self.files);
        if fp
            == self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .1
        {
            return Ok(false);
        }
        let alpn: Vec<&[u8]> = self.alpn.iter().map(Vec::as_slice).collect();
        let cfg = build(&self.files, &alpn)?;
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = (Arc::new(cfg), fp);
        tracing::info!(cert = %self.files.cert.display(), "TLS certificate reloaded");
        Ok(true)
    }

    /// Polls the files every `every` until `stop`, reloading on change.
    pub async fn keep_fresh(self: Arc<Self>, every: Duration, stop: CancellationToken) {
        crate::poll_reload(
            every,
            stop,
            "TLS files not reloaded; the previous certificate stays in use",
            move || self.reload(),
        )
        .await
    }
}

/// Who is on the other end of a connection the WorkerService serves (TLS or plain; the
/// request extension tonic gives every call on it).
#[derive(Debug, Clone)]
pub struct PeerInfo {
    /// The peer's address.
    pub remote_addr: SocketAddr,
    /// The `spiffe://` URIs in the subject alternative names of the peer's verified client
    /// certificate (empty without one, and on a plain connection).
    pub spiffe_ids: Arc<[String]>,
    /// When the peer last sent a byte (`None` for a connection not admitted through a
    /// [`crate::listen::GuardedListener`]).
    pub activity: Option<crate::listen::ConnActivity>,
}

/// The `spiffe://` SAN URIs of a DER certificate (empty when it has none or does not parse;
/// it has already been verified by the handshake).
pub fn spiffe_ids(cert: &[u8]) -> Vec<String> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let Ok((_, cert)) = X509Certificate::from_der(cert) else {
        return Vec::new();
    };
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::URI(u) if u.starts_with("spiffe://") => Some((*u).to_string()),
            _ => None,
        })
        .collect()
}

/// One accepted, handshaken TLS connection.
pub struct TlsConn {
    io: tokio_rustls::server::TlsStream<Guarded<TcpStream>>,
    peer: PeerInfo,
}

impl TlsConn {
    /// Who the peer is.
    pub fn peer(&self) -> &PeerInfo {
        &self.peer
    }
}

impl AsyncRead for TlsConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl tonic::transport::server::Connected for TlsConn {
    type ConnectInfo = PeerInfo;
    fn connect_info(&self) -> PeerInfo {
        self.peer.clone()
    }
}

/// The handshaken connections of one TLS listener.
pub struct TlsListener {
    rx: mpsc::Receiver<TlsConn>,
    local: SocketAddr,
}

impl TlsListener {
    /// The connections as a stream for tonic's `serve_with_incoming`.
    pub fn into_stream(self) -> impl futures::Stream<Item = io::Result<TlsConn>> + Send + 'static {
        futures::stream::unfold(self.rx, |mut rx| async move {
            rx.recv().await.map(|c| (Ok(c), rx))
        })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsConn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TlsConn, SocketAddr) {
        match self.rx.recv().await {
            Some(c) => {
                let addr = c.peer.remote_addr;
                (c, addr)
            }
            // The accept loop stopped (shutdown): the server's own shutdown ends us.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// Longest a client may take to finish the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts on `listener` until `stop`, handshaking each connection in its own task (with
/// [`HANDSHAKE_TIMEOUT`]) under the newest configuration of `tls`.
pub fn accept_tls(
    mut listener: GuardedListener,
    tls: Arc<ServerTls>,
    stop: CancellationToken,
) -> io::Result<TlsListener> {
    let local = listener.local_addr()?;
    let (tx, rx) = mpsc::channel(256);
    tokio::spawn(async move {
        loop {
            let (tcp, remote_addr) = tokio::select! {
                _ = stop.cancelled() => return,
                a = listener.accept() => a,
            };
            let (acceptor, tx) = (tls.acceptor(), tx.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(io)) => {
                        let spiffe = io
                            .get_ref()
                            .1
                            .peer_certificates()
                            .and_then(|c| c.first())
                            .map(|c| spiffe_ids(c))
                            .unwrap_or_default();
                        let activity = Some(io.get_ref().0.activity());
                        let conn = TlsConn {
                            io,
                            peer: PeerInfo {
                                remote_addr,
                                spiffe_ids: spiffe.into(),
                                activity,
                            },
                        };
                        let _ = tx.send(conn).await;
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(peer = %remote_addr, error = %e, "TLS handshake failed")
                    }
                    Err(_) => tracing::debug!(peer = %remote_addr, "TLS handshake timed out"),
                }
            });
        }
    });
    Ok(TlsListener { rx, local })
}
