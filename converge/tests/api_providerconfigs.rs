//! Provider configs against the real `converge`: validation against the kind's
//! config_schema, one default per kind version, offset-paged filtered lists, bundles, the
//! resource reference check, delete guards — and, with an in-process Rust SDK worker, the
//! default pushed to a connected stream on edit and a per-resource override riding its task.

mod common;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use base64::Engine;
use common::{Converge, wait_for};
use converge_sdk::{
    HandlerError, KindVersion, Outcome, Provider, ProviderConfig, ReactionRequest, Registry,
    WorkerConfig,
};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(30);

fn manifest() -> Value {
    json!({"kind": "cfgd", "kind_version": 1,
           "config_schema": {"type": "object", "properties": {
               "region": {"type": "string"}, "replicas": {"type": "integer", "minimum": 1}},
               "additionalProperties": false},
           "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]})
}

/// Echoes its effective config; remembers every default pushed to it.
struct Echo {
    pushed: Arc<Mutex<Vec<ProviderConfig>>>,
}

impl Provider for Echo {
    fn kind(&self) -> KindVersion {
        KindVersion::new("cfgd", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        Ok(Outcome::status(json!({
            "config": req.effective_config(),
            "bundle": String::from_utf8_lossy(req.effective_bundle()),
        })))
    }

    fn on_config(&self, cfg: ProviderConfig) {
        self.pushed.lock().unwrap().push(cfg);
    }
}

fn config(name: &str, default: bool, spec: Value) -> Value {
    json!({"name": name, "kind": "cfgd", "kind_version": 1, "is_default": default, "spec": spec})
}

#[tokio::test(flavor = "multi_thread")]
async fn configs_are_validated_listed_guarded_and_reach_workers() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&manifest()).await;
    let pc = |body: Value| c.call(Method::POST, "providerconfigs", Some(body));

    // Validation.
    let (s, body) = pc(config("bad", false, json!({"replicas": 0}))).await;
    assert_eq!(s, 422, "{body}");
    assert_eq!(body["errors"][0]["location"], "/spec/replicas", "{body}");
    let (s, _) = pc(json!({"name": "x", "kind": "nope", "kind_version": 1})).await;
    assert_eq!(s, 422);
    let (s, _) = pc(json!({"name": "x", "kind": "cfgd", "kind_version": 1, "data": "%%%"})).await;
    assert_eq!(s, 422);

    // One default per kind version.
    let (s, body) = pc(config("base", true, json!({"region": "eu"}))).await;
    assert_eq!(s, 201, "{body}");
    assert_eq!(body["is_default"], true);
    let (s, body) = pc(config("other", true, json!({}))).await;
    assert_eq!(s, 409, "{body}");
    let bundle = base64::engine::general_purpose::STANDARD.encode(b"override-bundle");
    let mut over = config("big", false, json!({"replicas": 3}));
    over["data"] = json!(bundle);
    let (s, body) = pc(over).await;
    assert_eq!((s, &body["data_size"]), (201, &json!(15)), "{body}");
    let (s, got) = c.call(Method::GET, "providerconfigs/big", None).await;
    assert_eq!((s, &got["data"]), (200, &json!(bundle)));

    // Lists: filters and offset pages.
    let (_, l) = c
        .call(Method::GET, "providerconfigs?default=true", None)
        .await;
    assert_eq!(l["total"], 1);
    assert_eq!(l["items"][0]["name"], "base");
    let (_, l) = c
        .call(
            Method::GET,
            "providerconfigs?kind=cfgd&limit=1&offset=1",
            None,
        )
        .await;
    assert_eq!(
        (l["total"].clone(), l["items"][0]["name"].clone()),
        (json!(2), json!("big"))
    );
    let (s, _) = c.call(Method::GET, "providerconfigs?limit=0", None).await;
    assert_eq!(s, 400);

    // A resource's reference must exist and configure its kind.
    let apply = |name: &str, r: Option<&str>| json!({"kind": "cfgd", "kind_version": 1, "name": name, "spec": {}, "provider_config_ref": r});
    let (s, _, body) = c.apply(&apply("r0", Some("missing"))).await;
    assert_eq!(s, 422, "{body}");

    // A worker: primed with the default, then pushed the edit; the override rides the task.
    let pushed = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    let cfg = WorkerConfig::new(c.broker.clone());
    tokio::spawn(converge_sdk::run_worker(
        cfg,
        Registry::new().with(Echo {
            pushed: pushed.clone(),
        }),
        stop.clone().cancelled_owned(),
    ));
    let (s, _, body) = c.apply(&apply("plain", None)).await;
    assert_eq!(s, 201, "{body}");
    let (s, _, body) = c.apply(&apply("tuned", Some("big"))).await;
    assert_eq!(s, 201, "{body}");
    let plain = c
        .wait_resource("cfgd", "plain", "plain Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert_eq!(
        plain["status"],
        json!({"config": {"region": "eu"}, "bundle": ""})
    );
    let tuned = c
        .wait_resource("cfgd", "tuned", "tuned Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert_eq!(
        tuned["status"],
        json!({"config": {"region": "eu", "replicas": 3}, "bundle": "override-bundle"})
    );
    let (s, body) = pc(config("base", true, json!({"region": "us"}))).await;
    assert_eq!(s, 200, "{body}");
    wait_for(T, "the edited default pushed to the worker", || async {
        pushed
            .lock()
            .unwrap()
            .iter()
            .any(|p| p.spec == Some(json!({"region": "us"})))
            .then_some(())
    })
    .await;

    // Guards: in use, then free.
    let (s, body) = c.call(Method::DELETE, "providerconfigs/big", None).await;
    assert_eq!(s, 409, "{body}");
    let (s, _, _) = c.apply(&apply("tuned", None)).await;
    assert_eq!(s, 200);
    let (s, _) = c.call(Method::DELETE, "providerconfigs/big", None).await;
    assert_eq!(s, 204);
    let (s, _) = c.call(Method::GET, "providerconfigs/big", None).await;
    assert_eq!(s, 404);
    stop.cancel();
}

/// `MAX_BUNDLE_BYTES` bounds a bundle, decoded: one byte over is a 422 at `/data` naming the
/// setting, the limit itself is stored whole.
#[tokio::test(flavor = "multi_thread")]
async fn a_bundle_over_max_bundle_bytes_is_refused_naming_the_setting() {
    let c = Converge::start(&[("MAX_BUNDLE_BYTES", "2048")]).await;
    c.apply_manifest(&manifest()).await;
    let with = |n: usize| {
        let mut body = config(&format!("b{n}"), false, json!({}));
        body["data"] = json!(base64::engine::general_purpose::STANDARD.encode(vec![7u8; n]));
        body
    };
    let (s, body) = c
        .call(Method::POST, "providerconfigs", Some(with(2049)))
        .await;
    assert_eq!(s, 422, "{body}");
    assert_eq!(body["errors"][0]["location"], "/data", "{body}");
    let message = body["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("2049") && message.contains("MAX_BUNDLE_BYTES"),
        "{body}"
    );
    let (s, body) = c
        .call(Method::POST, "providerconfigs", Some(with(2048)))
        .await;
    assert_eq!((s, &body["data_size"]), (201, &json!(2048)), "{body}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cel_graph_spec_must_compile_with_every_error_located() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&json!({"kind": "celnet", "kind_version": 1, "reactions": [
        {"name": "compose", "trigger": "specChange", "emits": ["children", "edges", "status"]}]}))
        .await;
    let pc = |name: &str, spec: Value| {
        c.call(
            Method::POST,
            "providerconfigs",
            Some(json!({"name": name, "kind": "celnet", "kind_version": 1, "is_default": true, "spec": spec})),
        )
    };

    // Three problems in two resources, all reported, each at its pointer under /spec.
    let bad = json!({"resources": [
        {"id": "vpc", "template": {"kind": "vpc", "name": "${root.name}-vpc",
                                   "spec": {"cidr": "${spec.cidr +}"}}},
        {"id": "subnet", "template": {"kind": "subnet", "name": "${root.name}-${nope.name}",
                                      "spec": {"vpc_id": "${vpc.status.vpc_id + 'x'}"}}},
    ]});
    let (s, body) = pc("celnet-bad", bad).await;
    assert_eq!(s, 422, "{body}");
    let locations: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["location"].as_str().unwrap())
        .collect();
    for want in [
        "/spec/resources/0/template/spec/cidr",
        "/spec/resources/1/template/name",
        "/spec/resources/1/template/spec/vpc_id",
    ] {
        assert!(locations.contains(&want), "{want} missing from {body}");
    }
    let (s, _) = c
        .call(Method::GET, "providerconfigs/celnet-bad", None)
        .await;
    assert_eq!(s, 404, "a rejected config is not stored");

    // A cycle is rejected too; a good graph is stored; a spec without `resources` is not a
    // graph and is not compiled.
    let cycle = json!({"resources": [
        {"id": "a", "template": {"kind": "x", "name": "a", "spec": {"v": "${b.spec.v}"}}},
        {"id": "b", "template": {"kind": "x", "name": "b", "spec": {"v": "${a.spec.v}"}}},
    ]});
    let (s, body) = pc("celnet-cycle", cycle).await;
    assert_eq!(s, 422, "{body}");
    assert!(
        body["errors"][0]["location"]
            .as_str()
            .unwrap()
            .starts_with("/spec/resources"),
        "{body}"
    );
    let good = json!({"resources": [
        {"id": "vpc", "template": {"kind": "vpc", "name": "${root.name}-vpc",
                                   "spec": {"cidr": "${spec.cidr}"}}},
        {"id": "subnet", "template": {"kind": "subnet", "name": "${root.name}-subnet",
                                      "spec": {"vpc_id": "${vpc.status.vpc_id}"}}},
    ]});
    let (s, body) = pc("celnet", good).await;
    assert_eq!(s, 201, "{body}");
    let (s, body) = pc("celnet", json!({"anything": "${not cel"})).await;
    assert_eq!(s, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cel_graph_flow_must_type_check_against_the_kinds_it_joins() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&json!({"kind": "celnet", "kind_version": 1, "reactions": [
        {"name": "compose", "trigger": "specChange", "emits": ["children", "edges", "status"]}]}))
        .await;
    apply_flow_kinds(&c).await;
    let pc = |spec: Value| {
        c.call(
            Method::POST,
            "providerconfigs",
            Some(json!({"name": "net", "kind": "celnet", "kind_version": 1, "is_default": true, "spec": spec})),
        )
    };
    let graph = |subnet_spec: Value| {
        json!({"resources": [
            {"id": "vpc", "template": {"kind": "vpc", "name": "${root.name}-vpc", "spec": {}}},
            {"id": "subnet", "template": {"kind": "subnet", "name": "${root.name}-subnet",
                                          "spec": subnet_spec}},
        ]})
    };

    // A string status field into an integer spec field: one 422 naming both ends.
    let (s, body) = pc(graph(json!({"vpc_id": "${vpc.status.vpc_id}",
                                     "count": "${vpc.status.vpc_id}"})))
    .await;
    assert_eq!(s, 422, "{body}");
    let errors = body["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{body}");
    assert_eq!(
        errors[0]["location"], "/spec/resources/1/template/spec/count",
        "{body}"
    );
    let msg = errors[0]["message"].as_str().unwrap();
    for want in [
        "vpc.status/vpc_id",
        "kind vpc v1",
        "subnet.spec/count",
        "kind subnet v1",
        "string",
        "integer",
    ] {
        assert!(msg.contains(want), "{want} missing from {msg}");
    }

    // A status pointer the upstream's schema cannot have.
    let (s, body) = pc(graph(json!({"vpc_id": "${vpc.status.vpcid}"}))).await;
    assert_eq!(s, 422, "{body}");
    let msg = body["errors"][0]["message"].as_str().unwrap();
    assert!(
        msg.contains("status_schema of vpc v1 has no /vpcid"),
        "{msg}"
    );
    let (s, _) = c.call(Method::GET, "providerconfigs/net", None).await;
    assert_eq!(s, 404, "a refused graph is not stored");

    // Correct flows (an integer into a number included) are accepted without warnings.
    let (s, body) = pc(graph(json!({"vpc_id": "${vpc.status.vpc_id}",
                                     "size": "${vpc.status.prefix_len}",
                                     "count": "${vpc.status.prefix_len}"})))
    .await;
    assert_eq!(s, 201, "{body}");
    assert!(body.get("warnings").is_none(), "{body}");

    // A flow into a kind not registered yet is accepted with a warning naming it.
    let (s, body) = pc(json!({"resources": [
        {"id": "vpc", "template": {"kind": "vpc", "name": "v", "spec": {}}},
        {"id": "db", "template": {"kind": "rds", "name": "d",
                                  "spec": {"vpc": "${vpc.status.vpc_id}"}}},
    ]}))
    .await;
    assert_eq!(s, 200, "{body}");
    let warning = body["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("kind rds version 1 is not registered"),
        "{body}"
    );
}

/// Composes a vpc and one dependent whose kind and flow the sample spec chooses, or fails
/// when the sample says so; the config's `region` lands in the status.
const FLOW_BUNDLE: &str = r#"
def compose(spec, config):
    if get(spec, "fail", False):
        fail("the sample says no")
    vpc = child("vpc", "v", {})
    dep = child(spec["dep_kind"], "d", {})
    return {
        "children": [vpc, dep],
        "edges": [edge(spec["dep_kind"], "d", "vpc", "v", values = {spec["dst"]: spec["src"]})],
        "status": {"region": config["region"]},
    }
"#;

/// The flow kinds of the CEL test: a vpc whose status is closed, a subnet with typed fields.
async fn apply_flow_kinds(c: &Converge) {
    c.apply_manifest(&json!({"kind": "vpc", "kind_version": 1,
        "status_schema": {"type": "object", "additionalProperties": false, "properties": {
            "vpc_id": {"type": "string"}, "prefix_len": {"type": "integer"}}},
        "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]}))
        .await;
    c.apply_manifest(&json!({"kind": "subnet", "kind_version": 1,
        "spec_schema": {"type": "object", "properties": {
            "vpc_id": {"type": "string"}, "size": {"type": "number"}, "count": {"type": "integer"}}},
        "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]}))
        .await;
}

fn starnet_manifest() -> Value {
    json!({"kind": "starnet", "kind_version": 1, "provider": "starlark",
           "spec_schema": {"type": "object", "properties": {"dep_kind": {"type": "string"}}},
           "reactions": [{"name": "compose", "trigger": "specChange",
                          "emits": ["children", "edges", "status"]}]})
}

fn starlark_config(sample: Value) -> Value {
    json!({"name": "starnet", "kind": "starnet", "kind_version": 1, "is_default": true,
           "spec": {"region": "eu", "limits": {"max_ticks": 100000}, "sample_spec": sample},
           "data": base64::engine::general_purpose::STANDARD
               .encode(common::stored_zip(&[("compose.star", FLOW_BUNDLE)]))})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_starlark_sample_compose_must_type_check_against_the_kinds_it_joins() {
    // converge finds converge-starlark-compose beside itself (scripts/test.sh builds it).
    common::sibling_bin("converge-starlark-compose");
    let c = Converge::start(&[]).await;
    c.apply_manifest(&starnet_manifest()).await;
    apply_flow_kinds(&c).await;
    let pc = |sample: Value| {
        c.call(
            Method::POST,
            "providerconfigs",
            Some(starlark_config(sample)),
        )
    };
    let flow = |dep: &str, src: &str, dst: &str| json!({"dep_kind": dep, "src": src, "dst": dst});

    // A string status field into an integer spec field: one 422 naming both ends.
    let (s, body) = pc(flow("subnet", "/vpc_id", "/count")).await;
    assert_eq!(s, 422, "{body}");
    let errors = body["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{body}");
    assert_eq!(errors[0]["location"], "/spec/sample_spec", "{body}");
    let msg = errors[0]["message"].as_str().unwrap();
    for want in [
        "v.status/vpc_id",
        "kind vpc v1",
        "d.spec/count",
        "kind subnet v1",
        "string",
        "integer",
    ] {
        assert!(msg.contains(want), "{want} missing from {msg}");
    }

    // A status pointer the upstream's schema cannot have.
    let (s, body) = pc(flow("subnet", "/vpcid", "/vpc_id")).await;
    assert_eq!(s, 422, "{body}");
    let msg = body["errors"][0]["message"].as_str().unwrap();
    assert!(
        msg.contains("status_schema of vpc v1 has no /vpcid"),
        "{msg}"
    );
    let (s, _) = c.call(Method::GET, "providerconfigs/starnet", None).await;
    assert_eq!(s, 404, "a refused config is not stored");

    // A bundle failing on the sample: 422 at the sample, with the engine's message.
    let (s, body) = pc(json!({"fail": true})).await;
    assert_eq!(s, 422, "{body}");
    assert_eq!(body["errors"][0]["location"], "/spec/sample_spec", "{body}");
    let msg = body["errors"][0]["message"].as_str().unwrap();
    assert!(msg.contains("the sample says no"), "{msg}");

    // A sample that is not a spec of the kind.
    let (s, body) = pc(json!({"dep_kind": 7})).await;
    assert_eq!(s, 422, "{body}");
    assert_eq!(
        body["errors"][0]["location"], "/spec/sample_spec/dep_kind",
        "{body}"
    );

    // Correct flows (an integer into a number included) are accepted without warnings.
    let (s, body) = pc(flow("subnet", "/prefix_len", "/size")).await;
    assert_eq!(s, 201, "{body}");
    assert!(body.get("warnings").is_none(), "{body}");
    assert_eq!(
        body["spec"]["sample_spec"]["dst"], "/size",
        "the sample is stored"
    );

    // A flow into a kind not registered yet is accepted with a warning naming it.
    let (s, body) = pc(flow("rds", "/vpc_id", "/vpc")).await;
    assert_eq!(s, 200, "{body}");
    let warning = body["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("kind rds version 1 is not registered"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_compose_binary_a_sample_is_accepted_with_a_warning() {
    let c = Converge::start(&[(
        "CONVERGE_STARLARK_BIN",
        "/nonexistent/converge-starlark-compose",
    )])
    .await;
    c.apply_manifest(&starnet_manifest()).await;
    apply_flow_kinds(&c).await;
    let bad = json!({"dep_kind": "subnet", "src": "/vpc_id", "dst": "/count"});
    let (s, body) = c
        .call(Method::POST, "providerconfigs", Some(starlark_config(bad)))
        .await;
    assert_eq!(s, 201, "{body}");
    let warning = body["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("not checked") && warning.contains("CONVERGE_STARLARK_BIN"),
        "{body}"
    );
}
