//! API tokens with a life cycle: `POST /api/v1/tokens` mints one (the secret is in that
//! answer and nowhere else: only its SHA-256 is stored), `GET /api/v1/tokens` lists them
//! (never a secret or a hash), `DELETE /api/v1/tokens/{name}` revokes one. Admin only, every
//! method (the auth guard's `required_role`). Minted tokens live in `api_tokens` and join
//! every process's principal index (`app::tokens`); a revoke notifies every pod in its
//! transaction, and the pod that served it re-reads at once. `AUTH_FILE` stays the bootstrap
//! and break-glass source: a name it uses cannot be minted, and with authentication off
//! there is nothing a token could unlock, so every route here answers 409 naming it.

use std::sync::Arc;

use axum::{
    Extension, Json,
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
};
use converge_auth::{Authenticator, Role, principals::check_kinds, token};
use converge_proto::manifest::is_valid_resource_name;
use serde::Deserialize;

use super::{
    AppState,
    auth::{Caller, actor},
    input::{ApiJson, ApiPath},
    openapi::{Conflict, NotFound},
    problem::{ApiError, quote},
    wire::{ApiToken, ApiTokenList, MintedApiToken, NamePath},
};
use crate::{app::tokens::reload, db};

/// The longest lifetime a token may be given: one year, in seconds.
pub const MAX_EXPIRES_IN: i64 = 365 * 24 * 3600;
/// The longest token name.
pub const MAX_NAME: usize = 128;

/// `POST /api/v1/tokens`'s body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenBody {
    /// The principal's name: 1-128 printable ASCII characters without '/' or spaces, not
    /// used by `AUTH_FILE` nor by another token.
    pub name: String,
    /// `viewer`, `operator`, `admin`, or `worker` (which needs `kinds`).
    pub role: String,
    /// For a worker: globs of the kinds it may serve (`*` matches any run of characters).
    #[serde(default)]
    pub kinds: Option<Vec<String>>,
    /// Seconds until it stops authenticating (1 to 31536000, one year); absent: never.
    #[serde(default)]
    pub expires_in: Option<i64>,
}

/// The authenticator when authentication is on; else the 409 every tokens route answers.
fn authenticator(s: &AppState) -> Result<&Arc<Authenticator>, ApiError> {
    s.auth.as_ref().ok_or_else(|| {
        ApiError::Conflict(
            "authentication is off (AUTH_FILE is not set): a token would unlock nothing. \
             Set AUTH_FILE to turn authentication on, then mint tokens"
                .into(),
        )
    })
}

/// The body's role and kinds, checked as `AUTH_FILE` checks them.
fn check(body: &TokenBody) -> Result<(Role, Vec<String>), ApiError> {
    if body.name.len() > MAX_NAME || !is_valid_resource_name(&body.name) {
        return Err(ApiError::BadRequest(format!(
            "name {} must be 1-{MAX_NAME} printable ASCII characters without '/' or spaces",
            quote(&body.name)
        )));
    }
    if body.name.starts_with(converge_auth::oidc::NAME_PREFIX) {
        return Err(ApiError::BadRequest(format!(
            "name {} starts with {:?}, reserved for people signed in through OIDC",
            quote(&body.name),
            converge_auth::oidc::NAME_PREFIX
        )));
    }
    let role = body
        .role
        .parse::<Role>()
        .map_err(|e| ApiError::BadRequest(format!("role: {e}")))?;
    let kinds = check_kinds(role, body.kinds.clone())
        .map_err(|e| ApiError::BadRequest(format!("kinds: {e}")))?;
    if kinds.len() > 64 || kinds.iter().any(|g| g.len() > 253) {
        return Err(ApiError::BadRequest(
            "kinds: at most 64 globs of at most 253 characters each".into(),
        ));
    }
    if let Some(s) = body.expires_in
        && !(1..=MAX_EXPIRES_IN).contains(&s)
    {
        return Err(ApiError::BadRequest(format!(
            "expires_in must be 1 to {MAX_EXPIRES_IN} seconds (one year), not {s}"
        )));
    }
    Ok((role, kinds))
}

/// Re-reads the tokens into this process's index now, so the caller's next request (to any
/// route of this pod) sees its change; other pods follow their LISTEN. A failure is logged
/// only: the change is committed, and the follower's failsafe re-read catches up.
async fn refresh(s: &AppState, auth: &Authenticator) {
    if let Err(e) = reload(&s.pool, auth).await {
        tracing::warn!(error = %e, "API tokens not re-read after a change; the follower will");
    }
}

/// Mint an API token.
///
/// `POST /api/v1/tokens` (admin) → 201 with the token, shown this once and never again (only
/// its SHA-256 is stored). A name, a role, for a worker the kind globs it may serve, and an
/// optional lifetime (`expires_in`, 1 s to 1 year); every pod accepts it within a second.
#[utoipa::path(
    post, operation_id = "tokens_create", path = "/tokens", tag = "tokens",
    request_body = TokenBody,
    responses(
        (status = 201, description = "Minted. The secret is in this answer only.", body = MintedApiToken),
        (status = 409, response = Conflict),
    ),
)]
#[tracing::instrument(skip(s, body, caller), fields(name = %body.name))]
pub async fn create(
    State(s): State<AppState>,
    caller: Option<Extension<Caller>>,
    ApiJson(body): ApiJson<TokenBody>,
) -> Result<impl IntoResponse, ApiError> {
    let auth = authenticator(&s)?;
    let (role, kinds) = check(&body)?;
    if auth.file_has_name(&body.name) {
        return Err(ApiError::Conflict(format!(
            "name {} belongs to an AUTH_FILE principal",
            quote(&body.name)
        )));
    }
    let secret = token::mint().map_err(|e| {
        tracing::error!(error = %e, "the operating system's random source failed");
        ApiError::Unavailable("cannot mint a token now: no randomness available".into())
    })?;
    let row = db::tokens::insert(
        &s.pool,
        &body.name,
        &token::digest(&secret),
        role.as_str(),
        &kinds,
        body.expires_in,
        actor(&caller).as_deref(),
    )
    .await
    .map_err(ApiError::db("store an API token"))?
    .ok_or_else(|| {
        ApiError::Conflict(format!(
            "a token named {} exists; revoke it first",
            quote(&body.name)
        ))
    })?;
    refresh(&s, auth).await;
    tracing::info!(name = %body.name, role = %role, "API token minted");
    Ok((
        StatusCode::CREATED,
        // The secret must not linger in a cache.
        [(header::CACHE_CONTROL, "no-store")],
        Json(MintedApiToken {
            token: secret,
            info: ApiToken::from(row),
        }),
    ))
}

/// List API tokens.
///
/// `GET /api/v1/tokens` (admin) → `{items}` by name: each token's role, kinds, when it was
/// created, when it expires and was last used (recorded at most once a minute). Never a
/// secret or its hash.
#[utoipa::path(
    get, operation_id = "tokens_list", path = "/tokens", tag = "tokens",
    responses(
        (status = 200, description = "Every minted token, by name (no secret, no hash).", body = ApiTokenList),
        (status = 409, response = Conflict),
    ),
)]
#[tracing::instrument(skip(s))]
pub async fn list(State(s): State<AppState>) -> Result<Json<ApiTokenList>, ApiError> {
    authenticator(&s)?;
    let items = db::tokens::list(&s.pool)
        .await
        .map_err(ApiError::db("list API tokens"))?;
    Ok(Json(ApiTokenList {
        items: items.into_iter().map(ApiToken::from).collect(),
    }))
}

/// Revoke an API token.
///
/// `DELETE /api/v1/tokens/{name}` (admin) → 204: the token is refused by every pod within a
/// second, and its open worker streams and watches are closed.
#[utoipa::path(
    delete, operation_id = "tokens_revoke", path = "/tokens/{name}", tag = "tokens",
    params(NamePath),
    responses(
        (status = 204, description = "Revoked."),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
    ),
)]
#[tracing::instrument(skip(s))]
pub async fn revoke(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    let auth = authenticator(&s)?;
    if !db::tokens::delete(&s.pool, &name)
        .await
        .map_err(ApiError::db("revoke an API token"))?
    {
        return Err(ApiError::NotFound(format!(
            "no API token named {}",
            quote(&name)
        )));
    }
    refresh(&s, auth).await;
    tracing::info!(name = %name, "API token revoked");
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(name: &str, role: &str, kinds: Option<&[&str]>, expires_in: Option<i64>) -> TokenBody {
        TokenBody {
            name: name.into(),
            role: role.into(),
            kinds: kinds.map(|k| k.iter().map(|s| s.to_string()).collect()),
            expires_in,
        }
    }

    #[test]
    fn bodies_are_checked_like_auth_file_entries() {
        assert!(check(&body("ci", "viewer", None, None)).is_ok());
        assert!(check(&body("w", "worker", Some(&["net-*"]), Some(60))).is_ok());
        let bad = [
            body("", "viewer", None, None),
            body("a b", "viewer", None, None),
            body(&"x".repeat(129), "viewer", None, None),
            body("ci", "root", None, None),
            body("w", "worker", None, None),
            body("w", "worker", Some(&[""]), None),
            body("ci", "admin", Some(&["*"]), None),
            body("ci", "viewer", None, Some(0)),
            body("ci", "viewer", None, Some(MAX_EXPIRES_IN + 1)),
        ];
        for b in bad {
            assert!(
                matches!(check(&b), Err(ApiError::BadRequest(_))),
                "{b:?} must be refused"
            );
        }
    }
}
