//! A client for converge's HTTP API (`/api/v1/...`) as the end-to-end tests use it: JSON in,
//! (status, JSON) out, over plain HTTP or (feature `tls`) HTTPS trusting a test CA.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use crate::wait_for;

/// Where a converge's HTTP API is, and the token its calls carry (if any).
#[derive(Clone)]
pub struct Api {
    /// `http://127.0.0.1:<port>`, or `https://...` for [`Api::tls`].
    pub base: String,
    client: reqwest::Client,
    token: Option<String>,
    /// The port and trusted CA (PEM) of an API on TLS.
    #[cfg(feature = "tls")]
    tls: Option<(u16, String)>,
}

impl Api {
    /// The API at `base` (`http://127.0.0.1:<port>`), called without a token.
    pub fn new(base: impl Into<String>) -> Api {
        Api {
            base: base.into(),
            client: reqwest::Client::new(),
            token: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// The API on TLS at `127.0.0.1:port`, trusting `ca_pem`; every call carries `token`.
    #[cfg(feature = "tls")]
    pub fn tls(port: u16, ca_pem: impl Into<String>, token: Option<String>) -> Api {
        Api {
            base: format!("https://127.0.0.1:{port}"),
            client: reqwest::Client::new(),
            token,
            tls: Some((port, ca_pem.into())),
        }
    }

    /// Sends `method` to `/api/v1/{path}` with an optional JSON body and this API's token;
    /// returns (status, body), the body `Null` when it is not JSON.
    ///
    /// # Panics
    /// If the request cannot be sent.
    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.call_as(self.token.as_deref(), method, path, body)
            .await
    }

    /// [`Api::call`] with `token` (none: an anonymous call) instead of this API's own.
    ///
    /// # Panics
    /// If the request cannot be sent.
    pub async fn call_as(
        &self,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        #[cfg(feature = "tls")]
        if let Some((port, ca_pem)) = &self.tls {
            let body = body.map(Value::to_string);
            let r = converge_auth::testing::https(
                *port,
                ca_pem,
                method.as_str(),
                &format!("/api/v1/{path}"),
                token,
                body.as_deref(),
            )
            .await
            .expect("HTTPS call");
            return (
                r.status,
                serde_json::from_str(&r.body).unwrap_or(Value::Null),
            );
        }
        let mut r = self
            .client
            .request(method, format!("{}/api/v1/{path}", self.base));
        if let Some(token) = token {
            r = r.bearer_auth(token);
        }
        if let Some(b) = body {
            r = r.json(b);
        }
        let r = r.send().await.expect("HTTP call");
        let s = r.status().as_u16();
        (s, r.json().await.unwrap_or(Value::Null))
    }

    /// PUTs a kind manifest.
    ///
    /// # Panics
    /// If it is not accepted (2xx).
    pub async fn apply_manifest(&self, manifest: &Value) {
        let kind = manifest["kind"]
            .as_str()
            .expect("the manifest names its kind");
        let (s, body) = self
            .call(
                Method::PUT,
                &format!("kinds/{kind}/manifest"),
                Some(manifest),
            )
            .await;
        assert!((200..300).contains(&s), "manifest {kind}: {s} {body}");
    }

    /// GETs resource `kind/name`: `None` on 404.
    ///
    /// # Panics
    /// On any status but 200 and 404.
    pub async fn get(&self, kind: &str, name: &str) -> Option<Value> {
        let (s, body) = self
            .call(Method::GET, &format!("resources/{kind}/{name}"), None)
            .await;
        match s {
            404 => None,
            200 => Some(body),
            s => panic!("GET {kind}/{name}: {s} {body}"),
        }
    }

    /// Waits until resource `kind/name` exists and satisfies `pred`; returns it.
    ///
    /// # Panics
    /// After `timeout`, naming `what`.
    pub async fn wait_resource(
        &self,
        kind: &str,
        name: &str,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        wait_for(timeout, what, || async {
            self.get(kind, name).await.filter(|v| pred(v))
        })
        .await
    }
}
