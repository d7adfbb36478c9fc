//! The HTTP client conctl talks through: one place that attaches the bearer token and turns
//! transport failures and RFC 7807 problem responses into readable errors. [`Client::watch`]
//! opens a `?watch=true` stream and reads its Server-Sent Events (`sse-stream`).

use std::{fmt, path::Path, time::Duration};

use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::{
    Method, Request, StatusCode,
    body::{Bytes, Incoming},
    header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderMap, HeaderValue, USER_AGENT},
};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;
use sse_stream::SseStream;

use crate::transport::{Endpoint, WireError};

/// Characters left unescaped in a path segment or query value.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Escapes one path segment or query value.
pub fn enc(s: &str) -> String {
    utf8_percent_encode(s, UNRESERVED).to_string()
}

/// Builds `?k=v&k=v` from pairs (repeats kept); empty when there are none.
pub fn query(pairs: &[(&str, String)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect();
    format!("?{}", parts.join("&"))
}

/// A non-success answer from the server, with its problem details when it sent them.
#[derive(Debug)]
pub struct ApiProblem {
    /// HTTP status.
    pub status: StatusCode,
    /// The problem's `detail` (or the body text).
    pub detail: String,
    /// `errors[]` as (location, message).
    pub errors: Vec<(String, String)>,
}

impl fmt::Display for ApiProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.detail, self.status)?;
        // A single error the detail already spells out is not repeated.
        if let [(location, message)] = self.errors.as_slice()
            && self.detail == format!("{location}: {message}")
        {
            return Ok(());
        }
        for (location, message) in &self.errors {
            let location = if location.is_empty() { "/" } else { location };
            write!(f, "\n  {location}: {message}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiProblem {}

impl ApiProblem {
    /// The problem a problem+json `body` answered with `status` describes.
    pub fn from_body(status: StatusCode, body: &str) -> ApiProblem {
        let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let detail = v["detail"]
            .as_str()
            .map(str::to_string)
            .filter(|d| !d.is_empty())
            .or_else(|| Some(body.trim().to_string()).filter(|b| !b.is_empty()))
            .unwrap_or_else(|| {
                status
                    .canonical_reason()
                    .unwrap_or("request failed")
                    .to_string()
            });
        let errors = v["errors"]
            .as_array()
            .map(|errs| {
                errs.iter()
                    .map(|e| {
                        (
                            e["location"].as_str().unwrap_or_default().to_string(),
                            e["message"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        ApiProblem {
            status,
            detail,
            errors,
        }
    }
}

/// A bearer token. It is only ever written into the `Authorization` header: `Debug` hides it,
/// and no error message quotes it.
pub struct Token(HeaderValue);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

impl Token {
    /// The token from `--token`/`CONVERGE_TOKEN`, trimmed; `None` when absent or blank (an
    /// exported but empty variable means "no token", as for an open server).
    pub fn new(raw: Option<&str>) -> anyhow::Result<Option<Token>> {
        let Some(t) = raw.map(str::trim).filter(|t| !t.is_empty()) else {
            return Ok(None);
        };
        // Visible ASCII only: anything else cannot travel in a header, and the error must not
        // echo the token to say so.
        if !t.bytes().all(|b| b.is_ascii_graphic()) {
            anyhow::bail!(
                "the token (--token or CONVERGE_TOKEN) holds spaces or characters an HTTP header \
                 cannot carry; pass the token exactly as `converge token new` printed it"
            );
        }
        let mut v = HeaderValue::from_str(&format!("Bearer {t}"))?;
        v.set_sensitive(true);
        Ok(Some(Token(v)))
    }
}

/// A successful answer.
#[derive(Debug)]
pub struct Reply {
    /// The status (a 2xx).
    pub status: StatusCode,
    /// Response headers.
    pub headers: HeaderMap,
    /// Parsed JSON body (null when empty).
    pub body: Value,
}

/// Whether `e` is the server's 404 (to tell "absent" from a failure).
pub fn is_not_found(e: &anyhow::Error) -> bool {
    e.downcast_ref::<ApiProblem>()
        .is_some_and(|p| p.status == StatusCode::NOT_FOUND)
}

impl Reply {
    /// A header as text, empty when absent.
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    }
}

/// The converge API at one server.
pub struct Client {
    server: String,
    timeout: Duration,
    token: Option<Token>,
    endpoint: Endpoint,
}

impl Client {
    /// A client for `server` (`http://localhost:8080`, `https://converge.example.org`, or a
    /// bare `host:port`) with a per-request timeout, sending `token` (when given) as
    /// `Authorization: Bearer` on every request and trusting the PEM roots in `ca_file` (an
    /// https server only) instead of the webpki roots.
    pub fn new(
        server: &str,
        timeout: Duration,
        token: Option<Token>,
        ca_file: Option<&Path>,
    ) -> anyhow::Result<Client> {
        Ok(Client {
            endpoint: Endpoint::parse(server, ca_file)?,
            server: server.trim().trim_end_matches('/').to_string(),
            timeout,
            token,
        })
    }

    /// A request to `/api/v1{path}` with the headers every call carries.
    fn request(&self, method: Method, path: &str, accept: &str) -> hyper::http::request::Builder {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}/api/v1{path}", self.endpoint.prefix))
            .header(HOST, self.endpoint.authority())
            .header(USER_AGENT, concat!("conctl/", env!("CARGO_PKG_VERSION")))
            .header(ACCEPT, accept);
        if let Some(Token(t)) = &self.token {
            req = req.header(AUTHORIZATION, t.clone());
        }
        req
    }

    /// Opens the event stream of `/api/v1{path}` (a `?watch=true` URL), resuming after
    /// `last_event_id` when given. `--timeout` bounds the wait for the answer's head only; the
    /// stream itself stays open until the server ends it.
    pub async fn watch(&self, path: &str, last_event_id: Option<&str>) -> anyhow::Result<Events> {
        let mut req = self.request(Method::GET, path, "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let req = req.body(Full::new(Bytes::new()))?;
        let resp = match tokio::time::timeout(self.timeout, self.endpoint.open(req)).await {
            Err(_) => anyhow::bail!(
                "the converge server at {} did not answer within {:?} (see --timeout)",
                self.server,
                self.timeout
            ),
            Ok(answer) => answer.map_err(|e| self.wire_error(e))?,
        };
        let (parts, body) = resp.into_parts();
        if !parts.status.is_success() {
            let raw = tokio::time::timeout(self.timeout, body.collect())
                .await
                .ok()
                .and_then(Result::ok)
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let text = String::from_utf8_lossy(&raw);
            if parts.status == StatusCode::UNAUTHORIZED {
                return Err(self.unauthorized(&text).into());
            }
            return Err(ApiProblem::from_body(parts.status, &text).into());
        }
        Ok(Events {
            stream: SseStream::new(body),
            server: self.server.clone(),
        })
    }

    /// Sends one request to `/api/v1{path}` and returns the reply, or an error that names
    /// the server (transport) or carries the problem details (non-2xx).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Reply> {
        let mut req = self.request(method, path, "application/json");
        let payload = match body {
            Some(b) => {
                req = req.header(CONTENT_TYPE, "application/json");
                Bytes::from(serde_json::to_vec(b)?)
            }
            None => Bytes::new(),
        };
        let req = req.body(Full::new(payload))?;
        let (status, headers, raw) =
            match tokio::time::timeout(self.timeout, self.endpoint.exchange(req)).await {
                Err(_) => anyhow::bail!(
                    "the converge server at {} did not answer within {:?} (see --timeout)",
                    self.server,
                    self.timeout
                ),
                Ok(answer) => answer.map_err(|e| self.wire_error(e))?,
            };
        let text = String::from_utf8_lossy(&raw);
        if status == StatusCode::UNAUTHORIZED {
            return Err(self.unauthorized(&text).into());
        }
        if !status.is_success() {
            // A 403's detail names the role the call needs; it is shown as the server wrote it.
            return Err(ApiProblem::from_body(status, &text).into());
        }
        let body = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).map_err(|e| {
                anyhow::anyhow!(
                    "the server at {} sent a response that is not JSON: {e}",
                    self.server
                )
            })?
        };
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// Follows a keyset-paged list at `/api/v1{path}` (the `X-Next-Cursor` header) with the
    /// query pairs `q`, collecting the array `field` of each page until `limit` rows or the
    /// last page (pages of at most 500, the API's largest).
    pub async fn pages(
        &self,
        path: &str,
        field: &str,
        q: &[(&str, String)],
        limit: usize,
    ) -> anyhow::Result<Vec<Value>> {
        let mut rows: Vec<Value> = Vec::new();
        let mut cursor = String::new();
        while rows.len() < limit {
            let mut page_q = q.to_vec();
            page_q.push(("limit", (limit - rows.len()).min(500).to_string()));
            if !cursor.is_empty() {
                page_q.push(("cursor", cursor.clone()));
            }
            let reply = self
                .call(Method::GET, &format!("{path}{}", query(&page_q)), None)
                .await?;
            let page = reply.body[field].as_array().cloned().unwrap_or_default();
            if page.is_empty() {
                break;
            }
            rows.extend(page);
            cursor = reply.header("x-next-cursor");
            if cursor.is_empty() {
                break;
            }
        }
        rows.truncate(limit);
        Ok(rows)
    }

    /// A 401 says what to do about it rather than repeating the server's "unauthorized".
    fn unauthorized(&self, body: &str) -> ApiProblem {
        let mut p = ApiProblem::from_body(StatusCode::UNAUTHORIZED, body);
        p.detail = if self.token.is_some() {
            format!(
                "the server at {} did not accept the token (unknown or revoked): check --token \
                 or CONVERGE_TOKEN",
                self.server
            )
        } else {
            format!(
                "the server at {} requires a token: pass --token or set CONVERGE_TOKEN",
                self.server
            )
        };
        p.errors.clear();
        p
    }

    fn wire_error(&self, e: WireError) -> anyhow::Error {
        match e {
            WireError::Connect(e) => anyhow::anyhow!(
                "cannot connect to the converge server at {} (is it running? set --server or \
                 CONVERGE_SERVER): {}",
                self.server,
                root_cause(&e)
            ),
            WireError::Tls(e) => {
                let cause = root_cause(&e);
                // The two usual reasons, named: a private CA, and a server that is not TLS.
                let hint = match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                    Some(rustls::Error::InvalidCertificate(_)) => {
                        " (if its certificate comes from a private CA, pass that CA with \
                         --ca-file or CONVERGE_CA_FILE)"
                    }
                    Some(rustls::Error::InvalidMessage(_)) => {
                        " (does the server speak plain http://?)"
                    }
                    _ => "",
                };
                anyhow::anyhow!(
                    "TLS handshake with the converge server at {} failed: {cause}{hint}",
                    self.server
                )
            }
            WireError::Http(e) => {
                // A TLS server answers plain HTTP with an alert record (not HTTP) or hangs up.
                let hint = if !self.endpoint.is_tls() && (e.is_parse() || e.is_incomplete_message())
                {
                    " (if the server serves TLS, use an https:// address)"
                } else {
                    ""
                };
                anyhow::anyhow!(
                    "request to the converge server at {} failed: {}{hint}",
                    self.server,
                    root_cause(&e)
                )
            }
        }
    }
}

/// One message of a watch: its SSE `id` (a log position to resume from) and its JSON `data`.
#[derive(Debug)]
pub struct Message {
    /// The `id` field, if the message had one.
    pub id: Option<String>,
    /// The `data` field as JSON.
    pub data: Value,
}

/// An open watch: its messages as they come.
pub struct Events {
    stream: SseStream<Incoming>,
    server: String,
}

impl Events {
    /// The next message; `None` when the server ended the stream (a restart, a shutdown:
    /// the caller may resume from the last id). Keep-alive comments are skipped.
    pub async fn next(&mut self) -> anyhow::Result<Option<Message>> {
        while let Some(sse) = self.stream.next().await {
            let sse = sse.map_err(|e| {
                anyhow::anyhow!(
                    "the watch stream from {} broke: {}",
                    self.server,
                    root_cause(&e)
                )
            })?;
            let Some(data) = sse.data else { continue };
            let data = serde_json::from_str(&data).map_err(|e| {
                anyhow::anyhow!(
                    "the server at {} sent a watch message that is not JSON: {e}",
                    self.server
                )
            })?;
            return Ok(Some(Message { id: sse.id, data }));
        }
        Ok(None)
    }
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::{
        io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
        net::TcpListener,
    };

    /// Reads one request head from `sock`, answers `status` with `body`, returns the head.
    async fn serve_one<S: AsyncRead + AsyncWrite + Unpin>(
        mut sock: S,
        status: &str,
        body: &str,
    ) -> String {
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = sock.read(&mut buf).await.unwrap();
            assert!(n > 0, "the client closed before sending a request");
            head.extend_from_slice(&buf[..n]);
            // Not HTTP (a TLS ClientHello): answer 400 and hang up, as HTTP servers do.
            if !head[0].is_ascii_alphabetic() {
                let bad = "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n";
                sock.write_all(bad.as_bytes()).await.unwrap();
                return String::new();
            }
        }
        let reply = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/problem+json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        sock.write_all(reply.as_bytes()).await.unwrap();
        sock.shutdown().await.unwrap();
        String::from_utf8(head).unwrap()
    }

    /// A one-request HTTP server on loopback: answers `status` with a problem body and hands
    /// back the request head it received (to see exactly what conctl put on the wire).
    async fn answer_once(
        status: &'static str,
        body: &'static str,
    ) -> (String, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (sock, _) = listener.accept().await.unwrap();
            serve_one(sock, status, body).await
        });
        (server, task)
    }

    /// A test CA (rcgen) and a TLS server config for `localhost`/127.0.0.1 issued by it.
    fn test_ca() -> (String, Arc<rustls::ServerConfig>) {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls_pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
        .unwrap();
        (ca.pem(), Arc::new(config))
    }

    /// Like [`answer_once`] over TLS; the task gives the handshake's error when it fails.
    async fn answer_once_tls(
        config: Arc<rustls::ServerConfig>,
    ) -> (u16, tokio::task::JoinHandle<Result<String, String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let (sock, _) = listener.accept().await.unwrap();
            let tls = tokio_rustls::TlsAcceptor::from(config)
                .accept(sock)
                .await
                .map_err(|e| e.to_string())?;
            Ok(serve_one(tls, "200 OK", r#"{"kinds":[]}"#).await)
        });
        (port, task)
    }

    fn write_temp(name: &str, text: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("conctl-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[tokio::test]
    async fn https_with_the_ca_file_carries_the_token_and_other_roots_are_refused() {
        let (ca_pem, config) = test_ca();
        let ca_file = write_temp("ca.pem", &ca_pem);
        let timeout = Duration::from_secs(10);
        let token = || Token::new(Some("tls-tok")).unwrap();

        for host in ["localhost", "127.0.0.1"] {
            let (port, req) = answer_once_tls(config.clone()).await;
            let c = Client::new(
                &format!("https://{host}:{port}"),
                timeout,
                token(),
                Some(&ca_file),
            )
            .unwrap();
            let reply = c.call(Method::GET, "/kinds", None).await.unwrap();
            assert_eq!(reply.body["kinds"], serde_json::json!([]));
            let head = req.await.unwrap().unwrap();
            assert!(head.starts_with("GET /api/v1/kinds HTTP/1.1\r\n"), "{head}");
            assert!(
                head.lines()
                    .any(|l| l.eq_ignore_ascii_case("authorization: Bearer tls-tok")),
                "{head}"
            );
        }

        // Without --ca-file only the webpki roots are trusted: the test CA is not one.
        let (port, server) = answer_once_tls(config.clone()).await;
        let server_url = format!("https://localhost:{port}");
        let c = Client::new(&server_url, timeout, token(), None).unwrap();
        let e = format!(
            "{:#}",
            c.call(Method::GET, "/kinds", None).await.unwrap_err()
        );
        assert!(
            e.contains("TLS handshake with the converge server at"),
            "{e}"
        );
        assert!(e.contains(&server_url), "{e}");
        assert!(
            e.contains("pass that CA with --ca-file or CONVERGE_CA_FILE"),
            "{e}"
        );
        assert!(!e.contains("tls-tok"), "{e}");
        assert!(server.await.unwrap().is_err(), "the server saw a request");

        // Another CA in --ca-file: refused the same way.
        let (other_pem, _) = test_ca();
        let other = write_temp("other.pem", &other_pem);
        let (port, server) = answer_once_tls(config.clone()).await;
        let c = Client::new(
            &format!("https://localhost:{port}"),
            timeout,
            token(),
            Some(&other),
        )
        .unwrap();
        let e = format!(
            "{:#}",
            c.call(Method::GET, "/kinds", None).await.unwrap_err()
        );
        assert!(e.contains("--ca-file"), "{e}");
        assert!(server.await.unwrap().is_err(), "the server saw a request");

        // A name the certificate does not hold is refused even with the right CA.
        let (port, server) = answer_once_tls(config.clone()).await;
        let c = Client::new(
            &format!("https://127.0.0.2:{port}"),
            timeout,
            token(),
            Some(&ca_file),
        )
        .unwrap();
        let listener_ip_is_127_0_0_1 = c.call(Method::GET, "/kinds", None).await;
        // 127.0.0.2 reaches the 127.0.0.1 listener only where loopback is a /8 (Linux); either
        // way the call must fail, never succeed.
        assert!(listener_ip_is_127_0_0_1.is_err());
        server.abort();
    }

    #[tokio::test]
    async fn the_wrong_scheme_is_named_in_the_error() {
        let (_, config) = test_ca();
        // http:// to a TLS server.
        let (port, server) = answer_once_tls(config).await;
        let e = format!(
            "{:#}",
            client(&format!("http://127.0.0.1:{port}"), None)
                .call(Method::GET, "/kinds", None)
                .await
                .unwrap_err()
        );
        assert!(e.contains("use an https:// address"), "{e}");
        let _ = server.await;
        // https:// to a plain server.
        let (server, _req) = answer_once("200 OK", "{}").await;
        let https = server.replace("http://", "https://");
        let e = format!(
            "{:#}",
            Client::new(&https, Duration::from_secs(10), None, None)
                .unwrap()
                .call(Method::GET, "/kinds", None)
                .await
                .unwrap_err()
        );
        assert!(e.contains("TLS handshake"), "{e}");
        assert!(e.contains("does the server speak plain http://?"), "{e}");
    }

    fn client(server: &str, token: Option<&str>) -> Client {
        Client::new(
            server,
            Duration::from_secs(10),
            Token::new(token).unwrap(),
            None,
        )
        .unwrap()
    }

    #[tokio::test]
    async fn the_token_goes_in_the_authorization_header_and_nowhere_else() {
        let (server, req) = answer_once("200 OK", "{}").await;
        let c = client(&server, Some("  s3cret-Tok_en  "));
        c.call(Method::GET, "/kinds", None).await.unwrap();
        let head = req.await.unwrap();
        let lower = head.to_ascii_lowercase();
        assert!(
            head.lines()
                .any(|l| l.eq_ignore_ascii_case("authorization: Bearer s3cret-Tok_en")),
            "{head}"
        );
        assert_eq!(lower.matches("s3cret").count(), 1, "{head}");
        assert!(head.starts_with("GET /api/v1/kinds HTTP/1.1\r\n"), "{head}");
        assert!(
            !format!("{:?}", Token::new(Some("s3cret")).unwrap()).contains("s3cret"),
            "Debug shows the token"
        );

        // Without a token no Authorization header is sent at all.
        let (server, req) = answer_once("200 OK", "{}").await;
        client(&server, None)
            .call(Method::GET, "/kinds", None)
            .await
            .unwrap();
        let head = req.await.unwrap().to_ascii_lowercase();
        assert!(!head.contains("authorization"), "{head}");
    }

    #[test]
    fn blank_tokens_are_none_and_unsendable_ones_are_refused_without_echo() {
        assert!(Token::new(None).unwrap().is_none());
        assert!(Token::new(Some("")).unwrap().is_none());
        assert!(Token::new(Some(" \n")).unwrap().is_none());
        for bad in ["zqx7 w", "zqx7\tw", "zqx7\u{e9}", "zqx7\nw"] {
            let e = Token::new(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("--token or CONVERGE_TOKEN"), "{e}");
            assert!(!e.contains("zqx7"), "the error quotes the token: {e}");
        }
    }

    #[tokio::test]
    async fn a_401_says_to_pass_a_token_and_a_403_shows_the_role_needed() {
        let unauth = r#"{"status":401,"title":"Unauthorized","detail":"missing bearer token"}"#;
        let (server, _req) = answer_once("401 Unauthorized", unauth).await;
        let e = client(&server, None)
            .call(Method::GET, "/kinds", None)
            .await
            .unwrap_err();
        let text = format!("{e:#}");
        assert!(
            text.contains("requires a token: pass --token or set CONVERGE_TOKEN"),
            "{text}"
        );
        assert!(text.contains(&server) && text.contains("401"), "{text}");
        assert_eq!(
            e.downcast_ref::<ApiProblem>().unwrap().status,
            StatusCode::UNAUTHORIZED
        );

        let (server, _req) = answer_once("401 Unauthorized", unauth).await;
        let text = format!(
            "{:#}",
            client(&server, Some("wrong-token"))
                .call(Method::GET, "/kinds", None)
                .await
                .unwrap_err()
        );
        assert!(text.contains("did not accept the token"), "{text}");
        assert!(!text.contains("wrong-token"), "{text}");

        let (server, _req) = answer_once(
            "403 Forbidden",
            r#"{"status":403,"detail":"alice (viewer) may not do this: it needs the operator role"}"#,
        )
        .await;
        let text = format!(
            "{:#}",
            client(&server, Some("viewer-token"))
                .call(Method::POST, "/resources/a/b/reconcile", None)
                .await
                .unwrap_err()
        );
        assert_eq!(
            text,
            "alice (viewer) may not do this: it needs the operator role (403 Forbidden)"
        );
    }

    #[test]
    fn problems_show_detail_and_every_location() {
        let p = ApiProblem::from_body(
            StatusCode::UNPROCESSABLE_ENTITY,
            r#"{"detail":"bad spec","errors":[{"location":"/spec/a","message":"not a string"}]}"#,
        );
        let text = p.to_string();
        assert!(
            text.starts_with("bad spec (422 Unprocessable Entity)"),
            "{text}"
        );
        assert!(text.contains("\n  /spec/a: not a string"), "{text}");
        let p = ApiProblem::from_body(
            StatusCode::UNPROCESSABLE_ENTITY,
            r#"{"detail":"phase: bad","errors":[{"location":"phase","message":"bad"}]}"#,
        );
        assert_eq!(p.to_string(), "phase: bad (422 Unprocessable Entity)");
        let p = ApiProblem::from_body(StatusCode::NOT_FOUND, "");
        assert_eq!(p.detail, "Not Found");
    }

    #[test]
    fn query_values_are_escaped() {
        assert_eq!(
            query(&[("label", "app:web x".into()), ("kind", "a".into())]),
            "?label=app%3Aweb%20x&kind=a"
        );
        assert_eq!(query(&[]), "");
        assert_eq!(enc("a/b?#"), "a%2Fb%3F%23");
    }
}
