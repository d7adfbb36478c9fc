//! What the API knows of its own process besides its pool and caches: whether the process is
//! ready ([`Health`], which `/readyz` answers and the broker's gRPC Health follows), and the
//! members' liveness window (`MEMBER_DEAD_AFTER`: a member silent longer is listed NotReady
//! and counted by no routing read).

use std::time::Duration;

use converge_engine::{health::Health, membership::DEAD_AFTER};

/// The process-wide state the API reads besides its pool and caches. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Runtime {
    /// The process's readiness (draining, PostgreSQL reachable).
    pub health: Health,
    /// How long a cluster member may go unstamped and still count as live.
    pub member_liveness: Duration,
}

impl Default for Runtime {
    /// Ready, with the default liveness window (tests and tools).
    fn default() -> Self {
        Runtime {
            health: Health::new(),
            member_liveness: DEAD_AFTER,
        }
    }
}
