//! The cel provider: a composite kind whose children come from a kro-style resource graph
//! held in the kind's effective provider config **spec** (`{"resources": [...]}`, shape in
//! `compose-dsl/README.md`).
//!
//! - The spec is the graph, nothing else (the engine rejects unknown top-level keys); the
//!   engine's default limits apply.
//! - A graph is compiled **once per content** (SHA-256 of its JSON); a config push replaces
//!   the cached default, tasks in flight keep the old `Arc`.
//! - STAGE_COMPOSE renders the graph for the root (`root.name`, `spec`); STAGE_ROLLUP counts
//!   descendants into the status; WORK, DELETE and REACT are empty successes; OPERATE is
//!   terminal.
//! - Compile and compose errors are **terminal** and never an empty compose. The API also
//!   compiles a graph when its providerconfig is applied and answers 422, so a broken graph
//!   normally never reaches a worker.
//! - Ready iff the kind's default config spec has a `resources` array.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use converge_cel::{CompileError, Graph, Limits};
use converge_sdk::{HandlerError, KindVersion, Outcome, Provider, ProviderConfig, ReactionRequest};
use serde_json::Value;
use tracing::{info, warn};

use super::shared::{
    CompileCache, ContentHash, StageAction, content_hash, rollup_status, stage_action,
};

/// The cache key of a graph config.
pub fn graph_key(spec: &Value) -> ContentHash {
    content_hash(&[&serde_json::to_vec(spec).unwrap_or_default()])
}

/// Whether a config spec looks like a CEL graph (a top-level `resources` array).
pub fn is_graph(spec: &Value) -> bool {
    spec.get("resources").is_some_and(Value::is_array)
}

/// Every compile error in one message, each with its JSON pointer.
pub fn describe_compile_errors(errors: &[CompileError]) -> String {
    let list = errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    format!("invalid cel graph ({} errors): {list}", errors.len())
}

/// Serves one (kind, version) with the CEL graph of its provider config.
#[derive(Debug)]
pub struct CelProvider {
    kv: KindVersion,
    ready: AtomicBool,
    cache: Arc<CompileCache<Graph, Vec<CompileError>>>,
}

impl CelProvider {
    /// A provider for `kv`; unready until a default config holding a graph arrives.
    pub fn new(kv: KindVersion) -> Self {
        Self {
            kv,
            ready: AtomicBool::new(false),
            cache: Arc::default(),
        }
    }

    /// Graph compiles so far (each distinct config is compiled once).
    pub fn compiles(&self) -> u64 {
        self.cache.compiles()
    }

    fn graph(&self, spec: &Value) -> Result<Arc<Graph>, Vec<CompileError>> {
        self.cache
            .get_or_compile(graph_key(spec), || Graph::compile(spec, Limits::default()))
    }

    /// Renders the graph for one COMPOSE task.
    pub fn compose(&self, req: &ReactionRequest) -> Result<Outcome, HandlerError> {
        let spec = req.effective_config();
        if spec.is_null() {
            // A config problem, fixed by pushing one: retry rather than stop.
            return Err(HandlerError::transient(format!(
                "no cel graph configured for {}@v{}: put {{\"resources\": [...]}} in its providerconfig's spec",
                req.kind, req.kind_version
            )));
        }
        let graph = self
            .graph(&spec)
            .map_err(|e| HandlerError::terminal(describe_compile_errors(&e)))?;
        let out = graph
            .compose(&req.resource.name, &req.resource.spec)
            .map_err(|e| HandlerError::terminal(format!("cel compose failed: {e}")))?;
        Ok(crate::into_outcome!(out))
    }
}

impl Provider for CelProvider {
    fn kind(&self) -> KindVersion {
        self.kv.clone()
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        match stage_action(req.stage) {
            StageAction::Compose => self.compose(&req),
            StageAction::Rollup => Ok(Outcome::status(rollup_status(
                req.status.as_ref(),
                &req.descendants,
            ))),
            StageAction::Nothing => Ok(Outcome::default()),
            StageAction::Unsupported => Err(HandlerError::terminal(format!(
                "the cel provider does not handle {:?} tasks",
                req.stage
            ))),
        }
    }

    fn on_config(&self, cfg: ProviderConfig) {
        let ready = cfg.spec.as_ref().is_some_and(is_graph);
        match cfg.spec.as_ref().filter(|s| is_graph(s)) {
            Some(spec) => {
                self.cache.set_default(Some(graph_key(spec)));
                // Compiling is cheap; doing it now logs a bad graph at push time.
                if let Err(e) = self.graph(spec) {
                    warn!(kind = %self.kv, error = %describe_compile_errors(&e), "the default cel graph does not compile; its composes will fail");
                }
            }
            None => self.cache.set_default(None),
        }
        let was = self.ready.swap(ready, Ordering::Relaxed);
        if was != ready {
            info!(kind = %self.kv, ready, "cel readiness changed by a config push");
        }
    }

    fn ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}
