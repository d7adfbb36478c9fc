//! A Starlark provider config's **spec**, as every runner of a bundle reads it (stdworker's
//! starlark provider, `converge-starlark-compose` for the API's apply check and for
//! `conctl render`): `"limits"` overrides the engine's [`Limits`] (clamped to [`max_limits`]),
//! `"sample_spec"` is the API's and never reaches `compose`, and everything else is the
//! `config` argument of `compose(spec, config)`. One definition, so a bundle composes the
//! same wherever it runs.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Limits;

/// The config spec key holding limit overrides.
pub const LIMITS_KEY: &str = "limits";

/// The config spec key holding the sample spec the API composes the bundle with at apply
/// (to type-check its value flows); never handed to `compose`.
pub const SAMPLE_SPEC_KEY: &str = "sample_spec";

/// Per-kind limit overrides, from the effective config spec's `limits`. Absent fields keep
/// the engine's defaults; values above [`max_limits`] are clamped to it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Tick budget per evaluation (calls plus loop back-edges).
    pub max_ticks: Option<u64>,
    /// Starlark heap cap in bytes.
    pub max_heap_bytes: Option<usize>,
    /// Call-stack depth.
    pub max_call_stack: Option<usize>,
    /// Wall-clock budget per evaluation, in milliseconds.
    pub deadline_ms: Option<u64>,
    /// Cap on the JSON size of spec plus config.
    pub max_input_bytes: Option<usize>,
    /// Cap on the JSON size of the compose result.
    pub max_output_bytes: Option<usize>,
    /// Children per compose.
    pub max_children: Option<usize>,
    /// Edges per compose.
    pub max_edges: Option<usize>,
    /// Provider configs per compose.
    pub max_configs: Option<usize>,
    /// Decompressed bundle size.
    pub max_bundle_bytes: Option<u64>,
    /// Decompressed size of one bundle file.
    pub max_file_bytes: Option<u64>,
    /// Zip entries.
    pub max_bundle_entries: Option<usize>,
}

/// The largest limits a config may ask for.
pub fn max_limits() -> Limits {
    Limits {
        max_ticks: 100_000_000,
        max_heap_bytes: 512 << 20,
        max_call_stack: crate::MAX_CALL_STACK,
        deadline: Duration::from_secs(30),
        max_input_bytes: 16 << 20,
        max_output_bytes: 16 << 20,
        max_children: 10_000,
        max_edges: 100_000,
        max_configs: 1_000,
        max_bundle_bytes: 10 << 20,
        max_file_bytes: 4 << 20,
        max_bundle_entries: 4_096,
    }
}

impl LimitsConfig {
    /// Every field set to `limits` (how resolved limits travel to a sandbox child, where
    /// [`resolve`](Self::resolve) gives them back unchanged).
    pub fn from_limits(limits: &Limits) -> Self {
        Self {
            max_ticks: Some(limits.max_ticks),
            max_heap_bytes: Some(limits.max_heap_bytes),
            max_call_stack: Some(limits.max_call_stack),
            deadline_ms: Some(u64::try_from(limits.deadline.as_millis()).unwrap_or(u64::MAX)),
            max_input_bytes: Some(limits.max_input_bytes),
            max_output_bytes: Some(limits.max_output_bytes),
            max_children: Some(limits.max_children),
            max_edges: Some(limits.max_edges),
            max_configs: Some(limits.max_configs),
            max_bundle_bytes: Some(limits.max_bundle_bytes),
            max_file_bytes: Some(limits.max_file_bytes),
            max_bundle_entries: Some(limits.max_bundle_entries),
        }
    }

    /// The engine limits: defaults, overridden by the set fields, clamped to [`max_limits`].
    pub fn resolve(&self) -> Limits {
        let d = Limits::default();
        let m = max_limits();
        Limits {
            max_ticks: self.max_ticks.unwrap_or(d.max_ticks).min(m.max_ticks),
            max_heap_bytes: self
                .max_heap_bytes
                .unwrap_or(d.max_heap_bytes)
                .min(m.max_heap_bytes),
            max_call_stack: self
                .max_call_stack
                .unwrap_or(d.max_call_stack)
                .min(m.max_call_stack),
            deadline: self
                .deadline_ms
                .map_or(d.deadline, Duration::from_millis)
                .min(m.deadline),
            max_input_bytes: self
                .max_input_bytes
                .unwrap_or(d.max_input_bytes)
                .min(m.max_input_bytes),
            max_output_bytes: self
                .max_output_bytes
                .unwrap_or(d.max_output_bytes)
                .min(m.max_output_bytes),
            max_children: self
                .max_children
                .unwrap_or(d.max_children)
                .min(m.max_children),
            max_edges: self.max_edges.unwrap_or(d.max_edges).min(m.max_edges),
            max_configs: self.max_configs.unwrap_or(d.max_configs).min(m.max_configs),
            max_bundle_bytes: self
                .max_bundle_bytes
                .unwrap_or(d.max_bundle_bytes)
                .min(m.max_bundle_bytes),
            max_file_bytes: self
                .max_file_bytes
                .unwrap_or(d.max_file_bytes)
                .min(m.max_file_bytes),
            max_bundle_entries: self
                .max_bundle_entries
                .unwrap_or(d.max_bundle_entries)
                .min(m.max_bundle_entries),
        }
    }
}

/// An effective config spec split into the engine limits and the `config` handed to
/// `compose`.
#[derive(Debug, Clone, PartialEq)]
pub struct StarlarkConfig {
    /// Resolved limits.
    pub limits: Limits,
    /// The spec without its `limits` and `sample_spec` keys (`{}` when there is no spec).
    pub compose_config: Value,
}

impl StarlarkConfig {
    /// Splits an effective config spec; `Null` is the empty config. A spec that is not an
    /// object, or malformed `limits`, is an error naming it.
    pub fn from_value(v: &Value) -> Result<Self, String> {
        let mut map = match v {
            Value::Null => Map::new(),
            Value::Object(m) => m.clone(),
            other => {
                return Err(format!(
                    "the starlark config spec must be an object, got {other}"
                ));
            }
        };
        map.remove(SAMPLE_SPEC_KEY);
        let limits = match map.remove(LIMITS_KEY) {
            None | Some(Value::Null) => LimitsConfig::default(),
            Some(l) => LimitsConfig::deserialize(&l)
                .map_err(|e| format!("invalid starlark config: limits: {e}"))?,
        };
        Ok(Self {
            limits: limits.resolve(),
            compose_config: Value::Object(map),
        })
    }
}
