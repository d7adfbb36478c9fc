//! The HTTP listener's rate limits: `RATE_LIMIT_PER_ADDRESS` on every request but the
//! probes and `/metrics`, checked first (before a token is even read, so a flood of bad
//! tokens costs a bucket lookup each), and `RATE_LIMIT_PER_PRINCIPAL` on each `/api/v1`
//! call of an authenticated principal, checked by the auth guard once it knows who calls
//! ([`RateLimits::check_principal`]). A refusal is a 429 problem with `Retry-After` and is
//! counted in `converge_rate_limited_total{limit}`. The buckets and their bounds are
//! `converge_auth::ratelimit`'s.
//!
//! The address is the TCP peer's ([`ClientAddr`]); `X-Forwarded-For` is never trusted, so
//! behind a proxy every client shares the proxy's address: set only the per-principal
//! limit there (or limit at the proxy).

use std::{net::SocketAddr, sync::Arc};

use axum::{
    extract::{ConnectInfo, Request, State, connect_info::Connected},
    middleware::Next,
    response::{IntoResponse, Response},
    serve::IncomingStream,
};
use converge_auth::{
    listen::GuardedListener,
    ratelimit::{AddressKey, KeyedLimiter, RateSpec, retry_after_secs},
    tls::TlsListener,
};
use converge_engine::metrics::{self, RateLimited};
use tokio_util::sync::CancellationToken;

use super::problem::ApiError;

/// Paths no rate limit applies to: orchestrators and Prometheus must always get through.
pub const EXEMPT: [&str; 4] = ["/livez", "/healthz", "/readyz", "/metrics"];

/// The peer address of a connection, put in each request's extensions by
/// `into_make_service_with_connect_info::<ClientAddr>()` for the listeners converge serves
/// HTTP on (the guarded TCP listener and the TLS one).
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub SocketAddr);

impl Connected<IncomingStream<'_, GuardedListener>> for ClientAddr {
    fn connect_info(stream: IncomingStream<'_, GuardedListener>) -> Self {
        ClientAddr(*stream.remote_addr())
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for ClientAddr {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        ClientAddr(*stream.remote_addr())
    }
}

/// The process's HTTP rate limits (none configured: no work per request).
#[derive(Clone, Default)]
pub struct RateLimits {
    per_principal: Option<Arc<KeyedLimiter<String>>>,
    per_address: Option<Arc<KeyedLimiter<AddressKey>>>,
}

impl std::fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimits")
            .field(
                "per_principal",
                &self.per_principal.as_ref().map(|l| l.spec()),
            )
            .field("per_address", &self.per_address.as_ref().map(|l| l.spec()))
            .finish()
    }
}

impl RateLimits {
    /// Limits at these rates (`None`: that limit is off), with the per-address limiter
    /// shared with whoever else passes it in (the broker's bad-credential limit).
    pub fn new(
        per_principal: Option<RateSpec>,
        per_address: Option<Arc<KeyedLimiter<AddressKey>>>,
    ) -> RateLimits {
        RateLimits {
            per_principal: per_principal.map(KeyedLimiter::new),
            per_address,
        }
    }

    /// Sweeps the per-principal buckets until `stop` (the per-address limiter is swept by
    /// whoever made it).
    pub fn keep_swept(&self, tasks: &mut tokio::task::JoinSet<()>, stop: &CancellationToken) {
        if let Some(l) = &self.per_principal {
            tasks.spawn(l.clone().keep_swept(stop.clone()));
        }
    }

    /// `Err(429)` when `principal` has made more calls than `RATE_LIMIT_PER_PRINCIPAL`
    /// allows.
    pub fn check_principal(&self, principal: &str) -> Result<(), ApiError> {
        let Some(l) = &self.per_principal else {
            return Ok(());
        };
        l.check(&principal.to_owned()).map_err(|wait| {
            refused(
                RateLimited::Principal,
                format!(
                    "principal {principal:?} is over its rate limit \
                     (RATE_LIMIT_PER_PRINCIPAL={})",
                    l.spec()
                ),
                wait,
            )
        })
    }
}

fn refused(limit: RateLimited, detail: String, wait: std::time::Duration) -> ApiError {
    metrics::metrics().rate_limited(limit);
    ApiError::TooManyRequests {
        detail,
        retry_after: retry_after_secs(wait),
    }
}

/// The middleware: refuses a request whose client address is over
/// `RATE_LIMIT_PER_ADDRESS` (probes and `/metrics` pass).
pub async fn per_address(State(limits): State<RateLimits>, req: Request, next: Next) -> Response {
    let Some(l) = &limits.per_address else {
        return next.run(req).await;
    };
    if EXEMPT.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    // Absent when the router runs without a socket (tests driving it with `oneshot`).
    let Some(ConnectInfo(ClientAddr(peer))) = req.extensions().get::<ConnectInfo<ClientAddr>>()
    else {
        return next.run(req).await;
    };
    match l.check(&AddressKey::of(peer.ip())) {
        Ok(()) => next.run(req).await,
        Err(wait) => refused(
            RateLimited::Address,
            format!(
                "client address {} is over its rate limit (RATE_LIMIT_PER_ADDRESS={})",
                peer.ip(),
                l.spec()
            ),
            wait,
        )
        .into_response(),
    }
}
