//! The HTTP client conctl talks through: one place that turns transport failures and RFC 7807
//! problem responses into readable errors.

use std::{fmt, time::Duration};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::{Method, StatusCode, header::HeaderMap};
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
    http: reqwest::Client,
}

impl Client {
    /// A client for `server` (e.g. `http://localhost:8080`) with a per-request timeout.
    pub fn new(server: &str, timeout: Duration) -> anyhow::Result<Client> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("conctl/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Client {
            server: server.trim_end_matches('/').to_string(),
            timeout,
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
        let resp = req.send().await.map_err(|e| self.transport_error(e))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.map_err(|e| self.transport_error(e))?;
        if !status.is_success() {
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
