//! The shipped fixtures checked against each other and against the providers: the manifests
//! are legal, the sample BOM fits the classicbom schema, and composing it yields children whose
//! specs (and, after a simulated run in dependency order with value flows substituted, whose
//! statuses) fit their kinds' schemas.

use std::collections::{BTreeMap, HashMap};

use classic_worker::{Account, ClassicBom, Route, Tgw, Vpc};
use converge_proto::manifest::{Emit, KindManifest, Trigger};
use converge_sdk::{HandlerError, Outcome, Resource, Stage, Subtree, testing, trigger};
use serde_json::{Value, json};

const KINDS: [&str; 5] = ["classicbom", "account", "vpc", "tgw", "route"];

fn read(rel: &str) -> String {
    // At run time first: a target dir shared by two checkouts keeps the first one's `env!`.
    let dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    let path = format!("{dir}/{rel}");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn manifest(kind: &str) -> KindManifest {
    serde_json::from_str(&read(&format!("manifests/{kind}.json"))).unwrap()
}

fn validator(schema: Option<&Value>) -> jsonschema::Validator {
    jsonschema::validator_for(schema.expect("schema present")).unwrap()
}

fn assert_fits(v: &jsonschema::Validator, doc: &Value, what: &str) {
    let errors: Vec<String> = v.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{what} {doc}: {errors:?}");
}

#[test]
fn the_statussink_manifest_is_a_reactor_with_a_config_schema() {
    let m = manifest("statussink");
    m.validate().unwrap();
    assert!(m.is_reactor());
    let v = validator(m.config_schema.as_ref());
    assert_fits(&v, &serde_json::json!({"directory": "/tmp/sink"}), "config");
    assert!(!v.is_valid(&serde_json::json!({"url": "ftp://x"})));
}

#[test]
fn manifests_are_legal() {
    for kind in KINDS {
        let m = manifest(kind);
        m.validate().unwrap_or_else(|e| panic!("{kind}: {e:?}"));
        assert_eq!((m.kind.as_str(), m.kind_version), (kind, 1));
        for schema in [&m.spec_schema, &m.status_schema] {
            jsonschema::validator_for(schema.as_ref().unwrap())
                .unwrap_or_else(|e| panic!("{kind}: {e}"));
        }
        if kind == "classicbom" {
            let compose = m.composer_reaction().unwrap();
            assert_eq!(compose.name, "compose");
            assert_eq!(
                compose.emits,
                [Emit::Children, Emit::Edges, Emit::Status, Emit::Conditions]
            );
            let rollup = m.rollup_reaction().unwrap();
            assert_eq!(
                (rollup.name.as_str(), rollup.trigger),
                ("rollup", Trigger::ChildrenSettled)
            );
            assert_eq!(rollup.emits, [Emit::Status, Emit::Conditions]);
            assert!(m.worker_reaction().is_none());
        } else {
            let work = m.worker_reaction().unwrap();
            assert_eq!(work.name, "work");
            assert_eq!(work.emits, [Emit::Status, Emit::Conditions]);
            // Every leaf tears its simulated resource down behind a finalizer.
            let teardown = m.delete_reaction().unwrap();
            assert_eq!(teardown.emits, [Emit::Finalizer]);
            assert_eq!(teardown.finalizer, m.finalizer_name);
            assert!(m.finalizer_name.is_some());
            assert_eq!(m.reactions.len(), 2);
        }
    }
}

fn bom() -> Value {
    serde_json::from_str(&read("bom.json")).unwrap()
}

#[test]
fn the_sample_bom_fits_the_schema() {
    let bom = bom();
    assert_eq!(
        (
            bom["kind"].as_str(),
            bom["kind_version"].as_i64(),
            bom["name"].as_str()
        ),
        (Some("classicbom"), Some(1), Some("demo-bom"))
    );
    let m = manifest("classicbom");
    let v = validator(m.spec_schema.as_ref());
    assert_fits(&v, &bom["spec"], "bom.json spec");

    for bad in [
        json!({"functional_domains": [{"name": "Payments", "teams": ["a"]}], "region": "r"}),
        json!({"functional_domains": [{"name": "p", "teams": ["a", "a"]}], "region": "r"}),
        json!({"functional_domains": [{"name": "p", "teams": ["-a"]}], "region": "r"}),
        json!({"functional_domains": [{"name": "p", "teams": ["a"], "x": 1}], "region": "r"}),
        json!({"functional_domains": [], "region": "r", "extra": true}),
        json!({"functional_domains": []}),
        json!({"functional_domains": [], "region": "r", "fail": {"p-a-vpc": "sometimes"}}),
        json!({"functional_domains": [], "region": "r", "fail": {"p-a-subnet": "terminal"}}),
    ] {
        assert!(!v.is_valid(&bad), "schema should refuse {bad}");
    }
    assert!(v.is_valid(
        &json!({"functional_domains": [], "region": "r", "fail": {"p-a-vpc": "terminal"}})
    ));
}

async fn run_leaf(child: &Resource) -> Result<Outcome, HandlerError> {
    let mut req = testing::request(child.kind.clone(), child.spec.value().clone());
    req.resource.name = child.name.clone();
    match child.kind.as_str() {
        "account" => testing::run(&Account::default(), req).await,
        "vpc" => testing::run(&Vpc::default(), req).await,
        "tgw" => testing::run(&Tgw::default(), req).await,
        "route" => testing::run(&Route::default(), req).await,
        other => panic!("unexpected child kind {other}"),
    }
}

/// Composes the sample BOM, then plays the engine: runs every child once its upstreams ran,
/// substituting value flows first, and finally rolls up.
#[tokio::test]
async fn the_sample_bom_composes_runs_in_order_and_rolls_up() {
    let bom = bom();
    let schemas: HashMap<&str, (jsonschema::Validator, jsonschema::Validator)> = KINDS
        .iter()
        .map(|k| {
            let m = manifest(k);
            (
                *k,
                (
                    validator(m.spec_schema.as_ref()),
                    validator(m.status_schema.as_ref()),
                ),
            )
        })
        .collect();

    let mut req = testing::request("classicbom", bom["spec"].clone());
    req.reaction = "compose".into();
    req.stage = Stage::Compose;
    req.resource.name = "demo-bom".into();
    let out = testing::run(&ClassicBom, req).await.unwrap();
    assert_eq!(out.status, Some(json!({"teams": 6, "children": 24})));
    assert_fits(
        &schemas["classicbom"].1,
        out.status.as_ref().unwrap(),
        "compose status",
    );
    assert_eq!(out.children.len(), 24);
    for (kind, n) in [("account", 6), ("vpc", 6), ("tgw", 6), ("route", 6)] {
        assert_eq!(
            out.children.iter().filter(|c| c.kind == kind).count(),
            n,
            "{kind}"
        );
    }
    let cidrs: Vec<&str> = out
        .children
        .iter()
        .filter(|c| c.kind == "vpc")
        .map(|c| c.spec["cidr"].as_str().unwrap())
        .collect();
    assert_eq!(
        cidrs,
        [
            "10.0.0.0/16",
            "10.1.0.0/16",
            "10.2.0.0/16",
            "10.3.0.0/16",
            "10.4.0.0/16",
            "10.5.0.0/16"
        ]
    );

    let mut pending: BTreeMap<(String, String), Resource> = BTreeMap::new();
    for c in &out.children {
        assert_fits(
            &schemas[c.kind.as_str()].0,
            &c.spec,
            &format!("{}/{} spec", c.kind, c.name),
        );
        assert_eq!(c.labels["bom"], "demo-bom");
        pending.insert(
            (c.kind.clone(), c.name.clone()),
            Resource {
                kind: c.kind.clone(),
                name: c.name.clone(),
                spec: c.spec.clone().into(),
                labels: c.labels.clone(),
                ..Resource::default()
            },
        );
    }
    let mut done: BTreeMap<(String, String), Resource> = BTreeMap::new();
    while !pending.is_empty() {
        let runnable: Vec<(String, String)> = pending
            .keys()
            .filter(|key| {
                out.edges
                    .iter()
                    .filter(|e| (&e.from.kind, &e.from.name) == (&key.0, &key.1))
                    .all(|e| done.contains_key(&(e.to.kind.clone(), e.to.name.clone())))
            })
            .cloned()
            .collect();
        assert!(
            !runnable.is_empty(),
            "no child can run: a cycle or a dangling edge"
        );
        for key in runnable {
            let mut child = pending.remove(&key).unwrap();
            for e in out
                .edges
                .iter()
                .filter(|e| (&e.from.kind, &e.from.name) == (&key.0, &key.1))
            {
                let upstream = &done[&(e.to.kind.clone(), e.to.name.clone())];
                for f in &e.values {
                    let value = upstream
                        .status
                        .as_ref()
                        .unwrap()
                        .pointer(&f.source_field)
                        .unwrap()
                        .clone();
                    *child.spec.pointer_mut(&f.dependent_field).unwrap() = value;
                }
            }
            assert_fits(
                &schemas[child.kind.as_str()].0,
                &child.spec,
                &format!("{}/{} flowed spec", key.0, key.1),
            );
            let leaf_out = run_leaf(&child)
                .await
                .unwrap_or_else(|e| panic!("{key:?}: {e}"));
            let status = leaf_out.status.unwrap();
            assert_fits(
                &schemas[child.kind.as_str()].1,
                &status,
                &format!("{}/{} status", key.0, key.1),
            );
            child.status = Some(status.into());
            child.is_ready = true;
            child.phase = "Ready".into();
            done.insert(key, child);
        }
    }
    let route = &done[&("route".to_string(), "lending-risk-route".to_string())];
    let vpc = &done[&("vpc".to_string(), "lending-risk-vpc".to_string())];
    let tgw = &done[&("tgw".to_string(), "lending-risk-tgw".to_string())];
    let status = route.status.as_ref().unwrap();
    assert_eq!(status["vpc_id"], vpc.status.as_ref().unwrap()["vpc_id"]);
    assert_eq!(status["tgw_id"], tgw.status.as_ref().unwrap()["tgw_id"]);

    let mut req = testing::request("classicbom", bom["spec"].clone());
    req.reaction = "rollup".into();
    req.stage = Stage::Rollup;
    req.trigger = trigger::CHILDREN_SETTLED.into();
    req.subtree = Subtree::fixed(done.into_values().collect());
    let out = testing::run(&ClassicBom, req).await.unwrap();
    let per = json!({"children": 6, "ready": 6});
    let status = out.status.unwrap();
    assert_eq!(
        status,
        json!({"children": 24, "ready": 24, "by_kind": {"account": per, "vpc": per, "tgw": per, "route": per}})
    );
    assert_fits(&schemas["classicbom"].1, &status, "rollup status");
    assert_eq!(out.conditions[0].status, "True");
}
