//! End to end: the real `converge` (from `CONVERGE_BIN`), the real `stdworker` serving a
//! composite kind with its starlark or cel provider, and an in-test Rust SDK worker serving
//! the leaf kinds `vpc` and `subnet`.
//!
//! Starlark: a bundle with a `load()`ed library composes a vpc and subnets with value flows;
//! the root is Ready after its children and rolls up their count; a bundle with a runtime
//! error fails the root terminally and prunes nothing; a pushed bundle changes the next
//! compose with no restart. CEL: the vpc/subnet graph composes two children, the vpc's status
//! flows into the subnet's spec, ints stay ints; a runtime error is terminal; a bad graph is a
//! 422 at the API.

mod common;

use std::time::Duration;

use common::{Converge, Stdworker, leaf_manifest, reapply_until};
use converge_sdk::{
    Condition, HandlerError, KindVersion, Outcome, Provider, ReactionRequest, Registry,
    WorkerConfig,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(60);

/// The leaf kinds: a vpc reports an id, a subnet echoes the vpc id it was given.
struct Leaf(&'static str);

impl Provider for Leaf {
    fn kind(&self) -> KindVersion {
        KindVersion::new(self.0, 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let spec = &req.resource.spec;
        let status = match self.0 {
            "vpc" => json!({"vpc_id": format!("vpc-{}", req.resource.name)}),
            _ => {
                if spec["vpc_id"].is_null() {
                    return Err(HandlerError::transient("ran before the vpc id arrived"));
                }
                json!({"vpc_id": spec["vpc_id"], "cidr": spec["cidr"]})
            }
        };
        Ok(Outcome::status(status).with_condition(Condition::ready(true, "Provisioned", "ok")))
    }
}

fn composite_manifest(kind: &str, rollup: bool) -> Value {
    let mut reactions = vec![
        json!({"name": "compose", "trigger": "specChange", "emits": ["children", "edges", "status"]}),
    ];
    if rollup {
        reactions.push(
            json!({"name": "rollup", "trigger": "childrenSettled", "emits": ["status", "conditions"]}),
        );
    }
    json!({"kind": kind, "kind_version": 1, "reactions": reactions})
}

/// Converge with the leaf kinds served in-process and `composite` registered.
async fn world(composite: &Value) -> (Converge, CancellationToken) {
    let c = Converge::start().await;
    c.apply_manifest(composite).await;
    for k in ["vpc", "subnet"] {
        c.apply_manifest(&leaf_manifest(k)).await;
    }
    let stop = CancellationToken::new();
    let mut cfg = WorkerConfig::new(c.broker.clone());
    cfg.worker_name = "leaves".into();
    tokio::spawn(converge_sdk::run_worker(
        cfg,
        Registry::new().with(Leaf("vpc")).with(Leaf("subnet")),
        stop.clone().cancelled_owned(),
    ));
    (c, stop)
}

const NET_LIB: &str = r#"
def subnet_name(root, i):
    return f"{root}-subnet-{i}"
"#;

const COMPOSE_V1: &str = r#"
load("lib/net.star", "subnet_name")

def compose(spec, config):
    vpc = child("vpc", spec["name"] + "-vpc", {"cidr": spec["cidr"], "region": config["region"]})
    subnets = [
        child("subnet", subnet_name(spec["name"], i), {"cidr": c, "vpc_id": None})
        for i, c in enumerate(spec["subnets"])
    ]
    return {
        "children": [vpc] + subnets,
        "edges": [edge("subnet", s["name"], "vpc", vpc["name"], values = {"/vpc_id": "/vpc_id"})
                  for s in subnets],
        "status": {"bundle": "v1", "subnets": len(subnets)},
    }
"#;

/// A runtime error: a missing key. Its children list would be empty (a prune-all) if the
/// error were ever mistaken for a result.
const COMPOSE_BROKEN: &str = r#"
def compose(spec, config):
    return {"children": [], "status": spec["no_such_key"]}
"#;

const COMPOSE_V2: &str = r#"
load("lib/net.star", "subnet_name")

def compose(spec, config):
    vpc = child("vpc", spec["name"] + "-vpc",
                {"cidr": spec["cidr"], "region": config["region"], "rev": 2},
                labels = {"bundle": "v2"})
    subnets = [
        child("subnet", subnet_name(spec["name"], i), {"cidr": c, "vpc_id": None})
        for i, c in enumerate(spec["subnets"])
    ]
    return {
        "children": [vpc] + subnets,
        "edges": [edge("subnet", s["name"], "vpc", vpc["name"], values = {"/vpc_id": "/vpc_id"})
                  for s in subnets],
        "status": {"bundle": "v2", "subnets": len(subnets)},
    }
"#;

fn bundle(compose: &str) -> Vec<u8> {
    converge_starlark::pack(&[("compose.star", compose), ("lib/net.star", NET_LIB)])
}

#[tokio::test(flavor = "multi_thread")]
async fn starlark_composes_fails_terminally_without_pruning_and_hot_swaps() {
    let (c, stop) = world(&composite_manifest("slnet", true)).await;
    let config = json!({"region": "eu-west", "limits": {"max_ticks": 200000, "deadline_ms": 2000}});
    c.put_config_bundle(
        "slnet-default",
        "slnet",
        true,
        config.clone(),
        &bundle(COMPOSE_V1),
    )
    .await;
    let w = Stdworker::start_env(&c.broker, &[("STDWORKER_STARLARK_KINDS", "slnet")]);

    let spec =
        json!({"name": "net1", "cidr": "10.0.0.0/16", "subnets": ["10.0.1.0/24", "10.0.2.0/24"]});
    c.apply("slnet", "net1", spec.clone()).await;
    let root = c
        .wait_resource("slnet", "net1", "root Ready", T, |v| v["phase"] == "Ready")
        .await;
    // Ready after its children: they are all Ready by now, and the rollup counted them.
    let d = &root["status"]["descendants"];
    assert_eq!(
        (d["total"].clone(), d["ready"].clone()),
        (json!(3), json!(3)),
        "{root}"
    );
    assert_eq!(d["by_kind"], json!({"subnet": 2, "vpc": 1}), "{root}");
    let vpc = c.get("vpc", "net1-vpc").await.expect("vpc child");
    assert_eq!(vpc["phase"], "Ready");
    assert_eq!(
        vpc["spec"],
        json!({"cidr": "10.0.0.0/16", "region": "eu-west"}),
        "the config (minus limits) reached compose: {vpc}"
    );
    assert_eq!(vpc["owner"], json!({"kind": "slnet", "name": "net1"}));
    for i in 0..2 {
        let s = c
            .get("subnet", &format!("net1-subnet-{i}"))
            .await
            .expect("subnet child");
        assert_eq!(s["phase"], "Ready", "{s}");
        assert_eq!(s["spec"]["vpc_id"], "vpc-net1-vpc", "value flowed: {s}");
        assert_eq!(s["status"]["vpc_id"], "vpc-net1-vpc", "{s}");
    }

    // A bundle with a runtime error: terminal, and the children stay.
    c.put_config_bundle(
        "slnet-default",
        "slnet",
        true,
        config.clone(),
        &bundle(COMPOSE_BROKEN),
    )
    .await;
    let root = reapply_until(
        &c,
        "slnet",
        "net1",
        &spec,
        "a terminal runtime error",
        |r| r["phase"] == "Failed",
    )
    .await;
    assert_eq!(root["failure_terminal"], true, "{root}");
    let msg = root["failure_message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("runtime error") && msg.contains("no_such_key"),
        "{root}"
    );
    assert!(
        msg.contains("compose.star"),
        "the location is reported: {root}"
    );
    assert!(
        c.get("vpc", "net1-vpc").await.is_some(),
        "a failed compose pruned the vpc"
    );
    for i in 0..2 {
        assert!(
            c.get("subnet", &format!("net1-subnet-{i}")).await.is_some(),
            "a failed compose pruned subnet {i}"
        );
    }

    // Push a fixed bundle: the next compose runs it, same worker process, no restart.
    let pid = w.child.id();
    c.put_config_bundle("slnet-default", "slnet", true, config, &bundle(COMPOSE_V2))
        .await;
    reapply_until(
        &c,
        "slnet",
        "net1",
        &spec,
        "a compose with bundle v2",
        |r| r["phase"] == "Ready",
    )
    .await;
    let vpc = c
        .wait_resource("vpc", "net1-vpc", "vpc at rev 2", T, |v| {
            v["spec"]["rev"] == 2 && v["phase"] == "Ready"
        })
        .await;
    assert_eq!(vpc["labels"]["bundle"], "v2", "{vpc}");
    assert_eq!(w.child.id(), pid, "the worker was not restarted");

    assert!(w.stop().await.success());
    stop.cancel();
    c.stop().await;
}

fn cel_graph() -> Value {
    json!({"resources": [
        {"id": "vpc",
         "template": {"kind": "vpc", "name": "${root.name}-vpc",
                      "spec": {"cidr": "${spec.cidr}"}}},
        {"id": "subnet",
         "template": {"kind": "subnet", "name": "${root.name}-subnet",
                      "spec": {"cidr": "${spec.subnet_cidr}", "vpc_id": "${vpc.status.vpc_id}",
                               "zones": "${spec.zones}", "region": "${vpc.spec.cidr}"}}}
    ]})
}

#[tokio::test(flavor = "multi_thread")]
async fn cel_graph_composes_with_value_flows_and_bad_graphs_are_refused() {
    let (c, stop) = world(&composite_manifest("celnet", false)).await;

    // A bad graph never gets stored: 422, every error located under /spec.
    let bad = json!({"resources": [
        {"id": "vpc", "template": {"kind": "vpc", "name": "${root.name}-vpc",
                                   "spec": {"cidr": "${spec.cidr"}}},
        {"id": "subnet", "template": {"kind": "subnet", "name": "${root.name}-subnet",
                                      "spec": {"vpc_id": "${vpc.status.vpc_id + 'x'}",
                                               "other": "${ghost.spec.x}"}}}
    ]});
    let body = json!({"name": "celnet-default", "kind": "celnet", "kind_version": 1,
                      "is_default": true, "spec": bad});
    let (s, resp) = c
        .call(reqwest::Method::POST, "providerconfigs", Some(&body))
        .await;
    assert_eq!(s, 422, "{resp}");
    let locations: Vec<&str> = resp["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["location"].as_str())
        .collect();
    for want in [
        "/spec/resources/0/template/spec/cidr",
        "/spec/resources/1/template/spec/vpc_id",
        "/spec/resources/1/template/spec/other",
    ] {
        assert!(locations.contains(&want), "{want} not in {resp}");
    }

    c.put_config("celnet-default", "celnet", true, cel_graph())
        .await;
    let w = Stdworker::start_env(&c.broker, &[("STDWORKER_CEL_KINDS", "celnet")]);
    c.apply(
        "celnet",
        "prod",
        json!({"cidr": "10.1.0.0/16", "subnet_cidr": "10.1.1.0/24", "zones": 3}),
    )
    .await;
    c.wait_resource("celnet", "prod", "root Ready", T, |v| v["phase"] == "Ready")
        .await;
    // Compose only (no rollup): the root does not wait for its children; they follow.
    let vpc = c
        .wait_resource("vpc", "prod-vpc", "vpc Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert_eq!(vpc["spec"], json!({"cidr": "10.1.0.0/16"}));
    let subnet = c
        .wait_resource("subnet", "prod-subnet", "subnet Ready", T, |v| {
            v["phase"] == "Ready"
        })
        .await;
    assert_eq!(
        subnet["spec"]["vpc_id"], "vpc-prod-vpc",
        "value flowed: {subnet}"
    );
    assert_eq!(
        subnet["spec"]["zones"],
        json!(3),
        "an int stays an int: {subnet}"
    );
    assert_eq!(
        subnet["spec"]["region"], "10.1.0.0/16",
        "sibling spec read: {subnet}"
    );
    assert_eq!(subnet["owner"], json!({"kind": "celnet", "name": "prod"}));

    // A compose-time error (the spec lacks a field the graph reads) is terminal.
    c.apply("celnet", "broken", json!({"cidr": "10.2.0.0/16"}))
        .await;
    let r = c
        .wait_resource("celnet", "broken", "Failed", T, |v| v["phase"] == "Failed")
        .await;
    assert_eq!(r["failure_terminal"], true, "{r}");
    assert!(
        r["failure_message"]
            .as_str()
            .unwrap_or_default()
            .contains("subnet"),
        "{r}"
    );
    assert!(
        c.get("vpc", "broken-vpc").await.is_none(),
        "an error creates nothing"
    );

    assert!(w.stop().await.success());
    stop.cancel();
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kind_without_a_default_bundle_is_not_served() {
    let (c, stop) = world(&composite_manifest("slidle", false)).await;
    let w = Stdworker::start_env(&c.broker, &[("STDWORKER_STARLARK_KINDS", "slidle")]);
    c.apply("slidle", "waits", json!({})).await;
    // Unready: nothing runs. Then a default with a bundle arrives and the root composes.
    let r = c.get("slidle", "waits").await.unwrap();
    assert_ne!(r["phase"], "Failed", "{r}");
    c.put_config_bundle(
        "slidle-default",
        "slidle",
        true,
        json!({}),
        &converge_starlark::pack(&[(
            "compose.star",
            "def compose(spec, config):\n    return {\"children\": [child(\"vpc\", \"idle-vpc\")]}\n",
        )]),
    )
    .await;
    c.wait_resource("slidle", "waits", "Ready once a bundle exists", T, |v| {
        v["phase"] == "Ready"
    })
    .await;
    assert!(c.get("vpc", "idle-vpc").await.is_some());
    assert!(w.stop().await.success());
    stop.cancel();
    c.stop().await;
}
