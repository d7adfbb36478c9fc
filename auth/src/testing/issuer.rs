//! A real OIDC issuer for tests: an HTTP server on loopback serving its discovery document
//! and JWKS, with ES256 keys generated in the test (never committed), that signs tokens with
//! the real private key. It can rotate to a new key (new `kid`, the old one withdrawn), and it
//! counts the JWKS fetches it served (so a test can see converge's re-fetch cooldown).

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
};

use axum::{Json, Router, extract::State, routing::get};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// An ES256 key pair with its `kid`.
pub struct SigningKey {
    /// The key's id, as the JWKS and the tokens' headers carry it.
    pub kid: String,
    enc: EncodingKey,
    jwk: Value,
}

impl SigningKey {
    /// A fresh P-256 key called `kid`.
    pub fn generate(kid: &str) -> SigningKey {
        let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("P-256 key");
        // The uncompressed point: 0x04 || x || y.
        let point = kp.public_key_raw();
        assert_eq!(point.len(), 65, "an uncompressed P-256 point");
        SigningKey {
            kid: kid.to_string(),
            enc: EncodingKey::from_ec_der(&kp.serialize_der()),
            jwk: json!({
                "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
                "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
            }),
        }
    }

    /// `claims` signed with this key, its `kid` in the header.
    pub fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }

    /// `claims` signed with this key under another `kid` (a forgery naming a real key).
    pub fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut h = Header::new(Algorithm::ES256);
        h.kid = Some(kid.to_string());
        jsonwebtoken::encode(&h, claims, &self.enc).expect("sign")
    }

    /// The public key as a JWK.
    pub fn jwk(&self) -> Value {
        self.jwk.clone()
    }
}

/// An HMAC-signed token (`HS256` with `secret`) naming `kid`: what an attacker makes by
/// using an issuer's public key as a shared secret.
pub fn forge_hs256(kid: &str, secret: &[u8], claims: &Value) -> String {
    let mut h = Header::new(Algorithm::HS256);
    h.kid = Some(kid.to_string());
    jsonwebtoken::encode(
        &h,
        claims,
        &EncodingKey::from_secret(secret).expect("an HMAC key"),
    )
    .expect("sign")
}

/// An unsigned token (`alg: none`) naming `kid`, with `signature` as its third part.
pub fn forge_none(kid: &str, claims: &Value, signature: &str) -> String {
    let h = json!({"alg": "none", "typ": "JWT", "kid": kid});
    format!(
        "{}.{}.{signature}",
        URL_SAFE_NO_PAD.encode(h.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

struct Shared {
    url: String,
    current: Mutex<Arc<SigningKey>>,
    jwks_fetches: AtomicUsize,
}

/// The issuer, serving until dropped.
pub struct Issuer {
    /// Its URL (`http://127.0.0.1:<port>`), the `iss` of its tokens.
    pub url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn discovery(State(s): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({
        "issuer": s.url,
        "jwks_uri": format!("{}/jwks", s.url),
        "authorization_endpoint": format!("{}/authorize", s.url),
        "token_endpoint": format!("{}/token", s.url),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
    }))
}

async fn jwks(State(s): State<Arc<Shared>>) -> Json<Value> {
    s.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    let key = s.current.lock().expect("issuer key").clone();
    Json(json!({ "keys": [key.jwk()] }))
}

impl Issuer {
    /// Starts an issuer on a free loopback port with one key, `key-1`.
    pub async fn start() -> Issuer {
        Self::start_on(0).await
    }

    /// [`Issuer::start`] on loopback `port` (0: a free one), e.g. one a converge was told of
    /// before the issuer was up.
    pub async fn start_on(port: u16) -> Issuer {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind the issuer");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let shared = Arc::new(Shared {
            url: url.clone(),
            current: Mutex::new(Arc::new(SigningKey::generate("key-1"))),
            jwks_fetches: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Issuer { url, shared, task }
    }

    /// The key it signs with now.
    pub fn key(&self) -> Arc<SigningKey> {
        self.shared.current.lock().expect("issuer key").clone()
    }

    /// Swaps to a fresh key called `kid`; the JWKS publishes only it from now on.
    pub fn rotate(&self, kid: &str) -> Arc<SigningKey> {
        let k = Arc::new(SigningKey::generate(kid));
        *self.shared.current.lock().expect("issuer key") = k.clone();
        k
    }

    /// How many times its JWKS was fetched.
    pub fn jwks_fetches(&self) -> usize {
        self.shared.jwks_fetches.load(Ordering::SeqCst)
    }

    /// Claims of a person `sub` for audience `aud` whose `roles` claim is `roles`, valid for
    /// ten minutes from now.
    pub fn claims(&self, sub: &str, aud: &str, roles: Value) -> Value {
        let now = crate::oidc::now_secs();
        json!({
            "iss": self.url, "aud": aud, "sub": sub, "preferred_username": sub,
            "iat": now, "exp": now + 600, "roles": roles,
        })
    }

    /// [`Self::claims`] signed with the current key.
    pub fn token(&self, sub: &str, aud: &str, roles: Value) -> String {
        self.key().sign(&self.claims(sub, aud, roles))
    }
}
