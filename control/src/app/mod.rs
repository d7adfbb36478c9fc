//! Control-plane parts that need more than PostgreSQL: the event-log tail behind the API's
//! watches, a provider config's value flows read out of its composer's shapes, the Starlark
//! sample compose (and a plan's Starlark or CEL compose), a plan's diffs (`plan`), and the process state the API reads (`runtime`: readiness, the members'
//! liveness window). (Kinds, their compiled schemas and their rules live in
//! `converge_kinds`; the API reads the process's one `KindCatalog`.) The watch tail follows
//! the loop shape of the engine's drainer and reaper (`converge_engine::{drainer, reaper}`):
//! a typed config, a `run(self, shutdown)` that owns its loop, and a cheap `Handle` as the
//! only way in.

pub mod apply_coalescer;
pub mod flows;
pub mod plan;
pub mod reads;
pub mod runtime;
pub mod starlark_sample;
pub mod tokens;
pub mod watch;
