//! The HTTP client conctl talks through: one place that attaches the bearer token and turns
//! transport failures and RFC 7807 problem responses into readable errors.

use std::{fmt, time::Duration};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::{
    Method, StatusCode,
    header::{AUTHORIZATION, HeaderMap, HeaderValue},
};
use serde_json::Value;

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
    fn from_body(status: StatusCode, body: &str) -> ApiProblem {
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
    /// Response headers.
    pub headers: HeaderMap,
    /// Parsed JSON body (null when empty).
    pub body: Value,
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
    http: reqwest::Client,
}

impl Client {
    /// A client for `server` (e.g. `http://localhost:8080`) with a per-request timeout, sending
    /// `token` (when given) as `Authorization: Bearer` on every request.
    pub fn new(server: &str, timeout: Duration, token: Option<Token>) -> anyhow::Result<Client> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("conctl/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Client {
            server: server.trim_end_matches('/').to_string(),
            timeout,
            token,
            http,
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
        let url = format!("{}/api/v1{path}", self.server);
        let mut req = self.http.request(method, &url);
        if let Some(b) = body {
            req = req.json(b);
        }
        if let Some(Token(t)) = &self.token {
            req = req.header(AUTHORIZATION, t.clone());
        }
        let resp = req.send().await.map_err(|e| self.transport_error(e))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.map_err(|e| self.transport_error(e))?;
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
        Ok(Reply { headers, body })
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

    fn transport_error(&self, e: reqwest::Error) -> anyhow::Error {
        if e.is_connect() {
            anyhow::anyhow!(
                "cannot connect to the converge server at {} (is it running? set --server or \
                 CONVERGE_SERVER): {}",
                self.server,
                root_cause(&e)
            )
        } else if e.is_timeout() {
            anyhow::anyhow!(
                "the converge server at {} did not answer within {:?} (see --timeout)",
                self.server,
                self.timeout
            )
        } else {
            anyhow::anyhow!(
                "request to the converge server at {} failed: {}",
                self.server,
                root_cause(&e)
            )
        }
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
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::TcpListener,
    };

    /// A one-request HTTP server on loopback: answers `status` with a problem body and hands
    /// back the request head it received (to see exactly what conctl put on the wire).
    async fn answer_once(
        status: &'static str,
        body: &'static str,
    ) -> (String, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = sock.read(&mut buf).await.unwrap();
                assert!(n > 0, "the client closed before sending a request");
                head.extend_from_slice(&buf[..n]);
            }
            let reply = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/problem+json\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            sock.write_all(reply.as_bytes()).await.unwrap();
            String::from_utf8(head).unwrap()
        });
        (server, task)
    }

    fn client(server: &str, token: Option<&str>) -> Client {
        Client::new(server, Duration::from_secs(10), Token::new(token).unwrap()).unwrap()
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
