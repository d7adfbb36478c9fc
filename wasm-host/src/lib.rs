//! converge-wasm-host: runs converge handlers compiled as WASM components (the
//! `converge:handler@0.1.0` world in `wit/world.wit`) under wasmtime with hard limits.
//!
//! Shape:
//! - one [`WasmHost`] per worker process: one `Engine` (fuel, epoch interruption, a bounded
//!   wasm stack, the pooling allocator with an on-demand fallback), a `Linker` with the
//!   bounded `log` import and a deny-all WASI p2, and an epoch ticker thread;
//! - [`WasmHost::load`] compiles a component once per content hash (memory and disk cache)
//!   and type-checks it against the world once (`Linker::instantiate_pre`);
//! - [`LoadedComponent::reconcile`] runs one task in a **fresh store** with its own memory
//!   cap, fuel budget and wall-clock deadline, then validates the outcome.
//!
//! The calls are `async` because WASI p2 is linked through its async API (its sync API
//! blocks on the ambient tokio runtime and panics inside one). A guest that computes for a
//! long time yields to the executor at every epoch tick, so it does not pin a runtime
//! thread past a tick; compiling (`load`) is CPU-bound and synchronous, so callers inside
//! tokio should run it on `spawn_blocking`.

mod cache;
mod failure;
mod limits;
mod task;
mod validate;

use std::collections::HashMap;
use std::hash::Hash;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Precompiled};

pub use failure::{HandlerFailure, LoadError};
pub use limits::{LimitOverrides, Limits};
pub use task::{LogEntry, LogLevel, TaskReport};
pub use validate::{outcome_bytes, request_bytes, validate_outcome};

use cache::{Digest32, DiskCache, Lookup};
use task::TaskState;

/// The bindings `wasmtime::component::bindgen!` generates for the world.
#[allow(missing_docs)]
mod bindings {
    wasmtime::component::bindgen!({
        world: "handler",
        path: "wit",
        exports: { default: async },
    });
}

/// The world's records (`Request`, `Outcome`, `Info`, ...), as Rust types.
pub mod wit {
    pub use crate::bindings::converge::handler::log::Level;
    pub use crate::bindings::converge::handler::types::*;
}

/// Limits on what a guest may send through the `log` import, per task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimits {
    /// Longer messages are truncated (at a character boundary) and marked truncated.
    pub max_message_bytes: usize,
    /// Messages past this count are dropped and counted in [`TaskReport::logs_dropped`].
    pub max_messages: usize,
}

impl Default for LogLimits {
    fn default() -> Self {
        Self {
            max_message_bytes: 4096,
            max_messages: 100,
        }
    }
}

/// Configuration of one [`WasmHost`] (operator settings, not per kind).
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Limits a task gets when the caller passes none ([`LoadedComponent::reconcile_default`]).
    pub default_limits: Limits,
    /// The operator maximum: per-call limits above it are clamped to it (see
    /// [`Limits::clamp_to`]); the pool's per-memory size is set to its `memory_bytes`.
    pub max_limits: Limits,
    /// The wasm stack, engine-wide (wasmtime cannot vary it per store): 512 KiB by default.
    pub max_wasm_stack: usize,
    /// How often the epoch ticker runs; deadlines are enforced to within about one tick.
    pub epoch_tick: Duration,
    /// Where compiled components are cached across restarts; `None` = memory only.
    pub cache_dir: Option<PathBuf>,
    /// Use the pooling allocator (falls back to on-demand if the pool cannot be reserved).
    pub pooling: bool,
    /// Pool slots: how many instances can exist at once; a task beyond it fails `Unavailable`.
    pub max_concurrent_instances: u32,
    /// Core instances one component may create (componentize-py guests need 9 or more).
    pub max_core_instances_per_component: u32,
    /// Components larger than this are refused at load.
    pub max_component_bytes: usize,
    /// Bounds on the `log` import.
    pub log: LogLimits,
    /// What the guest's wall clock always reads (time since the Unix epoch); its monotonic
    /// clock always reads 0. Handlers must be deterministic.
    pub fixed_wall_clock: Duration,
    /// Seed of the guest's (deterministic) random sources.
    pub random_seed: u64,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            default_limits: Limits::default(),
            max_limits: Limits::default_max(),
            max_wasm_stack: 512 * 1024,
            epoch_tick: Duration::from_millis(10),
            cache_dir: None,
            pooling: true,
            max_concurrent_instances: 128,
            max_core_instances_per_component: 64,
            max_component_bytes: 64 * 1024 * 1024,
            log: LogLimits::default(),
            // 2025-01-01T00:00:00Z.
            fixed_wall_clock: Duration::from_secs(1_735_689_600),
            random_seed: 0x00c0_ffee,
        }
    }
}

/// Counters of the compile cache, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Components compiled by cranelift.
    pub compiles: u64,
    /// Components loaded from the disk cache.
    pub disk_hits: u64,
    /// `load` calls answered by a component already in memory.
    pub memory_hits: u64,
    /// Disk entries that failed verification (or deserialization) and were recompiled.
    pub corrupt_entries: u64,
}

#[derive(Default)]
struct Counters {
    compiles: AtomicU64,
    disk_hits: AtomicU64,
    memory_hits: AtomicU64,
    corrupt_entries: AtomicU64,
}

struct HostInner {
    engine: Engine,
    linker: Linker<TaskState>,
    config: HostConfig,
    pooling: bool,
    engine_digest: Digest32,
    disk: Option<DiskCache>,
    loaded: Mutex<HashMap<Digest32, Weak<LoadedComponent>>>,
    /// One lock per content being compiled: loads of the same bytes wait for the first
    /// instead of compiling it again beside it (seven kinds sharing one 12 MB JavaScript
    /// component compiled it seven times at once, minutes of both cores).
    compiling: Mutex<HashMap<Digest32, Arc<Mutex<()>>>>,
    counters: Counters,
    random_bytes: Vec<u8>,
}

/// Hosts handler components: one per worker process.
#[derive(Clone)]
pub struct WasmHost {
    inner: Arc<HostInner>,
}

fn engine_config(cfg: &HostConfig, pooling: bool) -> Config {
    let mut c = Config::new();
    c.consume_fuel(true);
    c.epoch_interruption(true);
    c.max_wasm_stack(cfg.max_wasm_stack);
    // Async calls run on a fiber whose stack must hold the wasm stack plus host frames.
    c.async_stack_size(cfg.max_wasm_stack + 1024 * 1024);
    c.parallel_compilation(true);
    if pooling {
        let slots = cfg.max_concurrent_instances.max(1);
        let mut p = PoolingAllocationConfig::default();
        p.total_component_instances(slots);
        p.total_core_instances(slots.saturating_mul(16));
        p.total_memories(slots.saturating_mul(4));
        p.total_tables(slots.saturating_mul(8));
        p.total_stacks(slots);
        p.max_core_instances_per_component(cfg.max_core_instances_per_component);
        p.max_memories_per_component(16);
        p.max_tables_per_component(cfg.max_core_instances_per_component);
        p.max_memory_size(cfg.max_limits.memory_bytes as usize);
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(p));
    }
    c
}

impl WasmHost {
    /// Builds the engine, the linker and the epoch ticker. Falls back to the on-demand
    /// allocator when the pool's address space cannot be reserved (seen on some ARM boards
    /// and containers).
    pub fn new(config: HostConfig) -> anyhow::Result<Self> {
        let (engine, pooling) = match Engine::new(&engine_config(&config, config.pooling)) {
            Ok(e) => (e, config.pooling),
            Err(e) if config.pooling => {
                eprintln!(
                    "converge-wasm-host: pooling allocator unavailable ({e}); using on-demand allocation"
                );
                (Engine::new(&engine_config(&config, false))?, false)
            }
            Err(e) => return Err(e.into()),
        };

        let mut linker = Linker::<TaskState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        bindings::Handler::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut linker, |s| s)?;

        let mut hasher = cache::ShaHasher::default();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_digest = hasher.digest();

        let disk = match &config.cache_dir {
            Some(dir) => Some(DiskCache::open(dir)?),
            None => None,
        };

        // 4 KiB of seeded bytes the guest's random sources cycle through.
        let mut random_bytes = Vec::with_capacity(4096);
        let mut i = 0u64;
        while random_bytes.len() < 4096 {
            let mut block = config.random_seed.to_le_bytes().to_vec();
            block.extend_from_slice(&i.to_le_bytes());
            random_bytes.extend_from_slice(&cache::sha256(&block));
            i += 1;
        }

        spawn_ticker(&engine, config.epoch_tick);
        Ok(Self {
            inner: Arc::new(HostInner {
                engine,
                linker,
                config,
                pooling,
                engine_digest,
                disk,
                loaded: Mutex::new(HashMap::new()),
                compiling: Mutex::new(HashMap::new()),
                counters: Counters::default(),
                random_bytes,
            }),
        })
    }

    /// Whether the pooling allocator is in use (false after a fallback).
    pub fn is_pooling(&self) -> bool {
        self.inner.pooling
    }

    /// The host's configuration.
    pub fn config(&self) -> &HostConfig {
        &self.inner.config
    }

    /// The compile cache's counters.
    pub fn cache_stats(&self) -> CacheStats {
        let c = &self.inner.counters;
        CacheStats {
            compiles: c.compiles.load(Ordering::Relaxed),
            disk_hits: c.disk_hits.load(Ordering::Relaxed),
            memory_hits: c.memory_hits.load(Ordering::Relaxed),
            corrupt_entries: c.corrupt_entries.load(Ordering::Relaxed),
        }
    }

    /// The disk cache file for a component's bytes (whether or not it exists yet); `None`
    /// without a cache dir. For tests and operators.
    pub fn cache_path(&self, component: &[u8]) -> Option<PathBuf> {
        let disk = self.inner.disk.as_ref()?;
        Some(disk.path(&cache::sha256(component), &self.inner.engine_digest))
    }

    /// Loads a component: compiles it once per content hash (or takes it from the memory or
    /// disk cache) and checks it against the `handler` world. CPU-bound, synchronous: run
    /// it on a blocking thread inside tokio. Loading a component that is already loaded and
    /// still referenced returns the same `Arc`.
    pub fn load(&self, bytes: &[u8]) -> Result<Arc<LoadedComponent>, LoadError> {
        let inner = &self.inner;
        if bytes.len() > inner.config.max_component_bytes {
            return Err(LoadError::TooLarge {
                size: bytes.len(),
                max: inner.config.max_component_bytes,
            });
        }
        let digest = cache::sha256(bytes);
        if let Some(hit) = self.loaded(&digest) {
            return Ok(hit);
        }
        // Single flight per content: the first load compiles, the others wait on its lock
        // and then find it loaded (or, if it failed, try in turn and fail the same way).
        let flight = Arc::clone(
            inner
                .compiling
                .lock()
                .expect("compiling lock")
                .entry(digest)
                .or_default(),
        );
        let _flight = flight.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(hit) = self.loaded(&digest) {
            return Ok(hit);
        }
        let loaded = self.compile_and_link(&digest, bytes);
        inner
            .compiling
            .lock()
            .expect("compiling lock")
            .remove(&digest);
        loaded
    }

    /// The component of `digest` if it is loaded and still referenced (a memory-cache hit).
    fn loaded(&self, digest: &Digest32) -> Option<Arc<LoadedComponent>> {
        let hit = self
            .inner
            .loaded
            .lock()
            .expect("cache lock")
            .get(digest)
            .and_then(Weak::upgrade)?;
        self.inner
            .counters
            .memory_hits
            .fetch_add(1, Ordering::Relaxed);
        Some(hit)
    }

    /// Compiles (or takes from the disk cache) and links a component not loaded yet.
    fn compile_and_link(
        &self,
        digest: &Digest32,
        bytes: &[u8],
    ) -> Result<Arc<LoadedComponent>, LoadError> {
        let inner = &self.inner;
        let digest = *digest;
        let component = self.compile(&digest, bytes)?;
        let pre = inner
            .linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::World(format!("{e:#}")))?;
        let pre = bindings::HandlerPre::new(pre).map_err(|e| LoadError::World(format!("{e:#}")))?;
        let loaded = Arc::new(LoadedComponent {
            host: self.clone(),
            pre,
            digest,
            size: bytes.len(),
        });
        let mut map = inner.loaded.lock().expect("cache lock");
        map.retain(|_, w| w.strong_count() > 0);
        map.insert(digest, Arc::downgrade(&loaded));
        Ok(loaded)
    }

    fn compile(&self, digest: &Digest32, bytes: &[u8]) -> Result<Component, LoadError> {
        let inner = &self.inner;
        if let Some(disk) = &inner.disk {
            match disk.get(digest, &inner.engine_digest) {
                Lookup::Hit(payload) => {
                    if Engine::detect_precompiled(&payload) == Some(Precompiled::Component) {
                        // SAFETY: the payload comes from this host's private cache directory,
                        // was written by `DiskCache::put` from `Component::serialize` on an
                        // engine with the same compatibility hash (part of the file name),
                        // and its checksum header verified intact.
                        #[allow(unsafe_code)]
                        let c = unsafe { Component::deserialize(&inner.engine, &payload) };
                        if let Ok(c) = c {
                            inner.counters.disk_hits.fetch_add(1, Ordering::Relaxed);
                            return Ok(c);
                        }
                    }
                    inner
                        .counters
                        .corrupt_entries
                        .fetch_add(1, Ordering::Relaxed);
                }
                Lookup::Corrupt(why) => {
                    eprintln!("converge-wasm-host: corrupt cache entry ({why}); recompiling");
                    inner
                        .counters
                        .corrupt_entries
                        .fetch_add(1, Ordering::Relaxed);
                }
                Lookup::Miss => {}
            }
        }
        inner.counters.compiles.fetch_add(1, Ordering::Relaxed);
        let component = Component::new(&inner.engine, bytes)
            .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        if let Some(disk) = &inner.disk
            && let Ok(serialized) = component.serialize()
            && let Err(e) = disk.put(digest, &inner.engine_digest, &serialized)
        {
            eprintln!("converge-wasm-host: cannot write the compile cache: {e}");
        }
        Ok(component)
    }
}

fn spawn_ticker(engine: &Engine, tick: Duration) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(tick);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => return,
                }
            }
        })
        .expect("spawn the epoch ticker");
}

/// A compiled component, type-checked against the world, ready to instantiate per task.
///
/// Shared as an `Arc`: on a hot swap the stdworker loads the new bytes and replaces its
/// `Arc`; tasks already running keep the old one alive until they finish.
pub struct LoadedComponent {
    host: WasmHost,
    pre: bindings::HandlerPre<TaskState>,
    digest: Digest32,
    size: usize,
}

impl std::fmt::Debug for LoadedComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedComponent")
            .field("sha256", &self.sha256())
            .field("size", &self.size)
            .finish()
    }
}

impl LoadedComponent {
    /// The component's sha256, hex.
    pub fn sha256(&self) -> String {
        cache::hex(&self.digest)
    }

    /// The component's size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Calls `describe` in a fresh instance under the host's default limits.
    pub async fn describe(&self) -> Result<wit::Info, HandlerFailure> {
        let limits = self.host.inner.config.default_limits;
        let mut store = task::new_store(&self.host.inner, &limits);
        let result = async {
            let handler = self.pre.instantiate_async(&mut store).await?;
            handler.call_describe(&mut store).await
        }
        .await;
        result.map_err(|e| task::classify(&store, e, &limits))
    }

    /// Runs one task under the host's default limits.
    pub async fn reconcile_default(
        &self,
        req: &wit::Request,
    ) -> Result<wit::Outcome, HandlerFailure> {
        let limits = self.host.inner.config.default_limits;
        self.reconcile(req, &limits).await
    }

    /// Runs one task under `limits` (clamped to the operator maximum) in a fresh store and
    /// validates the outcome.
    pub async fn reconcile(
        &self,
        req: &wit::Request,
        limits: &Limits,
    ) -> Result<wit::Outcome, HandlerFailure> {
        self.reconcile_with_report(req, limits).await.0
    }

    /// Like [`reconcile`](Self::reconcile), also returning what the task consumed and logged.
    pub async fn reconcile_with_report(
        &self,
        req: &wit::Request,
        limits: &Limits,
    ) -> (Result<wit::Outcome, HandlerFailure>, TaskReport) {
        let inner = &self.host.inner;
        let limits = limits.clamp_to(&inner.config.max_limits);
        let started = Instant::now();
        let size = request_bytes(req);
        if size > limits.input_bytes {
            let failure = HandlerFailure::InvalidRequest(format!(
                "request is {size} bytes, over the cap of {} bytes",
                limits.input_bytes
            ));
            return (Err(failure), TaskReport::empty(limits));
        }

        let mut store = task::new_store(inner, &limits);
        // Epoch interruption only stops wasm that is executing; a guest blocked in a host
        // wait (a WASI sleep or poll) is stopped by this timer instead, two ticks after the
        // epoch check would have fired. Dropping the call future cancels it (wasmtime
        // unwinds the fiber); the store is discarded with it.
        let hard_deadline = limits.timeout + 2 * inner.config.epoch_tick;
        let call = async {
            let handler = self.pre.instantiate_async(&mut store).await?;
            handler.call_reconcile(&mut store, req).await
        };
        let result = match tokio::time::timeout(hard_deadline, call).await {
            Ok(Ok(Ok(outcome))) => match validate_outcome(&outcome, &limits) {
                Ok(()) => Ok(outcome),
                Err(why) => Err(HandlerFailure::InvalidOutcome(why)),
            },
            Ok(Ok(Err(err))) => Err(task::handler_error(err)),
            Ok(Err(e)) => Err(task::classify(&store, e, &limits)),
            Err(_elapsed) => Err(HandlerFailure::Deadline {
                timeout_ms: limits.timeout.as_millis() as u64,
            }),
        };
        let report = task::report(&mut store, limits, started.elapsed());
        (result, report)
    }
}
