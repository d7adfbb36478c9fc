//! Starlark composer: a zip bundle of `.star` files whose `compose(spec, config)` computes a
//! composite resource's children, dependency edges (with value flows), provider configs and
//! status.
//!
//! # Bundle
//! A zip with `compose.star` at its root and any library files beside it (`lib/net.star`).
//! Paths are relative and `/`-separated; `..`, absolute paths and symlinks are rejected.
//! `load("lib/net.star", "subnet")` names a file by its path from the bundle root and is
//! resolved only inside the bundle (no filesystem, no network); a load cycle is an error.
//! Every module is parsed, evaluated and frozen **once**, in [`Bundle::from_zip`].
//!
//! # Contract
//! `def compose(spec, config)` returns a dict:
//! ```text
//! {
//!   "children": [{"kind": str, "kind_version": int = 1, "name": str,
//!                 "spec": dict = {}, "labels": {str: str} = {}}],
//!   "edges":    [{"from": {"kind", "name"}, "to": {"kind", "name"},
//!                 "values": [{"dependent_field": "/ptr", "source_field": "/ptr"}]}],
//!   "configs":  [{"name", "kind", "kind_version": int = 1, "is_default": bool = False,
//!                 "spec": dict = {}}],
//!   "status":   any JSON (optional),
//! }
//! ```
//! Every key is optional; unknown keys are rejected. Builtins `child(...)`, `edge(...)`,
//! `provider_config(...)` and `get(obj, "a.b", default)` build these dicts; `json` and `struct` are
//! available. There is no `print`, clock, randomness or I/O.
//!
//! # Errors
//! Every [`Error`] is **terminal**, and an error must never be treated as an empty compose:
//! an empty *successful* compose prunes all children, an error prunes nothing.
//!
//! # Limits
//! See [`Limits`]: ticks, heap, call stack, a cooperative wall-clock deadline, input and
//! output size, child/edge/config counts, bundle size and entry count. The in-process
//! limits are best effort (starlark-rust's own caveat): a single native step such as
//! `"x" * 10**9` allocates before any check runs. Run untrusted bundles in a child process.

mod archive;
mod builtins;
mod bundle;
mod compose;
pub mod config;
mod error;
mod json;
mod limits;
mod output;
mod sandbox;

pub use archive::{pack, pack_dir};
pub use bundle::{Bundle, BundleStats, ENTRY};
pub use converge_compose_output::{
    ChildSpec, ComposeOutput, DepEdge, ProviderConfigSpec, ResourceRef, ValueFlow,
};
pub use error::{Error, LimitKind};
pub use limits::{Limits, MAX_CALL_STACK};
