//! Test support (feature `test-util`): a throwaway certificate authority whose server and
//! client certificates the TLS tests of every crate use, a minimal HTTPS client that
//! trusts it (reqwest's TLS features would reach every client built with the crate), and
//! the `AUTH_FILE` line of a bearer-token principal; [`issuer`]: a real OIDC issuer.

pub mod issuer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType,
    string::Ia5String,
};
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject};

/// One `AUTH_FILE` principal (a YAML list item, newline included) holding `token`'s hash,
/// with `kinds` when there are any (a worker's globs).
pub fn principal_line(name: &str, role: &str, token: &str, kinds: &[&str]) -> String {
    let kinds = if kinds.is_empty() {
        String::new()
    } else {
        format!(", kinds: {kinds:?}")
    };
    format!(
        "  - {{name: {name}, role: {role}, token_sha256: \"{}\"{kinds}}}\n",
        crate::token::digest_hex(token)
    )
}

/// A fresh directory under the system temp dir for one test's files (certificates, keys,
/// AUTH_FILE), named after `tag`; left for the OS to clean, so a failing test's files stay.
pub fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "converge-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    ));
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

/// A certificate and its private key, PEM.
#[derive(Debug, Clone)]
pub struct Pem {
    /// The certificate.
    pub cert: String,
    /// Its private key (PKCS#8).
    pub key: String,
}

impl Pem {
    /// Writes `<dir>/<name>.crt` and `<dir>/<name>.key` (mode 0600) and returns both paths.
    pub fn write(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let (c, k) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&c, &self.cert).expect("write certificate");
        std::fs::write(&k, &self.key).expect("write key");
        std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o600)).expect("chmod key");
        (c, k)
    }
}

/// A self-signed certificate authority for one test.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    /// A new CA named `name`.
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("CA key");
        TestCa {
            issuer: CertifiedIssuer::self_signed(params, key).expect("self-sign the CA"),
        }
    }

    /// The CA certificate, PEM (what clients and servers trust).
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// Writes the CA certificate to `<dir>/<name>.crt`.
    pub fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let p = dir.join(format!("{name}.crt"));
        std::fs::write(&p, self.pem()).expect("write CA certificate");
        p
    }

    fn leaf(&self, cn: &str, sans: Vec<SanType>) -> Pem {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.subject_alt_names = sans;
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign leaf");
        Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    /// A server certificate for `localhost` and 127.0.0.1, with common name `cn` (tests tell
    /// renewed certificates apart by it).
    pub fn server(&self, cn: &str) -> Pem {
        self.leaf(
            cn,
            vec![
                SanType::DnsName(Ia5String::try_from("localhost").expect("ia5")),
                SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()),
            ],
        )
    }

    /// A client certificate carrying `spiffe_id` as its SAN URI.
    pub fn client(&self, spiffe_id: &str) -> Pem {
        self.leaf(
            "client",
            vec![SanType::URI(
                Ia5String::try_from(spiffe_id).expect("ia5 URI"),
            )],
        )
    }
}

/// A rustls client configuration trusting `ca_pem`, presenting `identity` if given.
pub fn client_config(ca_pem: &str, identity: Option<&Pem>, alpn: &[&[u8]]) -> ClientConfig {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.expect("CA PEM")).expect("add root");
    }
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots);
    let mut cfg = match identity {
        None => builder.with_no_client_auth(),
        Some(id) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(id.cert.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .expect("client cert PEM"),
                PrivateKeyDer::from_pem_slice(id.key.as_bytes()).expect("client key PEM"),
            )
            .expect("client identity"),
    };
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    cfg
}

/// What an HTTPS call answered.
#[derive(Debug)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: hyper::HeaderMap,
    /// Body text.
    pub body: String,
    /// The common name of the server certificate that was served.
    pub server_cn: String,
}

/// One HTTP/1.1 request over TLS to `127.0.0.1:port`, trusting `ca_pem`.
pub async fn https(
    port: u16,
    ca_pem: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    json_body: Option<&str>,
) -> Result<Reply, Box<dyn std::error::Error + Send + Sync>> {
    let connector =
        tokio_rustls::TlsConnector::from(Arc::new(client_config(ca_pem, None, &[b"http/1.1"])));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let tls = connector
        .connect(ServerName::try_from("localhost")?, tcp)
        .await?;
    let server_cn = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .and_then(|c| {
            use x509_parser::prelude::{FromDer, X509Certificate};
            let (_, cert) = X509Certificate::from_der(c).ok()?;
            let cn = cert
                .subject()
                .iter_common_name()
                .next()?
                .as_str()
                .ok()?
                .to_string();
            Some(cn)
        })
        .unwrap_or_default();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await?;
    tokio::spawn(conn);
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", format!("localhost:{port}"));
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    if json_body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let req = req.body(Full::new(Bytes::from(json_body.unwrap_or("").to_string())))?;
    let resp = sender.send_request(req).await?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await?.to_bytes();
    Ok(Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        server_cn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

    fn sans_of(pem: &Pem) -> Option<Vec<String>> {
        let der = CertificateDer::from_pem_slice(pem.cert.as_bytes()).expect("certificate PEM");
        let (_, cert) = X509Certificate::from_der(&der).expect("certificate DER");
        let san = cert.subject_alternative_name().expect("one SAN at most")?;
        Some(
            san.value
                .general_names
                .iter()
                .map(|n| match n {
                    GeneralName::DNSName(d) => format!("DNS:{d}"),
                    GeneralName::URI(u) => format!("URI:{u}"),
                    GeneralName::IPAddress(ip) => format!("IP:{ip:?}"),
                    other => format!("{other:?}"),
                })
                .collect(),
        )
    }

    /// RFC 5280 4.2.1.6: a SubjectAlternativeName holds at least one name, so a certificate
    /// issued without names carries no SAN extension (newer TLS libraries refuse an empty one).
    #[test]
    fn a_leaf_without_names_has_no_san_extension() {
        let ca = TestCa::new("ca");
        assert_eq!(sans_of(&ca.leaf("w", Vec::new())), None);
        assert_eq!(
            sans_of(&ca.client("spiffe://t/w")),
            Some(vec!["URI:spiffe://t/w".to_string()])
        );
        assert_eq!(sans_of(&ca.server("s")).map(|s| s.len()), Some(2));
    }
}
