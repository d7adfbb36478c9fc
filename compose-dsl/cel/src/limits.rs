//! Static and per-compose limits of a CEL graph, with defaults.

/// Bounds checked when a graph compiles and when it composes.
///
/// CEL in Rust has no cost model, so evaluation is bounded indirectly: short expressions,
/// capped `forEach` fan-out, a cap on evaluations per compose and on input/output size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest expression source, in bytes. Default 4 KiB.
    pub max_expression_bytes: usize,
    /// Most resources in one graph. Default 256.
    pub max_resources: usize,
    /// Most items one resource's `forEach` may expand to. Default 1,000.
    pub max_for_each: usize,
    /// Most children one compose may produce. Default 1,000.
    pub max_children: usize,
    /// Most expression evaluations per compose. Default 100,000.
    pub max_evaluations: usize,
    /// Largest root spec, as JSON bytes. Default 1 MiB.
    pub max_input_bytes: usize,
    /// Largest output, as JSON bytes. Default 1 MiB.
    pub max_output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_expression_bytes: 4096,
            max_resources: 256,
            max_for_each: 1_000,
            max_children: 1_000,
            max_evaluations: 100_000,
            max_input_bytes: 1 << 20,
            max_output_bytes: 1 << 20,
        }
    }
}
