//! The converge engine as seen from Rust: the embedded migrator, every SQL wrapper over the
//! plpgsql engine (`db`), the id newtypes and shard ranges (`ids`), the LISTEN wake-ups
//! (`wake`), the loops that only talk to PostgreSQL (the drainer and the reaper), every
//! process's cluster membership (`membership`) and shard ranges (`topology`), its readiness
//! (`health`), its Prometheus metrics (`metrics`), the keys and envelopes of secrets at rest
//! (`sealing`) and the database's words as enums (`words`). The broker and the control plane
//! both build on it; neither depends on the other, and the `converge` binary wires them.
//! ARCHITECTURE.md walks through it.

pub mod db;
pub mod drainer;
pub mod health;
pub mod ids;
pub mod membership;
pub mod metrics;
pub mod reaper;
pub mod sealing;
pub mod topology;
pub mod value_flows;
pub mod wake;
pub mod words;

#[cfg(feature = "test-util")]
pub mod testing;
