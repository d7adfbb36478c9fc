//! End-to-end tests of the host against the real Python guest (`guests/python/app.py`,
//! built by `guests/build-python.sh` with componentize-py): describe, the `netbom`
//! composition, its empty outcomes and its terminal spec errors, and the host settings a
//! componentize-py component needs.
//!
//! Behind the cargo feature `python-guest`, because the component is not committed (~18 MB)
//! and compiling it takes a while. The component is read from `$CONVERGE_PYTHON_GUEST`
//! (default `$HOME/.cache/converge-wasm/python-guest.wasm`); when it is missing every test
//! **fails** with the command that builds it: a feature someone turned on must not pass by
//! skipping.
//!
//! What the host must give a componentize-py component (all of it is `HostConfig::default()`,
//! and the tests below check the part that is easy to get wrong):
//! - `max_core_instances_per_component` of at least 14 (the default is 64): a componentize-py
//!   0.25.1 component instantiates CPython, its libc, the WASI adapter and componentize-py's
//!   glue as 14 separate core instances (older releases were reported at 9). Under the
//!   pooling allocator a lower cap refuses the component at `load` ("transitively contains
//!   14 core module instances, which exceeds the configured maximum"); the pool's
//!   `total_core_instances` (16 per slot) leaves room for one Python task per slot;
//! - WASI p2 linked (25-odd interfaces, sockets included, even though netbom uses none):
//!   without it the component fails `load` as a world mismatch;
//! - a memory cap above the snapshot CPython starts from (see
//!   `a_small_memory_cap_fails_as_out_of_memory`); the default 64 MiB is enough;
//! - a fuel budget in the millions per call (the default 1e9 is ample).

#![cfg(feature = "python-guest")]

mod common;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use converge_wasm_host::{
    HandlerFailure, HostConfig, Limits, LoadedComponent, LogLevel, WasmHost, wit,
};
use serde_json::{Value, json};

/// Core module instances in a componentize-py 0.25.1 component (the number wasmtime reports
/// when the pool's per-component cap is lower).
const PYTHON_CORE_INSTANCES: u32 = 14;

/// Where the built component is: `$CONVERGE_PYTHON_GUEST` or the build script's default.
fn guest_path() -> PathBuf {
    if let Some(p) = std::env::var_os("CONVERGE_PYTHON_GUEST") {
        return p.into();
    }
    let home = std::env::var_os("HOME").expect("HOME is not set");
    PathBuf::from(home).join(".cache/converge-wasm/python-guest.wasm")
}

/// The component's bytes; panics (so the test fails, never skips) when it was not built.
fn guest_bytes() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let path = guest_path();
        std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "the Python guest component is missing: cannot read {} ({e}).\n\
                 Build it with `wasm-host/guests/build-python.sh` (needs PyPI for \
                 componentize-py), or point CONVERGE_PYTHON_GUEST at a built component.",
                path.display()
            )
        })
    })
}

/// The host every test shares, with a disk cache so the second host in
/// `eight_core_instances_are_not_enough` does not compile the 18 MB component again.
fn cache_dir() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("temp dir"))
}

/// The guest, compiled once for the whole test binary: compiling it costs seconds, every
/// call after that is a fresh instance anyway.
fn guest() -> Arc<LoadedComponent> {
    static GUEST: OnceLock<Arc<LoadedComponent>> = OnceLock::new();
    GUEST
        .get_or_init(|| {
            let bytes = guest_bytes();
            let host = WasmHost::new(HostConfig {
                cache_dir: Some(cache_dir().path().to_path_buf()),
                ..HostConfig::default()
            })
            .expect("host");
            let started = std::time::Instant::now();
            let loaded = host.load(bytes).expect("load the Python guest");
            eprintln!(
                "python guest: {} bytes, compiled in {:?}",
                bytes.len(),
                started.elapsed()
            );
            loaded
        })
        .clone()
}

/// A compose request for a `netbom` resource with `spec`.
fn netbom_request(spec: &Value) -> wit::Request {
    let mut req = common::request(&spec.to_string());
    req.stage = wit::Stage::Compose;
    req.reaction = "compose".into();
    req.kind = "netbom".into();
    req.target.kind = "netbom".into();
    req.target.name = "net-a".into();
    req
}

fn three_subnets(enabled: bool) -> Value {
    json!({
        "prefix": "prod",
        "region": "eu-west-1",
        "cidr": "10.0.0.0/16",
        "enabled": enabled,
        "subnets": [
            {"name": "a", "cidr": "10.0.1.0/24"},
            {"name": "b", "cidr": "10.0.2.0/24"},
            {"name": "c", "cidr": "10.0.3.0/24"},
        ],
    })
}

/// The outcome as JSON, so a mismatch shows the whole difference at once.
fn outcome_json(o: &wit::Outcome) -> Value {
    let r = |r: &wit::ResourceRef| json!([r.kind, r.name]);
    json!({
        "status": o.status,
        "conditions": o.conditions.len(),
        "children": o.children.iter().map(|c| json!({
            "kind": c.kind,
            "version": c.kind_version,
            "name": c.name,
            "spec": c.spec,
            "labels": c.labels.len(),
        })).collect::<Vec<_>>(),
        "edges": o.edges.iter().map(|e| json!({
            "dependent": r(&e.dependent),
            "dependency": r(&e.dependency),
            "values": e.values.iter()
                .map(|v| json!([v.dependent_field, v.source_field]))
                .collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "configs": o.configs.len(),
        "operation_output": o.operation_output,
    })
}

fn empty_outcome() -> Value {
    json!({
        "status": null, "conditions": 0, "children": [], "edges": [], "configs": 0,
        "operation_output": null,
    })
}

/// The terminal handler error's message; panics on anything else.
async fn terminal_error(spec: &Value) -> String {
    match guest()
        .reconcile(&netbom_request(spec), &Limits::default())
        .await
    {
        Err(HandlerFailure::Handler {
            terminal: true,
            message,
        }) => message,
        other => panic!("expected a terminal handler error for {spec}, got {other:?}"),
    }
}

#[tokio::test]
async fn describe_names_the_guest_and_netbom() {
    let info = guest().describe().await.expect("describe");
    assert_eq!(info.name, "converge-guest-python");
    assert_eq!(info.version, "0.1.0");
    let kinds: Vec<_> = info
        .kinds
        .iter()
        .map(|k| (k.kind.as_str(), k.version))
        .collect();
    assert_eq!(kinds, vec![("netbom", 1)]);
}

#[tokio::test]
async fn netbom_enabled_composes_the_vpc_subnets_edges_and_flows() {
    let (result, report) = guest()
        .reconcile_with_report(&netbom_request(&three_subnets(true)), &Limits::default())
        .await;
    let outcome = result.expect("reconcile");
    let subnet = |name: &str, cidr: &str| {
        json!({
            "kind": "subnet", "version": 1, "name": name, "labels": 0,
            // Exact bytes: compact, sorted keys, the same as the Rust guest's serde_json.
            "spec": format!(r#"{{"cidr":"{cidr}","region":"eu-west-1","vpc_id":null}}"#),
        })
    };
    let edge = |name: &str| {
        json!({
            "dependent": ["subnet", name],
            "dependency": ["vpc", "prod-vpc"],
            "values": [["/vpc_id", "/vpc_id"]],
        })
    };
    assert_eq!(
        outcome_json(&outcome),
        json!({
            "status": r#"{"subnets":3}"#,
            "conditions": 0,
            "children": [
                {
                    "kind": "vpc", "version": 1, "name": "prod-vpc", "labels": 0,
                    "spec": r#"{"cidr":"10.0.0.0/16","region":"eu-west-1"}"#,
                },
                subnet("prod-a", "10.0.1.0/24"),
                subnet("prod-b", "10.0.2.0/24"),
                subnet("prod-c", "10.0.3.0/24"),
            ],
            "edges": [edge("prod-a"), edge("prod-b"), edge("prod-c")],
            "configs": 0,
            "operation_output": null,
        })
    );

    // One debug line per call, forwarded through the bounded `log` import.
    assert_eq!(report.logs.len(), 1, "{:?}", report.logs);
    assert_eq!(report.logs[0].level, LogLevel::Debug);
    assert!(
        report.logs[0]
            .message
            .starts_with("netbom compose reaction=compose name=net-a"),
        "{:?}",
        report.logs[0]
    );
    eprintln!(
        "netbom (3 subnets): {} fuel, {:?} (debug build, instantiate + call)",
        report.fuel_consumed, report.elapsed
    );
}

#[tokio::test]
async fn netbom_disabled_is_an_empty_outcome() {
    let outcome = guest()
        .reconcile(&netbom_request(&three_subnets(false)), &Limits::default())
        .await
        .expect("reconcile");
    assert_eq!(outcome_json(&outcome), empty_outcome());

    // No subnets but enabled: the VPC alone, and a status that says so.
    let mut spec = three_subnets(true);
    spec["subnets"] = json!([]);
    let outcome = guest()
        .reconcile(&netbom_request(&spec), &Limits::default())
        .await
        .expect("reconcile");
    assert_eq!(outcome.children.len(), 1);
    assert!(outcome.edges.is_empty());
    assert_eq!(outcome.status.as_deref(), Some(r#"{"subnets":0}"#));
}

#[tokio::test]
async fn other_stages_are_empty_outcomes() {
    for stage in [
        wit::Stage::Work,
        wit::Stage::Rollup,
        wit::Stage::Delete,
        wit::Stage::Operate,
        wit::Stage::React,
    ] {
        let mut req = netbom_request(&three_subnets(true));
        req.stage = stage;
        // Not even the spec is read outside compose.
        req.target.spec = "not json".into();
        let outcome = guest()
            .reconcile(&req, &Limits::default())
            .await
            .unwrap_or_else(|e| panic!("{stage:?}: {e}"));
        assert_eq!(outcome_json(&outcome), empty_outcome(), "{stage:?}");
    }
}

#[tokio::test]
async fn a_missing_field_is_a_terminal_handler_error_naming_it() {
    let mut spec = three_subnets(true);
    spec.as_object_mut().unwrap().remove("region");
    assert_eq!(
        terminal_error(&spec).await,
        "netbom: spec.region is missing"
    );

    // The whole spec is validated before `enabled` is looked at.
    let mut spec = three_subnets(false);
    spec["subnets"][1].as_object_mut().unwrap().remove("cidr");
    assert_eq!(
        terminal_error(&spec).await,
        "netbom: spec.subnets[1].cidr is missing"
    );
}

#[tokio::test]
async fn ill_typed_fields_are_terminal_handler_errors_naming_them() {
    let cases = [
        (
            "enabled",
            json!("yes"),
            r#"spec.enabled must be a boolean, got "yes""#,
        ),
        ("prefix", json!(7), "spec.prefix must be a string, got 7"),
        ("cidr", Value::Null, "spec.cidr must be a string, got null"),
        (
            "subnets",
            json!({}),
            "spec.subnets must be an array, got {}",
        ),
    ];
    for (field, value, want) in cases {
        let mut spec = three_subnets(true);
        spec[field] = value;
        assert_eq!(terminal_error(&spec).await, format!("netbom: {want}"));
    }

    let mut spec = three_subnets(true);
    spec["subnets"][2] = json!(["c"]);
    assert_eq!(
        terminal_error(&spec).await,
        r#"netbom: spec.subnets[2] must be an object, got ["c"]"#
    );
    assert_eq!(
        terminal_error(&json!([1])).await,
        "netbom: spec must be an object, got [1]"
    );

    // A kind the guest does not serve is terminal too.
    let mut req = netbom_request(&three_subnets(true));
    req.kind = "vpc".into();
    let err = guest()
        .reconcile(&req, &Limits::default())
        .await
        .expect_err("unknown kind");
    assert!(err.is_terminal(), "{err:?}");
}

#[tokio::test]
async fn a_spec_that_is_not_json_is_terminal() {
    // Python's json accepts NaN, 1e400 (as infinity) and lone surrogates; serde_json (the
    // Rust guest) refuses all three, and so does this guest, so they agree on "valid".
    for text in [
        "not json",
        r#"{"prefix": NaN}"#,
        r#"{"prefix": 1e400}"#,
        r#"{"prefix": "\ud800"}"#,
    ] {
        let mut req = netbom_request(&three_subnets(true));
        req.target.spec = text.into();
        match guest().reconcile(&req, &Limits::default()).await {
            Err(HandlerFailure::Handler {
                terminal: true,
                message,
            }) => assert!(
                message.starts_with("spec is not valid JSON: "),
                "{text}: {message}"
            ),
            other => panic!("{text}: expected a terminal handler error, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_small_memory_cap_fails_as_out_of_memory() {
    // CPython starts from a pre-initialised memory snapshot of several MiB; a cap below it
    // fails at instantiation, classified (terminal) out of memory rather than a bare trap.
    let limits = Limits {
        memory_bytes: 4 * 1024 * 1024,
        ..Limits::default()
    };
    let err = guest()
        .reconcile(&netbom_request(&three_subnets(true)), &limits)
        .await
        .expect_err("4 MiB is too small for CPython");
    assert!(
        matches!(err, HandlerFailure::OutOfMemory { .. }),
        "expected OutOfMemory, got {err:?}"
    );
}

#[tokio::test]
async fn core_instance_cap_below_the_component_refuses_it_at_load() {
    // componentize-py components instantiate many core modules (CPython, its libc, the
    // WASI adapter, componentize-py's glue and shims): 0.25.1 builds 14, where older
    // releases were reported at 9. Under the pooling allocator wasmtime counts them when the
    // component is compiled or deserialized, so a cap below that refuses the component at
    // `load`, before any task runs. Same cache dir as the shared host, so the host with
    // enough instances deserializes instead of compiling again.
    guest();
    let capped = |n: u32| {
        WasmHost::new(HostConfig {
            cache_dir: Some(cache_dir().path().to_path_buf()),
            max_core_instances_per_component: n,
            ..HostConfig::default()
        })
        .expect("host")
    };
    let small = capped(8);
    let err = match small.load(guest_bytes()) {
        Err(e) => e.to_string(),
        // Without the pool (its reservation failed on this machine) the store's limiter
        // counts instead, at instantiation: "instance count too high".
        Ok(component) => {
            assert!(
                !small.is_pooling(),
                "8 core instances loaded under the pool"
            );
            component
                .reconcile(&netbom_request(&three_subnets(true)), &Limits::default())
                .await
                .expect_err("8 core instances are too few")
                .to_string()
        }
    };
    assert!(
        err.contains("instance"),
        "expected a core-instance failure, got {err}"
    );

    let enough = capped(PYTHON_CORE_INSTANCES);
    let component = enough.load(guest_bytes()).expect("load at the exact count");
    component
        .reconcile(&netbom_request(&three_subnets(true)), &Limits::default())
        .await
        .expect("reconcile at the exact count");
    eprintln!(
        "core instances: 8 refused ({err}; that host's cache: {:?}); \
         {PYTHON_CORE_INSTANCES} loaded ({:?})",
        small.cache_stats(),
        enough.cache_stats()
    );
}
