//! A rough figure, not a benchmark: the time to compose 100 children (run with
//! `--release -- --nocapture` for a meaningful number).

use std::time::Instant;

use converge_starlark::{Bundle, Limits, pack};
use serde_json::json;

const SRC: &str = r#"
def compose(spec, config):
    vpc = child("vpc", spec["name"] + "-vpc", {"cidr": spec["cidr"]})
    subnets = [
        child("subnet", "%s-sn-%d" % (spec["name"], i), {"index": i, "region": spec["region"], "vpc_id": None})
        for i in range(99)
    ]
    edges = [edge("subnet", s["name"], "vpc", vpc["name"], values = {"/vpc_id": "/vpc_id"}) for s in subnets]
    return {"children": [vpc] + subnets, "edges": edges}
"#;

#[test]
fn compose_100_children_figure() {
    let b = Bundle::from_zip(&pack(&[("compose.star", SRC)]), &Limits::default()).unwrap();
    let spec = json!({"name": "prod", "cidr": "10.0.0.0/16", "region": "eu"});
    let runs = 200;
    let start = Instant::now();
    for _ in 0..runs {
        let out = b.compose(&spec, &json!({}), &Limits::default()).unwrap();
        assert_eq!(out.children.len(), 100);
        assert_eq!(out.edges.len(), 99);
    }
    let per = start.elapsed() / runs;
    println!("starlark: compose of 100 children (99 edges with flows): {per:?} per compose");
}
