//! Applies [`Limits`] to one evaluator and turns starlark errors into typed [`Error`]s.

use std::{
    cell::Cell,
    time::{Duration, Instant},
};

use starlark::{
    ErrorKind,
    environment::{Globals, GlobalsBuilder, LibraryExtension},
    eval::Evaluator,
    syntax::Dialect,
};

use crate::{Error, LimitKind, Limits, builtins::compose_builtins, limits::MAX_CALL_STACK};

/// The dialect of every bundle file: standard Starlark (no top-level `for`/`if`) with
/// f-strings and keyword-only arguments; `load()` is allowed and resolved by the bundle.
pub(crate) fn dialect() -> Dialect {
    Dialect {
        enable_f_strings: true,
        enable_keyword_only_arguments: true,
        ..Dialect::Standard
    }
}

/// The allowlisted globals: the standard library, `json`, `struct`, `map`, `filter`,
/// `partial` and our builtins. Deliberately absent: `print`, `debug`, `breakpoint`,
/// `call_stack` and anything touching time, randomness, files, network or environment.
pub(crate) fn globals() -> Globals {
    GlobalsBuilder::extended_by(&[
        LibraryExtension::Json,
        LibraryExtension::StructType,
        LibraryExtension::Map,
        LibraryExtension::Filter,
        LibraryExtension::Partial,
    ])
    .with(compose_builtins)
    .build()
}

/// The deadline of one evaluation, polled by the evaluator every ~1000 ticks.
pub(crate) struct Deadline {
    at: Instant,
    fired: Cell<bool>,
}

impl Deadline {
    /// A deadline `budget` from now.
    pub(crate) fn after(budget: Duration) -> Self {
        Self {
            at: Instant::now() + budget,
            fired: Cell::new(false),
        }
    }

    fn poll(&self) -> bool {
        if Instant::now() >= self.at {
            self.fired.set(true);
        }
        self.fired.get()
    }
}

/// Installs ticks, heap, call-stack and deadline limits on a fresh evaluator.
pub(crate) fn limit<'a>(
    eval: &mut Evaluator<'_, 'a, '_>,
    limits: &Limits,
    deadline: &'a Deadline,
) -> Result<(), Error> {
    let setup = |r: anyhow::Result<()>| r.map_err(|e| Error::bundle(format!("bad limits: {e}")));
    setup(eval.set_max_tick_count(limits.max_ticks.max(1)))?;
    setup(eval.set_max_heap_size(limits.max_heap_bytes.max(1)))?;
    setup(eval.set_max_callstack_size(limits.max_call_stack.clamp(1, MAX_CALL_STACK)))?;
    eval.set_check_cancelled(Box::new(move || deadline.poll()));
    Ok(())
}

/// Re-checks the heap and the deadline after evaluation returned: both are only polled
/// periodically, so a short evaluation that allocated a lot would otherwise slip through.
pub(crate) fn check_after(
    eval: &Evaluator<'_, '_, '_>,
    limits: &Limits,
    deadline: &Deadline,
) -> Result<(), Error> {
    // The same measure the evaluator's own periodic check uses.
    let used = eval.heap().peak_allocated_bytes() + eval.frozen_heap().allocated_bytes();
    if used > limits.max_heap_bytes {
        return Err(Error::Limit(LimitKind::Heap));
    }
    if deadline.poll() {
        return Err(Error::Limit(LimitKind::Deadline));
    }
    Ok(())
}

/// Classifies an evaluation error: limits first (by evaluator state, then by message),
/// otherwise a runtime error with its location.
pub(crate) fn classify(
    err: starlark::Error,
    eval: &Evaluator<'_, '_, '_>,
    limits: &Limits,
    deadline: &Deadline,
) -> Error {
    if matches!(err.kind(), ErrorKind::StackOverflow(_)) {
        return Error::Limit(LimitKind::CallStack);
    }
    if matches!(err.kind(), ErrorKind::Parser(_)) {
        return Error::Syntax {
            message: err.to_string(),
        };
    }
    if deadline.fired.get() {
        return Error::Limit(LimitKind::Deadline);
    }
    if matches!(err.kind(), ErrorKind::Other(_)) {
        if eval.get_total_tick_count() > limits.max_ticks {
            return Error::Limit(LimitKind::Ticks);
        }
        let msg = err.without_diagnostic().to_string();
        if msg.starts_with("Heap memory limit of") {
            return Error::Limit(LimitKind::Heap);
        }
        if msg.starts_with("Execution duration limit of") {
            return Error::Limit(LimitKind::Ticks);
        }
    }
    let location = err.span().map(ToString::to_string).or_else(|| {
        err.call_stack()
            .frames
            .iter()
            .rev()
            .find_map(|f| f.location.as_ref().map(ToString::to_string))
    });
    Error::Runtime {
        message: err.without_diagnostic().to_string(),
        location,
    }
}
