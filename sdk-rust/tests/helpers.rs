//! The SDK's pure helpers: effective-config merging, request/outcome helpers, and the
//! `testing` module that runs a provider with no broker.

use converge_sdk::{
    Condition, HandlerError, KindVersion, Outcome, Provider, ProviderConfig, ReactionRequest,
    Registry, effective_bundle, effective_config, pb, testing,
};
use serde::Deserialize;
use serde_json::{Value, json};

#[test]
fn effective_config_deep_merges_with_the_override_winning() {
    let def = json!({"region": "eu", "limits": {"cpu": 1, "mem": 2}, "tags": ["a"]});
    let over = json!({"limits": {"cpu": 4}, "tags": ["b", "c"], "extra": true});
    assert_eq!(
        effective_config(Some(&def), Some(&over)),
        json!({"region": "eu", "limits": {"cpu": 4, "mem": 2}, "tags": ["b", "c"], "extra": true})
    );
    assert_eq!(effective_config(Some(&def), None), def);
    assert_eq!(effective_config(None, Some(&over)), over);
    assert_eq!(effective_config(None, None), Value::Null);
    assert_eq!(
        effective_config(Some(&def), Some(&json!("flat"))),
        json!("flat")
    );
    assert_eq!(effective_bundle(b"default", b""), b"default");
    assert_eq!(effective_bundle(b"default", b"override"), b"override");
}

/// One decoding rule in every SDK: a key the typed spec does not know is ignored (serde's
/// default; a spec type must not say `deny_unknown_fields`), so a kind adding an optional
/// field never breaks a deployed worker.
#[test]
fn unknown_spec_keys_are_ignored() {
    #[derive(Debug, Deserialize, PartialEq)]
    struct Spec {
        size: i64,
        #[serde(default)]
        tier: String,
    }
    let req = testing::request("k", json!({"size": 3, "added_later": {"x": 1}}));
    assert_eq!(
        req.spec::<Spec>().unwrap(),
        Spec {
            size: 3,
            tier: String::new()
        }
    );
    // What the typed spec needs is still checked.
    let missing = testing::request("k", json!({"tier": "gold", "added_later": true}));
    assert!(missing.spec::<Spec>().unwrap_err().is_terminal());
}

#[test]
fn request_helpers() {
    #[derive(Deserialize)]
    struct Spec {
        n: i64,
    }
    let mut req = testing::request("hello", json!({"n": 3}));
    assert_eq!(req.spec::<Spec>().unwrap().n, 3);
    req.config = ProviderConfig {
        spec: Some(json!({"a": {"b": 1}})),
        bundle: b"d".to_vec().into(),
    };
    req.config_override = Some(json!({"a": {"c": 2}}));
    assert_eq!(req.effective_config(), json!({"a": {"b": 1, "c": 2}}));
    assert_eq!(req.effective_bundle(), b"d");
    let bad = testing::request("hello", json!({"n": "three"}));
    let err = bad.spec::<Spec>().err().expect("bad spec");
    assert!(err.is_terminal(), "a spec that does not decode is terminal");
    assert!(
        HandlerError::transient("x").to_string() == "x"
            && !HandlerError::transient("x").is_terminal()
    );
}

struct Echo;

impl Provider for Echo {
    fn kind(&self) -> KindVersion {
        KindVersion::new("echo", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        match req.resource.spec.get("fail").and_then(Value::as_str) {
            Some("terminal") => Err(HandlerError::terminal("nope")),
            Some("sleep") => {
                req.cancel.cancelled().await;
                Err(HandlerError::transient("cancelled"))
            }
            _ => Ok(Outcome::status(
                json!({"name": req.resource.name, "config": req.effective_config()}),
            )
            .with_condition(Condition::ready(true, "Echoed", ""))),
        }
    }
}

#[tokio::test]
async fn testing_run_calls_the_provider_without_a_broker() {
    let out = testing::run(&Echo, testing::request("echo", json!({})))
        .await
        .unwrap();
    assert_eq!(out.status, Some(json!({"name": "test", "config": null})));
    assert_eq!(out.conditions, [Condition::ready(true, "Echoed", "")]);
    let err = testing::run(&Echo, testing::request("echo", json!({"fail": "terminal"})))
        .await
        .unwrap_err();
    assert!(err.is_terminal());
    let mut req = testing::request("echo", json!({"fail": "sleep"}));
    req.deadline = Some(tokio::time::Instant::now() + std::time::Duration::from_millis(20));
    let cancel = req.cancel.clone();
    let err = testing::run(&Echo, req).await.unwrap_err();
    assert_eq!(
        (err.message(), err.is_terminal()),
        ("deadline exceeded", false)
    );
    assert!(cancel.is_cancelled());
}

#[tokio::test]
async fn testing_execute_task_runs_the_wire_path() {
    let registry = Registry::new().with(Echo);
    let task = pb::StageTask {
        stage: pb::Stage::Work as i32,
        kind: "echo".into(),
        kind_version: 1,
        reaction: "work".into(),
        lease_token: "l".into(),
        claim_epoch: 3,
        provider_config: br#"{"b":2}"#.to_vec(),
        request: Some(pb::stage_task::Request::WorkReq(pb::WorkRequest {
            resource: Some(pb::Resource {
                name: "r".into(),
                spec: converge_sdk::Bytes::from_static(b"{}"),
                ..Default::default()
            }),
            status: Vec::new(),
        })),
        ..Default::default()
    };
    let default = ProviderConfig {
        spec: Some(json!({"a": 1})),
        bundle: Default::default(),
    };
    let c = testing::execute_task(&registry, task.clone(), default.clone()).await;
    assert_eq!(
        (
            c.lease_token.as_str(),
            c.claim_epoch,
            c.error_message.as_str()
        ),
        ("l", 3, "")
    );
    let status: Value = serde_json::from_slice(&c.status).unwrap();
    assert_eq!(status, json!({"name": "r", "config": {"a": 1, "b": 2}}));

    let mut unknown = task;
    unknown.kind = "nobody".into();
    let c = testing::execute_task(&registry, unknown, default).await;
    assert!(c.terminal && c.error_message.contains("no provider"));
}
