//! Control-plane loops that need more than PostgreSQL: the schema cache (compiled JSON
//! Schemas and CEL graphs for the API), the event-log tail behind the API's watches, and the
//! process state the API reads (`runtime`: readiness, the members' liveness window). It
//! follows the loop shape of the engine's drainer and reaper
//! (`converge_engine::{drainer, reaper}`): a typed config, a `run(self, shutdown)` that owns
//! its loop, and a cheap `Handle` as the only way in.

pub mod flows;
pub mod manifest_check;
pub mod runtime;
pub mod schemas;
pub mod starlark_sample;
pub mod watch;
