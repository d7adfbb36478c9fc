//! One task's sandbox: the store data (deny-all WASI, the memory limiter, the bounded log),
//! how a store is set up (fuel, epoch deadline, limiter) and how a failed call is classified.

use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store, StoreLimits, StoreLimitsBuilder, Trap, UpdateDeadline};
use wasmtime_wasi::{
    Deterministic, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView,
    WasiView,
};

use crate::bindings::converge::handler::{log, types};
use crate::{HandlerFailure, HostInner, Limits, LogLimits};

/// Longest failure message kept from a guest or a trap.
const MAX_FAILURE_MESSAGE: usize = 4096;

/// Severity of a guest log message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Debug.
    Debug,
    /// Info.
    Info,
    /// Warn.
    Warn,
    /// Error.
    Error,
}

/// One message a guest logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// Its level.
    pub level: LogLevel,
    /// The message, possibly truncated.
    pub message: String,
    /// Whether the message was cut at `LogLimits::max_message_bytes`.
    pub truncated: bool,
}

/// What one task consumed and logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskReport {
    /// The limits the task ran under (after clamping to the operator maximum).
    pub limits: Limits,
    /// Fuel consumed (budget minus what was left).
    pub fuel_consumed: u64,
    /// Wall time, instantiation and call included.
    pub elapsed: Duration,
    /// The messages the guest logged, up to `LogLimits::max_messages`.
    pub logs: Vec<LogEntry>,
    /// Messages dropped past the cap.
    pub logs_dropped: u64,
}

impl TaskReport {
    pub(crate) fn empty(limits: Limits) -> Self {
        Self {
            limits,
            fuel_consumed: 0,
            elapsed: Duration::ZERO,
            logs: Vec::new(),
            logs_dropped: 0,
        }
    }
}

/// Wraps `StoreLimits` to remember whether a growth was refused for exceeding the cap, so a
/// guest that traps after a failed `memory.grow` (e.g. a Rust allocator abort) is still
/// classified as out of memory.
pub(crate) struct TaskLimiter {
    inner: StoreLimits,
    memory_cap: usize,
    hit: bool,
}

impl ResourceLimiter for TaskLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_cap {
            self.hit = true;
        }
        self.inner.memory_growing(current, desired, maximum)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.inner.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.inner.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}

/// The store data of one task.
pub(crate) struct TaskState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: TaskLimiter,
    log_limits: LogLimits,
    logs: Vec<LogEntry>,
    logs_dropped: u64,
}

impl WasiView for TaskState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for TaskState {}

impl log::Host for TaskState {
    fn log(&mut self, level: log::Level, message: String) {
        if self.logs.len() >= self.log_limits.max_messages {
            self.logs_dropped += 1;
            return;
        }
        let (message, truncated) = truncate(message, self.log_limits.max_message_bytes);
        let level = match level {
            log::Level::Debug => LogLevel::Debug,
            log::Level::Info => LogLevel::Info,
            log::Level::Warn => LogLevel::Warn,
            log::Level::Error => LogLevel::Error,
        };
        self.logs.push(LogEntry {
            level,
            message,
            truncated,
        });
    }
}

/// Cuts `s` to at most `max` bytes at a character boundary.
fn truncate(mut s: String, max: usize) -> (String, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    (s, true)
}

/// The guest's wall clock: always the configured instant.
struct FixedWallClock(Duration);

impl HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        self.0
    }
}

/// The guest's monotonic clock: always 0.
struct FrozenMonotonicClock;

impl HostMonotonicClock for FrozenMonotonicClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// A fresh store for one task: deny-all WASI (no preopens, env, args or network; stdin
/// closed, stdout and stderr discarded — guests log through `log`), a fixed clock and seeded
/// random, the memory/instance limiter, the fuel budget and the epoch deadline.
pub(crate) fn new_store(host: &HostInner, limits: &Limits) -> Store<TaskState> {
    let cfg = &host.config;
    let wasi = WasiCtxBuilder::new()
        .wall_clock(FixedWallClock(cfg.fixed_wall_clock))
        .monotonic_clock(FrozenMonotonicClock)
        .secure_random(Deterministic::new(host.random_bytes.clone()))
        .insecure_random(Deterministic::new(host.random_bytes.clone()))
        .insecure_random_seed(u128::from(cfg.random_seed))
        .allow_blocking_current_thread(false)
        .build();
    let memory_cap = usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX);
    let limiter = TaskLimiter {
        inner: StoreLimitsBuilder::new()
            .memory_size(memory_cap)
            .instances(cfg.max_core_instances_per_component as usize)
            .tables(cfg.max_core_instances_per_component as usize)
            .memories(16)
            .trap_on_grow_failure(true)
            .build(),
        memory_cap,
        hit: false,
    };
    let state = TaskState {
        wasi,
        table: ResourceTable::new(),
        limiter,
        log_limits: cfg.log,
        logs: Vec::new(),
        logs_dropped: 0,
    };
    let mut store = Store::new(&host.engine, state);
    store.limiter(|s| &mut s.limiter);
    store
        .set_fuel(limits.fuel)
        .expect("fuel is enabled on the engine");
    // Check the deadline at every epoch tick; between checks, yield to the executor so a
    // spinning guest does not hold a runtime thread.
    let deadline = Instant::now() + limits.timeout;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if Instant::now() >= deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
    store
}

/// Maps a failed instantiation or call to its failure class.
pub(crate) fn classify(
    store: &Store<TaskState>,
    err: wasmtime::Error,
    limits: &Limits,
) -> HandlerFailure {
    if store.data().limiter.hit {
        return HandlerFailure::OutOfMemory {
            cap_bytes: limits.memory_bytes,
        };
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => {
            return HandlerFailure::OutOfFuel {
                budget: limits.fuel,
            };
        }
        Some(Trap::Interrupt) => {
            return HandlerFailure::Deadline {
                timeout_ms: limits.timeout.as_millis() as u64,
            };
        }
        Some(Trap::StackOverflow) => return HandlerFailure::StackOverflow,
        _ => {}
    }
    let pool_full = err.chain().any(|e| {
        e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
            .is_some()
    });
    let (message, _) = truncate(format!("{err:?}"), MAX_FAILURE_MESSAGE);
    if pool_full {
        HandlerFailure::Unavailable(message)
    } else {
        HandlerFailure::Trap(message)
    }
}

/// Maps the guest's own `handler-error`.
pub(crate) fn handler_error(err: types::HandlerError) -> HandlerFailure {
    let (terminal, message) = match err {
        types::HandlerError::Transient(m) => (false, m),
        types::HandlerError::Terminal(m) => (true, m),
    };
    HandlerFailure::Handler {
        terminal,
        message: truncate(message, MAX_FAILURE_MESSAGE).0,
    }
}

/// What the finished task consumed and logged.
pub(crate) fn report(
    store: &mut Store<TaskState>,
    limits: Limits,
    elapsed: Duration,
) -> TaskReport {
    let left = store.get_fuel().unwrap_or(0);
    let data = store.data_mut();
    TaskReport {
        limits,
        fuel_consumed: limits.fuel.saturating_sub(left),
        elapsed,
        logs: std::mem::take(&mut data.logs),
        logs_dropped: data.logs_dropped,
    }
}
