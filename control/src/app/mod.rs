//! Control-plane rules and loops: the drainer, the reaper and the schema cache. Each loop is
//! a `Service` with a typed config, a `run(self, shutdown)` that owns its loop, and a cheap
//! `Handle` as the only way in.

pub mod drainer;
pub mod reaper;
pub mod schemas;
