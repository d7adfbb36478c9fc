//! `GET /api/v1/whoami`: who the caller is and what role it holds, so a client (the web UI)
//! can name the signed-in principal and disable what that role may not do before the server
//! refuses it. Any principal that may read gets its answer; with authentication off the
//! answer is the anonymous caller every request runs as, which may do everything.

use axum::{Extension, Json};
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Caller;

/// The caller of the API.
#[derive(Debug, Serialize, ToSchema, PartialEq, Eq)]
pub struct WhoAmI {
    /// The principal's name (recorded as the actor of what it does); `anonymous` when
    /// authentication is off.
    pub name: String,
    /// Its role: `viewer`, `operator` or `admin` (`admin` when authentication is off, since
    /// then every call is allowed).
    pub role: String,
    /// For a worker principal, the globs of the kinds it may serve; empty otherwise.
    pub kinds: Vec<String>,
    /// Whether the server checks tokens (`AUTH_FILE` set); false means anyone may do anything.
    pub authenticated: bool,
}

/// Say who the caller is and what its role allows.
///
/// `GET /api/v1/whoami`: the principal the request's credential names, its role and kind
/// globs, and whether authentication is on at all (the UI disables what the role cannot do).
#[utoipa::path(get, operation_id = "whoami", path = "/whoami", tag = "meta",
    responses((status = 200, description = "The calling principal and its role.", body = WhoAmI)))]
pub async fn whoami(caller: Option<Extension<Caller>>) -> Json<WhoAmI> {
    Json(answer(caller.as_ref().map(|c| &c.0)))
}

/// The answer for `caller` (`None`: authentication is off, see the auth guard, which sets a
/// [`Caller`] on every request it lets through when it is on).
fn answer(caller: Option<&Caller>) -> WhoAmI {
    match caller {
        Some(Caller(p)) => WhoAmI {
            name: p.name.clone(),
            role: p.role.as_str().to_string(),
            kinds: p.kinds.clone(),
            authenticated: true,
        },
        None => WhoAmI {
            name: "anonymous".into(),
            role: converge_auth::Role::Admin.as_str().to_string(),
            kinds: Vec::new(),
            authenticated: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use converge_auth::{Principal, Role};

    use super::*;

    #[test]
    fn the_caller_is_named_with_its_role_and_anonymous_admin_without_auth() {
        let viewer = Caller(Arc::new(Principal {
            name: "ann".into(),
            role: Role::Viewer,
            kinds: Vec::new(),
            token_id: None,
            expires: None,
        }));
        assert_eq!(
            answer(Some(&viewer)),
            WhoAmI {
                name: "ann".into(),
                role: "viewer".into(),
                kinds: Vec::new(),
                authenticated: true
            }
        );
        let off = answer(None);
        assert_eq!(
            (off.name.as_str(), off.role.as_str(), off.authenticated),
            ("anonymous", "admin", false)
        );
    }
}
