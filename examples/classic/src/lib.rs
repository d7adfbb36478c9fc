//! The classic demo's providers: a `classicbom` composer that expands a bill of materials
//! (functional domains × teams) into per-team `account` → `vpc` → `tgw` → `route` leaves wired
//! by value flows, and the four leaves, which pretend to provision cloud resources.
//!
//! Every provider is deterministic: the same spec always yields the same children, ids and
//! statuses, so a recompose that changes nothing writes nothing. Leaves can be slowed down
//! ([`LATENCY_ENV`]) or made to fail on purpose (a `fail` field in their spec, which the BOM's
//! own `fail` map sets per child) to demo the Degraded and Quarantined phases.

mod bom;
mod ids;
mod leaves;
mod statussink;
pub mod teardown;

use std::time::Duration;

use converge_sdk::{ConfigError, Registry};

pub use bom::{BomSpec, ClassicBom, FunctionalDomain, MAX_TEAMS};
pub use leaves::{
    Account, AccountSpec, FailMode, ROUTE_DESTINATION, Route, RouteSpec, Tgw, TgwSpec, Vpc, VpcSpec,
};
pub use statussink::{Destination, StatusSink};

/// The environment variable holding the simulated provisioning latency of every leaf, in
/// milliseconds (default 0).
pub const LATENCY_ENV: &str = "CLASSIC_LATENCY_MS";

/// Every provider of the demo, the leaves sleeping `latency` before they answer.
pub fn registry(latency: Duration) -> Registry {
    Registry::new()
        .with(ClassicBom)
        .with(Account { latency })
        .with(Vpc { latency })
        .with(Tgw { latency })
        .with(Route { latency })
        .with(StatusSink::default())
}

/// Reads [`LATENCY_ENV`]; unset or empty means no latency.
pub fn latency_from_env() -> Result<Duration, ConfigError> {
    latency_from(std::env::var(LATENCY_ENV).ok().as_deref())
}

/// Parses a [`LATENCY_ENV`] value (`None` or empty = no latency).
pub fn latency_from(value: Option<&str>) -> Result<Duration, ConfigError> {
    match value.map(str::trim) {
        None | Some("") => Ok(Duration::ZERO),
        Some(v) => v
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|e| ConfigError::Invalid {
                var: LATENCY_ENV.to_string(),
                value: v.to_string(),
                reason: format!("expected a whole number of milliseconds ({e})"),
            }),
    }
}
