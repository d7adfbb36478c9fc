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

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use base64::Engine;
use converge_sdk::{HandlerError, KindVersion, Outcome, Provider, ProviderConfig, ReactionRequest};
use converge_starlark::Limits;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tracing::{info, warn};

use super::shared::{
    ContentHash, LastWarmed, StageAction, compose_output, content_hash, into_outcome,
    rollup_status_of, short_hex, spec_text, stage_action,
};
use crate::sandbox::{
    SandboxPool,
    wire::{Job, Program, StarlarkInput},
};

/// The config spec key holding limit overrides.
pub const LIMITS_KEY: &str = "limits";

/// The config spec key holding the sample spec the API composes the bundle with at apply
/// (to type-check its value flows); never handed to `compose`.
pub const SAMPLE_SPEC_KEY: &str = "sample_spec";

/// Per-kind limit overrides, from the effective config spec's `limits`. Absent fields keep
/// the engine's defaults; values above [`max_limits`] are clamped to it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Tick budget per evaluation (calls plus loop back-edges).
    pub max_ticks: Option<u64>,
    /// Starlark heap cap in bytes.
    pub max_heap_bytes: Option<usize>,
    /// Call-stack depth.
    pub max_call_stack: Option<usize>,
    /// Wall-clock budget per evaluation, in milliseconds.
    pub deadline_ms: Option<u64>,
    /// Cap on the JSON size of spec plus config.
    pub max_input_bytes: Option<usize>,
    /// Cap on the JSON size of the compose result.
    pub max_output_bytes: Option<usize>,
    /// Children per compose.
    pub max_children: Option<usize>,
    /// Edges per compose.
    pub max_edges: Option<usize>,
    /// Provider configs per compose.
    pub max_configs: Option<usize>,
    /// Decompressed bundle size.
    pub max_bundle_bytes: Option<u64>,
    /// Decompressed size of one bundle file.
    pub max_file_bytes: Option<u64>,
    /// Zip entries.
    pub max_bundle_entries: Option<usize>,
}

/// The largest limits a config may ask for.
pub fn max_limits() -> Limits {
    Limits {
        max_ticks: 100_000_000,
        max_heap_bytes: 512 << 20,
        max_call_stack: converge_starlark::MAX_CALL_STACK,
        deadline: Duration::from_secs(30),
        max_input_bytes: 16 << 20,
        max_output_bytes: 16 << 20,
        max_children: 10_000,
        max_edges: 100_000,
        max_configs: 1_000,
        max_bundle_bytes: 10 << 20,
        max_file_bytes: 4 << 20,
        max_bundle_entries: 4_096,
    }
}

impl LimitsConfig {
    /// Every field set to `limits` (how resolved limits travel to a sandbox child, where
    /// [`resolve`](Self::resolve) gives them back unchanged).
    pub fn from_limits(limits: &Limits) -> Self {
        Self {
            max_ticks: Some(limits.max_ticks),
            max_heap_bytes: Some(limits.max_heap_bytes),
            max_call_stack: Some(limits.max_call_stack),
            deadline_ms: Some(u64::try_from(limits.deadline.as_millis()).unwrap_or(u64::MAX)),
            max_input_bytes: Some(limits.max_input_bytes),
            max_output_bytes: Some(limits.max_output_bytes),
            max_children: Some(limits.max_children),
            max_edges: Some(limits.max_edges),
            max_configs: Some(limits.max_configs),
            max_bundle_bytes: Some(limits.max_bundle_bytes),
            max_file_bytes: Some(limits.max_file_bytes),
            max_bundle_entries: Some(limits.max_bundle_entries),
        }
    }

    /// The engine limits: defaults, overridden by the set fields, clamped to [`max_limits`].
    pub fn resolve(&self) -> Limits {
        let d = Limits::default();
        let m = max_limits();
        Limits {
            max_ticks: self.max_ticks.unwrap_or(d.max_ticks).min(m.max_ticks),
            max_heap_bytes: self
                .max_heap_bytes
                .unwrap_or(d.max_heap_bytes)
                .min(m.max_heap_bytes),
            max_call_stack: self
                .max_call_stack
                .unwrap_or(d.max_call_stack)
                .min(m.max_call_stack),
            deadline: self
                .deadline_ms
                .map_or(d.deadline, Duration::from_millis)
                .min(m.deadline),
            max_input_bytes: self
                .max_input_bytes
                .unwrap_or(d.max_input_bytes)
                .min(m.max_input_bytes),
            max_output_bytes: self
                .max_output_bytes
                .unwrap_or(d.max_output_bytes)
                .min(m.max_output_bytes),
            max_children: self
                .max_children
                .unwrap_or(d.max_children)
                .min(m.max_children),
            max_edges: self.max_edges.unwrap_or(d.max_edges).min(m.max_edges),
            max_configs: self.max_configs.unwrap_or(d.max_configs).min(m.max_configs),
            max_bundle_bytes: self
                .max_bundle_bytes
                .unwrap_or(d.max_bundle_bytes)
                .min(m.max_bundle_bytes),
            max_file_bytes: self
                .max_file_bytes
                .unwrap_or(d.max_file_bytes)
                .min(m.max_file_bytes),
            max_bundle_entries: self
                .max_bundle_entries
                .unwrap_or(d.max_bundle_entries)
                .min(m.max_bundle_entries),
        }
    }
}

/// An effective config spec split into the engine limits and the `config` handed to
/// `compose`.
#[derive(Debug, Clone, PartialEq)]
pub struct StarlarkConfig {
    /// Resolved limits.
    pub limits: Limits,
    /// The spec without its `limits` and `sample_spec` keys (`{}` when there is no spec).
    pub compose_config: Value,
}

impl StarlarkConfig {
    /// Splits an effective config spec; `Null` is the empty config. A spec that is not an
    /// object, or malformed `limits`, is an error naming it.
    pub fn from_value(v: &Value) -> Result<Self, String> {
        let mut map = match v {
            Value::Null => Map::new(),
            Value::Object(m) => m.clone(),
            other => {
                return Err(format!(
                    "the starlark config spec must be an object, got {other}"
                ));
            }
        };
        map.remove(SAMPLE_SPEC_KEY);
        let limits = match map.remove(LIMITS_KEY) {
            None | Some(Value::Null) => LimitsConfig::default(),
            Some(l) => LimitsConfig::deserialize(&l)
                .map_err(|e| format!("invalid starlark config: limits: {e}"))?,
        };
        Ok(Self {
            limits: limits.resolve(),
            compose_config: Value::Object(map),
        })
    }
}

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
