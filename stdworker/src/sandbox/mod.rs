//! The composers' sandbox: every starlark and CEL evaluation (bundle loads and graph
//! compiles included) runs in a pool of child processes, never on stdworker's async
//! runtime or in its address space.
//!
//! Neither engine bounds all of its own work: CEL has no cost model (a nested `all()` over
//! 1,000 items ran for minutes), and starlark checks its heap cap only periodically (a
//! top-level `"x" * 1500000000` allocated 2.8 GB before any check). A child process is a
//! bound no engine bug can escape:
//!
//! - **Memory**: each child caps its own address space (`RLIMIT_AS`, see [`child`]); an
//!   evaluation that needs more aborts the child, and the task fails with class `memory`.
//! - **Wall clock**: stdworker kills a child whose reply has not come within the task's
//!   budget ([`SandboxPool::budget`]: `STDWORKER_SANDBOX_TIMEOUT`, or less when the task's
//!   own deadline is nearer); the task fails with class `deadline`.
//! - **Cost**: the engines' own budgets (starlark ticks, CEL evaluations) fail with class
//!   `cost`; `RLIMIT_CPU` ends an orphaned child.
//!
//! A runaway class is always a **terminal** failure (the same input would run away again)
//! whose message starts with the class: `memory: ...`, `deadline: ...`, `cost: ...`. A dead
//! child is replaced by a fresh one on the next request; the other kinds of the worker only
//! ever wait for a free child, never for the runaway one.
//!
//! The children are long-lived (one request at a time each) and keep compiled programs by
//! content hash, so the hot path is one JSON frame each way over a pipe ([`wire`]).

pub mod child;
mod pool;
pub mod wire;

use std::{fmt, path::PathBuf, time::Duration};

use converge_sdk::{ConfigError, HandlerError};
use serde::{Deserialize, Serialize};

pub use pool::{PoolStats, SandboxPool, classify_death};

/// The hidden subcommand that turns `stdworker` into a sandbox child.
pub const CHILD_ARG: &str = "__sandbox";

/// The variable bounding how many sandbox children run at once.
pub const PROCS_VAR: &str = "STDWORKER_SANDBOX_PROCS";
/// The variable holding each child's memory bound, in MiB.
pub const MEMORY_VAR: &str = "STDWORKER_SANDBOX_MEMORY_MIB";
/// The variable holding the wall-clock bound of one evaluation.
pub const TIMEOUT_VAR: &str = "STDWORKER_SANDBOX_TIMEOUT";

/// Default memory bound of a child: 512 MiB (the largest starlark heap a config may ask
/// for, so an allowed heap is never cut short by the process bound first).
pub const DEFAULT_MEMORY_BYTES: u64 = 512 << 20;
/// Default wall-clock bound of one evaluation: 30 s (the largest starlark `deadline_ms`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

const MEMORY_MIB_RANGE: (u64, u64) = (32, 1 << 20);
const PROCS_MAX: usize = 64;
const TIMEOUT_RANGE: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(3600));

/// How the sandbox pool runs its children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// The executable started as `<program> __sandbox <memory-bytes>`: stdworker itself
    /// (`/proc/self/exe`, which still works after the binary on disk was replaced).
    pub program: PathBuf,
    /// Children alive at once (`STDWORKER_SANDBOX_PROCS`); more evaluations wait for one.
    pub procs: usize,
    /// Memory each child's evaluations may use, on top of what the process maps at start
    /// (`STDWORKER_SANDBOX_MEMORY_MIB`).
    pub memory_bytes: u64,
    /// Wall-clock bound of one evaluation (`STDWORKER_SANDBOX_TIMEOUT`).
    pub timeout: Duration,
}

/// Default pool size: one child per core, at least 2 (one runaway evaluation must not
/// leave the other kinds without a child) and at most 8.
pub fn default_procs() -> usize {
    std::thread::available_parallelism()
        .map_or(2, std::num::NonZero::get)
        .clamp(2, 8)
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            program: PathBuf::from("/proc/self/exe"),
            procs: default_procs(),
            memory_bytes: DEFAULT_MEMORY_BYTES,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl SandboxConfig {
    /// The defaults, with `program` as the child executable (tests: the built `stdworker`).
    pub fn with_program(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            ..Self::default()
        }
    }

    /// Reads [`PROCS_VAR`], [`MEMORY_VAR`] and [`TIMEOUT_VAR`] from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|var| match std::env::var(var) {
            Ok(v) => Ok(Some(v)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(ConfigError::NotUnicode {
                var: var.to_string(),
            }),
        })
    }

    /// Like [`SandboxConfig::from_env`], reading variables through `lookup`. Unset or blank
    /// variables keep the defaults; a malformed or out-of-range value is an error naming
    /// the variable.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Result<Option<String>, ConfigError>,
    ) -> Result<Self, ConfigError> {
        let get = |var: &str| -> Result<Option<String>, ConfigError> {
            Ok(lookup(var)?.filter(|v| !v.trim().is_empty()))
        };
        let invalid = |var: &str, value: &str, reason: String| ConfigError::Invalid {
            var: var.to_string(),
            value: value.to_string(),
            reason,
        };
        let mut cfg = Self::default();
        if let Some(v) = get(PROCS_VAR)? {
            cfg.procs = v
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..=PROCS_MAX).contains(n))
                .ok_or_else(|| {
                    invalid(
                        PROCS_VAR,
                        &v,
                        format!("expected an integer from 1 to {PROCS_MAX}"),
                    )
                })?;
        }
        if let Some(v) = get(MEMORY_VAR)? {
            let (lo, hi) = MEMORY_MIB_RANGE;
            let mib: u64 = v
                .trim()
                .parse()
                .ok()
                .filter(|n| (lo..=hi).contains(n))
                .ok_or_else(|| {
                    invalid(
                        MEMORY_VAR,
                        &v,
                        format!("expected a number of MiB from {lo} to {hi}"),
                    )
                })?;
            cfg.memory_bytes = mib << 20;
        }
        if let Some(v) = get(TIMEOUT_VAR)? {
            let (lo, hi) = TIMEOUT_RANGE;
            cfg.timeout = converge_proto::duration::parse_duration(&v)
                .and_then(|d| {
                    if (lo..=hi).contains(&d) {
                        Ok(d)
                    } else {
                        Err(format!("must be from {lo:?} to {hi:?}"))
                    }
                })
                .map_err(|reason| invalid(TIMEOUT_VAR, &v, reason))?;
        }
        Ok(cfg)
    }
}

/// The class of a runaway evaluation, first word of its failure message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunawayClass {
    /// An engine's work budget ran out (starlark ticks, CEL evaluations).
    Cost,
    /// The evaluation needed more memory than its bound (the sandbox's address space, or
    /// starlark's heap cap).
    Memory,
    /// The evaluation did not finish in its wall-clock budget.
    Deadline,
}

impl fmt::Display for RunawayClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cost => "cost",
            Self::Memory => "memory",
            Self::Deadline => "deadline",
        })
    }
}

/// Why a sandboxed evaluation produced no output.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The engine refused or failed (an error in the bundle or graph, an engine limit).
    #[error("{}{message}", class.map(|c| format!("{c}: ")).unwrap_or_default())]
    Engine {
        /// The runaway class of an engine limit, if it was one.
        class: Option<RunawayClass>,
        /// The engine's message.
        message: String,
    },
    /// The sandbox stopped the evaluation: its child was killed on the deadline or died
    /// of its memory bound.
    #[error("{class}: {detail}")]
    Runaway {
        /// Which bound it hit.
        class: RunawayClass,
        /// What happened, for the task's failure message.
        detail: String,
    },
    /// The child died during the evaluation for another reason (a signal, an engine
    /// abort); the same input would most likely do it again.
    #[error(
        "the {engine} sandbox process died during the evaluation ({status}){}",
        tail_suffix(stderr)
    )]
    Crashed {
        /// `starlark` or `cel`.
        engine: &'static str,
        /// How it ended.
        status: String,
        /// The end of its stderr.
        stderr: String,
    },
    /// The child answered something stdworker cannot use (an oversized or malformed frame).
    #[error("the {engine} sandbox answered an unusable reply: {detail}")]
    Protocol {
        /// `starlark` or `cel`.
        engine: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// No child could take the request (it could not be started, or it was gone before the
    /// request reached it). Not the evaluation's fault: worth a retry.
    #[error("no {engine} sandbox process could take the evaluation: {detail}")]
    Unavailable {
        /// `starlark` or `cel`.
        engine: &'static str,
        /// Why.
        detail: String,
    },
    /// Too little of the task's time was left to start an evaluation.
    #[error("only {left:?} left before the task deadline: not enough to start an evaluation")]
    NoTime {
        /// The time that was left.
        left: Duration,
    },
}

fn tail_suffix(stderr: &str) -> String {
    if stderr.trim().is_empty() {
        String::new()
    } else {
        format!(": {}", stderr.trim())
    }
}

impl SandboxError {
    /// Whether retrying cannot help: every failure caused by the program or its input.
    pub fn is_terminal(&self) -> bool {
        match self {
            Self::Engine { .. }
            | Self::Runaway { .. }
            | Self::Crashed { .. }
            | Self::Protocol { .. } => true,
            Self::Unavailable { .. } | Self::NoTime { .. } => false,
        }
    }

    /// The runaway class, when the evaluation hit a cost, memory or deadline bound.
    pub fn class(&self) -> Option<RunawayClass> {
        match self {
            Self::Engine { class, .. } => *class,
            Self::Runaway { class, .. } => Some(*class),
            _ => None,
        }
    }
}

/// The one place sandbox errors become task failures.
impl From<SandboxError> for HandlerError {
    fn from(e: SandboxError) -> Self {
        if e.is_terminal() {
            HandlerError::terminal(e)
        } else {
            HandlerError::transient(e)
        }
    }
}
