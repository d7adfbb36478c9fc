//! The host against a real toolchain-built guest: `tests/fixtures/conformance-guest.wasm`,
//! built from `guests/rust` by `guests/build-rust.sh` (wit-bindgen, Rust std on
//! wasm32-wasip2). Checks every kind the guest serves exactly as `guests/README.md` states
//! it, the failure classes a real guest produces (handler errors, a panic as a trap), real
//! sleeping through WASI against the deadline, and what the sandbox lets std see.

mod common;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use converge_wasm_host::{
    HandlerFailure, HostConfig, Limits, LoadedComponent, LogLevel, TaskReport, WasmHost, wit,
};
use serde_json::{Value, json};

/// The committed fixture (rebuild with `guests/build-rust.sh`).
const GUEST: &[u8] = include_bytes!("fixtures/conformance-guest.wasm");

/// One host and one compiled guest for the whole file: compiling the guest is the slow part.
fn guest() -> &'static Arc<LoadedComponent> {
    static G: OnceLock<(WasmHost, Arc<LoadedComponent>)> = OnceLock::new();
    &G.get_or_init(|| {
        let host = WasmHost::new(HostConfig::default()).expect("host");
        let component = host.load(GUEST).expect("the fixture loads");
        (host, component)
    })
    .1
}

/// A request for `kind` at `stage` (reaction named after the conformance manifests).
fn req(kind: &str, stage: wit::Stage, reaction: &str, spec: Value) -> wit::Request {
    let mut r = common::request(&spec.to_string());
    r.kind = kind.into();
    r.target.kind = kind.into();
    r.stage = stage;
    r.reaction = reaction.into();
    r
}

fn work(kind: &str, spec: Value) -> wit::Request {
    req(kind, wit::Stage::Work, "work", spec)
}

async fn call(r: &wit::Request) -> (Result<wit::Outcome, HandlerFailure>, TaskReport) {
    guest().reconcile_with_report(r, &Limits::default()).await
}

async fn ok(r: &wit::Request) -> wit::Outcome {
    match call(r).await.0 {
        Ok(out) => out,
        Err(e) => panic!("{} {:?}: {e}", r.kind, r.stage),
    }
}

async fn err(r: &wit::Request) -> HandlerFailure {
    call(r).await.0.expect_err("the call should fail")
}

fn json(s: Option<&str>) -> Value {
    serde_json::from_str(s.expect("a JSON document")).expect("valid JSON")
}

fn status(out: &wit::Outcome) -> Value {
    json(out.status.as_deref())
}

fn is_empty(out: &wit::Outcome) -> bool {
    out.status.is_none()
        && out.conditions.is_empty()
        && out.children.is_empty()
        && out.edges.is_empty()
        && out.configs.is_empty()
        && out.operation_output.is_none()
}

fn terminal(message: &str) -> HandlerFailure {
    HandlerFailure::Handler {
        terminal: true,
        message: message.into(),
    }
}

fn transient(message: &str) -> HandlerFailure {
    HandlerFailure::Handler {
        terminal: false,
        message: message.into(),
    }
}

/// Children as `(kind, version, name, spec)`, specs parsed.
fn children(out: &wit::Outcome) -> Vec<(String, i32, String, Value)> {
    out.children
        .iter()
        .map(|c| {
            assert!(c.labels.is_empty(), "no labels on {}", c.name);
            (
                c.kind.clone(),
                c.kind_version,
                c.name.clone(),
                json(Some(&c.spec)),
            )
        })
        .collect()
}

/// Edges as `(dependent kind, dependent name, dependency kind, dependency name, flows)`.
type EdgeView = (String, String, String, String, Vec<(String, String)>);

fn edges(out: &wit::Outcome) -> Vec<EdgeView> {
    out.edges
        .iter()
        .map(|e| {
            (
                e.dependent.kind.clone(),
                e.dependent.name.clone(),
                e.dependency.kind.clone(),
                e.dependency.name.clone(),
                e.values
                    .iter()
                    .map(|v| (v.dependent_field.clone(), v.source_field.clone()))
                    .collect(),
            )
        })
        .collect()
}

fn edge(dependent: (&str, &str), dependency: (&str, &str), flow: (&str, &str)) -> EdgeView {
    (
        dependent.0.into(),
        dependent.1.into(),
        dependency.0.into(),
        dependency.1.into(),
        vec![(flow.0.into(), flow.1.into())],
    )
}

/// The guest crate's version, read from its manifest so a version bump needs no test edit.
fn guest_version() -> String {
    let manifest = include_str!("../guests/rust/Cargo.toml");
    let line = manifest
        .lines()
        .find(|l| l.starts_with("version = "))
        .expect("a version line");
    line.trim_start_matches("version = ")
        .trim_matches('"')
        .into()
}

#[tokio::test]
async fn describe_lists_every_kind_at_version_1() {
    let info = guest().describe().await.unwrap();
    assert_eq!(info.name, "converge-guest-conformance");
    assert_eq!(info.version, guest_version());
    let kinds: Vec<_> = info
        .kinds
        .iter()
        .map(|k| (k.kind.as_str(), k.version))
        .collect();
    assert_eq!(
        kinds,
        [
            "conf-leaf",
            "conf-composite",
            "conf-final",
            "conf-fail",
            "conf-slow",
            "conf-hold",
            "conf-react",
            "conf-ready",
            "conf-config",
            "netbom",
            "probe",
        ]
        .map(|k| (k, 1))
    );
}

#[tokio::test]
async fn unknown_kind_is_terminal() {
    let e = err(&work("conf-nope", json!({}))).await;
    assert_eq!(e, terminal("unknown kind"));
    assert!(e.is_terminal());
}

#[tokio::test]
async fn leaf_kinds_echo_the_request_into_their_status() {
    for kind in ["conf-leaf", "conf-final", "conf-ready"] {
        let mut r = work(kind, json!({"greeting": "hi", "n": [1, 2]}));
        r.generation = 7;
        r.attempt = 2;
        r.trigger = "childrenSettled".into();
        let out = ok(&r).await;
        assert_eq!(
            status(&out),
            json!({
                "echo": {"greeting": "hi", "n": [1, 2]},
                "form": "wasm",
                "generation": 7,
                "attempt": 2,
                "trigger": "childrenSettled",
            }),
            "{kind}"
        );
        assert!(out.children.is_empty() && out.operation_output.is_none());
    }
}

#[tokio::test]
async fn every_call_logs_one_debug_line() {
    let (result, report) = call(&work("conf-leaf", json!({}))).await;
    result.unwrap();
    assert_eq!(report.logs.len(), 1, "{:?}", report.logs);
    assert_eq!(report.logs[0].level, LogLevel::Debug);
    assert!(
        report.logs[0]
            .message
            .starts_with("conf-leaf work reaction=work "),
        "{:?}",
        report.logs[0].message
    );
    assert_eq!(report.logs_dropped, 0);
}

#[tokio::test]
async fn leaf_ping_answers_with_its_input() {
    let mut r = req("conf-leaf", wit::Stage::Operate, "ping", json!({}));
    r.operation = Some(wit::Operation {
        resource_id: Some(r.target.id.clone()),
        verb: "ping".into(),
        input: Some(r#"{"x":[1,"two"]}"#.into()),
        attempts: 1,
        requested_by: "test".into(),
    });
    let out = ok(&r).await;
    assert_eq!(
        json(out.operation_output.as_deref()),
        json!({"pong": {"x": [1, "two"]}, "name": "world"})
    );
    assert!(out.status.is_none());

    r.operation.as_mut().unwrap().input = None;
    let out = ok(&r).await;
    assert_eq!(
        json(out.operation_output.as_deref()),
        json!({"pong": null, "name": "world"})
    );
    r.operation = None;
    let out = ok(&r).await;
    assert_eq!(
        json(out.operation_output.as_deref()),
        json!({"pong": null, "name": "world"})
    );
}

#[tokio::test]
async fn composite_composes_a_chain_with_value_flows() {
    let compose = |spec| req("conf-composite", wit::Stage::Compose, "compose", spec);
    let out = ok(&compose(json!({"children": 3}))).await;
    assert_eq!(status(&out), json!({"composed": 3}));
    let leaf = |i: i64| {
        (
            "conf-leaf".to_string(),
            1,
            format!("world-{i}"),
            json!({"index": i}),
        )
    };
    assert_eq!(children(&out), vec![leaf(0), leaf(1), leaf(2)]);
    let flow = ("/upstream_index", "/echo/index");
    assert_eq!(
        edges(&out),
        vec![
            edge(("conf-leaf", "world-1"), ("conf-leaf", "world-0"), flow),
            edge(("conf-leaf", "world-2"), ("conf-leaf", "world-1"), flow),
        ]
    );

    // Default: two children, one edge.
    let out = ok(&compose(json!({}))).await;
    assert_eq!(status(&out), json!({"composed": 2}));
    assert_eq!(children(&out), vec![leaf(0), leaf(1)]);
    assert_eq!(edges(&out).len(), 1);

    // Zero is a valid (deliberately empty) composition; 50 is the maximum.
    let out = ok(&compose(json!({"children": 0}))).await;
    assert_eq!(status(&out), json!({"composed": 0}));
    assert!(out.children.is_empty() && out.edges.is_empty());
    let out = ok(&compose(json!({"children": 50}))).await;
    assert_eq!((out.children.len(), out.edges.len()), (50, 49));

    for bad in [json!(51), json!(-1), json!(2.5), json!("3"), json!(null)] {
        match err(&compose(json!({ "children": bad }))).await {
            HandlerFailure::Handler {
                terminal: true,
                message,
            } => assert!(message.contains("children"), "{message}"),
            other => panic!("children = {bad}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn composite_rollup_counts_descendants_and_ready_ones() {
    let mut r = req("conf-composite", wit::Stage::Rollup, "rollup", json!({}));
    let row = |name: &str, ready: bool| {
        let mut row = r.target.clone();
        row.kind = "conf-leaf".into();
        row.name = name.into();
        row.is_ready = ready;
        row
    };
    r.descendants = vec![row("a", true), row("b", false), row("c", true)];
    let out = ok(&r).await;
    assert_eq!(
        status(&out),
        json!({"composed": 2, "descendants": 3, "ready": 2})
    );
    assert!(out.children.is_empty());

    r.target.spec = json!({"children": 5}).to_string();
    r.descendants.clear();
    let out = ok(&r).await;
    assert_eq!(
        status(&out),
        json!({"composed": 5, "descendants": 0, "ready": 0})
    );
}

#[tokio::test]
async fn stages_a_kind_does_not_handle_give_an_empty_outcome() {
    let cases = [
        ("conf-composite", wit::Stage::Work),
        ("conf-composite", wit::Stage::Delete),
        ("conf-leaf", wit::Stage::Compose),
        ("conf-fail", wit::Stage::React),
        ("netbom", wit::Stage::Rollup),
        ("netbom", wit::Stage::Work),
        ("probe", wit::Stage::Compose),
    ];
    for (kind, stage) in cases {
        let out = ok(&req(kind, stage, "other", json!({"mode": "panic"}))).await;
        assert!(is_empty(&out), "{kind} {stage:?}: {out:?}");
    }
}

#[tokio::test]
async fn final_teardown_fails_transiently_then_releases() {
    let mut r = req(
        "conf-final",
        wit::Stage::Delete,
        "teardown",
        json!({"delete_failures": 2}),
    );
    for attempt in 1..=2 {
        r.attempt = attempt;
        let e = err(&r).await;
        assert_eq!(e, transient(&format!("teardown failure {attempt}")));
        assert!(!e.is_terminal());
    }
    r.attempt = 3;
    assert!(is_empty(&ok(&r).await));

    let r = req("conf-final", wit::Stage::Delete, "teardown", json!({}));
    assert!(is_empty(&ok(&r).await));
}

#[tokio::test]
async fn fail_modes_map_to_their_failure_classes() {
    let out = ok(&work("conf-fail", json!({"mode": "ok"}))).await;
    assert_eq!(status(&out), json!({"ok": true, "attempt": 1}));

    let e = err(&work("conf-fail", json!({"mode": "terminal"}))).await;
    assert_eq!(e, terminal("conformance terminal"));
    assert!(e.is_terminal());

    let mut r = work("conf-fail", json!({"mode": "transient", "times": 2}));
    for attempt in 1..=2 {
        r.attempt = attempt;
        let e = err(&r).await;
        assert_eq!(e, transient(&format!("conformance transient {attempt}")));
        assert!(!e.is_terminal());
    }
    r.attempt = 3;
    assert_eq!(status(&ok(&r).await), json!({"ok": true, "attempt": 3}));

    // times 0 (or absent): transient forever.
    let mut r = work("conf-fail", json!({"mode": "transient"}));
    r.attempt = 9;
    assert_eq!(err(&r).await, transient("conformance transient 9"));

    // A Rust panic aborts, which reaches the host as a trap: terminal.
    let (result, report) = call(&work("conf-fail", json!({"mode": "panic"}))).await;
    let e = result.unwrap_err();
    assert!(matches!(e, HandlerFailure::Trap(_)), "{e:?}");
    assert!(e.is_terminal());
    assert_eq!(e.reason(), "Trap");
    // The debug line logged before the panic still comes back.
    assert_eq!(report.logs.len(), 1);
}

/// Fuel a `conf-slow` call consumed, its wall time and its result.
async fn slow(
    sleep_ms: u64,
    limits: &Limits,
) -> (Result<wit::Outcome, HandlerFailure>, u64, Duration) {
    let r = work("conf-slow", json!({ "sleep_ms": sleep_ms }));
    let t = Instant::now();
    let (result, report) = guest().reconcile_with_report(&r, limits).await;
    (result, report.fuel_consumed, t.elapsed())
}

#[tokio::test]
async fn slow_sleeps_in_real_time_without_burning_fuel() {
    let (result, fuel_0, _) = slow(0, &Limits::default()).await;
    assert_eq!(
        status(&result.unwrap()),
        json!({"slept_ms": 0, "attempt": 1})
    );

    let (result, fuel_300, wall) = slow(300, &Limits::default()).await;
    assert_eq!(
        status(&result.unwrap()),
        json!({"slept_ms": 300, "attempt": 1})
    );
    assert!(wall >= Duration::from_millis(300), "slept only {wall:?}");
    eprintln!("conf-slow: 0 ms = {fuel_0} fuel; 300 ms = {fuel_300} fuel in {wall:?}");
    // The guest waits on a WASI pollable the host resolves with a timer: the sleep itself
    // executes no wasm, so it costs about what a zero sleep costs (a spin loop for 300 ms
    // would burn hundreds of millions of units).
    assert!(
        fuel_300 < fuel_0 + 50_000,
        "sleeping 300 ms cost {fuel_300} fuel vs {fuel_0} for 0 ms"
    );
}

#[tokio::test]
async fn deadline_cuts_a_sleeping_guest_short() {
    // Epoch interruption can only stop wasm that is executing; while the guest is blocked
    // in the host's WASI poll (its sleep) the host's own timer (the deadline plus two epoch
    // ticks) drops the call. So a 100 ms deadline stops a 400 ms sleep early, as `Deadline`.
    let limits = Limits {
        timeout: Duration::from_millis(100),
        ..Limits::default()
    };
    let (result, fuel, wall) = slow(400, &limits).await;
    eprintln!("conf-slow 400 ms under a 100 ms deadline: {result:?} after {wall:?}, {fuel} fuel");
    assert_eq!(
        result.unwrap_err(),
        HandlerFailure::Deadline { timeout_ms: 100 }
    );
    assert!(
        wall >= Duration::from_millis(100) && wall < Duration::from_millis(400),
        "a sleeping guest was not stopped at its deadline: {wall:?}"
    );

    // A sleep that ends within the deadline succeeds.
    let limits = Limits {
        timeout: Duration::from_secs(5),
        ..Limits::default()
    };
    let (result, _, _) = slow(50, &limits).await;
    assert_eq!(
        status(&result.unwrap()),
        json!({"slept_ms": 50, "attempt": 1})
    );
}

#[tokio::test]
async fn config_reports_the_effective_config() {
    let mut r = work("conf-config", json!({}));
    r.config = Some(r#"{"region":"eu","limits":{"fuel":5}}"#.into());
    assert_eq!(
        status(&ok(&r).await),
        json!({"config": {"region": "eu", "limits": {"fuel": 5}}})
    );
    r.config = None;
    assert_eq!(status(&ok(&r).await), json!({"config": null}));
}

fn netbom(spec: Value) -> wit::Request {
    req("netbom", wit::Stage::Compose, "compose", spec)
}

fn bill(enabled: bool, subnets: usize) -> Value {
    let subnets: Vec<_> = (0..subnets)
        .map(|i| json!({"name": format!("s{i}"), "cidr": format!("10.0.{i}.0/24")}))
        .collect();
    json!({
        "prefix": "prod",
        "region": "eu-west-1",
        "cidr": "10.0.0.0/16",
        "enabled": enabled,
        "subnets": subnets,
    })
}

#[tokio::test]
async fn netbom_composes_a_vpc_and_its_subnets() {
    let out = ok(&netbom(bill(true, 2))).await;
    assert_eq!(status(&out), json!({"subnets": 2}));
    assert_eq!(
        children(&out),
        vec![
            (
                "vpc".into(),
                1,
                "prod-vpc".into(),
                json!({"cidr": "10.0.0.0/16", "region": "eu-west-1"})
            ),
            (
                "subnet".into(),
                1,
                "prod-s0".into(),
                json!({"cidr": "10.0.0.0/24", "region": "eu-west-1", "vpc_id": null})
            ),
            (
                "subnet".into(),
                1,
                "prod-s1".into(),
                json!({"cidr": "10.0.1.0/24", "region": "eu-west-1", "vpc_id": null})
            ),
        ]
    );
    let flow = ("/vpc_id", "/vpc_id");
    assert_eq!(
        edges(&out),
        vec![
            edge(("subnet", "prod-s0"), ("vpc", "prod-vpc"), flow),
            edge(("subnet", "prod-s1"), ("vpc", "prod-vpc"), flow),
        ]
    );
    assert!(out.conditions.is_empty() && out.configs.is_empty());

    // No subnets: the VPC alone.
    let out = ok(&netbom(bill(true, 0))).await;
    assert_eq!(status(&out), json!({"subnets": 0}));
    assert_eq!(out.children.len(), 1);
    assert!(out.edges.is_empty());
}

#[tokio::test]
async fn netbom_with_124_subnets() {
    let out = ok(&netbom(bill(true, 124))).await;
    assert_eq!(status(&out), json!({"subnets": 124}));
    assert_eq!(out.children.len(), 125);
    assert_eq!(out.edges.len(), 124);
    assert_eq!(out.children[124].name, "prod-s123");
    assert_eq!(
        json(Some(&out.children[124].spec)),
        json!({"cidr": "10.0.123.0/24", "region": "eu-west-1", "vpc_id": null})
    );
    assert!(
        out.edges
            .iter()
            .enumerate()
            .all(|(i, e)| e.dependent.name == format!("prod-s{i}")
                && e.dependency.name == "prod-vpc")
    );
}

#[tokio::test]
async fn netbom_disabled_is_an_empty_outcome() {
    let out = ok(&netbom(bill(false, 3))).await;
    assert!(is_empty(&out), "{out:?}");
}

#[tokio::test]
async fn netbom_refuses_a_malformed_spec_naming_the_field() {
    let with = |path: &[&str], v: Option<Value>| {
        let mut spec = bill(true, 2);
        let mut at = &mut spec;
        for key in &path[..path.len() - 1] {
            at = match key.parse::<usize>() {
                Ok(i) => &mut at[i],
                Err(_) => &mut at[*key],
            };
        }
        let last = path[path.len() - 1];
        let obj = at.as_object_mut().unwrap();
        match v {
            Some(v) => obj.insert(last.into(), v),
            None => obj.remove(last),
        };
        spec
    };
    let cases = [
        (with(&["prefix"], None), "spec.prefix"),
        (with(&["region"], Some(json!(1))), "spec.region"),
        (with(&["cidr"], Some(json!(null))), "spec.cidr"),
        (with(&["enabled"], Some(json!("yes"))), "spec.enabled"),
        (with(&["subnets"], Some(json!({}))), "spec.subnets"),
        (
            with(&["subnets", "1", "cidr"], Some(json!(24))),
            "spec.subnets[1].cidr",
        ),
        (
            with(&["subnets", "0", "name"], None),
            "spec.subnets[0].name",
        ),
        (json!([1, 2]), "spec must be an object"),
    ];
    for (spec, field) in cases {
        match err(&netbom(spec.clone())).await {
            HandlerFailure::Handler {
                terminal: true,
                message,
            } => assert!(message.contains(field), "{spec}: {message}"),
            other => panic!("{spec}: {other:?}"),
        }
    }
    // The spec is validated before `enabled` is looked at.
    let mut spec = bill(false, 1);
    spec["subnets"][0]["cidr"] = json!(false);
    assert!(err(&netbom(spec)).await.is_terminal());
}

#[tokio::test]
async fn probe_sees_a_sealed_sandbox() {
    let probe = work("probe", json!({}));
    let s = status(&ok(&probe).await);
    eprintln!("probe: {s:#}");
    for denied in ["fs_read", "fs_write", "fs_list", "tcp_connect"] {
        assert_eq!(s[denied]["ok"], json!(false), "{denied}: {s}");
        assert!(s[denied]["error"].is_string(), "{denied}: {s}");
    }
    assert_eq!(s["stdin_bytes"], json!(0));
    assert_eq!(s["env_vars"], json!(0));
    assert_eq!(s["args"], json!(0));
    assert_eq!(s["wall_clock_secs"], json!(1_735_689_600));
    assert_eq!(s["monotonic_elapsed_ns"], json!(0));

    // Randomness is the host's seeded stream: the same in every instance, on another host
    // with the same seed, and different under another seed.
    let random = s["random"].as_str().expect("random hex").to_string();
    assert_eq!(random.len(), 32);
    assert_eq!(status(&ok(&probe).await)["random"], json!(random));
    let other = |seed| async move {
        let host = WasmHost::new(HostConfig {
            random_seed: seed,
            ..HostConfig::default()
        })
        .unwrap();
        let c = host.load(GUEST).unwrap();
        let out = c
            .reconcile_default(&work("probe", json!({})))
            .await
            .unwrap();
        status(&out)["random"].as_str().unwrap().to_string()
    };
    assert_eq!(other(HostConfig::default().random_seed).await, random);
    assert_ne!(other(1).await, random);
}

#[tokio::test]
async fn leaf_fuel_is_reported_and_deterministic() {
    let r = work("conf-leaf", json!({"greeting": "hi"}));
    let (result, first) = call(&r).await;
    result.unwrap();
    let (_, second) = call(&r).await;
    eprintln!(
        "conf-leaf work: {} fuel, {:?} (debug build)",
        first.fuel_consumed, first.elapsed
    );
    assert!(first.fuel_consumed > 0);
    assert!(first.fuel_consumed < 1_000_000, "{}", first.fuel_consumed);
    assert_eq!(first.fuel_consumed, second.fuel_consumed);
}
