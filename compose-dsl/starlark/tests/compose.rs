//! End-to-end composes through real zip bundles: outputs, loads, output validation, numbers,
//! freezing and determinism.

use converge_starlark::{Bundle, ComposeOutput, Error, Limits, pack};
use serde_json::{Value, json};

const LIB: &str = r#"
def subnet_name(root, i):
    return "%s-subnet-%d" % (root, i)
"#;

const COMPOSE: &str = r#"
load("lib/net.star", "subnet_name")

def compose(spec, config):
    vpc = child("vpc", spec["name"] + "-vpc", {"cidr": spec["cidr"]}, labels = {"tier": "net"})
    subnets = [
        child("subnet", subnet_name(spec["name"], i), {"cidr": c, "vpc_id": None}, version = 2)
        for i, c in enumerate(spec["subnets"])
    ]
    edges = [
        edge("subnet", s["name"], "vpc", vpc["name"], values = {"/vpc_id": "/vpc_id"})
        for s in subnets
    ]
    return {
        "children": [vpc] + subnets,
        "edges": edges,
        "configs": [provider_config("net-" + spec["name"], "subnet", {"region": config["region"]})],
        "status": {"subnets": len(subnets), "region": get(config, "region", "none")},
    }
"#;

fn bundle(files: &[(&str, &str)]) -> Bundle {
    Bundle::from_zip(&pack(files), &Limits::default()).expect("bundle loads")
}

fn net_bundle() -> Bundle {
    bundle(&[("compose.star", COMPOSE), ("lib/net.star", LIB)])
}

fn spec() -> Value {
    json!({"name": "prod", "cidr": "10.0.0.0/16", "subnets": ["10.0.1.0/24", "10.0.2.0/24"]})
}

#[test]
fn compose_produces_children_edges_flows_configs_and_status() {
    let out = net_bundle()
        .compose(&spec(), &json!({"region": "eu-west-1"}), &Limits::default())
        .expect("compose succeeds");
    let expected: ComposeOutput = serde_json::from_value(json!({
        "children": [
            {"kind": "vpc", "kind_version": 1, "name": "prod-vpc",
             "spec": {"cidr": "10.0.0.0/16"}, "labels": {"tier": "net"}},
            {"kind": "subnet", "kind_version": 2, "name": "prod-subnet-0",
             "spec": {"cidr": "10.0.1.0/24", "vpc_id": null}, "labels": {}},
            {"kind": "subnet", "kind_version": 2, "name": "prod-subnet-1",
             "spec": {"cidr": "10.0.2.0/24", "vpc_id": null}, "labels": {}},
        ],
        "edges": [
            {"from": {"kind": "subnet", "name": "prod-subnet-0"}, "to": {"kind": "vpc", "name": "prod-vpc"},
             "values": [{"dependent_field": "/vpc_id", "source_field": "/vpc_id"}]},
            {"from": {"kind": "subnet", "name": "prod-subnet-1"}, "to": {"kind": "vpc", "name": "prod-vpc"},
             "values": [{"dependent_field": "/vpc_id", "source_field": "/vpc_id"}]},
        ],
        "configs": [{"name": "net-prod", "kind": "subnet", "kind_version": 1, "is_default": false,
                     "spec": {"region": "eu-west-1"}}],
        "status": {"subnets": 2, "region": "eu-west-1"},
    }))
    .unwrap();
    assert_eq!(out, expected);
}

#[test]
fn plain_dicts_work_without_builtins_and_defaults_apply() {
    let b = bundle(&[(
        "compose.star",
        r#"
def compose(spec, config):
    return {"children": [{"kind": "k", "name": "a"}]}
"#,
    )]);
    let out = b
        .compose(&json!({}), &json!({}), &Limits::default())
        .unwrap();
    assert_eq!(out.children[0].kind_version, 1);
    assert_eq!(out.children[0].spec, json!({}));
    assert!(out.status.is_none());
}

#[test]
fn an_empty_dict_is_a_successful_empty_compose() {
    let b = bundle(&[(
        "compose.star",
        "def compose(spec, config):\n    return {}\n",
    )]);
    let out = b
        .compose(&json!({}), &json!({}), &Limits::default())
        .unwrap();
    assert_eq!(out, ComposeOutput::default());
}

#[test]
fn ints_and_floats_round_trip() {
    let b = bundle(&[(
        "compose.star",
        "def compose(spec, config):\n    return {\"children\": [child(\"k\", \"a\", spec)]}\n",
    )]);
    let input = json!({"n": 3, "neg": -7, "f": 1.5, "whole": 2.0, "big": 123456789012345678u64,
                       "huge": 9223372036854775807i64, "nested": [1, 2.5, {"x": 0}]});
    let out = b.compose(&input, &json!({}), &Limits::default()).unwrap();
    let spec = &out.children[0].spec;
    assert_eq!(spec["n"].as_i64(), Some(3));
    assert!(spec["n"].is_i64() || spec["n"].is_u64());
    assert_eq!(spec["neg"].as_i64(), Some(-7));
    assert_eq!(spec["f"].as_f64(), Some(1.5));
    assert!(
        spec["whole"].is_f64(),
        "2.0 stays a float: {}",
        spec["whole"]
    );
    assert_eq!(spec["big"].as_u64(), Some(123456789012345678));
    assert_eq!(spec["huge"].as_i64(), Some(i64::MAX));
    assert_eq!(
        serde_json::to_string(spec).unwrap(),
        serde_json::to_string(&input).unwrap()
    );
}

#[test]
fn output_is_deterministic_over_100_runs() {
    let b = net_bundle();
    let cfg = json!({"region": "r"});
    let first =
        serde_json::to_string(&b.compose(&spec(), &cfg, &Limits::default()).unwrap()).unwrap();
    for _ in 0..100 {
        let again = b.compose(&spec(), &cfg, &Limits::default()).unwrap();
        assert_eq!(serde_json::to_string(&again).unwrap(), first);
    }
}

#[test]
fn modules_are_frozen_once_and_reused() {
    let b = bundle(&[
        (
            "compose.star",
            r#"
load("lib/state.star", "SEEN")

def compose(spec, config):
    if spec.get("mutate"):
        SEEN.append(1)
    return {"status": {"seen": len(SEEN)}}
"#,
        ),
        ("lib/state.star", "SEEN = []\n"),
        ("lib/unused.star", "X = 1\n"),
    ]);
    assert_eq!(
        b.stats().modules_frozen,
        2,
        "only modules reachable from compose.star"
    );
    for _ in 0..5 {
        let out = b
            .compose(&json!({}), &json!({}), &Limits::default())
            .unwrap();
        assert_eq!(out.status, Some(json!({"seen": 0})));
    }
    // Module state is frozen: a compose cannot leak state into the next one.
    let err = b
        .compose(&json!({"mutate": true}), &json!({}), &Limits::default())
        .unwrap_err();
    assert!(matches!(err, Error::Runtime { .. }), "{err:?}");
    let stats = b.stats();
    assert_eq!(stats.modules_frozen, 2, "no module was evaluated again");
    assert_eq!(stats.composes, 6);
}

#[test]
fn runtime_errors_are_typed_with_location() {
    let b = bundle(&[(
        "compose.star",
        "def compose(spec, config):\n    x = 1\n    return spec[\"missing\"]\n",
    )]);
    match b
        .compose(&json!({}), &json!({}), &Limits::default())
        .unwrap_err()
    {
        Error::Runtime { message, location } => {
            assert!(message.contains("missing"), "{message}");
            let location = location.expect("a location");
            assert!(location.starts_with("compose.star:3:"), "{location}");
        }
        other => panic!("expected a runtime error, got {other:?}"),
    }
    let b = bundle(&[(
        "compose.star",
        "def compose(spec, config):\n    fail(\"no region given\")\n",
    )]);
    let err = b
        .compose(&json!({}), &json!({}), &Limits::default())
        .unwrap_err();
    assert!(
        matches!(&err, Error::Runtime { message, location: Some(l) }
            if message.contains("no region given") && l.starts_with("compose.star:2:")),
        "{err:?}"
    );
}

#[test]
fn invalid_outputs_are_rejected() {
    let cases = [
        "None",
        "[]",
        "{\"children\": [{\"kind\": \"k\"}]}",
        "{\"unknown\": 1}",
        "{\"children\": [child(\"k\", \"a\"), child(\"k\", \"a\")]}",
        "{\"children\": [child(\"k\", \"a\")], \"edges\": [edge(\"k\", \"a\", \"k\", \"zz\")]}",
        "{\"children\": [child(\"k\", \"a\"), child(\"k\", \"b\")], \"edges\": [edge(\"k\", \"a\", \"k\", \"b\"), edge(\"k\", \"b\", \"k\", \"a\")]}",
        "{\"children\": [child(\"k\", \"a\"), child(\"k\", \"b\")], \"edges\": [edge(\"k\", \"a\", \"k\", \"b\", values = {\"x\": \"/y\"})]}",
        "{\"children\": [child(\"k\", \"a\", version = 0)]}",
        "{\"children\": [child(\"k\", \"a\", labels = {\"n\": 1})]}",
    ];
    for body in cases {
        let src = format!("def compose(spec, config):\n    return {body}\n");
        let b = bundle(&[("compose.star", &src)]);
        let err = b
            .compose(&json!({}), &json!({}), &Limits::default())
            .unwrap_err();
        assert!(matches!(err, Error::InvalidOutput(_)), "{body}: {err:?}");
    }
}

#[test]
fn bundle_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Bundle>();
    let b = std::sync::Arc::new(net_bundle());
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let b = b.clone();
            std::thread::spawn(move || {
                b.compose(&spec(), &json!({"region": "r"}), &Limits::default())
                    .unwrap()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().children.len(), 3);
    }
}

#[test]
fn a_three_parameter_compose_receives_the_root_and_a_two_parameter_one_does_not() {
    let with_root = bundle(&[(
        "compose.star",
        r#"
def compose(spec, config, root):
    return {"children": [child("leaf", root["name"] + "-0")], "status": {"kind": root["kind"]}}
"#,
    )]);
    let root = json!({"name": "comp", "kind": "conf-composite", "kind_version": 1, "labels": {}});
    let out = with_root
        .compose_root(&root, &json!({}), &json!({}), &Limits::default())
        .expect("compose with root");
    assert_eq!(out.children[0].name, "comp-0");
    assert_eq!(out.status, Some(json!({"kind": "conf-composite"})));

    // The classic signature is called with two arguments whatever the caller has.
    let out = net_bundle()
        .compose_root(
            &root,
            &json!({"name": "n", "cidr": "10.0.0.0/16", "subnets": []}),
            &json!({"region": "eu"}),
            &Limits::default(),
        )
        .expect("two-parameter compose");
    assert_eq!(out.children.len(), 1);
}
