//! The `classicbom` composer and rollup run with no broker: the exact children, labels,
//! edges and value flows of a 2×2 BOM, determinism, the spec checks, and the rollup summary.

use classic_worker::ClassicBom;
use converge_sdk::{
    ChildSpec, DepEdge, Outcome, ReactionRequest, Resource, ResourceRef, Stage, Subtree, ValueFlow,
    testing, trigger,
};
use serde_json::{Value, json};

fn compose_request(name: &str, spec: Value) -> ReactionRequest {
    let mut req = testing::request("classicbom", spec);
    req.reaction = "compose".into();
    req.stage = Stage::Compose;
    req.resource.name = name.into();
    req
}

fn rollup_request(descendants: Vec<Resource>) -> ReactionRequest {
    let mut req = testing::request("classicbom", json!({}));
    req.reaction = "rollup".into();
    req.stage = Stage::Rollup;
    req.trigger = trigger::CHILDREN_SETTLED.into();
    req.subtree = Subtree::fixed(descendants);
    req
}

async fn compose(spec: Value) -> Outcome {
    testing::run(&ClassicBom, compose_request("bom-test", spec))
        .await
        .unwrap()
}

fn two_by_two() -> Value {
    json!({
        "functional_domains": [
            {"name": "payments", "teams": ["alpha", "beta"]},
            {"name": "lending", "teams": ["core", "risk"]}
        ],
        "region": "us-east-1"
    })
}

/// The specification restated: four leaves per team, in a fixed order, with labels.
fn expected_children(fd: &str, team: &str, index: u32) -> Vec<ChildSpec> {
    let child = |kind: &str, spec: Value| {
        ChildSpec::new(kind, 1, format!("{fd}-{team}-{kind}"), spec)
            .with_label("fd", fd)
            .with_label("team", team)
            .with_label("bom", "bom-test")
    };
    vec![
        child(
            "account",
            json!({"domain": fd, "team": team, "region": "us-east-1"}),
        ),
        child(
            "vpc",
            json!({"account_id": null, "cidr": format!("10.{index}.0.0/16"), "region": "us-east-1"}),
        ),
        child(
            "tgw",
            json!({"vpc_id": null, "asn": 64512 + index, "region": "us-east-1"}),
        ),
        child(
            "route",
            json!({"tgw_id": null, "vpc_id": null, "destination": "10.0.0.0/8"}),
        ),
    ]
}

fn expected_edges(fd: &str, team: &str) -> Vec<DepEdge> {
    let r = |kind: &str| ResourceRef::new(kind, format!("{fd}-{team}-{kind}"));
    vec![
        DepEdge::new(r("vpc"), r("account"))
            .with_value(ValueFlow::new("/account_id", "/account_id")),
        DepEdge::new(r("tgw"), r("vpc")).with_value(ValueFlow::new("/vpc_id", "/vpc_id")),
        DepEdge::new(r("route"), r("tgw")).with_value(ValueFlow::new("/tgw_id", "/tgw_id")),
        DepEdge::new(r("route"), r("vpc")).with_value(ValueFlow::new("/vpc_id", "/vpc_id")),
    ]
}

#[tokio::test]
async fn a_two_by_two_bom_composes_four_wired_leaves_per_team() {
    let out = compose(two_by_two()).await;
    let teams = [
        ("payments", "alpha"),
        ("payments", "beta"),
        ("lending", "core"),
        ("lending", "risk"),
    ];
    let mut children = Vec::new();
    let mut edges = Vec::new();
    for (i, (fd, team)) in (0u32..).zip(teams) {
        children.extend(expected_children(fd, team, i));
        edges.extend(expected_edges(fd, team));
    }
    assert_eq!(out.children.len(), 16);
    assert_eq!(out.children, children);
    assert_eq!(out.edges.len(), 16);
    assert_eq!(out.edges, edges);
    assert_eq!(out.status, Some(json!({"teams": 4, "children": 16})));
    assert_eq!(out.conditions.len(), 1);
    assert_eq!(
        (
            out.conditions[0].type_.as_str(),
            out.conditions[0].status.as_str()
        ),
        ("Composed", "True")
    );
    assert!(
        out.conditions.iter().all(|c| c.type_ != "Ready"),
        "compose must not claim readiness; the rollup does"
    );
    assert!(out.configs.is_empty());
}

#[tokio::test]
async fn compose_is_deterministic() {
    let a = compose(two_by_two()).await;
    let b = compose(two_by_two()).await;
    assert_eq!(a, b);
    let names: Vec<&str> = a.children.iter().map(|c| c.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), names.len(), "child names are unique");
}

#[tokio::test]
async fn the_fail_map_reaches_exactly_the_named_child() {
    let mut spec = two_by_two();
    spec["fail"] = json!({"payments-beta-vpc": "terminal", "lending-core-route": "transient"});
    let out = compose(spec).await;
    for c in &out.children {
        let expected = match c.name.as_str() {
            "payments-beta-vpc" => json!("terminal"),
            "lending-core-route" => json!("transient"),
            _ => Value::Null,
        };
        assert_eq!(
            c.spec.get("fail").cloned().unwrap_or(Value::Null),
            expected,
            "{}",
            c.name
        );
    }
}

#[tokio::test]
async fn a_bom_that_cannot_be_expanded_fails_terminally() {
    let cases = [
        (
            json!({"functional_domains": [{"name": "a", "teams": ["x", "x"]}], "region": "r"}),
            "another team already has",
        ),
        (
            json!({"functional_domains": [{"name": "a-b", "teams": ["c"]}, {"name": "a", "teams": ["b-c"]}], "region": "r"}),
            "a-b-c-*",
        ),
        (
            json!({"functional_domains": [{"name": "Pay", "teams": ["x"]}], "region": "r"}),
            "functional domain name \"Pay\"",
        ),
        (
            json!({"functional_domains": [{"name": "a", "teams": ["x/y"]}], "region": "r"}),
            "team name",
        ),
        (
            json!({"functional_domains": [{"name": "a", "teams": ["x"]}], "region": ""}),
            "region",
        ),
        (
            json!({"functional_domains": [{"name": "a", "teams": ["x"]}], "region": "r", "fail": {"a-y-vpc": "terminal"}}),
            "a-y-vpc",
        ),
        (
            json!({"functional_domains": [], "region": "r", "surprise": 1}),
            "invalid spec",
        ),
    ];
    for (spec, needle) in cases {
        let err = testing::run(&ClassicBom, compose_request("b", spec.clone()))
            .await
            .unwrap_err();
        assert!(err.is_terminal(), "{spec}");
        assert!(err.message().contains(needle), "{spec}: {}", err.message());
    }
    let many: Vec<String> = (0..257).map(|i| format!("t{i}")).collect();
    let spec = json!({"functional_domains": [{"name": "big", "teams": many}], "region": "r"});
    let err = testing::run(&ClassicBom, compose_request("b", spec))
        .await
        .unwrap_err();
    assert!(err.is_terminal() && err.message().contains("at most 256 teams"));
}

#[tokio::test]
async fn an_empty_bom_composes_no_children() {
    let out =
        compose(json!({"functional_domains": [{"name": "a", "teams": []}], "region": "r"})).await;
    assert!(out.children.is_empty() && out.edges.is_empty());
    assert_eq!(out.status, Some(json!({"teams": 0, "children": 0})));
}

fn leaf(kind: &str, name: &str, ready: bool, phase: &str) -> Resource {
    Resource {
        kind: kind.into(),
        name: name.into(),
        is_ready: ready,
        phase: phase.into(),
        ..Resource::default()
    }
}

#[tokio::test]
async fn rollup_counts_ready_children_per_kind() {
    let all: Vec<Resource> = ["account", "vpc", "tgw", "route"]
        .iter()
        .flat_map(|k| ["a", "b"].map(|t| leaf(k, &format!("p-{t}-{k}"), true, "Ready")))
        .collect();
    let out = testing::run(&ClassicBom, rollup_request(all.clone()))
        .await
        .unwrap();
    let per = json!({"children": 2, "ready": 2});
    assert_eq!(
        out.status,
        Some(
            json!({"children": 8, "ready": 8, "by_kind": {"account": per, "vpc": per, "tgw": per, "route": per}})
        )
    );
    assert_eq!(out.conditions.len(), 1);
    let c = &out.conditions[0];
    assert_eq!(
        (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
        ("Ready", "True", "AllChildrenReady")
    );
    assert!(out.children.is_empty() && out.edges.is_empty());
}

#[tokio::test]
async fn rollup_names_the_children_that_are_not_ready() {
    let mut d = vec![
        leaf("account", "p-a-account", true, "Ready"),
        leaf("vpc", "p-a-vpc", false, "Failed"),
        leaf("tgw", "p-a-tgw", false, "Reconciling"),
        leaf("route", "p-a-route", false, "Reconciling"),
    ];
    let out = testing::run(&ClassicBom, rollup_request(d.clone()))
        .await
        .unwrap();
    let status = out.status.unwrap();
    assert_eq!(
        (status["children"].clone(), status["ready"].clone()),
        (json!(4), json!(1))
    );
    assert_eq!(status["by_kind"]["vpc"], json!({"children": 1, "ready": 0}));
    let c = &out.conditions[0];
    assert_eq!(
        (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
        ("Ready", "False", "ChildrenNotReady")
    );
    assert_eq!(
        c.message,
        "1/4 children ready; not ready: route/p-a-route (Reconciling), tgw/p-a-tgw (Reconciling), vpc/p-a-vpc (Failed)"
    );

    for i in 0..6 {
        d.push(leaf("vpc", &format!("q-{i}-vpc"), false, "Degraded"));
    }
    let out = testing::run(&ClassicBom, rollup_request(d)).await.unwrap();
    assert!(
        out.conditions[0].message.ends_with(" and 4 more"),
        "{}",
        out.conditions[0].message
    );
}

#[tokio::test]
async fn rollup_of_no_children_is_ready() {
    let out = testing::run(&ClassicBom, rollup_request(Vec::new()))
        .await
        .unwrap();
    assert_eq!(
        out.status,
        Some(json!({"children": 0, "ready": 0, "by_kind": {}}))
    );
    assert_eq!(out.conditions[0].status, "True");
}

#[tokio::test]
async fn other_stages_are_refused() {
    let err = testing::run(&ClassicBom, testing::request("classicbom", two_by_two()))
        .await
        .unwrap_err();
    assert!(err.is_terminal());
}
