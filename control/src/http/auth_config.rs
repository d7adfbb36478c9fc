//! `GET /api/v1/auth/config`: how a person signs in, for the web UI before it holds any
//! credential (so the one `/api/v1` route the auth guard lets through without a token). With
//! OIDC configured for the UI (`OIDC_ISSUER` and `OIDC_CLIENT_ID`), the issuer, the public
//! client id, the scopes and the issuer's authorization and token endpoints (from its
//! discovery document; `null` until converge has fetched it); else `oidc: null` and the UI
//! offers the paste-a-token sign-in only. Nothing here is secret: a public client has none.

use axum::{Json, extract::State};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;

/// How people sign in.
#[derive(Debug, Serialize, ToSchema, PartialEq, Eq)]
pub struct AuthConfig {
    /// Sign-in through the OIDC issuer (authorization code + PKCE, a public client), or
    /// `null` when the UI has no such sign-in (paste a token instead).
    pub oidc: Option<OidcConfig>,
}

/// The OIDC issuer the UI signs people in through.
#[derive(Debug, Serialize, ToSchema, PartialEq, Eq)]
pub struct OidcConfig {
    /// OIDC_ISSUER.
    pub issuer: String,
    /// OIDC_CLIENT_ID: the UI's public client.
    pub client_id: String,
    /// OIDC_SCOPES, space-separated.
    pub scopes: String,
    /// Where to send the person to sign in (`null` until the issuer's discovery document is
    /// fetched).
    pub authorization_endpoint: Option<String>,
    /// Where the UI exchanges the code for tokens (`null` until fetched).
    pub token_endpoint: Option<String>,
}

/// Say how people sign in (no credential needed).
///
/// `GET /api/v1/auth/config`: the OIDC issuer, public client id, scopes and endpoints the web
/// UI signs people in with (authorization code + PKCE), or `oidc: null` when only bearer
/// tokens are taken. The only `/api/v1` route that answers without a token.
#[utoipa::path(get, operation_id = "auth_config", path = "/auth/config", tag = "meta",
    responses((status = 200, description = "How people sign in.", body = AuthConfig)))]
pub async fn get(State(s): State<AppState>) -> Json<AuthConfig> {
    Json(answer(&s))
}

fn answer(s: &AppState) -> AuthConfig {
    let oidc = s.auth.as_ref().and_then(|a| a.oidc()).and_then(|v| {
        let set = v.settings();
        let client_id = set.client_id.clone()?;
        let discovery = v.discovery();
        Some(OidcConfig {
            issuer: set.issuer.clone(),
            client_id,
            scopes: set.scopes.clone(),
            authorization_endpoint: discovery
                .as_ref()
                .and_then(|d| d.authorization_endpoint.clone()),
            token_endpoint: discovery.and_then(|d| d.token_endpoint),
        })
    });
    AuthConfig { oidc }
}

/// The origins (`scheme://host[:port]`) the UI's sign-in calls, for the CSP's `connect-src`:
/// the issuer's (the UI reads its discovery document) and the token endpoint's (where it
/// exchanges the code), once each; none unless OIDC is configured for the UI. Before the
/// discovery document is in, the issuer's alone.
pub fn connect_origins(s: &AppState) -> Vec<String> {
    let Some(v) = s.auth.as_ref().and_then(|a| a.oidc()) else {
        return Vec::new();
    };
    if v.settings().client_id.is_none() {
        return Vec::new();
    }
    let token = v.discovery().and_then(|d| d.token_endpoint);
    let mut out: Vec<String> = Vec::new();
    for url in std::iter::once(v.settings().issuer.clone()).chain(token) {
        if let Some(o) = url::Url::parse(&url).ok().and_then(|u| match u.origin() {
            o @ url::Origin::Tuple(..) => Some(o.ascii_serialization()),
            url::Origin::Opaque(_) => None,
        }) && !out.contains(&o)
        {
            out.push(o);
        }
    }
    out
}
