//! The Rust SDK form of the converge conformance suite.
//!
//! One worker program serves every conformance kind exactly as `conformance/KINDS.md`
//! describes, so the language-neutral runner (`conformance/run.py`) can check that this SDK
//! speaks the WorkerService contract the same way as every other form. Nothing here is clever
//! on purpose: the handlers are the smallest code that exhibits each contract behaviour.

pub mod eventlog;
pub mod kinds;

use std::sync::Arc;

use converge_sdk::Registry;

pub use eventlog::EventLog;

/// The form name used when `CONFORMANCE_FORM` is unset.
pub const DEFAULT_FORM: &str = "rust";

/// Every conformance kind, sharing one event log.
pub fn registry(log: Arc<EventLog>) -> Registry {
    Registry::new()
        .with(kinds::Leaf::new(Arc::clone(&log)))
        .with(kinds::Composite::new(Arc::clone(&log)))
        .with(kinds::Summary::new(Arc::clone(&log)))
        .with(kinds::Final::new(Arc::clone(&log)))
        .with(kinds::Fail::new(Arc::clone(&log)))
        .with(kinds::Slow::new(Arc::clone(&log)))
        .with(kinds::Slow::hold(Arc::clone(&log)))
        .with(kinds::React::new(Arc::clone(&log)))
        .with(kinds::Ready::new(Arc::clone(&log)))
        .with(kinds::Config::new(log))
}
