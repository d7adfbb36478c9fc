//! Who is calling the WorkerService, and whether they may serve the kinds they ask for.
//!
//! A caller proves who it is with `authorization: Bearer <token>` metadata or, on an mTLS
//! listener, with its client certificate's SPIFFE ID (the token wins when both are
//! present). Only `worker` principals speak the WorkerService, and only for the kinds their
//! globs match. Health and reflection are separate services and stay open.
//!
//! Authentication is a tower layer around the WorkerService ([`Authenticated`]): it reads the
//! request's headers and its connection's certificate, and refuses a caller before tonic
//! decodes a single message, so an unauthenticated peer cannot make the broker buffer or
//! decode a 64 MiB request (issue 41: 16 concurrent 60 MiB `GetProviderConfig` calls with no
//! token held 889 MiB when the check ran in the handler). The principal it found travels to
//! the handlers in the request's extensions ([`Caller`], read by [`caller`]).

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use converge_auth::{
    Authenticator, Principal, Role,
    ratelimit::{AddressKey, KeyedLimiter, retry_after_secs},
    tls::PeerInfo,
    token,
};
use converge_engine::metrics::{self, RateLimited};
use tonic::{
    Request, Status,
    codegen::{Service, http},
    server::NamedService,
};

use converge_engine::ids::KindPair;

/// The authenticated caller of one WorkerService request, put in its extensions by
/// [`Authenticated`] (`None`: authentication is off).
#[derive(Clone, Debug)]
pub struct Caller(pub Option<Arc<Principal>>);

/// The WorkerService behind authentication: every request's caller is resolved from its
/// headers (and its connection's client certificate) before the inner service sees it.
#[derive(Clone)]
pub struct Authenticated<S> {
    inner: S,
    auth: Option<Arc<Authenticator>>,
    bad_credentials: Option<Arc<KeyedLimiter<AddressKey>>>,
}

impl<S> Authenticated<S> {
    /// `inner` behind `auth` (`None`: every caller is let in as [`Caller`]`(None)`).
    pub fn new(inner: S, auth: Option<Arc<Authenticator>>) -> Self {
        Authenticated {
            inner,
            auth,
            bad_credentials: None,
        }
    }

    /// Limits the calls refused for their credentials per client address (`None`: no
    /// limit).
    pub fn with_bad_credentials_limit(
        mut self,
        limit: Option<Arc<KeyedLimiter<AddressKey>>>,
    ) -> Self {
        self.bad_credentials = limit;
        self
    }

    /// `status` (an authentication refusal of a call from `extensions`' peer), or
    /// RESOURCE_EXHAUSTED when that peer's address is out of bad attempts.
    fn refusal(&self, status: Status, extensions: &http::Extensions) -> Status {
        let (Some(limit), Some(peer)) = (&self.bad_credentials, extensions.get::<PeerInfo>())
        else {
            return status;
        };
        if status.code() != tonic::Code::Unauthenticated {
            return status;
        }
        match limit.check(&AddressKey::of(peer.remote_addr.ip())) {
            Ok(()) => status,
            Err(wait) => {
                metrics::metrics().rate_limited(RateLimited::GrpcBadCredentials);
                Status::resource_exhausted(format!(
                    "too many calls with bad credentials from {} (RATE_LIMIT_PER_ADDRESS={}); \
                     retry in {} s",
                    peer.remote_addr.ip(),
                    limit.spec(),
                    retry_after_secs(wait)
                ))
            }
        }
    }
}

impl<S: NamedService> NamedService for Authenticated<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B, R> Service<http::Request<B>> for Authenticated<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        match identify(self.auth.as_deref(), req.headers(), req.extensions()) {
            Ok(principal) => {
                req.extensions_mut().insert(Caller(principal));
                Box::pin(self.inner.call(req))
            }
            // Answered from the headers alone: the body is dropped unread, so the peer's
            // flow-control window is all it ever got to send.
            Err(status) => {
                let response = self.refusal(status, req.extensions()).into_http();
                Box::pin(async move { Ok(response) })
            }
        }
    }
}

/// The principal a request's headers (or its connection's certificate) prove.
fn identify(
    auth: Option<&Authenticator>,
    headers: &http::HeaderMap,
    extensions: &http::Extensions,
) -> Result<Option<Arc<Principal>>, Status> {
    let Some(auth) = auth else {
        return Ok(None);
    };
    let principal = match headers.get("authorization") {
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
            let ids = extensions
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

/// The caller [`Authenticated`] found for `req` (`None` when authentication is off). A
/// request that did not pass the layer while authentication is on (`auth_on`) is refused:
/// a service wired without it fails closed.
pub(crate) fn caller<T>(req: &Request<T>, auth_on: bool) -> Result<Option<Arc<Principal>>, Status> {
    match req.extensions().get::<Caller>() {
        Some(Caller(p)) => Ok(p.clone()),
        None if !auth_on => Ok(None),
        None => Err(Status::unauthenticated(
            "the request did not pass the broker's authentication",
        )),
    }
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

/// Whether `principal` may serve `kind` (authentication off: anyone may).
pub(crate) fn may_serve(principal: Option<&Principal>, kind: &str) -> bool {
    principal.is_none_or(|p| p.may_serve(kind))
}

/// A principal's name for the log (`-` when authentication is off).
pub(crate) fn name_of(principal: Option<&Principal>) -> &str {
    principal.map_or("-", |p| p.name.as_str())
}
