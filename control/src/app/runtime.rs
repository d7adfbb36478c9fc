//! What the API knows of its own process besides its pool and caches: where reads may go
//! ([`Reads`]: the primary, or a streaming replica while it keeps up), whether the process is
//! ready ([`Health`], which `/readyz` answers and the broker's gRPC Health follows), and the
//! members' liveness window (`MEMBER_DEAD_AFTER`: a member silent longer is listed NotReady
//! and counted by no routing read), its HTTP rate limits ([`RateLimits`]) and whether its
//! HTTP listener serves TLS (which decides `Strict-Transport-Security`).

use std::time::Duration;

use converge_engine::{health::Health, membership::DEAD_AFTER};

use super::reads::Reads;
use crate::http::ratelimit::RateLimits;

/// The process-wide state the API reads besides its pool and caches. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Runtime {
    /// The read replica (`DATABASE_READ_URL`), if any, and whether reads may use it now.
    pub reads: Reads,
    /// The process's readiness (draining, PostgreSQL reachable).
    pub health: Health,
    /// How long a cluster member may go unstamped and still count as live.
    pub member_liveness: Duration,
    /// RATE_LIMIT_PER_PRINCIPAL and RATE_LIMIT_PER_ADDRESS (default: none).
    pub limits: RateLimits,
    /// Whether the HTTP listener serves TLS (answers then carry HSTS).
    pub https: bool,
    /// How long a plan waits for worker composers' dry runs (`PLAN_DRY_RUN_TIMEOUT`).
    pub plan_dry_run_timeout: Duration,
}

impl Default for Runtime {
    /// Ready, no replica, the default liveness window, no rate limit, plain HTTP (tests and
    /// tools).
    fn default() -> Self {
        Runtime {
            reads: Reads::primary_only(),
            health: Health::new(),
            member_liveness: DEAD_AFTER,
            limits: RateLimits::default(),
            https: false,
            plan_dry_run_timeout: Duration::from_secs(10),
        }
    }
}
