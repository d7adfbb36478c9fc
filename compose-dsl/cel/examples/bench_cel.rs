//! Per-compose cost of a 125-child graph (one vpc + 124 subnets with value flows), the
//! shape of issue 6's CEL figure: `cargo run --release --example bench_cel [runs]`.
//! Prints mean, median and min; long enough runs double as a profiling target.

use std::time::{Duration, Instant};

use converge_cel::{Graph, Limits};
use serde_json::json;

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000);
    let graph = Graph::compile(
        &json!({"resources": [
            {"id": "vpc", "when": "${spec.enabled}",
             "template": {"kind": "vpc", "name": "${spec.prefix}-vpc",
                          "spec": {"cidr": "${spec.cidr}", "region": "${spec.region}"}}},
            {"id": "subnet", "forEach": {"s": "${spec.subnets}"},
             "template": {"kind": "subnet", "name": "${spec.prefix}-${s.name}",
                          "spec": {"cidr": "${s.cidr}", "region": "${spec.region}",
                                   "vpc_id": "${vpc.status.vpc_id}"}}},
        ]}),
        Limits::default(),
    )
    .expect("the graph compiles");
    let subnets: Vec<_> = (0..124)
        .map(|i| json!({"name": format!("sn-{i}"), "cidr": format!("10.{}.{}.0/24", i / 256, i % 256)}))
        .collect();
    let spec = json!({"enabled": true, "prefix": "prod", "cidr": "10.0.0.0/16",
                      "region": "eu-west-1", "subnets": subnets});
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let out = graph.compose("prod", &spec).expect("compose");
        times.push(start.elapsed());
        assert_eq!(out.children.len(), 125);
    }
    times.sort();
    let mean = times.iter().sum::<Duration>() / runs as u32;
    println!(
        "cel compose, 125 children + 124 edges, {runs} runs: mean {:.1} µs, median {:.1} µs, min {:.1} µs",
        mean.as_secs_f64() * 1e6,
        times[runs / 2].as_secs_f64() * 1e6,
        times[0].as_secs_f64() * 1e6
    );
}
