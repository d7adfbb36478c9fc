//! Per-compose cost of the netbom bundle (stdworker/tests/fixtures/netbom) at 125 children
//! (one vpc + 124 subnets with value flows), the shape of issue 6's Starlark figure:
//! `cargo run --release --example bench_starlark [runs]`. Prints mean, median and min; long
//! enough runs double as a profiling target.

use std::time::{Duration, Instant};

use converge_starlark::{Bundle, Limits, pack};
use serde_json::json;

const COMPOSE: &str = include_str!("../../../stdworker/tests/fixtures/netbom/compose.star");
const NET: &str = include_str!("../../../stdworker/tests/fixtures/netbom/lib/net.star");

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000);
    let limits = Limits::default();
    let bundle = Bundle::from_zip(
        &pack(&[("compose.star", COMPOSE), ("lib/net.star", NET)]),
        &limits,
    )
    .expect("the bundle loads");
    let subnets: Vec<_> = (0..124)
        .map(|i| json!({"name": format!("sn-{i}"), "cidr": format!("10.{}.{}.0/24", i / 256, i % 256)}))
        .collect();
    let spec = json!({"enabled": true, "prefix": "prod", "cidr": "10.0.0.0/16",
                      "region": "eu-west-1", "subnets": subnets});
    let config = json!({});
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let out = bundle.compose(&spec, &config, &limits).expect("compose");
        times.push(start.elapsed());
        assert_eq!(out.children.len(), 125);
    }
    times.sort();
    let mean = times.iter().sum::<Duration>() / runs as u32;
    println!(
        "starlark compose (netbom), 125 children + 124 edges, {runs} runs: mean {:.1} µs, median {:.1} µs, min {:.1} µs",
        mean.as_secs_f64() * 1e6,
        times[runs / 2].as_secs_f64() * 1e6,
        times[0].as_secs_f64() * 1e6
    );
}
