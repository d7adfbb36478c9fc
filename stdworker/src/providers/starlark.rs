//! The starlark provider: a composite kind whose `compose` is a zip of `.star` files carried
//! as the kind's provider config **bundle** (`compose.star` at its root, see
//! `compose-dsl/README.md`).
//!
//! - The effective config **spec** (kind default deep-merged with the resource's override)
//!   may carry `"limits": {...}` (see [`LimitsConfig`], clamped to [`max_limits`]) and
//!   `"sample_spec": {...}` (the API's, see [`SAMPLE_SPEC_KEY`]); everything else in the
//!   spec is handed to `compose(spec, config)` as `config`.
//! - Bundles load and compose in a sandbox child process ([`crate::sandbox`]), never on
//!   the async runtime: a bundle that runs away fails its task terminally with its class
//!   (`cost`, `memory`, `deadline`) and nothing else on the worker notices.
//! - A bundle is loaded (parsed, evaluated, frozen) **once per content and child**: the
//!   cache key is a SHA-256 of the bytes and the limits, and a child is sent a bundle only
//!   when it has not loaded it. A config push warms one child with the new default.
//! - STAGE_COMPOSE runs the engine (a `compose(spec, config, root)` also gets the root's
//!   `name`, `kind`, `kind_version` and `labels`); STAGE_ROLLUP counts descendants into the status
//!   ([`rollup_status`]); WORK, DELETE and REACT are empty successes; OPERATE is terminal.
//! - Every engine error (bundle, syntax, runtime, limit, invalid output) is **terminal** and is
//!   never turned into an empty compose, so a broken bundle prunes nothing.
//! - Ready iff the kind's default config carries a bundle.

use std::sync::atomic::{AtomicBool, Ordering};

use base64::Engine;
use converge_sdk::{HandlerError, KindVersion, Outcome, Provider, ProviderConfig, ReactionRequest};
use converge_starlark::Limits;
pub use converge_starlark::config::{
    LIMITS_KEY, LimitsConfig, SAMPLE_SPEC_KEY, StarlarkConfig, max_limits,
};
use serde_json::Value;
use tracing::{info, warn};

use super::shared::{
    ContentHash, LastWarmed, StageAction, compose_output, content_hash, into_outcome,
    rollup_status_of, short_hex, spec_text, stage_action,
};
use crate::sandbox::{
    SandboxPool,
    wire::{Job, Program, StarlarkInput},
};

/// The cache key of a bundle loaded under `limits`.
pub fn bundle_key(bytes: &[u8], limits: &Limits) -> ContentHash {
    content_hash(&[bytes, format!("{limits:?}").as_bytes()])
}

/// Serves one (kind, version) with the Starlark bundle of its provider config.
#[derive(Debug)]
pub struct StarlarkProvider {
    kv: KindVersion,
    ready: AtomicBool,
    pool: SandboxPool,
    warmed: LastWarmed,
}

/// A bundle as a sandbox child receives it.
fn bundle_program(bytes: &[u8]) -> Program {
    Program::Starlark(base64::engine::general_purpose::STANDARD.encode(bytes))
}

impl StarlarkProvider {
    /// A provider for `kv` evaluating in `pool`; unready until a default config with a
    /// bundle arrives.
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

    /// Runs the engine for one COMPOSE task.
    pub async fn compose(&self, req: &ReactionRequest) -> Result<Outcome, HandlerError> {
        let cfg =
            StarlarkConfig::from_value(&req.effective_config()).map_err(HandlerError::terminal)?;
        let bytes = req.effective_bundle();
        if bytes.is_empty() {
            // A config problem, fixed by pushing a bundle: retry rather than stop.
            return Err(HandlerError::transient(format!(
                "no starlark bundle configured for {}@v{}: put a zip with compose.star in its providerconfig's data",
                req.kind, req.kind_version
            )));
        }
        let key = bundle_key(bytes, &cfg.limits);
        // Handed to a `compose(spec, config, root)` that asks for it (children named after
        // their root, for one).
        let root = serde_json::json!({
            "name": req.resource.name,
            "kind": req.resource.kind,
            "kind_version": req.resource.kind_version,
            "labels": req.resource.labels,
        });
        let job = Job::Starlark {
            limits: Box::new(LimitsConfig::from_limits(&cfg.limits)),
            compose: Some(StarlarkInput {
                root,
                spec: spec_text(&req.resource.spec)?,
                config: cfg.compose_config,
            }),
        };
        let eval = self
            .pool
            .evaluate(key, job, || bundle_program(bytes), req.deadline);
        // Dropping the evaluation kills its child at once instead of letting it run to
        // its own deadline.
        let out = tokio::select! {
            out = eval => out?,
            () = req.cancel.cancelled() => {
                return Err(HandlerError::transient("cancelled during the starlark evaluation"));
            }
        };
        Ok(into_outcome(compose_output("starlark", out)?))
    }
}

impl Provider for StarlarkProvider {
    fn kind(&self) -> KindVersion {
        self.kv.clone()
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        match stage_action(req.stage) {
            StageAction::Compose => self.compose(&req).await,
            StageAction::Rollup => Ok(Outcome::status(rollup_status_of(&req))),
            StageAction::Nothing => Ok(Outcome::default()),
            StageAction::Unsupported => Err(HandlerError::terminal(format!(
                "the starlark provider does not handle {:?} tasks",
                req.stage
            ))),
        }
    }

    fn on_config(&self, cfg: ProviderConfig) {
        let ready = !cfg.bundle.is_empty();
        if ready {
            let parsed = StarlarkConfig::from_value(cfg.spec.as_ref().unwrap_or(&Value::Null));
            match parsed {
                Ok(sc) => {
                    // Load it in a child now: the first task would otherwise pay for the
                    // load, and a bundle that does not load is logged at push time.
                    let key = bundle_key(&cfg.bundle, &sc.limits);
                    if self.warmed.is_new(key)
                        && let Ok(rt) = tokio::runtime::Handle::try_current()
                    {
                        let (pool, kind) = (self.pool.clone(), self.kv.clone());
                        let job = Job::Starlark {
                            limits: Box::new(LimitsConfig::from_limits(&sc.limits)),
                            compose: None,
                        };
                        rt.spawn(async move {
                            let program = || bundle_program(&cfg.bundle);
                            if let Err(e) = pool.evaluate(key, job, program, None).await {
                                warn!(%kind, bundle = short_hex(&key), error = %e, "the default starlark bundle does not load; its composes will fail");
                            }
                        });
                    }
                }
                Err(e) => {
                    warn!(kind = %self.kv, error = %e, "default starlark config is malformed; its composes will fail");
                }
            }
        }
        let was = self.ready.swap(ready, Ordering::Relaxed);
        if was != ready {
            info!(kind = %self.kv, ready, "starlark readiness changed by a config push");
        }
    }

    fn ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}
