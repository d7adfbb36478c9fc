//! The `hello` provider run with no broker, and its shipped fixtures checked against each
//! other (the manifest is legal; the sample resource fits the spec schema).

use std::time::Duration;

use converge_proto::manifest::KindManifest;
use converge_sdk::testing;
use hello_worker::Hello;
use serde_json::{Value, json};

fn fixture(name: &str) -> Value {
    // At run time first: a target dir shared by two checkouts keeps the first one's `env!`.
    let dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    let path = format!("{dir}/{name}");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[tokio::test]
async fn greets_the_resource() {
    let mut req = testing::request("hello", json!({"greeting": "hi"}));
    req.resource.name = "world".into();
    req.generation = 4;
    let hello = Hello {
        worker: "w1".into(),
        log: None,
    };
    let out = testing::run(&hello, req).await.unwrap();
    assert_eq!(
        out.status,
        Some(
            json!({"message": "hi, world!", "observed_generation": 4, "attempt": 1, "worker": "w1"})
        )
    );
    assert_eq!(out.conditions[0].type_, "Ready");
    let out = testing::run(&Hello::default(), testing::request("hello", json!({})))
        .await
        .unwrap();
    assert_eq!(out.status.unwrap()["message"], "hello, test!");
}

#[tokio::test]
async fn fails_on_purpose() {
    let mut req = testing::request("hello", json!({"fail_attempts": 2}));
    req.attempt = 2;
    let err = testing::run(&Hello::default(), req.clone())
        .await
        .unwrap_err();
    assert!(!err.is_terminal());
    req.attempt = 3;
    assert!(testing::run(&Hello::default(), req).await.is_ok());

    let err = testing::run(
        &Hello::default(),
        testing::request("hello", json!({"fail": "terminal"})),
    )
    .await
    .unwrap_err();
    assert!(err.is_terminal());
    let err = testing::run(
        &Hello::default(),
        testing::request("hello", json!({"fail": "transient"})),
    )
    .await
    .unwrap_err();
    assert!(!err.is_terminal());
    let err = testing::run(
        &Hello::default(),
        testing::request("hello", json!({"bogus": 1})),
    )
    .await
    .unwrap_err();
    assert!(
        err.is_terminal(),
        "an unknown spec field is a terminal error"
    );
}

#[tokio::test]
async fn sleep_honours_cancellation() {
    let mut req = testing::request("hello", json!({"sleep_ms": 600_000}));
    req.deadline = Some(tokio::time::Instant::now() + Duration::from_millis(20));
    let err = testing::run(&Hello::default(), req).await.unwrap_err();
    assert!(!err.is_terminal());
    let req = testing::request("hello", json!({"sleep_ms": 600_000}));
    req.cancel.cancel();
    let err = testing::run(&Hello::default(), req).await.unwrap_err();
    assert_eq!(err.message(), "cancelled while sleeping");
}

#[test]
fn manifest_is_legal_and_the_sample_fits_it() {
    let manifest: KindManifest = serde_json::from_value(fixture("kind-hello.json")).unwrap();
    manifest.validate().unwrap();
    assert_eq!(
        (manifest.kind.as_str(), manifest.kind_version),
        ("hello", 1)
    );
    let schema = manifest.spec_schema.clone().unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let sample = fixture("hello.json");
    assert_eq!(
        (sample["kind"].as_str(), sample["kind_version"].as_i64()),
        (Some("hello"), Some(1))
    );
    assert!(validator.is_valid(&sample["spec"]));
    assert!(!validator.is_valid(&json!({"fail": "sometimes"})));
    assert!(!validator.is_valid(&json!({"sleep_ms": -1})));
    let status_schema = manifest.status_schema.clone().unwrap();
    let status = json!({"message": "hello, world!", "observed_generation": 1, "attempt": 1});
    assert!(
        jsonschema::validator_for(&status_schema)
            .unwrap()
            .is_valid(&status)
    );
}
