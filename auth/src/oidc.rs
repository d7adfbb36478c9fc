//! OIDC for people: a bearer JWT signed by the configured issuer (`OIDC_ISSUER`) is a
//! principal of the HTTP API, with the role its roles claim names.
//!
//! - The issuer's keys: its discovery document (`$OIDC_ISSUER/.well-known/openid-configuration`,
//!   whose `issuer` must equal `OIDC_ISSUER` exactly) names its `jwks_uri`; the JWKS is cached
//!   by `kid`, refreshed in the background ([`Verifier::keep_fresh`], every
//!   `OIDC_JWKS_REFRESH`, retried with backoff while the issuer is unreachable, so an issuer
//!   down at boot does not stop the boot), and re-fetched when a token names a `kid` the cache
//!   does not hold: a rotation at the issuer is followed without a restart. That re-fetch
//!   happens at most once per `OIDC_JWKS_COOLDOWN`, so a flood of tokens with made-up `kid`s
//!   cannot make converge hammer the issuer.
//! - A token: only asymmetric algorithms (RS*, PS*, ES256/ES384, EdDSA) are accepted, and the
//!   key's own algorithm or curve must match the header's: `none` and the HMAC family are
//!   refused before any key is looked at, so an issuer's public key can never serve as an
//!   HMAC secret. Keys named in the token itself (`jwk`, `jku`) are ignored. `iss`, `aud`
//!   (any of `OIDC_AUDIENCE`), `exp`, `sub` are required; `exp` and `nbf` are checked with
//!   [`LEEWAY`] of clock skew. Verification is jsonwebtoken's (pure-Rust RustCrypto backend).
//! - The role: the claim `OIDC_ROLES_CLAIM` (a top-level name, else a dotted path), a string
//!   or a list of strings. Without `OIDC_ROLE_MAP` the values `viewer`, `operator`, `admin`
//!   count; with it, only the values it maps (it is then the whole truth, so a group that
//!   happens to be called `admin` grants nothing unless mapped). The highest role wins. A
//!   valid token with no role is refused with 403 ([`Rejection::NoRole`]). Never `worker`:
//!   OIDC principals are people and never reach the WorkerService.
//! - The name (recorded as the actor of what the person does): `oidc:` and the token's
//!   `preferred_username`, else its `email`, else its `sub` (the first that is 1-123
//!   printable characters). The prefix is reserved (`AUTH_FILE` and `POST /api/v1/tokens`
//!   refuse names that start with it), so a person is never taken for a file principal or
//!   an API token in the audit trail or the per-principal rate limit. The name is for people
//!   to read: `preferred_username` is whatever the issuer lets users choose, so an issuer
//!   that lets users rename themselves can make two people look alike over time.
//! - A principal lives as long as its token: [`Principal::expires`] is its `exp` (plus
//!   [`LEEWAY`]), when an open watch of it closes. A role taken away at the issuer holds
//!   until then.

pub mod fetch;

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use jsonwebtoken::{
    Algorithm, DecodingKey, Validation,
    errors::ErrorKind,
    jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse},
};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::principals::{Principal, Role};

/// Clock skew allowed on `exp` and `nbf`.
pub const LEEWAY: Duration = Duration::from_secs(60);
/// The longest bearer JWT looked at (an ID token with many groups is a few KiB).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// The most keys kept from one JWKS.
pub const MAX_KEYS: usize = 100;
/// Prefix of every OIDC principal's name.
pub const NAME_PREFIX: &str = "oidc:";
/// The longest principal name (as `AUTH_FILE` and minted tokens allow).
const MAX_NAME: usize = 128;

/// The OIDC settings (`OIDC_*`), parsed and checked at boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// OIDC_ISSUER, exactly as the tokens' `iss` and the discovery document's `issuer` spell it.
    pub issuer: String,
    /// OIDC_AUDIENCE (comma-separated; default OIDC_CLIENT_ID): a token's `aud` must hold one.
    pub audiences: Vec<String>,
    /// OIDC_ROLES_CLAIM (default `roles`).
    pub roles_claim: String,
    /// OIDC_ROLE_MAP (`group=role,...`); empty: the role names themselves count.
    pub role_map: HashMap<String, Role>,
    /// OIDC_CLIENT_ID: the UI's public client (authorization code + PKCE); `None`: no UI
    /// sign-in through the issuer (bearer tokens still work).
    pub client_id: Option<String>,
    /// OIDC_SCOPES (default `openid profile email`): what the UI asks for.
    pub scopes: String,
    /// OIDC_INSECURE_HTTP=true: allow `http://` issuer URLs beyond loopback.
    pub insecure_http: bool,
    /// OIDC_CA_FILE: PEM roots to trust for the issuer instead of the webpki roots.
    pub ca_file: Option<std::path::PathBuf>,
    /// OIDC_JWKS_REFRESH: how often the keys are re-fetched in the background (default 10 min).
    pub refresh_every: Duration,
    /// OIDC_JWKS_COOLDOWN: the least time between two fetches a token's unknown `kid`
    /// triggers (default 30 s).
    pub cooldown: Duration,
}

/// Default OIDC_SCOPES.
pub const DEFAULT_SCOPES: &str = "openid profile email";
/// Default OIDC_ROLES_CLAIM.
pub const DEFAULT_ROLES_CLAIM: &str = "roles";
/// Default OIDC_JWKS_REFRESH.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(600);
/// Default OIDC_JWKS_COOLDOWN.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(30);

/// Checks an issuer URL (`what` names it in the message): absolute, no credentials, query or
/// fragment, and `https` unless its host is loopback or `insecure_http` allows plain HTTP.
pub fn check_url(what: &str, s: &str, insecure_http: bool) -> Result<Url, String> {
    let u = Url::parse(s).map_err(|e| format!("{what} {s:?} is not a URL: {e}"))?;
    if !u.username().is_empty() || u.password().is_some() {
        return Err(format!("{what} {s:?} must not carry credentials"));
    }
    if u.fragment().is_some() {
        return Err(format!("{what} {s:?} must not have a fragment"));
    }
    if u.host().is_none() {
        return Err(format!("{what} {s:?} has no host"));
    }
    match u.scheme() {
        "https" => Ok(u),
        "http" if insecure_http || is_loopback(&u) => Ok(u),
        "http" => Err(format!(
            "{what} {s:?} is plain http beyond loopback: tokens' keys would travel unprotected \
             (use https, or set OIDC_INSECURE_HTTP=true on purpose)"
        )),
        other => Err(format!("{what} {s:?}: scheme {other} is not http(s)")),
    }
}

fn is_loopback(u: &Url) -> bool {
    match u.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        None => false,
    }
}

/// Parses OIDC_ROLE_MAP: `value=role` pairs separated by commas (`platform-admins=admin,
/// devs=operator`); roles viewer, operator, admin only; a value listed twice is an error.
pub fn parse_role_map(s: &str) -> Result<HashMap<String, Role>, String> {
    let mut out = HashMap::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (value, role) = pair
            .rsplit_once('=')
            .ok_or_else(|| format!("{pair:?} is not value=role (e.g. platform-admins=admin)"))?;
        let (value, role) = (value.trim(), role.trim());
        if value.is_empty() {
            return Err(format!("{pair:?} has an empty value"));
        }
        let role: Role = role.parse()?;
        if role == Role::Worker {
            return Err(format!(
                "{pair:?}: OIDC principals are people: viewer, operator or admin, never worker"
            ));
        }
        if out.insert(value.to_string(), role).is_some() {
            return Err(format!("{value:?} is mapped twice"));
        }
    }
    if out.is_empty() {
        return Err("is set but maps nothing (value=role,...)".into());
    }
    Ok(out)
}

/// Why a bearer JWT was not let in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// Not a valid token of the issuer (401): malformed, wrong algorithm, unknown key, bad
    /// signature, expired, wrong audience or issuer.
    #[error("OIDC token refused: {0}")]
    Invalid(String),
    /// A valid token that grants no converge role (403).
    #[error("{0}")]
    NoRole(String),
    /// The issuer's keys have not been fetched yet (503: try again).
    #[error("OIDC issuer keys unavailable: {0}")]
    Unavailable(String),
}

/// Whether `token` has the shape of a JWS in compact form: three base64url parts separated by
/// dots (the bearer door sends those to the OIDC verifier, everything else to the token index).
pub fn looks_like_jwt(token: &str) -> bool {
    let mut parts = 0;
    for p in token.split('.') {
        parts += 1;
        if p.is_empty()
            || !p
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return false;
        }
    }
    parts == 3
}

/// What the discovery document says (the fields converge uses).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Discovery {
    /// Must equal OIDC_ISSUER.
    pub issuer: String,
    /// Where the keys are.
    pub jwks_uri: String,
    /// Where the UI sends a person to sign in.
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    /// Where the UI exchanges the code.
    #[serde(default)]
    pub token_endpoint: Option<String>,
}

struct Key {
    key: DecodingKey,
    /// The algorithms this key may verify (from its `alg`, else its type and curve).
    algs: Vec<Algorithm>,
}

#[derive(Default)]
struct Keys {
    discovery: Option<Discovery>,
    by_kid: HashMap<String, Arc<Key>>,
    /// Keys published without a `kid`: used for a token without one when there is exactly one.
    unnamed: Vec<Arc<Key>>,
}

/// Verifies bearer JWTs against the issuer's keys; cheap to share (`Arc`).
pub struct Verifier {
    settings: Settings,
    client: fetch::Client,
    keys: RwLock<Arc<Keys>>,
    /// Serialises fetches; holds when the last one started.
    fetching: tokio::sync::Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("oidc::Verifier")
            .field("issuer", &self.settings.issuer)
            .field("keys", &self.current().by_kid.len())
            .finish()
    }
}

const ACCEPTED: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Why an issuer's documents were not taken.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// A document could not be fetched.
    #[error(transparent)]
    Fetch(#[from] fetch::FetchError),
    /// A document was fetched but is not acceptable.
    #[error("{0}")]
    Refused(String),
}

impl Verifier {
    /// A verifier for `settings` with no keys yet (see [`Verifier::keep_fresh`]).
    pub fn new(settings: Settings) -> Result<Arc<Verifier>, String> {
        check_url("OIDC_ISSUER", &settings.issuer, settings.insecure_http)?;
        let client = fetch::Client::new(settings.ca_file.as_deref())?;
        Ok(Arc::new(Verifier {
            settings,
            client,
            keys: RwLock::new(Arc::new(Keys::default())),
            fetching: tokio::sync::Mutex::new(None),
        }))
    }

    /// The settings in force.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The discovery document last fetched (`None` before the first success).
    pub fn discovery(&self) -> Option<Discovery> {
        self.current().discovery.clone()
    }

    fn current(&self) -> Arc<Keys> {
        self.keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Fetches the discovery document and the JWKS now and swaps them in; with `cooldown`,
    /// not if a fetch started less than OIDC_JWKS_COOLDOWN ago (`Ok(false)`).
    pub async fn refresh(&self, cooldown: bool) -> Result<bool, RefreshError> {
        let mut last = self.fetching.lock().await;
        if cooldown && last.is_some_and(|t| t.elapsed() < self.settings.cooldown) {
            return Ok(false);
        }
        *last = Some(Instant::now());
        let keys = self.fetch_keys().await?;
        tracing::info!(
            issuer = %self.settings.issuer,
            keys = keys.by_kid.len() + keys.unnamed.len(),
            "OIDC issuer keys fetched"
        );
        *self
            .keys
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(keys);
        Ok(true)
    }

    async fn fetch_keys(&self) -> Result<Keys, RefreshError> {
        let s = &self.settings;
        let base = s.issuer.trim_end_matches('/');
        let url = check_url(
            "the discovery URL",
            &format!("{base}/.well-known/openid-configuration"),
            s.insecure_http,
        )
        .map_err(RefreshError::Refused)?;
        let discovery: Discovery = self.client.get_json(&url).await?;
        if discovery.issuer != s.issuer {
            return Err(RefreshError::Refused(format!(
                "the discovery document names issuer {:?}, not OIDC_ISSUER {:?}",
                discovery.issuer, s.issuer
            )));
        }
        let jwks_url = check_url("jwks_uri", &discovery.jwks_uri, s.insecure_http)
            .map_err(RefreshError::Refused)?;
        #[derive(Deserialize)]
        struct Set {
            keys: Vec<Value>,
        }
        let set: Set = self.client.get_json(&jwks_url).await?;
        let mut keys = Keys {
            discovery: Some(discovery),
            ..Keys::default()
        };
        let mut skipped = 0;
        for v in set.keys.into_iter().take(MAX_KEYS) {
            match serde_json::from_value::<Jwk>(v)
                .ok()
                .and_then(|j| usable(&j))
            {
                Some((kid, key)) => match kid {
                    Some(kid) => {
                        keys.by_kid.insert(kid, Arc::new(key));
                    }
                    None => keys.unnamed.push(Arc::new(key)),
                },
                None => skipped += 1,
            }
        }
        if skipped > 0 {
            tracing::debug!(
                skipped,
                "OIDC JWKS: keys not for signatures or of unknown types skipped"
            );
        }
        Ok(keys)
    }

    /// Keeps the keys fresh until `stop`: fetches at once, then every OIDC_JWKS_REFRESH; a
    /// failure is logged (once per distinct message) and retried from 1 s, doubling to 60 s.
    pub async fn keep_fresh(self: Arc<Self>, stop: CancellationToken) {
        let mut backoff = Duration::from_secs(1);
        let mut last_error = String::new();
        loop {
            let wait = match self.refresh(false).await {
                Ok(_) => {
                    last_error.clear();
                    backoff = Duration::from_secs(1);
                    self.settings.refresh_every
                }
                Err(e) => {
                    let msg = crate::error_chain(&e);
                    if msg != last_error {
                        tracing::error!(issuer = %self.settings.issuer, error = %msg,
                            "OIDC issuer keys not fetched; the keys fetched before (if any) stay in force, retrying");
                        last_error = msg;
                    }
                    let w = backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(60));
                    w
                }
            };
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    fn lookup(&self, kid: Option<&str>) -> Option<Arc<Key>> {
        let keys = self.current();
        match kid {
            Some(kid) => keys.by_kid.get(kid).cloned(),
            None if keys.unnamed.len() + keys.by_kid.len() == 1 => keys
                .unnamed
                .iter()
                .chain(keys.by_kid.values())
                .next()
                .cloned(),
            None => None,
        }
    }

    /// The principal `token` (a JWT) stands for, or why it is refused.
    pub async fn verify(&self, token: &str) -> Result<Principal, Rejection> {
        let invalid = |s: String| Rejection::Invalid(s);
        if token.len() > MAX_TOKEN_BYTES {
            return Err(invalid(format!("longer than {MAX_TOKEN_BYTES} bytes")));
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| invalid(format!("not a signed JWT ({e})")))?;
        if !ACCEPTED.contains(&header.alg) {
            return Err(invalid(format!(
                "algorithm {:?} is not accepted (only the issuer's asymmetric signatures: RS*, PS*, ES256, ES384, EdDSA)",
                header.alg
            )));
        }
        let kid = header.kid.as_deref();
        let key = match self.lookup(kid) {
            Some(k) => k,
            None => {
                // A rotation at the issuer, or a made-up kid: re-fetch (at most once per
                // cooldown), then look again.
                if let Err(e) = self.refresh(true).await {
                    tracing::warn!(issuer = %self.settings.issuer, error = %crate::error_chain(&e), "OIDC keys re-fetch failed");
                }
                match self.lookup(kid) {
                    Some(k) => k,
                    None if self.current().discovery.is_none() => {
                        return Err(Rejection::Unavailable(format!(
                            "the keys of {} have not been fetched yet",
                            self.settings.issuer
                        )));
                    }
                    None => {
                        return Err(invalid(match kid {
                            Some(k) => format!("unknown signing key {k:?}"),
                            None => "no kid, and the issuer publishes more than one key".into(),
                        }));
                    }
                }
            }
        };
        if !key.algs.contains(&header.alg) {
            return Err(invalid(format!(
                "key {:?} does not sign with {:?}",
                kid.unwrap_or_default(),
                header.alg
            )));
        }
        let mut v = Validation::new(header.alg);
        v.set_issuer(&[&self.settings.issuer]);
        v.set_audience(&self.settings.audiences);
        v.leeway = LEEWAY.as_secs();
        v.validate_exp = true;
        v.validate_nbf = true;
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &v)
            .map_err(|e| invalid(reason(e.kind())))?;
        let claims = data.claims;
        let name = name_of(&claims)?;
        let role = self.role_of(&claims).ok_or_else(|| {
            Rejection::NoRole(format!(
                "{name:?} holds no converge role: its claim {:?} names none of {}",
                self.settings.roles_claim,
                if self.settings.role_map.is_empty() {
                    "viewer, operator, admin".to_string()
                } else {
                    "the values OIDC_ROLE_MAP maps".to_string()
                }
            ))
        })?;
        let exp = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        Ok(Principal {
            name,
            role,
            kinds: Vec::new(),
            token_id: None,
            expires: Some(UNIX_EPOCH + Duration::from_secs(exp) + LEEWAY),
        })
    }

    /// The highest role the roles claim grants (see the module's documentation).
    pub fn role_of(&self, claims: &Map<String, Value>) -> Option<Role> {
        let path = &self.settings.roles_claim;
        let found = claims.get(path).or_else(|| {
            let mut parts = path.split('.');
            let first = claims.get(parts.next()?)?;
            parts.try_fold(first, |v, p| v.get(p))
        })?;
        let values: Vec<&str> = match found {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        values
            .into_iter()
            .filter_map(|v| {
                if self.settings.role_map.is_empty() {
                    v.parse::<Role>().ok().filter(|r| *r != Role::Worker)
                } else {
                    self.settings.role_map.get(v).copied()
                }
            })
            .max_by_key(|r| rank(*r))
    }
}

fn rank(r: Role) -> u8 {
    match r {
        Role::Viewer => 1,
        Role::Operator => 2,
        Role::Admin => 3,
        Role::Worker => 0,
    }
}

/// The key a JWKS entry describes, if it is a public signing key of a type converge accepts.
fn usable(j: &Jwk) -> Option<(Option<String>, Key)> {
    if matches!(&j.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
        return None;
    }
    let by_type: Vec<Algorithm> = match &j.algorithm {
        AlgorithmParameters::RSA(_) => vec![
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ],
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(_) => vec![Algorithm::EdDSA],
        // A symmetric key (or a type unknown here) is never a signature converge checks.
        _ => return None,
    };
    let algs = match j.common.key_algorithm {
        None => by_type,
        Some(KeyAlgorithm::UNKNOWN_ALGORITHM) => return None,
        Some(ka) => {
            let a = Algorithm::try_from(ka).ok()?;
            if !by_type.contains(&a) {
                return None;
            }
            vec![a]
        }
    };
    let key = DecodingKey::from_jwk(j).ok()?;
    Some((j.common.key_id.clone(), Key { key, algs }))
}

fn reason(e: &ErrorKind) -> String {
    match e {
        ErrorKind::ExpiredSignature => "expired".into(),
        ErrorKind::ImmatureSignature => "not valid yet (nbf)".into(),
        ErrorKind::InvalidAudience => "wrong audience (aud holds none of OIDC_AUDIENCE)".into(),
        ErrorKind::InvalidIssuer => "wrong issuer (iss is not OIDC_ISSUER)".into(),
        ErrorKind::InvalidSignature => "bad signature".into(),
        ErrorKind::MissingRequiredClaim(c) => format!("no {c} claim"),
        ErrorKind::InvalidAlgorithm => "algorithm does not match the key".into(),
        other => format!("malformed ({other:?})"),
    }
}

/// `oidc:` and the best display name the claims carry (see the module's documentation).
fn name_of(claims: &Map<String, Value>) -> Result<String, Rejection> {
    let ok = |s: &&str| {
        !s.is_empty() && NAME_PREFIX.len() + s.len() <= MAX_NAME && !s.chars().any(char::is_control)
    };
    let sub = claims
        .get("sub")
        .and_then(Value::as_str)
        .filter(ok)
        .ok_or_else(|| Rejection::Invalid("sub is not a string of 1-120 characters".into()))?;
    let shown = ["preferred_username", "email"]
        .iter()
        .filter_map(|c| claims.get(*c).and_then(Value::as_str))
        .find(ok)
        .unwrap_or(sub);
    Ok(format!("{NAME_PREFIX}{shown}"))
}

/// Unix seconds now (for tokens made in tests and the expiry of principals).
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(map: &str) -> Settings {
        Settings {
            issuer: "https://idp.example".into(),
            audiences: vec!["converge".into()],
            roles_claim: "realm_access.roles".into(),
            role_map: if map.is_empty() {
                HashMap::new()
            } else {
                parse_role_map(map).unwrap()
            },
            client_id: None,
            scopes: DEFAULT_SCOPES.into(),
            insecure_http: false,
            ca_file: None,
            refresh_every: DEFAULT_REFRESH,
            cooldown: DEFAULT_COOLDOWN,
        }
    }

    fn claims(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_highest_role_wins_and_a_map_is_the_whole_truth() {
        let plain = Verifier::new(settings("")).unwrap();
        let c = claims(serde_json::json!({"realm_access": {"roles": ["viewer", "admin", "x"]}}));
        assert_eq!(plain.role_of(&c), Some(Role::Admin));
        let c = claims(serde_json::json!({"realm_access": {"roles": "operator"}}));
        assert_eq!(plain.role_of(&c), Some(Role::Operator));
        let c = claims(serde_json::json!({"realm_access": {"roles": ["worker"]}}));
        assert_eq!(plain.role_of(&c), None, "never a worker");
        // A top-level name with dots (a namespaced claim) is taken whole.
        let mut s = settings("");
        s.roles_claim = "https://converge.example/roles".into();
        let ns = Verifier::new(s).unwrap();
        let c = claims(serde_json::json!({"https://converge.example/roles": ["operator"]}));
        assert_eq!(ns.role_of(&c), Some(Role::Operator));

        let mapped = Verifier::new(settings("platform-admins=admin, devs=operator")).unwrap();
        let c = claims(serde_json::json!({"realm_access": {"roles": ["devs", "admin"]}}));
        assert_eq!(
            mapped.role_of(&c),
            Some(Role::Operator),
            "unmapped `admin` grants nothing"
        );
        let c = claims(serde_json::json!({"realm_access": {"roles": ["platform-admins"]}}));
        assert_eq!(mapped.role_of(&c), Some(Role::Admin));
    }

    #[test]
    fn role_maps_and_urls_are_checked() {
        assert!(parse_role_map("a=root").is_err());
        assert!(
            parse_role_map("a=worker")
                .unwrap_err()
                .contains("never worker")
        );
        assert!(
            parse_role_map("a=admin,a=viewer")
                .unwrap_err()
                .contains("twice")
        );
        assert!(parse_role_map("noequals").is_err());
        assert!(parse_role_map(" , ").is_err());
        assert!(check_url("OIDC_ISSUER", "https://idp.example/realms/x", false).is_ok());
        assert!(check_url("OIDC_ISSUER", "http://127.0.0.1:9000", false).is_ok());
        assert!(check_url("OIDC_ISSUER", "http://localhost:9000", false).is_ok());
        assert!(
            check_url("OIDC_ISSUER", "http://idp.example", false)
                .unwrap_err()
                .contains("OIDC_INSECURE_HTTP")
        );
        assert!(check_url("OIDC_ISSUER", "http://idp.example", true).is_ok());
        assert!(check_url("OIDC_ISSUER", "idp.example", false).is_err());
        assert!(check_url("OIDC_ISSUER", "https://u:p@idp.example", false).is_err());
        assert!(check_url("OIDC_ISSUER", "ftp://idp.example", false).is_err());
    }

    #[test]
    fn names_prefer_the_username_and_stay_bounded() {
        let n = |v: Value| name_of(&claims(v));
        assert_eq!(
            n(serde_json::json!({"sub": "123", "preferred_username": "ann", "email": "a@x"}))
                .unwrap(),
            "oidc:ann"
        );
        assert_eq!(
            n(serde_json::json!({"sub": "123", "email": "a@x"})).unwrap(),
            "oidc:a@x"
        );
        assert_eq!(
            n(serde_json::json!({"sub": "123", "email": "a\nb"})).unwrap(),
            "oidc:123"
        );
        assert_eq!(
            n(serde_json::json!({"sub": "123", "preferred_username": "x".repeat(200)})).unwrap(),
            "oidc:123"
        );
        assert!(n(serde_json::json!({"sub": ""})).is_err());
    }

    #[test]
    fn only_compact_jws_shapes_go_to_the_verifier() {
        assert!(looks_like_jwt("eyJh.eyJz.c2ln"));
        assert!(!looks_like_jwt("cvg_abcDEF-_"));
        assert!(!looks_like_jwt("a.b"));
        assert!(!looks_like_jwt("a..c"));
        assert!(!looks_like_jwt("a.b.c.d"));
        assert!(!looks_like_jwt("a.b+.c"));
    }
}
