//! Who is calling the WorkerService, and whether they may serve the kinds they ask for.
//!
//! A caller proves who it is with `authorization: Bearer <token>` metadata or, on an mTLS
//! listener, with its client certificate's SPIFFE ID (the token wins when both are
//! present). Only `worker` principals speak the WorkerService, and only for the kinds their
//! globs match. Health and reflection are separate services and stay open.

use std::sync::Arc;

use converge_auth::{Authenticator, Principal, Role, tls::PeerInfo, token};
use tonic::{Request, Status};

use converge_engine::ids::KindPair;

/// The authenticated caller of `req`, or `None` when authentication is off.
pub(crate) fn caller<T>(
    auth: Option<&Authenticator>,
    req: &Request<T>,
) -> Result<Option<Arc<Principal>>, Status> {
    let Some(auth) = auth else {
        return Ok(None);
    };
    let principal = match req.metadata().get("authorization") {
        Some(v) => {
            let header = v
                .to_str()
                .map_err(|_| Status::unauthenticated("authorization metadata is not text"))?;
            let token = token::bearer(header).ok_or_else(|| {
                Status::unauthenticated("authorization metadata must be `Bearer <token>`")
            })?;
            auth.by_token(token)
                .ok_or_else(|| Status::unauthenticated("unknown token"))?
        }
        None => {
            let ids = req
                .extensions()
                .get::<PeerInfo>()
                .map(|p| p.spiffe_ids.clone())
                .unwrap_or_default();
            if ids.is_empty() {
                return Err(Status::unauthenticated(
                    "credentials required: send `authorization: Bearer <token>` metadata \
                     (WORKER_TOKEN) or a client certificate",
                ));
            }
            ids.iter()
                .find_map(|id| auth.by_spiffe(id))
                .ok_or_else(|| {
                    Status::unauthenticated(format!(
                        "no principal has the client certificate's SPIFFE ID {}",
                        ids.join(", ")
                    ))
                })?
        }
    };
    if principal.role != Role::Worker {
        return Err(Status::permission_denied(format!(
            "principal {:?} has role {}; the WorkerService needs role worker",
            principal.name, principal.role
        )));
    }
    Ok(Some(principal))
}

/// Refuses the first kind `principal` may not serve (no principal: authentication is off).
pub(crate) fn check_kinds(principal: Option<&Principal>, pairs: &[KindPair]) -> Result<(), Status> {
    let Some(p) = principal else {
        return Ok(());
    };
    match pairs.iter().find(|k| !p.may_serve(&k.kind)) {
        None => Ok(()),
        Some(k) => Err(Status::permission_denied(format!(
            "principal {:?} may not serve kind {:?} (its kinds: {})",
            p.name,
            k.kind,
            p.kinds.join(", ")
        ))),
    }
}
