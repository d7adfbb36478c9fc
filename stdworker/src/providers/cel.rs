//! The cel provider: a composite kind whose children come from a kro-style resource graph
//! held in the kind's effective provider config **spec** (`{"resources": [...]}`, shape in
//! `compose-dsl/README.md`).
//!
//! - The spec is the graph, nothing else (the engine rejects unknown top-level keys); the
//!   engine's default limits apply.
//! - Graphs compile and compose in a sandbox child process ([`crate::sandbox`]), never on
//!   the async runtime: CEL has no cost model, so a graph that runs away (nested
//!   comprehensions) is stopped by the sandbox's wall-clock and memory bounds and fails its
//!   task terminally with its class (`deadline`, `memory`, `cost`).
//! - A graph is compiled **once per content and child** (SHA-256 of its JSON); a child is
//!   sent a graph only when it has not compiled it.
//! - STAGE_COMPOSE renders the graph for the root (`root.name`, `spec`); STAGE_ROLLUP counts
//!   descendants into the status; WORK, DELETE and REACT are empty successes; OPERATE is
//!   terminal.
//! - Compile and compose errors are **terminal** and never an empty compose. The API also
//!   compiles a graph when its providerconfig is applied and answers 422, so a broken graph
//!   normally never reaches a worker.
//! - Ready iff the kind's default config spec has a `resources` array.

use std::sync::atomic::{AtomicBool, Ordering};

use converge_cel::CompileError;
use converge_sdk::{HandlerError, KindVersion, Outcome, Provider, ProviderConfig, ReactionRequest};
use serde_json::Value;
use tracing::{info, warn};

use super::shared::{
    ContentHash, LastWarmed, StageAction, compose_output, content_hash, into_outcome,
    rollup_status_of, spec_text, stage_action,
};
use crate::sandbox::{
    SandboxPool,
    wire::{CelInput, Job, Program},
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
    pool: SandboxPool,
    warmed: LastWarmed,
}

impl CelProvider {
    /// A provider for `kv` evaluating in `pool`; unready until a default config holding a
    /// graph arrives.
    pub fn new(kv: KindVersion, pool: SandboxPool) -> Self {
        Self {
            kv,
            ready: AtomicBool::new(false),
            pool,
            warmed: LastWarmed::default(),
        }
    }

    /// The sandbox pool this provider evaluates in.
    pub fn pool(&self) -> &SandboxPool {
        &self.pool
    }

    /// Renders the graph for one COMPOSE task.
    pub async fn compose(&self, req: &ReactionRequest) -> Result<Outcome, HandlerError> {
        let spec = req.effective_config();
        if spec.is_null() {
            // A config problem, fixed by pushing one: retry rather than stop.
            return Err(HandlerError::transient(format!(
                "no cel graph configured for {}@v{}: put {{\"resources\": [...]}} in its providerconfig's spec",
                req.kind, req.kind_version
            )));
        }
        let job = Job::Cel {
            compose: Some(CelInput {
                root_name: req.resource.name.clone(),
                spec: spec_text(&req.resource.spec)?,
            }),
        };
        let eval = self
            .pool
            .evaluate(graph_key(&spec), job, || Program::Cel(spec), req.deadline);
        // Dropping the evaluation kills its child at once instead of letting it run to
        // its deadline.
        let out = tokio::select! {
            out = eval => out?,
            () = req.cancel.cancelled() => {
                return Err(HandlerError::transient("cancelled during the cel evaluation"));
            }
        };
        Ok(into_outcome(compose_output("cel", out)?))
    }
}

impl Provider for CelProvider {
    fn kind(&self) -> KindVersion {
        self.kv.clone()
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        match stage_action(req.stage) {
            StageAction::Compose => self.compose(&req).await,
            StageAction::Rollup => Ok(Outcome::status(rollup_status_of(&req))),
            StageAction::Nothing => Ok(Outcome::default()),
            StageAction::Unsupported => Err(HandlerError::terminal(format!(
                "the cel provider does not handle {:?} tasks",
                req.stage
            ))),
        }
    }

    fn on_config(&self, cfg: ProviderConfig) {
        let ready = cfg.spec.as_ref().is_some_and(is_graph);
        // Compiling now (in a child, like every evaluation) logs a bad graph at push time
        // and warms one child.
        if let Some(spec) = cfg.spec.filter(is_graph)
            && self.warmed.is_new(graph_key(&spec))
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let (pool, kind) = (self.pool.clone(), self.kv.clone());
            rt.spawn(async move {
                let job = Job::Cel { compose: None };
                let key = graph_key(&spec);
                if let Err(e) = pool.evaluate(key, job, || Program::Cel(spec), None).await {
                    warn!(%kind, error = %e, "the default cel graph does not compile; its composes will fail");
                }
            });
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
