//! Failure classes of one task and of loading a component.
//!
//! Each sandbox breach has its own class so the stdworker can report it as a condition
//! reason and pick terminal versus transient without parsing messages.

use thiserror::Error;

/// Why a `describe` or `reconcile` call did not produce a valid outcome.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HandlerFailure {
    /// The fuel budget ran out. Terminal: fuel is deterministic, so the same request with
    /// the same budget runs out at the same instruction again.
    #[error("out of fuel: the handler exceeded its budget of {budget} fuel units")]
    OutOfFuel {
        /// The budget the task had.
        budget: u64,
    },
    /// The wall-clock deadline passed. Transient: wall time depends on machine load and
    /// scheduling, so a retry on a quieter worker may well finish (the broker's retry
    /// backoff bounds the cost of a handler that always spins).
    #[error("deadline: the handler ran longer than {timeout_ms} ms")]
    Deadline {
        /// The deadline the task had, in milliseconds.
        timeout_ms: u64,
    },
    /// A linear memory (or table) tried to grow past the task's cap, or the instance needed
    /// more memory than the cap to start. Terminal: the same input needs the same memory.
    #[error("out of memory: the handler exceeded its memory cap of {cap_bytes} bytes")]
    OutOfMemory {
        /// The per-memory cap the task had.
        cap_bytes: u64,
    },
    /// The wasm call stack overflowed (deep recursion). Terminal, like any trap.
    #[error("stack overflow: the handler exhausted its wasm stack")]
    StackOverflow,
    /// The guest trapped (unreachable, out-of-bounds access, a panic, ...) or failed to
    /// instantiate. Terminal: a deterministic guest traps again on the same input.
    #[error("trap: {0}")]
    Trap(String),
    /// The guest returned an outcome the host refuses (duplicate children, an edge to an
    /// unknown child, a cycle, a cap exceeded, malformed JSON). Terminal: a bug in the
    /// handler, which a retry does not fix; the outcome is never applied.
    #[error("invalid outcome: {0}")]
    InvalidOutcome(String),
    /// The request itself was refused before the call (larger than the input cap).
    /// Terminal: the same resource produces the same oversized request.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The host had no capacity for another instance right now (the pooling allocator's
    /// slots are all in use). Transient.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The handler itself returned `handler-error`.
    #[error("handler error ({}): {message}", if *terminal { "terminal" } else { "transient" })]
    Handler {
        /// `terminal(..)` rather than `transient(..)`.
        terminal: bool,
        /// The handler's message.
        message: String,
    },
}

impl HandlerFailure {
    /// Whether retrying the same request cannot help (see each variant for the reasoning).
    pub fn is_terminal(&self) -> bool {
        match self {
            HandlerFailure::OutOfFuel { .. }
            | HandlerFailure::OutOfMemory { .. }
            | HandlerFailure::StackOverflow
            | HandlerFailure::Trap(_)
            | HandlerFailure::InvalidOutcome(_)
            | HandlerFailure::InvalidRequest(_) => true,
            HandlerFailure::Deadline { .. } | HandlerFailure::Unavailable(_) => false,
            HandlerFailure::Handler { terminal, .. } => *terminal,
        }
    }

    /// A short CamelCase reason for a condition (`OutOfFuel`, `Deadline`, ...).
    pub fn reason(&self) -> &'static str {
        match self {
            HandlerFailure::OutOfFuel { .. } => "OutOfFuel",
            HandlerFailure::Deadline { .. } => "Deadline",
            HandlerFailure::OutOfMemory { .. } => "OutOfMemory",
            HandlerFailure::StackOverflow => "StackOverflow",
            HandlerFailure::Trap(_) => "Trap",
            HandlerFailure::InvalidOutcome(_) => "InvalidOutcome",
            HandlerFailure::InvalidRequest(_) => "InvalidRequest",
            HandlerFailure::Unavailable(_) => "Unavailable",
            HandlerFailure::Handler { .. } => "HandlerError",
        }
    }
}

/// Why a component could not be loaded.
#[derive(Debug, Error)]
pub enum LoadError {
    /// The bytes are larger than `HostConfig::max_component_bytes`.
    #[error("component is {size} bytes, over the {max}-byte cap")]
    TooLarge {
        /// The component's size.
        size: usize,
        /// The cap.
        max: usize,
    },
    /// The bytes are not a valid component, or compiling them failed.
    #[error("compile failed: {0}")]
    Compile(String),
    /// The component's imports or exports do not match the `handler` world (or it imports
    /// something the host does not provide).
    #[error("component does not fit the converge:handler world: {0}")]
    World(String),
}
