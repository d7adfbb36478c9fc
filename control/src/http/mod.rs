//! The HTTP API (`/api/v1/...`) and probes. Handlers validate input, call `db` functions and
//! shape responses; they hold no SQL. Errors leave through [`problem::ApiError`] only.

pub mod auth;
pub mod events;
pub mod health;
pub mod input;
pub mod kinds;
pub mod operations;
pub mod problem;
pub mod providerconfigs;
pub mod reactor_bindings;
pub mod resource_actions;
pub mod resource_batch;
pub mod resource_graph;
pub mod resource_views;
pub mod resources;
pub mod spec_history;
pub mod ui;

use std::sync::{Arc, OnceLock};

use axum::{
    Router,
    extract::{DefaultBodyLimit, Request},
    http::{HeaderValue, header},
    middleware::{self, Next},
    response::Response,
    routing::{get, post, put},
};
use sqlx::PgPool;
use tokio::sync::Notify;

use crate::app::schemas::{KindSchemas, Schemas};

/// Shared state of every handler.
#[derive(Clone)]
pub struct AppState {
    /// The primary pool.
    pub pool: PgPool,
    /// The validator surface.
    pub schemas: Arc<Schemas>,
    /// The co-located broker's dispatch hint, woken after an apply schedules work.
    pub dispatch_hint: Option<Arc<Notify>>,
    /// Who may call the API (`None`: authentication is off).
    pub auth: Option<Arc<converge_auth::Authenticator>>,
}

impl AppState {
    /// The compiled manifest of (kind, version). Another pod may have just applied it, so a
    /// miss re-reads the manifests once before answering `None`.
    pub async fn kind_schemas(
        &self,
        kind: &str,
        version: i32,
    ) -> Result<Option<Arc<KindSchemas>>, problem::ApiError> {
        if let Some(k) = self.schemas.get(kind, version) {
            return Ok(Some(k));
        }
        self.schemas
            .reload(&self.pool)
            .await
            .map_err(problem::ApiError::db("reload kind manifests"))?;
        Ok(self.schemas.get(kind, version))
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

async fn standard_headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert("x-api-version", HeaderValue::from_static("v1"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    resp
}

/// The API router (without a socket, so tests can drive it with `oneshot`).
pub fn router(state: AppState, max_body_bytes: usize) -> Router {
    let _ = BODY_LIMIT.set(max_body_bytes);
    let api = Router::new()
        .route("/version", get(health::version))
        .route("/kinds", get(kinds::list))
        .route(
            "/kinds/{kind}/manifest",
            put(kinds::put_manifest).get(kinds::get_manifest),
        )
        .route(
            "/kinds/{kind}/versions/{version}/manifest",
            get(kinds::get_manifest_version),
        )
        .route(
            "/kinds/{kind}/versions/{version}/config",
            put(kinds::put_config).get(kinds::get_config),
        )
        .route(
            "/providerconfigs",
            get(providerconfigs::list).post(providerconfigs::put),
        )
        .route(
            "/providerconfigs/{name}",
            get(providerconfigs::get).delete(providerconfigs::delete),
        )
        .route(
            "/reactor-bindings",
            get(reactor_bindings::list).post(reactor_bindings::put),
        )
        .route(
            "/reactor-bindings/{name}",
            get(reactor_bindings::get).delete(reactor_bindings::delete),
        )
        .route("/resources", get(resources::list).post(resources::apply))
        .route("/resources:batch", post(resource_batch::apply_batch))
        .route("/resources/roots", get(resource_views::roots))
        .route("/resources/summary", get(resource_views::summary))
        .route(
            "/resources/{kind}/{name}",
            get(resources::get).delete(resource_actions::delete),
        )
        .route(
            "/resources/{kind}/{name}/children",
            get(resource_views::children),
        )
        .route(
            "/resources/{kind}/{name}/dependencies",
            get(resource_graph::dependencies),
        )
        .route("/resources/{kind}/{name}/graph", get(resource_graph::graph))
        .route(
            "/resources/{kind}/{name}/summary",
            get(resource_views::owner_summary),
        )
        .route(
            "/resources/{kind}/{name}/reconcile",
            post(resource_actions::reconcile),
        )
        .route(
            "/resources/{kind}/{name}/quarantine",
            post(resource_actions::quarantine),
        )
        .route(
            "/resources/{kind}/{name}/unquarantine",
            post(resource_actions::unquarantine),
        )
        .route(
            "/resources/{kind}/{name}/ops",
            post(operations::create).get(operations::list),
        )
        .route("/resources/{kind}/{name}/ops/{uid}", get(operations::get))
        .route("/resources/{kind}/{name}/events", get(events::list))
        .route(
            "/resources/{kind}/{name}/spec-history",
            get(spec_history::history),
        )
        .route(
            "/resources/{kind}/{name}/rollback",
            post(spec_history::rollback),
        )
        .route(
            "/raw/resources/{kind}/{name}/spec/{generation}",
            get(spec_history::raw_spec),
        )
        // After routing (so it sees the named path parameters), before any handler.
        .route_layer(middleware::from_fn(input::refuse_nul_params));
    Router::new()
        .nest("/api/v1", api)
        .merge(health::probes())
        .fallback(ui::serve)
        // Outside the nest, so an unknown /api/v1 path answers 401 before 404.
        .layer(middleware::from_fn_with_state(state.clone(), auth::guard))
        .layer(middleware::from_fn(standard_headers))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
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
