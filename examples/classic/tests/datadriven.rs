//! examples/datadriven against this crate's composer: for the same BOMs, the Starlark bundle
//! (`starlark/compose.star`) and the CEL graphs (`cel/celbom-…`, `cel/celteam-…`) yield exactly
//! the leaves and edges `classicbom`'s Rust composer does — same kinds, names, specs (value
//! flows' fields `null`), labels, edges and flows, whatever the order. The CEL version composes
//! one `celteam` per team and each team's leaves under it, so its leaves are gathered from both
//! levels; it has no `fail` injection, so its BOMs carry none.
//!
//! The engines run as they do for stdworker: CEL through `converge-cel` (linked here, as in the
//! control plane), Starlark through `converge-starlark-compose`, the binary converge itself runs
//! at provider-config apply (the `starlark` crate must not be linked into this workspace; see
//! compose-dsl/Cargo.toml). That binary is looked up beside this test's target dir, or at
//! `$CONVERGE_STARLARK_BIN`; a missing one fails the test, saying how to build it.

use std::{
    collections::BTreeSet,
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use classic_worker::ClassicBom;
use converge_sdk::{Outcome, Stage, testing};
use serde_json::{Value, json};

fn example(rel: &str) -> PathBuf {
    // At run time first: a target dir shared by two checkouts keeps the first one's `env!`.
    let dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    Path::new(&dir).join("../datadriven").join(rel)
}

fn read_json(rel: &str) -> Value {
    let path = example(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A leaf or edge set in a canonical form: order carries no meaning for the control plane.
#[derive(Debug, PartialEq)]
struct Composed {
    children: BTreeSet<String>,
    edges: BTreeSet<String>,
}

fn child_key(kind: &str, version: i64, name: &str, spec: &Value, labels: &Value) -> String {
    json!({"kind": kind, "kind_version": version, "name": name, "spec": spec, "labels": labels})
        .to_string()
}

fn edge_key(from: &Value, to: &Value, values: &Value) -> String {
    let mut flows: Vec<String> = values
        .as_array()
        .into_iter()
        .flatten()
        .map(Value::to_string)
        .collect();
    flows.sort();
    json!({"from": from, "to": to, "values": flows}).to_string()
}

/// A compose result in the wire shape both DSL engines print: `{children, edges, ...}`.
fn canonical(out: &Value) -> Composed {
    let children = out["children"]
        .as_array()
        .expect("children")
        .iter()
        .map(|c| {
            child_key(
                c["kind"].as_str().unwrap(),
                c["kind_version"].as_i64().unwrap_or(1),
                c["name"].as_str().unwrap(),
                &c["spec"],
                &c["labels"],
            )
        })
        .collect();
    let edges = out["edges"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| edge_key(&e["from"], &e["to"], &e["values"]))
        .collect();
    Composed { children, edges }
}

async fn classic(name: &str, spec: &Value) -> Composed {
    let mut req = testing::request("classicbom", spec.clone());
    req.reaction = "compose".into();
    req.stage = Stage::Compose;
    req.resource.name = name.into();
    let out: Outcome = testing::run(&ClassicBom, req)
        .await
        .expect("classic compose");
    let children = out
        .children
        .iter()
        .map(|c| {
            child_key(
                &c.kind,
                i64::from(c.kind_version),
                &c.name,
                &c.spec,
                &serde_json::to_value(&c.labels).unwrap(),
            )
        })
        .collect();
    let edges = out
        .edges
        .iter()
        .map(|e| {
            let flows: Vec<Value> = e
                .values
                .iter()
                .map(|v| json!({"dependent_field": v.dependent_field, "source_field": v.source_field}))
                .collect();
            edge_key(
                &json!({"kind": e.from.kind, "name": e.from.name}),
                &json!({"kind": e.to.kind, "name": e.to.name}),
                &Value::from(flows),
            )
        })
        .collect();
    Composed { children, edges }
}

fn starlark_bin() -> PathBuf {
    if let Ok(p) = std::env::var("CONVERGE_STARLARK_BIN") {
        return p.into();
    }
    // target/debug/deps/<this test> -> target/debug/converge-starlark-compose
    let exe = std::env::current_exe().expect("current exe");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("converge-starlark-compose");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build --locked --manifest-path compose-dsl/Cargo.toml \
         -p converge-starlark --bin converge-starlark-compose` (scripts/test.sh does), or set \
         CONVERGE_STARLARK_BIN",
        bin.display()
    );
    bin
}

/// The bundle as a provider config carries it (base64 zip), made by the example's own tool.
fn bundle() -> String {
    let out = Command::new("python3")
        .arg(example("bundle.py"))
        .arg(example("starlark-providerconfig.json"))
        .arg(example("starlark"))
        .output()
        .expect("python3 examples/datadriven/bundle.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config: Value = serde_json::from_slice(&out.stdout).unwrap();
    config["data"].as_str().expect("data").to_owned()
}

fn starlark(bundle: &str, name: &str, spec: &Value) -> Composed {
    let input = json!({"bundle": bundle, "spec": spec, "config": {},
        "root": {"name": name, "kind": "starbom", "kind_version": 1, "labels": {}}});
    let mut child = Command::new(starlark_bin())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn converge-starlark-compose");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "converge-starlark-compose: {:?}",
        out.status
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        answer.get("error").is_none(),
        "starlark: {}",
        answer["error"]
    );
    canonical(&answer["output"])
}

fn graph(kind: &str) -> converge_cel::Graph {
    let config = read_json(&format!("cel/{kind}-providerconfig.json"));
    converge_cel::Graph::compile(&config["spec"], converge_cel::Limits::default())
        .unwrap_or_else(|e| panic!("{kind}'s graph does not compile: {e:#?}"))
}

/// The CEL BOM's leaves: its celteam children, each composed by the celteam graph.
fn cel(name: &str, spec: &Value) -> Composed {
    let teams = graph("celbom").compose(name, spec).expect("celbom compose");
    assert!(teams.edges.is_empty(), "teams are independent");
    let team_graph = graph("celteam");
    let mut all = Composed {
        children: BTreeSet::new(),
        edges: BTreeSet::new(),
    };
    for team in &teams.children {
        assert_eq!(team.kind, "celteam");
        assert_eq!(team.labels.get("bom").map(String::as_str), Some(name));
        let leaves = team_graph
            .compose(&team.name, &team.spec)
            .expect("celteam compose");
        let leaves = canonical(&serde_json::to_value(&leaves).unwrap());
        all.children.extend(leaves.children);
        all.edges.extend(leaves.edges);
    }
    all
}

#[tokio::test]
async fn the_starlark_bundle_composes_what_the_rust_composer_does() {
    let bundle = bundle();
    let mut spec = read_json("star-bom.json")["spec"].clone();
    let want = classic("star-bom", &spec).await;
    assert_eq!(want.children.len(), 24);
    assert_eq!(want.edges.len(), 24);
    assert_eq!(starlark(&bundle, "star-bom", &spec), want);
    // With failures injected, and a BOM of another shape.
    spec["fail"] = json!({"payments-beta-vpc": "terminal", "lending-core-route": "transient"});
    assert_eq!(
        starlark(&bundle, "star-bom", &spec),
        classic("star-bom", &spec).await
    );
    let wide = json!({"region": "ap-south-1", "functional_domains": [
        {"name": "a", "teams": (0..40).map(|i| format!("t{i}")).collect::<Vec<_>>()},
        {"name": "b", "teams": []},
        {"name": "c", "teams": ["x"]}
    ]});
    assert_eq!(
        starlark(&bundle, "wide", &wide),
        classic("wide", &wide).await
    );
}

#[tokio::test]
async fn the_cel_graphs_compose_what_the_rust_composer_does() {
    for spec in [
        read_json("cel-bom.json")["spec"].clone(),
        read_json("star-bom.json")["spec"].clone(),
        json!({"region": "ap-south-1", "functional_domains": [
            {"name": "a", "teams": (0..40).map(|i| format!("t{i}")).collect::<Vec<_>>()},
            {"name": "b", "teams": []},
            {"name": "c", "teams": ["x"]}
        ]}),
    ] {
        let want = classic("cel-bom", &spec).await;
        assert!(!want.children.is_empty());
        assert_eq!(cel("cel-bom", &spec), want, "spec {spec}");
    }
}
