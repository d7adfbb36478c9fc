//! Authentication and authorization of `/api/v1/*`.
//!
//! With `AUTH_FILE` set, every call carries `Authorization: Bearer <token>`; the token's
//! principal must hold the role the call needs ([`required_role`]). With `OIDC_ISSUER` set
//! too, a bearer JWT is a person's token, verified against the issuer's keys
//! (`converge_auth::oidc`): invalid → 401, valid without a converge role → 403. Without one the answer
//! is 401 with `WWW-Authenticate: Bearer`; with too weak a role, 403 naming the role needed.
//! Probes, `/metrics` and the UI's static files live outside `/api/v1` and stay open.
//! Every mutating call is logged with its actor, and the actor reaches the database so the
//! resource's events record who did it.

use std::sync::Arc;

use axum::{
    extract::{Request, State},
    http::{Method, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use converge_auth::{Principal, Role, oidc::Rejection, token};

use super::{AppState, problem::ApiError};

/// The authenticated caller of a request (absent when authentication is off).
#[derive(Debug, Clone)]
pub struct Caller(pub Arc<Principal>);

/// The name recorded as the actor of a mutating call (`None` when authentication is off).
pub fn actor(caller: &Option<axum::Extension<Caller>>) -> Option<String> {
    caller.as_ref().map(|c| c.0.0.name.clone())
}

/// The role a call to `path` (relative to `/api/v1`) with `method` needs.
pub fn required_role(method: &Method, path: &str) -> Role {
    let under = |p: &str| {
        path.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    // Tokens grant access: even listing them is the admin's business.
    if under("/tokens") {
        return Role::Admin;
    }
    if method == Method::GET || method == Method::HEAD {
        return Role::Viewer;
    }
    // Kinds (manifests, versions, configs) and provider configs shape what runs where.
    let admin = ["/kinds", "/providerconfigs"].iter().any(|p| under(p));
    if admin { Role::Admin } else { Role::Operator }
}

/// Whether the caller of a request outside `/api/v1` with `headers` may read what a viewer
/// reads (the kinds' schemas in the OpenAPI document): anyone when authentication is off,
/// else the holder of a token (or OIDC token) whose role allows viewing.
pub async fn may_read(state: &AppState, headers: &axum::http::HeaderMap) -> bool {
    let Some(auth) = &state.auth else {
        return true;
    };
    let Some(t) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(token::bearer)
    else {
        return false;
    };
    auth.by_bearer(t)
        .await
        .is_ok_and(|p| p.role.allows(Role::Viewer))
}

fn is_mutation(method: &Method) -> bool {
    !(method == Method::GET || method == Method::HEAD || method == Method::OPTIONS)
}

/// The middleware: authenticates and authorizes `/api/v1/*` (anything else passes), and
/// logs mutating calls.
pub async fn guard(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let method = req.method().clone();
    // Nothing to check or log (no AUTH_FILE, a read): no per-request work at all.
    if state.auth.is_none() && !is_mutation(&method) {
        return next.run(req).await;
    }
    let path = match req.uri().path().strip_prefix("/api/v1") {
        Some(p) if p.is_empty() || p.starts_with('/') => p.to_string(),
        _ => return next.run(req).await,
    };
    // How to sign in: asked before the UI holds any credential (see `auth_config`).
    if path == "/auth/config" && method == Method::GET {
        return next.run(req).await;
    }
    let caller = match &state.auth {
        None => None,
        Some(auth) => {
            let token = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(token::bearer);
            let Some(token) = token else {
                return ApiError::Unauthorized(
                    "this API requires a bearer token: send `Authorization: Bearer <token>`".into(),
                )
                .into_response();
            };
            let principal = match auth.by_bearer(token).await {
                Ok(p) => p,
                Err(Rejection::Invalid(why)) => {
                    return ApiError::Unauthorized(why).into_response();
                }
                // A person the issuer vouches for, whom no claim gives a converge role.
                Err(Rejection::NoRole(why)) => {
                    return ApiError::Forbidden(why).into_response();
                }
                Err(e @ Rejection::Unavailable(_)) => {
                    return ApiError::Unavailable(e.to_string()).into_response();
                }
            };
            // Every call of the principal counts, refused ones too.
            if let Err(e) = state.runtime.limits.check_principal(&principal.name) {
                return e.into_response();
            }
            let needed = required_role(&method, &path);
            if !principal.role.allows(needed) {
                return ApiError::Forbidden(format!(
                    "{method} /api/v1{path} needs role {needed}; principal {:?} has role {}",
                    principal.name, principal.role
                ))
                .into_response();
            }
            req.extensions_mut().insert(Caller(principal.clone()));
            Some(principal)
        }
    };
    let resp = next.run(req).await;
    if is_mutation(&method) {
        let actor = caller
            .as_ref()
            .map(|p| p.name.as_str())
            .unwrap_or("anonymous");
        tracing::info!(actor, %method, path = %format!("/api/v1{path}"), status = resp.status().as_u16(), "api call");
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_by_route_class() {
        let cases = [
            (Method::GET, "/resources", Role::Viewer),
            (Method::GET, "/kinds/x/manifest", Role::Viewer),
            (Method::GET, "/providerconfigs/x", Role::Viewer),
            (Method::POST, "/resources", Role::Operator),
            (Method::POST, "/resources:plan", Role::Operator),
            (Method::DELETE, "/resources/k/n", Role::Operator),
            (Method::POST, "/resources/k/n/ops", Role::Operator),
            (Method::POST, "/resources/k/n/rollback", Role::Operator),
            (Method::POST, "/reactor-bindings", Role::Operator),
            (Method::PUT, "/kinds/x/manifest", Role::Admin),
            (Method::PUT, "/kinds/x/versions/1/config", Role::Admin),
            (Method::DELETE, "/kinds/x/versions/1", Role::Admin),
            (Method::GET, "/schemas/manifest", Role::Viewer),
            (Method::POST, "/providerconfigs", Role::Admin),
            (Method::DELETE, "/providerconfigs/x", Role::Admin),
            (Method::POST, "/kindsx", Role::Operator),
            (Method::GET, "/tokens", Role::Admin),
            (Method::POST, "/tokens", Role::Admin),
            (Method::DELETE, "/tokens/ci", Role::Admin),
            (Method::GET, "/tokensx", Role::Viewer),
        ];
        for (m, p, want) in cases {
            assert_eq!(required_role(&m, p), want, "{m} {p}");
        }
    }
}
