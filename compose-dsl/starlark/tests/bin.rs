//! `converge-starlark-compose`, run as the control plane runs it: JSON in on stdin, the
//! compose result (or the engine's error) out on stdout.

use std::{
    io::Write,
    process::{Command, Stdio},
};

use base64::Engine;
use converge_starlark::pack;
use serde_json::{Value, json};

const COMPOSE: &str = r#"
def compose(spec, config, root):
    vpc = child("vpc", root["name"] + "-vpc", {"cidr": spec["cidr"]})
    sub = child("subnet", root["name"] + "-sub", {"vpc_id": None}, version = 2)
    return {
        "children": [vpc, sub],
        "edges": [edge("subnet", sub["name"], "vpc", vpc["name"], values = {"/vpc_id": "/id"})],
        "status": {"region": config["region"]},
    }
"#;

fn run(input: &Value) -> (i32, Value) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_converge-starlark-compose"))
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let code = out.status.code().unwrap();
    let answer = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (code, answer)
}

fn b64(files: &[(&str, &str)]) -> String {
    base64::engine::general_purpose::STANDARD.encode(pack(files))
}

#[test]
fn composes_with_spec_config_and_root() {
    let (code, answer) = run(&json!({
        "bundle": b64(&[("compose.star", COMPOSE)]),
        "spec": {"cidr": "10.0.0.0/16"},
        "config": {"region": "eu"},
        "root": {"name": "demo"},
    }));
    assert_eq!(code, 0);
    let out = &answer["output"];
    assert_eq!(out["children"][1]["kind_version"], 2);
    assert_eq!(out["children"][0]["name"], "demo-vpc");
    assert_eq!(
        out["edges"][0]["values"],
        json!([{"dependent_field": "/vpc_id", "source_field": "/id"}])
    );
    assert_eq!(out["status"], json!({"region": "eu"}));
}

#[test]
fn a_failing_compose_is_an_error_answer_and_bad_input_exits_2() {
    let (code, answer) = run(&json!({
        "bundle": b64(&[("compose.star", "def compose(spec, config):\n    fail(\"no \" + spec[\"x\"])\n")]),
        "spec": {"x": "cidr"},
    }));
    assert_eq!(code, 0);
    let e = answer["error"].as_str().unwrap();
    assert!(e.contains("no cidr"), "{e}");

    let (code, answer) = run(&json!({"bundle": b64(&[("other.star", "")]), "spec": {}}));
    assert_eq!(code, 0);
    assert!(answer["error"].as_str().unwrap().contains("compose.star"));

    let (code, _) = run(&json!({"spec": {}}));
    assert_eq!(code, 2);
}

#[test]
fn a_cel_graph_composes_with_the_same_answer() {
    let graph = json!({"resources": [
        {"id": "vpc", "template": {"kind": "vpc", "name": "${root.name}-vpc",
                                   "spec": {"cidr": "${spec.cidr}"}}},
        {"id": "sub", "template": {"kind": "subnet", "name": "${root.name}-sub",
                                   "spec": {"vpc_id": "${vpc.status.id}"}}}
    ]});
    let (code, answer) = run(&json!({
        "cel_graph": graph,
        "spec": {"cidr": "10.0.0.0/16"},
        "root": {"name": "demo"},
    }));
    assert_eq!(code, 0, "{answer}");
    let out = &answer["output"];
    assert_eq!(out["children"][0]["name"], "demo-vpc");
    assert_eq!(out["children"][0]["spec"], json!({"cidr": "10.0.0.0/16"}));
    assert_eq!(
        out["edges"][0]["values"],
        json!([{"dependent_field": "/vpc_id", "source_field": "/id"}])
    );

    // A graph that does not compile: an error answer naming the problem.
    let (code, answer) = run(&json!({"cel_graph": {"resources": [{"id": "x"}]}, "spec": {}}));
    assert_eq!(code, 0);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("does not compile"),
        "{answer}"
    );
    // A graph and a bundle: input the binary refuses.
    let (code, _) = run(&json!({"cel_graph": graph, "bundle": b64(&[]), "spec": {}}));
    assert_eq!(code, 2);
}
