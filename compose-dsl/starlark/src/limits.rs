//! Per-bundle and per-compose limits, with the defaults of the design (plugins.md §6.2).

use std::time::Duration;

/// Bounds applied when a bundle is loaded and when `compose` runs.
///
/// The same struct serves both: bundle loading uses the `bundle_*` fields plus the evaluation
/// limits (module top-levels are evaluated too), a compose uses the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Tick budget: one tick is one function call or one loop back-edge. Default 1,000,000.
    pub max_ticks: u64,
    /// Starlark heap cap in bytes (best effort, checked periodically and at the end).
    /// Default 64 MiB.
    pub max_heap_bytes: usize,
    /// Starlark call-stack depth. Default 50; clamped to [`MAX_CALL_STACK`].
    pub max_call_stack: usize,
    /// Wall-clock budget, checked cooperatively every ~1000 ticks. Default 1 s.
    pub deadline: Duration,
    /// Cap on the JSON size of spec plus config. Default 1 MiB.
    pub max_input_bytes: usize,
    /// Cap on the JSON size of the compose result. Default 1 MiB.
    pub max_output_bytes: usize,
    /// Cap on children per compose. Default 1,000.
    pub max_children: usize,
    /// Cap on edges per compose. Default 10,000.
    pub max_edges: usize,
    /// Cap on provider configs per compose. Default 100.
    pub max_configs: usize,
    /// Cap on the decompressed size of the whole bundle. Default 4 MiB.
    pub max_bundle_bytes: u64,
    /// Cap on the decompressed size of one bundle file. Default 1 MiB.
    pub max_file_bytes: u64,
    /// Cap on the number of zip entries (directories included). Default 256.
    pub max_bundle_entries: usize,
}

/// The largest call-stack depth accepted: each Starlark frame also uses native stack.
pub const MAX_CALL_STACK: usize = 200;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_ticks: 1_000_000,
            max_heap_bytes: 64 << 20,
            max_call_stack: 50,
            deadline: Duration::from_secs(1),
            max_input_bytes: 1 << 20,
            max_output_bytes: 1 << 20,
            max_children: 1_000,
            max_edges: 10_000,
            max_configs: 100,
            max_bundle_bytes: 4 << 20,
            max_file_bytes: 1 << 20,
            max_bundle_entries: 256,
        }
    }
}
