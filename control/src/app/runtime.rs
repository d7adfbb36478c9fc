//! What the API knows of its own process besides its pool and caches: whether the process is
//! ready ([`Health`], which `/readyz` answers and the broker's gRPC Health follows).

use converge_engine::health::Health;

/// The process-wide state the API reads besides its pool and caches. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Runtime {
    /// The process's readiness (draining, PostgreSQL reachable).
    pub health: Health,
}
