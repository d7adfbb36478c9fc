//! The typed errors of the Starlark composer.
//!
//! Every error is terminal for the compose that raised it: retrying the same bundle with the
//! same spec gives the same answer, and no error may ever be read as "no children".

use std::fmt;

/// Which limit an evaluation or a bundle ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitKind {
    /// The tick budget (function calls plus loop back-edges) ran out.
    Ticks,
    /// The Starlark heap grew past its cap.
    Heap,
    /// The Starlark call stack grew past its cap (usually deep recursion).
    CallStack,
    /// The wall-clock deadline passed.
    Deadline,
    /// The spec or config handed to `compose` was too large.
    InputSize,
    /// The serialized compose result was too large.
    OutputSize,
    /// More children than allowed.
    Children,
    /// More edges than allowed.
    Edges,
    /// More provider configs than allowed.
    Configs,
    /// The bundle (or one of its files) was too large once decompressed.
    BundleSize,
    /// The bundle had too many entries.
    BundleEntries,
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ticks => "tick budget exhausted",
            Self::Heap => "heap limit exceeded",
            Self::CallStack => "call stack limit exceeded",
            Self::Deadline => "deadline exceeded",
            Self::InputSize => "input too large",
            Self::OutputSize => "output too large",
            Self::Children => "too many children",
            Self::Edges => "too many edges",
            Self::Configs => "too many configs",
            Self::BundleSize => "bundle too large",
            Self::BundleEntries => "too many bundle entries",
        })
    }
}

/// A failure to load a bundle or to run its `compose`.
///
/// All variants are terminal: the caller reports them and must not prune children because of
/// them (an empty *successful* compose prunes everything; an error prunes nothing).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The bundle is malformed: not a zip, a bad path, no `compose.star`, a `load()` of a
    /// module outside the bundle, or a cycle of loads.
    #[error("invalid starlark bundle: {0}")]
    Bundle(String),
    /// A `.star` file does not parse.
    #[error("starlark syntax error: {message}")]
    Syntax {
        /// The parser's message, with its `file:line:col` span.
        message: String,
    },
    /// Evaluation failed: `fail()`, a type error, a missing key, a bad builtin argument.
    #[error("starlark runtime error{}: {message}", location.as_deref().map(|l| format!(" at {l}")).unwrap_or_default())]
    Runtime {
        /// What went wrong, without the traceback.
        message: String,
        /// Where (`file:line:col-col`), when known.
        location: Option<String>,
    },
    /// A limit was hit.
    #[error("starlark limit: {0}")]
    Limit(LimitKind),
    /// `compose` returned something that is not a valid compose result.
    #[error("invalid compose output: {0}")]
    InvalidOutput(String),
}

impl Error {
    /// Builds an [`Error::InvalidOutput`].
    pub(crate) fn output(msg: impl Into<String>) -> Self {
        Self::InvalidOutput(msg.into())
    }

    /// Builds an [`Error::Bundle`].
    pub(crate) fn bundle(msg: impl Into<String>) -> Self {
        Self::Bundle(msg.into())
    }
}
