//! A rough figure, not a benchmark: the time to compose 100 children (run with
//! `--release -- --nocapture` for a meaningful number).

use std::time::Instant;

use converge_cel::{Graph, Limits};
use serde_json::json;

#[test]
fn compose_100_children_figure() {
    let g = Graph::compile(
        &json!({"resources": [
            {"id": "vpc", "template": {"kind": "vpc", "name": "${root.name}-vpc", "spec": {"cidr": "${spec.cidr}"}}},
            {"id": "subnet", "forEach": {"i": "${spec.subnets}"},
             "template": {"kind": "subnet", "name": "${root.name}-sn-${i}",
                          "spec": {"index": "${i}", "region": "${spec.region}", "vpc_id": "${vpc.status.vpc_id}"}}},
        ]}),
        Limits::default(),
    )
    .unwrap();
    let spec =
        json!({"cidr": "10.0.0.0/16", "region": "eu", "subnets": (0..99).collect::<Vec<_>>()});
    let runs = 200;
    let start = Instant::now();
    for _ in 0..runs {
        let out = g.compose("prod", &spec).unwrap();
        assert_eq!(out.children.len(), 100);
        assert_eq!(out.edges.len(), 99);
    }
    let per = start.elapsed() / runs;
    println!("cel: compose of 100 children (99 edges with flows): {per:?} per compose");
}
