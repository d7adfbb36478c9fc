//! Benchmark harness (being written).

fn main() {}
