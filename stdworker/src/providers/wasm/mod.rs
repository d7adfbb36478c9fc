//! The wasm provider: a kind served by a WASM component (the `converge:handler` world, see
//! `wasm-host/`) whose bytes arrive as the kind's provider config **bundle**.
//!
//! - Config spec: `{"settings": <any JSON>, "limits": {...}, "ready": bool}` ([`WasmConfig`]).
//!   `settings` is what the guest sees as its effective config; `limits` overrides the
//!   host's per-task sandbox limits (camelCase `LimitOverrides`, clamped to the operator
//!   maximum); `ready: false` parks the kind.
//! - A component is compiled **once per content** (the host also keeps a disk cache across
//!   restarts, `STDWORKER_WASM_CACHE_DIR`). A config push with new bytes is a **hot swap**:
//!   the new component is loaded off the runtime's threads and the next task runs it; tasks
//!   in flight keep the `Arc` of the old one and finish on it. No restart.
//! - Every task runs in a fresh instance under the sandbox limits; each failure keeps the
//!   host's class (`wasm OutOfFuel: ...`) and its terminal/transient choice.
//! - Ready iff the default config has a bundle that loads and does not say `ready: false`;
//!   the kind only becomes ready once the load finished, so the first task never waits on
//!   a compile.

pub mod convert;

use std::{
    sync::{Arc, Mutex},
    time::Instant,
};

use converge_sdk::{
    Bytes, HandlerError, KindVersion, Outcome, Provider, ProviderConfig, ReactionRequest, Stage,
};
use converge_wasm_host::{
    HandlerFailure, HostConfig, LimitOverrides, LoadedComponent, LogLevel, WasmHost,
};
use serde::Deserialize;
use serde_json::Value;
use tracing::{debug, error, info, warn};

use super::shared::{CompileCache, ContentHash, content_hash, short_hex};

/// The variable naming the directory of the compiled-component cache.
pub const CACHE_DIR_VAR: &str = "STDWORKER_WASM_CACHE_DIR";

/// A wasm kind's provider config spec.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WasmConfig {
    /// Handed to the guest as its effective config (`None` when absent).
    pub settings: Option<Value>,
    /// Per-kind overrides of the host's task limits.
    pub limits: LimitOverrides,
    /// `false` parks the kind (unready) whatever the bundle.
    pub ready: Option<bool>,
}

impl WasmConfig {
    /// Parses an effective config spec; `Null` is the empty config.
    pub fn from_value(v: &Value) -> Result<Self, String> {
        if v.is_null() {
            return Ok(Self::default());
        }
        Self::deserialize(v).map_err(|e| {
            format!("invalid wasm config: {e} (expected {{\"settings\", \"limits\", \"ready\"}})")
        })
    }
}

/// The host every wasm kind of this process shares (one engine, one epoch ticker, one
/// instance pool), configured from the environment: `STDWORKER_WASM_CACHE_DIR` (default
/// `$HOME/.cache/converge/wasm`; empty disables the disk cache).
pub fn host_from_env() -> anyhow::Result<WasmHost> {
    let cache_dir = match std::env::var_os(CACHE_DIR_VAR) {
        Some(v) if v.is_empty() => None,
        Some(v) => Some(v.into()),
        None => std::env::var_os("HOME")
            .map(|h| std::path::PathBuf::from(h).join(".cache/converge/wasm")),
    };
    WasmHost::new(HostConfig {
        cache_dir,
        ..HostConfig::default()
    })
}

/// What the kind's default config currently says; `generation` orders pushes so a slow
/// load finishing after a newer push cannot flip readiness back.
#[derive(Debug, Default)]
struct DefaultState {
    generation: u64,
    ready: bool,
    /// The default bundle and its content hash: a task on the default (most tasks) finds
    /// its key by identity instead of hashing the whole component again.
    bundle: Option<(Bytes, ContentHash)>,
}

/// Serves one (kind, version) with the component in its provider config's bundle.
pub struct WasmProvider {
    kv: KindVersion,
    host: WasmHost,
    state: Arc<Mutex<DefaultState>>,
    cache: Arc<CompileCache<Arc<LoadedComponent>, String>>,
}

impl std::fmt::Debug for WasmProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmProvider")
            .field("kind", &self.kv)
            .field("cache", &self.cache)
            .finish()
    }
}

/// Loads a component through the host, mapping the error to a message.
fn load(host: &WasmHost, kind: &KindVersion, bytes: &[u8]) -> Result<Arc<LoadedComponent>, String> {
    let started = Instant::now();
    let loaded = host
        .load(bytes)
        .map_err(|e| format!("wasm component does not load: {e}"))?;
    info!(%kind, sha256 = %loaded.sha256(), bytes = loaded.size(), took_ms = started.elapsed().as_millis() as u64, "wasm component loaded");
    Ok(loaded)
}

impl WasmProvider {
    /// A provider for `kv` on `host`; unready until a default config with a loadable
    /// bundle arrives.
    pub fn new(kv: KindVersion, host: WasmHost) -> Self {
        Self {
            kv,
            host,
            state: Arc::default(),
            cache: Arc::default(),
        }
    }

    /// Component loads so far through this provider (each distinct content once).
    pub fn loads(&self) -> u64 {
        self.cache.compiles()
    }

    /// The cache key of a task's component bytes.
    fn key_of(&self, bytes: &[u8]) -> ContentHash {
        // Compared outside the lock: other tasks need it too.
        let default = self.state.lock().expect("state lock").bundle.clone();
        match default {
            // Requests share the pushed default's allocation, so this is a pointer check;
            // the byte comparison is for a bundle that arrived some other way.
            Some((default, key))
                if std::ptr::eq(default.as_ptr(), bytes.as_ptr())
                    && default.len() == bytes.len()
                    || *default == *bytes =>
            {
                key
            }
            _ => content_hash(&[bytes]),
        }
    }

    /// Runs one task in a fresh instance of the effective component.
    async fn run(&self, req: &ReactionRequest) -> Result<Outcome, HandlerError> {
        let cfg =
            WasmConfig::from_value(&req.effective_config()).map_err(HandlerError::terminal)?;
        let bytes = req.effective_bundle();
        if bytes.is_empty() {
            // A config problem, fixed by pushing a component: retry rather than stop.
            return Err(HandlerError::transient(format!(
                "no wasm component configured for {}: put the component's bytes in its providerconfig's data",
                self.kv
            )));
        }
        let key = self.key_of(bytes);
        // A cache hit is a map lookup; a miss (a per-resource override, a load racing the
        // push) compiles on a blocking thread so the runtime keeps serving other tasks.
        let component = match self.cache.get(&key) {
            Some(hit) => hit.map(|c| Arc::clone(&c)),
            None => {
                let (cache, host, kv, bytes) = (
                    self.cache.clone(),
                    self.host.clone(),
                    self.kv.clone(),
                    bytes.to_vec(),
                );
                tokio::task::spawn_blocking(move || {
                    cache
                        .get_or_compile(key, || load(&host, &kv, &bytes))
                        .map(|c| Arc::clone(&c))
                })
                .await
                .map_err(|e| HandlerError::transient(format!("wasm load task failed: {e}")))?
            }
        }
        .map_err(HandlerError::terminal)?;

        let limits = self
            .host
            .config()
            .default_limits
            .with_overrides(&cfg.limits);
        // The guest gets the whole live subtree, as it always has: read here, page by page,
        // when the kind's rollup takes the summary form.
        let descendants = match req.stage {
            Stage::Rollup => req.read_descendants().await?,
            _ => Vec::new(),
        };
        let request = convert::request(req, cfg.settings.as_ref(), &descendants);
        let (result, report) = tokio::select! {
            r = component.reconcile_with_report(&request, &limits) => r,
            () = req.cancel.cancelled() => {
                return Err(HandlerError::transient("cancelled: the task's deadline passed or it was cancelled"));
            }
        };
        for entry in &report.logs {
            let msg = entry.message.as_str();
            match entry.level {
                LogLevel::Debug => debug!(kind = %self.kv, name = %req.resource.name, guest = msg),
                LogLevel::Info => info!(kind = %self.kv, name = %req.resource.name, guest = msg),
                LogLevel::Warn => warn!(kind = %self.kv, name = %req.resource.name, guest = msg),
                LogLevel::Error => error!(kind = %self.kv, name = %req.resource.name, guest = msg),
            }
        }
        debug!(kind = %self.kv, name = %req.resource.name, fuel = report.fuel_consumed, elapsed_us = report.elapsed.as_micros() as u64, "wasm task finished");
        match result {
            Ok(out) => convert::outcome(out)
                .map_err(|e| HandlerError::terminal(format!("wasm InvalidOutcome: {e}"))),
            Err(f) => Err(failure(&f)),
        }
    }

    /// Applies a default config: validates it, loads its component off the runtime's
    /// threads and flips readiness when (and only if) this is still the latest push.
    fn apply_default(&self, cfg: ProviderConfig) {
        let generation = {
            let mut st = self.state.lock().expect("state lock");
            st.generation += 1;
            st.ready = false;
            st.bundle = None;
            st.generation
        };
        let parsed = WasmConfig::from_value(cfg.spec.as_ref().unwrap_or(&Value::Null));
        let parsed = match parsed {
            Ok(p) => p,
            Err(e) => {
                self.cache.set_default(None);
                warn!(kind = %self.kv, error = %e, "default wasm config is malformed; the kind stays unready");
                return;
            }
        };
        let max = self.host.config().max_limits;
        let over = self
            .host
            .config()
            .default_limits
            .with_overrides(&parsed.limits)
            .exceeding(&max);
        if !over.is_empty() {
            warn!(kind = %self.kv, fields = ?over, "wasm limits above the operator maximum are clamped to it");
        }
        if cfg.bundle.is_empty() {
            self.cache.set_default(None);
            info!(kind = %self.kv, "no wasm component in the default config; the kind is unready");
            return;
        }
        let key = content_hash(&[&cfg.bundle]);
        self.cache.set_default(Some(key));
        {
            let mut st = self.state.lock().expect("state lock");
            if st.generation == generation {
                st.bundle = Some((cfg.bundle.clone(), key));
            }
        }
        let want_ready = parsed.ready != Some(false);
        let (state, kv) = (self.state.clone(), self.kv.clone());
        let settle = move |loaded: bool| {
            let mut st = state.lock().expect("state lock");
            if st.generation == generation {
                let ready = loaded && want_ready;
                if st.ready != ready {
                    info!(kind = %kv, ready, component = short_hex(&key), "wasm readiness changed by a config push");
                }
                st.ready = ready;
            }
        };
        let (cache, host, kind) = (self.cache.clone(), self.host.clone(), self.kv.clone());
        let work = move || {
            let r = cache.get_or_compile(key, || load(&host, &kind, &cfg.bundle));
            if let Err(e) = &r {
                warn!(%kind, error = %e, "the default wasm component does not load; the kind stays unready");
            }
            settle(r.is_ok());
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn_blocking(work);
            }
            Err(_) => work(),
        }
    }
}

/// A host failure as a handler error: the class stays in the message (`wasm OutOfFuel: ...`)
/// and decides terminal versus transient.
fn failure(f: &HandlerFailure) -> HandlerError {
    let message = match f {
        // The guest's own error: its message is the whole story.
        HandlerFailure::Handler { message, .. } => message.clone(),
        other => format!("wasm {}: {other}", other.reason()),
    };
    if f.is_terminal() {
        HandlerError::terminal(message)
    } else {
        HandlerError::transient(message)
    }
}

impl Provider for WasmProvider {
    fn kind(&self) -> KindVersion {
        self.kv.clone()
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        self.run(&req).await
    }

    fn on_config(&self, cfg: ProviderConfig) {
        self.apply_default(cfg);
    }

    fn ready(&self) -> bool {
        self.state.lock().expect("state lock").ready
    }
}
