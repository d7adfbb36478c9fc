//! The four leaves run with no broker: deterministic ids and echoed inputs in status, a Ready
//! condition, the fail switch, the "waiting for <field>" guard on missing flowed inputs,
//! latency that honours cancellation, and the worker's registry and environment.

use std::time::Duration;

use classic_worker::{Account, Route, Tgw, Vpc, latency_from, registry};
use converge_sdk::{HandlerError, KindVersion, Outcome, Provider, Stage, testing};
use serde_json::{Value, json};

async fn run<P: Provider>(
    p: &P,
    kind: &str,
    name: &str,
    spec: Value,
) -> Result<Outcome, HandlerError> {
    let mut req = testing::request(kind, spec);
    req.resource.name = name.into();
    testing::run(p, req).await
}

fn id_of(status: &Value, field: &str, prefix: &str) -> String {
    let id = status[field].as_str().unwrap().to_string();
    let hex = id
        .strip_prefix(&format!("{prefix}-"))
        .unwrap_or_else(|| panic!("{id} lacks {prefix}-"));
    assert_eq!(hex.len(), 12, "{id}");
    assert!(hex.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    id
}

fn assert_ready(out: &Outcome) {
    assert_eq!(out.conditions.len(), 1);
    let c = &out.conditions[0];
    assert_eq!(
        (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
        ("Ready", "True", "Provisioned")
    );
}

#[tokio::test]
async fn each_leaf_reports_a_deterministic_id_and_echoes_its_inputs() {
    let account_spec = json!({"domain": "payments", "team": "alpha", "region": "us-east-1"});
    let out = run(
        &Account::default(),
        "account",
        "payments-alpha-account",
        account_spec.clone(),
    )
    .await
    .unwrap();
    assert_ready(&out);
    let status = out.status.unwrap();
    let acct = id_of(&status, "account_id", "acct");
    assert_eq!(
        status,
        json!({"account_id": acct, "domain": "payments", "team": "alpha", "region": "us-east-1"})
    );
    let again = run(
        &Account::default(),
        "account",
        "payments-alpha-account",
        account_spec,
    )
    .await
    .unwrap();
    assert_eq!(
        again.status.unwrap()["account_id"],
        acct,
        "same inputs, same id"
    );
    let other = run(
        &Account::default(),
        "account",
        "payments-beta-account",
        json!({"domain": "payments", "team": "beta", "region": "us-east-1"}),
    )
    .await
    .unwrap();
    assert_ne!(
        other.status.unwrap()["account_id"],
        acct,
        "another team, another id"
    );

    let out = run(
        &Vpc::default(),
        "vpc",
        "payments-alpha-vpc",
        json!({"account_id": acct, "cidr": "10.0.0.0/16", "region": "us-east-1"}),
    )
    .await
    .unwrap();
    assert_ready(&out);
    let status = out.status.unwrap();
    let vpc = id_of(&status, "vpc_id", "vpc");
    assert_eq!(
        status,
        json!({"vpc_id": vpc, "account_id": acct, "cidr": "10.0.0.0/16", "region": "us-east-1"})
    );

    let out = run(
        &Tgw::default(),
        "tgw",
        "payments-alpha-tgw",
        json!({"vpc_id": vpc, "asn": 64512, "region": "us-east-1"}),
    )
    .await
    .unwrap();
    assert_ready(&out);
    let status = out.status.unwrap();
    let tgw = id_of(&status, "tgw_id", "tgw");
    assert_eq!(
        status,
        json!({"tgw_id": tgw, "vpc_id": vpc, "asn": 64512, "region": "us-east-1"})
    );

    let out = run(
        &Route::default(),
        "route",
        "payments-alpha-route",
        json!({"tgw_id": tgw, "vpc_id": vpc, "destination": "10.0.0.0/8"}),
    )
    .await
    .unwrap();
    assert_ready(&out);
    let status = out.status.unwrap();
    let route = id_of(&status, "route_id", "route");
    assert_eq!(
        status,
        json!({"route_id": route, "tgw_id": tgw, "vpc_id": vpc, "destination": "10.0.0.0/8"})
    );
}

#[tokio::test]
async fn a_missing_flowed_input_is_a_transient_wait() {
    let cases: [(&str, Value, &str); 5] = [
        (
            "vpc",
            json!({"account_id": null, "cidr": "10.0.0.0/16", "region": "r"}),
            "waiting for account_id",
        ),
        (
            "vpc",
            json!({"cidr": "10.0.0.0/16", "region": "r"}),
            "waiting for account_id",
        ),
        (
            "tgw",
            json!({"vpc_id": null, "asn": 64512, "region": "r"}),
            "waiting for vpc_id",
        ),
        (
            "route",
            json!({"tgw_id": null, "vpc_id": "vpc-1", "destination": "10.0.0.0/8"}),
            "waiting for tgw_id",
        ),
        (
            "route",
            json!({"tgw_id": "tgw-1", "vpc_id": null, "destination": "10.0.0.0/8"}),
            "waiting for vpc_id",
        ),
    ];
    for (kind, spec, msg) in cases {
        let err = match kind {
            "vpc" => run(&Vpc::default(), kind, "x", spec.clone()).await,
            "tgw" => run(&Tgw::default(), kind, "x", spec.clone()).await,
            _ => run(&Route::default(), kind, "x", spec.clone()).await,
        }
        .unwrap_err();
        assert!(!err.is_terminal(), "{kind} {spec}");
        assert_eq!(err.message(), msg, "{kind} {spec}");
    }
}

#[tokio::test]
async fn the_fail_switch_fails_on_purpose() {
    for (mode, terminal) in [("terminal", true), ("transient", false)] {
        let err = run(
            &Account::default(),
            "account",
            "x",
            json!({"domain": "d", "team": "t", "region": "r", "fail": mode}),
        )
        .await
        .unwrap_err();
        assert_eq!(err.is_terminal(), terminal, "{mode}");
        assert!(err.message().contains(mode), "{}", err.message());
        let err = run(
            &Route::default(),
            "route",
            "x",
            json!({"tgw_id": "tgw-1", "vpc_id": "vpc-1", "destination": "10.0.0.0/8", "fail": mode}),
        )
        .await
        .unwrap_err();
        assert_eq!(err.is_terminal(), terminal, "{mode}");
    }
    // The switch wins even while a flowed input is still missing.
    let err = run(
        &Vpc::default(),
        "vpc",
        "x",
        json!({"account_id": null, "cidr": "10.0.0.0/16", "region": "r", "fail": "terminal"}),
    )
    .await
    .unwrap_err();
    assert!(err.is_terminal());
}

#[tokio::test]
async fn a_spec_that_does_not_fit_is_terminal() {
    for (kind, spec) in [
        (
            "account",
            json!({"domain": "d", "team": "t", "region": "r", "bogus": 1}),
        ),
        ("account", json!({"domain": "d", "team": "t"})),
        ("tgw", json!({"vpc_id": "vpc-1", "asn": -1, "region": "r"})),
        (
            "vpc",
            json!({"account_id": "a", "cidr": "10.0.0.0/16", "region": "r", "fail": "sometimes"}),
        ),
    ] {
        let err = match kind {
            "account" => run(&Account::default(), kind, "x", spec.clone()).await,
            "tgw" => run(&Tgw::default(), kind, "x", spec.clone()).await,
            _ => run(&Vpc::default(), kind, "x", spec.clone()).await,
        }
        .unwrap_err();
        assert!(err.is_terminal(), "{kind} {spec}");
        assert!(
            err.message().starts_with("invalid spec"),
            "{}",
            err.message()
        );
    }
}

#[tokio::test]
async fn leaves_serve_only_the_work_stage() {
    let mut req = testing::request(
        "account",
        json!({"domain": "d", "team": "t", "region": "r"}),
    );
    req.stage = Stage::Rollup;
    let err = testing::run(&Account::default(), req).await.unwrap_err();
    assert!(err.is_terminal());
}

#[tokio::test(start_paused = true)]
async fn latency_is_simulated_and_honours_cancellation() {
    let vpc = Vpc {
        latency: Duration::from_secs(5),
    };
    let spec = json!({"account_id": "acct-1", "cidr": "10.0.0.0/16", "region": "r"});
    let start = tokio::time::Instant::now();
    run(&vpc, "vpc", "x", spec.clone()).await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(5));

    let mut req = testing::request("vpc", spec);
    req.deadline = Some(tokio::time::Instant::now() + Duration::from_secs(1));
    let err = testing::run(&vpc, req).await.unwrap_err();
    assert!(!err.is_terminal());
}

#[test]
fn the_registry_serves_the_six_kinds() {
    let kinds = registry(Duration::ZERO).kinds();
    let expected: Vec<KindVersion> = ["classicbom", "account", "vpc", "tgw", "route", "statussink"]
        .iter()
        .map(|k| KindVersion::new(*k, 1))
        .collect();
    assert_eq!(kinds, expected);
}

#[test]
fn latency_comes_from_the_environment_value() {
    assert_eq!(latency_from(None).unwrap(), Duration::ZERO);
    assert_eq!(latency_from(Some("")).unwrap(), Duration::ZERO);
    assert_eq!(
        latency_from(Some("250")).unwrap(),
        Duration::from_millis(250)
    );
    let err = latency_from(Some("fast")).unwrap_err();
    assert_eq!(err.var(), "CLASSIC_LATENCY_MS");
}

#[tokio::test]
async fn statussink_writes_the_status_once_per_generation_and_waits_for_a_destination() {
    use classic_worker::StatusSink;
    use converge_sdk::{Provider, ProviderConfig, Stage};

    let sink = StatusSink::default();
    assert!(!sink.ready(), "no destination yet");
    let mut req = testing::request("statussink", serde_json::json!({}));
    req.stage = Stage::React;
    req.resource.kind = "classicbom".into();
    req.resource.name = "bom".into();
    req.resource.generation = 3;
    req.resource.status = Some(serde_json::json!({"ready": 4}).into());
    req.dedup_token = "id:synced:3:b".into();
    let err = testing::run(&sink, req.clone()).await.unwrap_err();
    assert!(!err.is_terminal(), "waiting for a destination is transient");

    // A directory that does not exist yet (two levels deep) is created by the first delivery.
    let top = std::env::temp_dir().join(format!("statussink-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&top);
    let dir = top.join("deliveries");
    sink.on_config(ProviderConfig {
        spec: Some(serde_json::json!({"directory": dir})),
        bundle: Default::default(),
    });
    assert!(sink.ready());
    testing::run(&sink, req.clone()).await.unwrap();
    testing::run(&sink, req).await.unwrap();
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(files.len(), 1, "a redelivery overwrites");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("bom-3.json")).unwrap()).unwrap();
    assert_eq!(doc["status"], serde_json::json!({"ready": 4}));
    assert_eq!(doc["dedup_token"], "id:synced:3:b");
    std::fs::remove_dir_all(top).unwrap();
}
