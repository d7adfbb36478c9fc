//! Per-task sandbox limits: defaults, per-kind overrides and the operator maximum.
//!
//! A kind's provider config may raise or lower any limit for its tasks; the operator's
//! maximum (`HostConfig::max_limits`) bounds what a config can ask for. Requests above the
//! maximum are **clamped** at call time (the task still runs, at the maximum) so that a
//! config edit can never make an already-running worker refuse work; [`Limits::exceeding`]
//! lets the stdworker refuse such a config when it is applied instead (a 422 at the API).

use std::time::Duration;

use serde::Deserialize;

/// One mebibyte.
const MIB: u64 = 1024 * 1024;

/// The limits one task runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Cap on each linear memory of the instance, in bytes (`StoreLimits::memory_size`).
    pub memory_bytes: u64,
    /// Fuel budget: roughly one unit per wasm instruction; deterministic.
    pub fuel: u64,
    /// Wall-clock deadline, enforced by epoch interruption (catches host time and
    /// descheduling, which fuel does not count).
    pub timeout: Duration,
    /// Cap on the request's size (the sum of its strings), checked before the call.
    pub input_bytes: u64,
    /// Cap on the outcome's size (the sum of its strings), checked after the call.
    pub output_bytes: u64,
    /// Cap on the number of children in an outcome.
    pub max_children: u32,
    /// Cap on the number of edges in an outcome.
    pub max_edges: u32,
    /// Cap on the number of conditions in an outcome.
    pub max_conditions: u32,
    /// Cap on the number of provider configs in an outcome.
    pub max_configs: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 * MIB,
            fuel: 1_000_000_000,
            timeout: Duration::from_secs(5),
            input_bytes: MIB,
            output_bytes: 4 * MIB,
            max_children: 10_000,
            max_edges: 20_000,
            max_conditions: 256,
            max_configs: 1_000,
        }
    }
}

impl Limits {
    /// The default operator maximum: what a kind's config may raise its limits to.
    pub fn default_max() -> Self {
        Self {
            memory_bytes: 256 * MIB,
            fuel: 10_000_000_000,
            timeout: Duration::from_secs(30),
            input_bytes: 8 * MIB,
            output_bytes: 16 * MIB,
            max_children: 50_000,
            max_edges: 100_000,
            max_conditions: 1_000,
            max_configs: 10_000,
        }
    }

    /// Each field lowered to `max` where it exceeds it.
    pub fn clamp_to(&self, max: &Limits) -> Limits {
        Limits {
            memory_bytes: self.memory_bytes.min(max.memory_bytes),
            fuel: self.fuel.min(max.fuel),
            timeout: self.timeout.min(max.timeout),
            input_bytes: self.input_bytes.min(max.input_bytes),
            output_bytes: self.output_bytes.min(max.output_bytes),
            max_children: self.max_children.min(max.max_children),
            max_edges: self.max_edges.min(max.max_edges),
            max_conditions: self.max_conditions.min(max.max_conditions),
            max_configs: self.max_configs.min(max.max_configs),
        }
    }

    /// The names of the fields that exceed `max` (empty when within it). Use it to refuse a
    /// provider config at apply time rather than silently clamping at call time.
    pub fn exceeding(&self, max: &Limits) -> Vec<&'static str> {
        let mut over = Vec::new();
        let mut check = |name, exceeds: bool| {
            if exceeds {
                over.push(name);
            }
        };
        check("memoryBytes", self.memory_bytes > max.memory_bytes);
        check("fuel", self.fuel > max.fuel);
        check("timeoutMs", self.timeout > max.timeout);
        check("inputBytes", self.input_bytes > max.input_bytes);
        check("outputBytes", self.output_bytes > max.output_bytes);
        check("maxChildren", self.max_children > max.max_children);
        check("maxEdges", self.max_edges > max.max_edges);
        check("maxConditions", self.max_conditions > max.max_conditions);
        check("maxConfigs", self.max_configs > max.max_configs);
        over
    }

    /// These limits with the fields set in `overrides` replaced.
    pub fn with_overrides(&self, overrides: &LimitOverrides) -> Limits {
        Limits {
            memory_bytes: overrides.memory_bytes.unwrap_or(self.memory_bytes),
            fuel: overrides.fuel.unwrap_or(self.fuel),
            timeout: overrides
                .timeout_ms
                .map(Duration::from_millis)
                .unwrap_or(self.timeout),
            input_bytes: overrides.input_bytes.unwrap_or(self.input_bytes),
            output_bytes: overrides.output_bytes.unwrap_or(self.output_bytes),
            max_children: overrides.max_children.unwrap_or(self.max_children),
            max_edges: overrides.max_edges.unwrap_or(self.max_edges),
            max_conditions: overrides.max_conditions.unwrap_or(self.max_conditions),
            max_configs: overrides.max_configs.unwrap_or(self.max_configs),
        }
    }
}

/// Per-kind overrides as they appear in a provider config (`"limits": {...}`, camelCase);
/// absent fields keep the host's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitOverrides {
    /// See [`Limits::memory_bytes`].
    pub memory_bytes: Option<u64>,
    /// See [`Limits::fuel`].
    pub fuel: Option<u64>,
    /// See [`Limits::timeout`], in milliseconds.
    pub timeout_ms: Option<u64>,
    /// See [`Limits::input_bytes`].
    pub input_bytes: Option<u64>,
    /// See [`Limits::output_bytes`].
    pub output_bytes: Option<u64>,
    /// See [`Limits::max_children`].
    pub max_children: Option<u32>,
    /// See [`Limits::max_edges`].
    pub max_edges: Option<u32>,
    /// See [`Limits::max_conditions`].
    pub max_conditions: Option<u32>,
    /// See [`Limits::max_configs`].
    pub max_configs: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_then_clamp() {
        let o: LimitOverrides =
            serde_json::from_str(r#"{"fuel": 5, "timeoutMs": 999999, "memoryBytes": 1024}"#)
                .unwrap();
        let l = Limits::default().with_overrides(&o);
        assert_eq!(l.fuel, 5);
        assert_eq!(l.memory_bytes, 1024);
        let max = Limits::default_max();
        assert_eq!(l.exceeding(&max), vec!["timeoutMs"]);
        assert_eq!(l.clamp_to(&max).timeout, max.timeout);
        assert!(serde_json::from_str::<LimitOverrides>(r#"{"bogus": 1}"#).is_err());
    }
}
