//! Compile-time and compose-time errors of the CEL graph.

use std::fmt;

/// What kind of problem a [`CompileError`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompileErrorKind {
    /// The config does not have the graph's shape (missing id, bad template, ...).
    Shape,
    /// A `${...}` expression does not parse.
    Parse,
    /// An expression names something that is not `spec`, `root.name`, a sibling id or a
    /// `forEach` variable in scope.
    UnknownReference,
    /// An expression computes with (or tests, or interpolates) a sibling's status, or uses it
    /// outside the dependent's spec. Status values arrive later by value flow, so the
    /// expression can only be the whole field: `${vpc.status.vpc_id}`.
    StatusComputed,
    /// The resources' references form a cycle.
    Cycle,
    /// A static limit (expression size, resource count) is exceeded.
    Limit,
}

/// One problem found when compiling a graph; every one is reported, not only the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    /// The resource id, when the problem belongs to one resource.
    pub resource: Option<String>,
    /// JSON pointer to the offending value inside the graph config, e.g.
    /// `/resources/1/template/spec/vpc_id`.
    pub path: String,
    /// The kind of problem.
    pub kind: CompileErrorKind,
    /// A human-readable explanation (parse errors include `line:column`).
    pub message: String,
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.resource {
            Some(id) => write!(f, "resource {id:?} at {}: {}", self.path, self.message),
            None => write!(f, "at {}: {}", self.path, self.message),
        }
    }
}

impl std::error::Error for CompileError {}

/// Which limit a compose ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitKind {
    /// The root spec was too large.
    InputSize,
    /// The serialized output was too large.
    OutputSize,
    /// A `forEach` expanded to more items than allowed.
    ForEach,
    /// More children than allowed in total.
    Children,
    /// More expression evaluations than allowed.
    Evaluations,
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::InputSize => "input too large",
            Self::OutputSize => "output too large",
            Self::ForEach => "forEach expansion too large",
            Self::Children => "too many children",
            Self::Evaluations => "too many expression evaluations",
        })
    }
}

/// A compose failure. Every variant is terminal, and an error must never be treated as an
/// empty compose (an empty *successful* compose prunes every child).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The root spec is not a JSON object.
    #[error("invalid root spec: {0}")]
    InvalidInput(String),
    /// An expression failed or produced a value of the wrong type.
    #[error("resource {resource:?} at {path}: {message}")]
    Eval {
        /// The resource id.
        resource: String,
        /// JSON pointer to the expression inside the graph config.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A limit was hit.
    #[error("cel limit: {0}")]
    Limit(LimitKind),
    /// The rendered children are not a valid compose result (duplicate names, bad kinds).
    #[error("invalid compose output: {0}")]
    InvalidOutput(String),
}

impl From<converge_compose_output::InvalidOutput> for Error {
    fn from(e: converge_compose_output::InvalidOutput) -> Self {
        Self::InvalidOutput(e.into_message())
    }
}
