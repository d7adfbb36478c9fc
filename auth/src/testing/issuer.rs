//! A real OIDC issuer for tests: an HTTP server on loopback serving its discovery document
//! and JWKS, with ES256 keys generated in the test (never committed), that signs tokens with
//! the real private key. It can rotate to a new key (new `kid`, the old one withdrawn), and it
//! counts the JWKS fetches it served (so a test can see converge's re-fetch cooldown).
//!
//! It also signs people in the way a browser app does (authorization code + PKCE, a public
//! client): `GET /authorize` answers a page listing its people, or with `login_hint` naming
//! one, redirects at once to `redirect_uri` with a one-use code and the `state`; `POST /token`
//! trades the code for `{id_token, access_token, token_type, expires_in}` after checking the
//! client, the redirect URI and the PKCE verifier against the S256 challenge, with the
//! `nonce` of the authorization request in the ID token. Its people ([`Issuer::add_person`])
//! default to `vera` (viewer), `otto` (operator) and `ada` (admin). The discovery document
//! and the JWKS answer CORS for any origin (they are public, as at real issuers); the token
//! endpoint only for the origins of redirect URIs it was asked to send a code to (what
//! Keycloak's "web origins: +" does), preflight included.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    Form, Json, Router,
    extract::{Query, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{Html, IntoResponse, Redirect, Response},
    routing::get,
};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rand::TryRngCore;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

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

/// How long a code may wait for its exchange, and how long the ID tokens last.
const CODE_TTL: Duration = Duration::from_secs(60);
/// The lifetime of the tokens `/token` answers, seconds.
pub const TOKEN_TTL_SECS: u64 = 600;

/// A code handed out by `/authorize`, waiting for `/token`.
struct Grant {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    nonce: Option<String>,
    sub: String,
    issued: Instant,
}

struct Shared {
    url: String,
    current: Mutex<Arc<SigningKey>>,
    jwks_fetches: AtomicUsize,
    /// Who can sign in: `sub` -> the value of their `roles` claim.
    people: Mutex<BTreeMap<String, Value>>,
    /// Codes not yet exchanged (each is taken by its first exchange, good or bad).
    grants: Mutex<HashMap<String, Grant>>,
    /// Origins of the redirect URIs codes were sent to: the token endpoint's CORS list.
    origins: Mutex<HashSet<String>>,
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

/// `Access-Control-Allow-Origin: *`: public documents any page may read.
fn public(body: Json<Value>) -> Response {
    (
        [(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        )],
        body,
    )
        .into_response()
}

async fn discovery(State(s): State<Arc<Shared>>) -> Response {
    public(Json(json!({
        "issuer": s.url,
        "jwks_uri": format!("{}/jwks", s.url),
        "authorization_endpoint": format!("{}/authorize", s.url),
        "token_endpoint": format!("{}/token", s.url),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": ["openid", "profile", "email"],
    })))
}

async fn jwks(State(s): State<Arc<Shared>>) -> Response {
    s.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    let key = s.current.lock().expect("issuer key").clone();
    public(Json(json!({ "keys": [key.jwk()] })))
}

/// A random URL-safe value of 32 bytes (codes, opaque access tokens).
fn random() -> String {
    let mut b = [0u8; 32];
    rand::rngs::OsRng
        .try_fill_bytes(&mut b)
        .expect("the OS random source");
    URL_SAFE_NO_PAD.encode(b)
}

/// The S256 PKCE challenge of `verifier` (RFC 7636 4.2).
pub fn pkce_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// `scheme://host[:port]` of `url`, if it has one.
fn origin_of(url: &url::Url) -> Option<String> {
    match url.origin() {
        o @ url::Origin::Tuple(..) => Some(o.ascii_serialization()),
        url::Origin::Opaque(_) => None,
    }
}

fn bad_request(msg: impl Into<String>) -> Response {
    (StatusCode::BAD_REQUEST, msg.into()).into_response()
}

/// The query of `GET /authorize`.
#[derive(Deserialize)]
struct AuthorizeQuery {
    response_type: Option<String>,
    client_id: Option<String>,
    redirect_uri: Option<String>,
    scope: Option<String>,
    state: Option<String>,
    nonce: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
    /// Who signs in; without it, the page listing the people.
    login_hint: Option<String>,
}

/// Escapes `s` for HTML text and attribute values.
fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

async fn authorize(
    State(s): State<Arc<Shared>>,
    Query(q): Query<AuthorizeQuery>,
    uri: axum::http::Uri,
) -> Response {
    // A request it cannot send back to the client is answered here (RFC 6749 4.1.2.1).
    let Some(client_id) = q.client_id.filter(|c| !c.is_empty()) else {
        return bad_request("client_id is required");
    };
    let Some(redirect) = q
        .redirect_uri
        .as_deref()
        .and_then(|r| url::Url::parse(r).ok())
    else {
        return bad_request("redirect_uri is required and must be an absolute URL");
    };
    let Some(origin) = origin_of(&redirect).filter(|_| redirect.fragment().is_none()) else {
        return bad_request("redirect_uri must be http(s) without a fragment");
    };
    if q.response_type.as_deref() != Some("code") {
        return bad_request("response_type must be code");
    }
    if !q
        .scope
        .as_deref()
        .is_some_and(|sc| sc.split(' ').any(|x| x == "openid"))
    {
        return bad_request("scope must include openid");
    }
    // A public client must prove the exchange is its own: PKCE with S256 only.
    let Some(challenge) = q.code_challenge.filter(|c| c.len() == 43) else {
        return bad_request("code_challenge is required (43 characters, S256)");
    };
    if q.code_challenge_method.as_deref() != Some("S256") {
        return bad_request("code_challenge_method must be S256");
    }
    let Some(sub) = q.login_hint.filter(|h| !h.is_empty()) else {
        // The sign-in page: one link per person, this request plus their login_hint.
        let people = s.people.lock().expect("people").clone();
        let query = uri.query().unwrap_or_default();
        let links: String = people
            .iter()
            .map(|(sub, roles)| {
                let href = format!(
                    "/authorize?{query}&login_hint={}",
                    url::form_urlencoded::byte_serialize(sub.as_bytes()).collect::<String>()
                );
                format!(
                    "<li><a href=\"{}\">Sign in as {}</a> <small>roles {}</small></li>",
                    html_escape(&href),
                    html_escape(sub),
                    html_escape(&roles.to_string())
                )
            })
            .collect();
        return Html(format!(
            "<!doctype html><meta charset=utf-8><title>Test issuer</title>\
             <h1>Test issuer</h1><p>Who signs in to {}?</p><ul>{links}</ul>",
            html_escape(&client_id)
        ))
        .into_response();
    };
    if !s.people.lock().expect("people").contains_key(&sub) {
        return bad_request(format!("no person {sub:?} at this issuer"));
    }
    let code = random();
    s.grants.lock().expect("grants").insert(
        code.clone(),
        Grant {
            client_id,
            redirect_uri: redirect.to_string(),
            challenge,
            nonce: q.nonce,
            sub,
            issued: Instant::now(),
        },
    );
    s.origins.lock().expect("origins").insert(origin);
    let mut back = redirect;
    back.query_pairs_mut().append_pair("code", &code);
    if let Some(state) = &q.state {
        back.query_pairs_mut().append_pair("state", state);
    }
    Redirect::to(back.as_str()).into_response()
}

/// The CORS headers of the token endpoint for a request from `headers`' `Origin`: only the
/// origins codes were sent to.
fn token_cors(s: &Shared, headers: &HeaderMap) -> Vec<(header::HeaderName, HeaderValue)> {
    let mut out = vec![(header::VARY, HeaderValue::from_static("Origin"))];
    let allowed = headers
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .filter(|o| s.origins.lock().expect("origins").contains(*o))
        .and_then(|o| HeaderValue::from_str(o).ok());
    if let Some(o) = allowed {
        out.push((header::ACCESS_CONTROL_ALLOW_ORIGIN, o));
    }
    out
}

/// The form of `POST /token`.
#[derive(Deserialize)]
struct TokenForm {
    grant_type: Option<String>,
    code: Option<String>,
    redirect_uri: Option<String>,
    client_id: Option<String>,
    code_verifier: Option<String>,
}

/// An RFC 6749 5.2 error answer.
fn token_error(cors: Vec<(header::HeaderName, HeaderValue)>, error: &str, why: &str) -> Response {
    let mut r = (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": error, "error_description": why})),
    )
        .into_response();
    r.headers_mut().extend(cors);
    r
}

async fn token(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Form(f): Form<TokenForm>,
) -> Response {
    let cors = token_cors(&s, &headers);
    if f.grant_type.as_deref() != Some("authorization_code") {
        return token_error(cors, "unsupported_grant_type", "only authorization_code");
    }
    // Taken whatever follows: a code is good for one exchange at most.
    let grant = f
        .code
        .as_deref()
        .and_then(|c| s.grants.lock().expect("grants").remove(c));
    let Some(g) = grant.filter(|g| g.issued.elapsed() < CODE_TTL) else {
        return token_error(cors, "invalid_grant", "unknown, used or expired code");
    };
    if f.client_id.as_deref() != Some(g.client_id.as_str()) {
        return token_error(
            cors,
            "invalid_grant",
            "the code was issued to another client",
        );
    }
    if f.redirect_uri.as_deref() != Some(g.redirect_uri.as_str()) {
        return token_error(
            cors,
            "invalid_grant",
            "redirect_uri differs from the authorization request's",
        );
    }
    if f.code_verifier.as_deref().map(pkce_challenge).as_deref() != Some(g.challenge.as_str()) {
        return token_error(
            cors,
            "invalid_grant",
            "the PKCE code_verifier does not match the challenge",
        );
    }
    let Some(roles) = s.people.lock().expect("people").get(&g.sub).cloned() else {
        return token_error(cors, "invalid_grant", "that person is gone");
    };
    let now = crate::oidc::now_secs();
    let mut claims = json!({
        "iss": s.url, "aud": g.client_id, "sub": g.sub, "preferred_username": g.sub,
        "iat": now, "exp": now + TOKEN_TTL_SECS, "roles": roles,
    });
    if let Some(n) = g.nonce {
        claims["nonce"] = json!(n);
    }
    let key = s.current.lock().expect("issuer key").clone();
    let mut r = Json(json!({
        "id_token": key.sign(&claims),
        // Opaque: only the ID token is meant for converge (its `aud` is the client).
        "access_token": random(),
        "token_type": "Bearer",
        "expires_in": TOKEN_TTL_SECS,
        "scope": "openid profile email",
    }))
    .into_response();
    let h = r.headers_mut();
    h.extend(cors);
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// The preflight of a cross-origin `POST /token`.
async fn token_preflight(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    let h = r.headers_mut();
    h.extend(token_cors(&s, &headers));
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("POST"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("content-type, accept"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    r
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
            people: Mutex::new(BTreeMap::from([
                ("vera".to_string(), json!(["viewer"])),
                ("otto".to_string(), json!(["operator"])),
                ("ada".to_string(), json!(["admin"])),
            ])),
            grants: Mutex::new(HashMap::new()),
            origins: Mutex::new(HashSet::new()),
        });
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/authorize", get(authorize))
            .route(
                "/token",
                axum::routing::post(token).options(token_preflight),
            )
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

    /// Lets `sub` sign in at `/authorize`, their `roles` claim being `roles` (replacing
    /// whatever they had).
    pub fn add_person(&self, sub: &str, roles: Value) {
        self.shared
            .people
            .lock()
            .expect("people")
            .insert(sub.to_string(), roles);
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
