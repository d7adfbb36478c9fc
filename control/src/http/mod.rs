//! The HTTP API (`/api/v1/...`), probes and `/metrics`. Handlers validate input, call `db` functions and
//! shape responses; they hold no SQL. Errors leave through [`problem::ApiError`] only.

pub mod activity;
pub mod auth;
pub mod auth_config;
pub mod cluster;
pub mod events;
pub mod health;
pub mod input;
pub mod kinds;
pub mod metrics;
pub mod openapi;
pub mod operations;
pub mod problem;
pub mod providerconfigs;
pub mod ratelimit;
pub mod reactor_bindings;
pub mod resource_actions;
pub mod resource_batch;
pub mod resource_graph;
pub mod resource_plan;
pub mod resource_views;
pub mod resources;
pub mod spec_history;
pub mod tokens;
pub mod ui;
pub mod watch;
pub mod whoami;
pub mod wire;

use std::sync::{Arc, OnceLock};

use axum::{
    Router,
    extract::{DefaultBodyLimit, Request, State},
    http::{HeaderValue, header},
    middleware::{self, Next},
    response::Response,
    routing::get,
};
use sqlx::PgPool;
use tokio::sync::Notify;
use utoipa::OpenApi as _;
use utoipa_axum::{router::OpenApiRouter, routes};

use converge_kinds::{Kind, KindCatalog};

use crate::app::{
    apply_coalescer::ApplyCoalescer,
    reads::{self, ReadFrom},
    runtime::Runtime,
    watch::WatchHub,
};

/// Shared state of every handler.
#[derive(Clone)]
pub struct AppState {
    /// The primary pool.
    pub pool: PgPool,
    /// The process's kinds: every manifest compiled once, and the rules every check here
    /// asks (shared with a co-located broker).
    pub catalog: KindCatalog,
    /// The co-located broker's dispatch hint, woken after an apply schedules work.
    pub dispatch_hint: Option<Arc<Notify>>,
    /// Who may call the API (`None`: authentication is off).
    pub auth: Option<Arc<converge_auth::Authenticator>>,
    /// The event-log tail that `?watch=true` streams follow.
    pub watches: Arc<WatchHub>,
    /// Largest provider-config bundle, decoded (`MAX_BUNDLE_BYTES`).
    pub max_bundle_bytes: usize,
    /// The keys that seal provider configs' writeOnly values before they are stored
    /// (`converge_engine::sealing`); with no current key, such a value is refused.
    pub secrets: converge_engine::sealing::Keyring,
    /// Where reads may go, the process's readiness, the members' liveness window.
    pub runtime: Runtime,
    /// Where single applies go: written in batches with the applies queued beside them.
    pub applies: ApplyCoalescer,
}

impl AppState {
    /// The kind (kind, version), from the catalog. Another pod may have just applied it, so
    /// a miss looks the pair up in the database (one indexed read; a manifest found is
    /// compiled once and joins the catalog) rather than trusting the remembered unknowns:
    /// what this answers decides refusals and which secrets are masked.
    pub async fn kind(
        &self,
        kind: &str,
        version: i32,
    ) -> Result<Option<Arc<Kind>>, problem::ApiError> {
        if let Some(k) = self.catalog.get(kind, version) {
            return Ok(Some(k));
        }
        self.catalog
            .lookup(&self.pool, [(kind.to_string(), version)], true)
            .await
            .map_err(problem::ApiError::db("look up a kind manifest"))?;
        Ok(self.catalog.get(kind, version))
    }

    /// This state with `pool` pointed where a handler's reads go: its one decision, made at
    /// its top (`let s = s.reading(ReadFrom::Replica);`), which every query it makes follows
    /// and its response's `X-Converge-Read-Source` reports (see `app::reads`).
    pub fn reading(&self, from: ReadFrom) -> AppState {
        let (pool, source) = self.runtime.reads.choose(&self.pool, from);
        reads::record(source);
        AppState {
            pool: pool.clone(),
            ..self.clone()
        }
    }

    /// Tells a co-located broker that work was scheduled (other brokers hear the NOTIFY).
    pub fn work_scheduled(&self) {
        if let Some(n) = &self.dispatch_hint {
            n.notify_one();
        }
    }
}

static BODY_LIMIT: OnceLock<usize> = OnceLock::new();

/// The request body limit in force (for the 413 message).
pub(crate) fn body_limit() -> usize {
    *BODY_LIMIT.get().unwrap_or(&(16 * 1024 * 1024))
}

/// The Content-Security-Policy of every answer. The UI's build loads one script and one
/// stylesheet from `/assets` and nothing inline (React sets styles through the CSSOM, which
/// `style-src` does not govern); it talks to its own origin only (fetch and the event
/// streams). `/docs` (Swagger UI) loads its own files the same way and draws its icons from
/// `data:` images. Nothing may frame converge, and an API answer opened in a browser runs
/// nothing at all.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; \
    object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// `Strict-Transport-Security` when the listener serves TLS: a year, for this host only
/// (converge does not own its domain's other hosts, so no `includeSubDomains`).
pub const STRICT_TRANSPORT_SECURITY: &str = "max-age=31536000";

/// [`CONTENT_SECURITY_POLICY`] with `origins` (the OIDC issuer's and its token endpoint's,
/// which the UI's sign-in reads the discovery document from and exchanges its code at) added
/// to `connect-src`. Only `connect-src` grows: the redirect to the issuer's sign-in page is a
/// top-level navigation, which no directive of this policy limits (`form-action` governs form
/// submissions, and the UI submits none to the issuer; `navigate-to` is not set).
pub fn content_security_policy_with(origins: &[String]) -> String {
    CONTENT_SECURITY_POLICY.replace(
        "connect-src 'self'",
        &format!("connect-src 'self' {}", origins.join(" ")),
    )
}

/// The headers of every answer, the UI's, the API's and the probes': the version, no MIME
/// sniffing, no framing, the [`CONTENT_SECURITY_POLICY`] (with the OIDC issuer's and token
/// endpoint's origins when the UI signs in through an issuer), no referrer sent on, and over TLS
/// (`https`) the [`STRICT_TRANSPORT_SECURITY`].
async fn standard_headers(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let https = s.runtime.https;
    let origins = auth_config::connect_origins(&s);
    let csp = Some(origins)
        .filter(|o| !o.is_empty())
        .and_then(|o| HeaderValue::from_str(&content_security_policy_with(&o)).ok())
        .unwrap_or(HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert("x-api-version", HeaderValue::from_static("v1"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CONTENT_SECURITY_POLICY, csp);
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if https {
        h.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static(STRICT_TRANSPORT_SECURITY),
        );
    }
    resp
}

/// The API router (without a socket, so tests can drive it with `oneshot`).
pub fn router(state: AppState, max_body_bytes: usize) -> Router {
    let _ = BODY_LIMIT.set(max_body_bytes);
    let (documented, _) = routes().split_for_parts();
    documented
        .merge(openapi::docs_router())
        // Not in the document: for Prometheus, not a call of the API (see `metrics`).
        .route("/metrics", get(metrics::serve))
        .fallback(ui::serve)
        // Outside the nest, so an unknown /api/v1 path answers 401 before 404.
        .layer(middleware::from_fn_with_state(state.clone(), auth::guard))
        // Before the guard: a flood from one address is refused before its token is read.
        .layer(middleware::from_fn_with_state(
            state.runtime.limits.clone(),
            ratelimit::per_address,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            standard_headers,
        ))
        .layer(middleware::from_fn_with_state(
            state.runtime.reads.clone(),
            reads::read_source_header,
        ))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        // Outermost: counts every answer, the guard's 401s and the body limit's 413s too.
        .layer(middleware::from_fn(metrics::track))
        .with_state(state)
}

/// Every documented route: `/api/v1`, the probes and `/openapi.json`. Each `routes!` call
/// registers the handlers of one path and their `#[utoipa::path]` descriptions together, so
/// the router and [`openapi::document`] are two views of this one list.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    let api = OpenApiRouter::new()
        .routes(routes!(health::version))
        .routes(routes!(whoami::whoami))
        .routes(routes!(auth_config::get))
        .routes(routes!(cluster::get))
        .routes(routes!(kinds::list))
        .routes(routes!(kinds::put_manifest, kinds::get_manifest))
        .routes(routes!(kinds::get_manifest_version))
        .routes(routes!(kinds::delete_version))
        .routes(routes!(kinds::manifest_schema))
        .routes(routes!(kinds::put_config, kinds::get_config))
        .routes(routes!(providerconfigs::list, providerconfigs::put))
        .routes(routes!(providerconfigs::get, providerconfigs::delete))
        .routes(routes!(reactor_bindings::list, reactor_bindings::put))
        .routes(routes!(reactor_bindings::get, reactor_bindings::delete))
        .routes(routes!(resources::list, resources::apply))
        .routes(routes!(resource_batch::apply_batch))
        .routes(routes!(resource_plan::plan))
        .routes(routes!(resource_views::roots))
        .routes(routes!(resource_views::summary))
        .routes(routes!(resources::get, resource_actions::delete))
        .routes(routes!(resource_views::children))
        .routes(routes!(resource_graph::dependencies))
        .routes(routes!(resource_graph::graph))
        .routes(routes!(resource_views::owner_summary))
        .routes(routes!(resource_actions::reconcile))
        .routes(routes!(resource_actions::quarantine))
        .routes(routes!(resource_actions::unquarantine))
        .routes(routes!(operations::create, operations::list))
        .routes(routes!(operations::get))
        .routes(routes!(events::list))
        .routes(routes!(events::log))
        .routes(routes!(activity::recent))
        .routes(routes!(spec_history::history))
        .routes(routes!(spec_history::rollback))
        .routes(routes!(spec_history::raw_spec))
        .routes(routes!(tokens::create, tokens::list))
        .routes(routes!(tokens::revoke))
        // After routing (so it sees the named path parameters), before any handler.
        .route_layer(middleware::from_fn(input::refuse_nul_params));
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .nest("/api/v1", api)
        .merge(health::probes())
        .routes(routes!(openapi::serve_document))
}

/// Parses a query string into (key, value) pairs, keeping repeats (`?phase=A&phase=B`).
pub(crate) fn query_pairs(q: Option<&str>) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        percent_encoding::percent_decode_str(&s)
            .decode_utf8_lossy()
            .into_owned()
    };
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}
