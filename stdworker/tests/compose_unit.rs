//! The starlark and cel providers without a broker (their evaluations run in a real
//! sandbox child, the `stdworker` built with these tests): config parsing and limit
//! clamping, the compile-once cache and its replacement on a config push, stage dispatch,
//! the rollup status, and the terminal/transient choice of every failure.

use std::sync::Arc;

use converge_sdk::{
    Provider, ProviderConfig, Resource, Stage,
    testing::{request, run},
};
use converge_stdworker::{
    providers::{
        cel::CelProvider,
        shared::{CACHE_ENTRIES, CompileCache, content_hash, rollup_status},
        starlark::{LimitsConfig, StarlarkConfig, StarlarkProvider, max_limits},
    },
    sandbox::{SandboxConfig, SandboxPool},
};
use serde_json::{Value, json};

const GOOD: &str = r#"
def compose(spec, config):
    return {
        "children": [child("vpc", "v-" + spec["id"], {"region": config["region"]}),
                     child("subnet", "s-" + spec["id"], {"vpc_id": None})],
        "edges": [edge("subnet", "s-" + spec["id"], "vpc", "v-" + spec["id"],
                       values = {"/vpc_id": "/id"})],
        "configs": [provider_config("cfg-" + spec["id"], "vpc", {"k": 1})],
        "status": {"n": 2, "f": 2.5},
    }
"#;

fn kv(kind: &str) -> converge_sdk::KindVersion {
    converge_sdk::KindVersion::new(kind, 1)
}

/// One sandbox child, so "loaded once" counts are exact.
fn pool() -> SandboxPool {
    SandboxPool::new(SandboxConfig {
        procs: 1,
        ..SandboxConfig::with_program(env!("CARGO_BIN_EXE_stdworker"))
    })
}

fn bundle(src: &str) -> Vec<u8> {
    converge_starlark::pack(&[("compose.star", src)])
}

fn compose_request(
    kind: &str,
    spec: Value,
    cfg: Option<Value>,
    bundle: Vec<u8>,
) -> converge_sdk::ReactionRequest {
    let mut req = request(kind, spec);
    req.stage = Stage::Compose;
    req.reaction = "compose".into();
    req.resource.name = "root".into();
    req.config = ProviderConfig {
        spec: cfg,
        bundle: bundle.into(),
    };
    req
}

#[test]
fn limits_are_parsed_defaulted_and_clamped() {
    let c = StarlarkConfig::from_value(
        &json!({"region": "eu", "limits": {"max_ticks": 5, "deadline_ms": 250}}),
    )
    .unwrap();
    assert_eq!(
        c.compose_config,
        json!({"region": "eu"}),
        "limits are not handed to compose"
    );
    assert_eq!(c.limits.max_ticks, 5);
    assert_eq!(c.limits.deadline, std::time::Duration::from_millis(250));
    assert_eq!(
        c.limits.max_children,
        converge_starlark::Limits::default().max_children
    );

    let huge = LimitsConfig {
        max_ticks: Some(u64::MAX),
        max_call_stack: Some(100_000),
        deadline_ms: Some(u64::MAX),
        ..Default::default()
    };
    let l = huge.resolve();
    let m = max_limits();
    assert_eq!(
        (l.max_ticks, l.max_call_stack, l.deadline),
        (m.max_ticks, m.max_call_stack, m.deadline)
    );

    assert_eq!(
        StarlarkConfig::from_value(&Value::Null)
            .unwrap()
            .compose_config,
        json!({})
    );
    let e = StarlarkConfig::from_value(&json!({"limits": {"max_tick": 1}})).unwrap_err();
    assert!(e.contains("max_tick"), "{e}");
    assert!(StarlarkConfig::from_value(&json!([1])).is_err());
}

#[test]
fn the_sample_spec_is_not_handed_to_compose() {
    let c = StarlarkConfig::from_value(&json!({
        "region": "eu",
        "sample_spec": {"name": "demo", "cidr": "10.0.0.0/16"},
        "limits": {"max_ticks": 5},
    }))
    .unwrap();
    assert_eq!(c.compose_config, json!({"region": "eu"}));
    assert_eq!(c.limits.max_ticks, 5);
}

#[test]
fn the_cache_compiles_once_and_a_new_default_replaces_the_old() {
    let cache: CompileCache<String, String> = CompileCache::default();
    let a = content_hash(&[b"a"]);
    let b = content_hash(&[b"b"]);
    cache.set_default(Some(a));
    let first = cache.get_or_compile(a, || Ok("A".into())).unwrap();
    let again = cache
        .get_or_compile(a, || panic!("compiled twice"))
        .unwrap();
    assert!(Arc::ptr_eq(&first, &again));
    assert_eq!(cache.compiles(), 1);

    // Errors are cached too.
    let bad = content_hash(&[b"bad"]);
    assert_eq!(
        cache
            .get_or_compile(bad, || Err::<String, _>("nope".into()))
            .unwrap_err(),
        "nope"
    );
    assert_eq!(
        cache
            .get_or_compile(bad, || panic!("recompiled an error"))
            .unwrap_err(),
        "nope"
    );

    // A push: the old default's entry goes, but an in-flight holder keeps its Arc.
    cache.set_default(Some(b));
    let fresh = cache.get_or_compile(b, || Ok("B".into())).unwrap();
    assert_eq!(*fresh, "B");
    assert_eq!(*first, "A", "the in-flight Arc survives");
    let recompiled = cache.get_or_compile(a, || Ok("A2".into())).unwrap();
    assert_eq!(*recompiled, "A2", "the replaced default was dropped");

    // Bounded: the pinned default survives eviction.
    for i in 0..(CACHE_ENTRIES * 2) {
        let k = content_hash(&[format!("k{i}").as_bytes()]);
        cache.get_or_compile(k, || Ok(i.to_string())).unwrap();
    }
    assert!(cache.len() <= CACHE_ENTRIES);
    cache
        .get_or_compile(b, || panic!("the default was evicted"))
        .unwrap();
}

#[tokio::test]
async fn starlark_composes_once_per_bundle_and_maps_every_part() {
    let p = StarlarkProvider::new(kv("net"), pool());
    assert!(!p.ready());
    p.on_config(ProviderConfig {
        spec: Some(json!({"region": "eu"})),
        bundle: bundle(GOOD).into(),
    });
    assert!(p.ready());
    let req = || {
        compose_request(
            "net",
            json!({"id": "x"}),
            Some(json!({"region": "eu"})),
            bundle(GOOD),
        )
    };
    let out = run(&p, req()).await.unwrap();
    assert_eq!(out.children.len(), 2);
    assert_eq!(out.children[0].spec, json!({"region": "eu"}));
    assert_eq!(out.edges[0].values[0].source_field, "/id");
    assert_eq!(out.configs[0].name, "cfg-x");
    assert_eq!(out.status, Some(json!({"n": 2, "f": 2.5})));
    assert_eq!(
        out.status.as_ref().unwrap()["n"].as_i64(),
        Some(2),
        "ints stay ints"
    );
    for _ in 0..5 {
        run(&p, req()).await.unwrap();
    }
    assert_eq!(
        p.pool().stats().programs_sent,
        1,
        "one load for one bundle content (prewarm included)"
    );
    assert_eq!(p.pool().stats().spawned, 1, "one child served every task");

    // A new bundle (a push) loads once more.
    let v2 = bundle(&GOOD.replace("\"n\": 2", "\"n\": 3"));
    p.on_config(ProviderConfig {
        spec: Some(json!({"region": "eu"})),
        bundle: v2.clone().into(),
    });
    let out = run(
        &p,
        compose_request("net", json!({"id": "x"}), Some(json!({"region": "eu"})), v2),
    )
    .await
    .unwrap();
    assert_eq!(out.status.unwrap()["n"], 3);
    assert_eq!(p.pool().stats().programs_sent, 2);

    // No default bundle: unready.
    p.on_config(ProviderConfig {
        spec: Some(json!({})),
        bundle: Default::default(),
    });
    assert!(!p.ready());
}

#[tokio::test]
async fn starlark_errors_are_terminal_and_never_an_empty_compose() {
    let p = StarlarkProvider::new(kv("net"), pool());
    let cases = [
        ("def compose(spec, config):\n    fail(\"nope\")\n", "nope"),
        (
            "def compose(spec, config):\n    return {\"children\": [], \"status\": spec[\"missing\"]}\n",
            "missing",
        ),
        (
            "def compose(spec, config):\n    return {\"childs\": []}\n",
            "invalid compose output",
        ),
        (
            "def compose(spec, config):\n    for i in range(100000000):\n        pass\n",
            "limit",
        ),
        ("def compose(spec, config)\n", "syntax"),
        ("x = 1\n", "does not define compose"),
    ];
    for (src, want) in cases {
        let e = run(&p, compose_request("net", json!({}), None, bundle(src)))
            .await
            .unwrap_err();
        assert!(e.is_terminal(), "{src}: {e:?}");
        assert!(e.message().contains(want), "{src}: {}", e.message());
    }
    let e = run(
        &p,
        compose_request("net", json!({}), None, b"not a zip".to_vec()),
    )
    .await
    .unwrap_err();
    assert!(e.is_terminal() && e.message().contains("bundle"), "{e:?}");
    // Limits from the config apply.
    let tight = json!({"limits": {"max_ticks": 10}});
    let loop_src =
        "def compose(spec, config):\n    for i in range(1000):\n        pass\n    return {}\n";
    run(
        &p,
        compose_request("net", json!({}), None, bundle(loop_src)),
    )
    .await
    .unwrap();
    let e = run(
        &p,
        compose_request("net", json!({}), Some(tight), bundle(loop_src)),
    )
    .await
    .unwrap_err();
    assert!(e.is_terminal() && e.message().contains("tick"), "{e:?}");
    assert!(
        e.message().starts_with("cost: "),
        "an engine budget is the cost class: {e:?}"
    );
    // No bundle at all is a config problem: transient.
    let e = run(&p, compose_request("net", json!({}), None, vec![]))
        .await
        .unwrap_err();
    assert!(!e.is_terminal(), "{e:?}");
}

#[tokio::test]
async fn other_stages_work_rollup_and_operate() {
    let p = StarlarkProvider::new(kv("net"), pool());
    let mut req = compose_request("net", json!({}), None, bundle(GOOD));
    req.stage = Stage::Work;
    assert_eq!(
        run(&p, req.clone()).await.unwrap(),
        converge_sdk::Outcome::default()
    );
    req.stage = Stage::Operate;
    assert!(run(&p, req.clone()).await.unwrap_err().is_terminal());
    req.stage = Stage::Rollup;
    req.status = Some(json!({"bundle": "v1"}));
    let child = |kind: &str, ready: bool, phase: &str| Resource {
        kind: kind.into(),
        is_ready: ready,
        phase: phase.into(),
        ..Resource::default()
    };
    // The full form: counted from the rows the request carries.
    req.descendants = vec![
        child("vpc", true, "Ready"),
        child("subnet", false, "Failed"),
        child("subnet", true, "Ready"),
    ];
    req.descendants_included = true;
    let want = Some(
        json!({"bundle": "v1", "descendants": {"total": 3, "ready": 2, "failed": 1, "by_kind": {"subnet": 2, "vpc": 1}}}),
    );
    let out = run(&p, req.clone()).await.unwrap();
    assert_eq!(out.status, want);
    // The summary form: the same counts from the summary, with no row in the request.
    req.descendants = Vec::new();
    req.descendants_included = false;
    req.summary = Some(converge_sdk::RollupSummary {
        total: 3,
        by_phase: [("Ready".to_string(), 2), ("Failed".to_string(), 1)].into(),
        by_kind: [("subnet".to_string(), 2), ("vpc".to_string(), 1)].into(),
        failed_total: 1,
        not_ready_total: 1,
        ..Default::default()
    });
    let out = run(&p, req.clone()).await.unwrap();
    assert_eq!(out.status, want);
    assert_eq!(
        rollup_status(Some(&json!(7)), &[])["descendants"]["total"],
        0
    );
}

fn graph() -> Value {
    json!({"resources": [
        {"id": "vpc", "template": {"kind": "vpc", "name": "${root.name}-vpc", "spec": {"cidr": "${spec.cidr}", "n": "${spec.n}"}}},
        {"id": "subnet", "template": {"kind": "subnet", "name": "${root.name}-subnet",
                                      "spec": {"vpc_id": "${vpc.status.vpc_id}"}}}
    ]})
}

#[tokio::test]
async fn cel_compiles_once_and_composes_with_flows() {
    let p = CelProvider::new(kv("celnet"), pool());
    assert!(!p.ready());
    p.on_config(ProviderConfig {
        spec: Some(graph()),
        bundle: Default::default(),
    });
    assert!(p.ready());
    for _ in 0..3 {
        let out = run(
            &p,
            compose_request(
                "celnet",
                json!({"cidr": "10.0.0.0/16", "n": 3}),
                Some(graph()),
                vec![],
            ),
        )
        .await
        .unwrap();
        assert_eq!(out.children.len(), 2);
        assert_eq!(out.children[0].name, "root-vpc");
        assert_eq!(
            out.children[0].spec["n"].as_i64(),
            Some(3),
            "{{\"n\": 3}} is an int"
        );
        assert_eq!(out.children[1].spec["vpc_id"], Value::Null);
        assert_eq!(out.edges.len(), 1);
        assert_eq!(out.edges[0].to.name, "root-vpc");
        assert_eq!(out.edges[0].values[0].dependent_field, "/vpc_id");
    }
    assert_eq!(
        p.pool().stats().programs_sent,
        1,
        "one compile for one graph"
    );

    // Compile and compose errors are terminal.
    let bad =
        json!({"resources": [{"id": "a", "template": {"kind": "x", "name": "${nope.name}"}}]});
    let e = run(&p, compose_request("celnet", json!({}), Some(bad), vec![]))
        .await
        .unwrap_err();
    assert!(
        e.is_terminal() && e.message().contains("/resources/0/template/name"),
        "{e:?}"
    );
    let e = run(
        &p,
        compose_request("celnet", json!({"n": 1}), Some(graph()), vec![]),
    )
    .await
    .unwrap_err();
    assert!(e.is_terminal(), "{e:?}");
    let e = run(&p, compose_request("celnet", json!({}), None, vec![]))
        .await
        .unwrap_err();
    assert!(!e.is_terminal(), "no graph is a config problem: {e:?}");

    p.on_config(ProviderConfig {
        spec: Some(json!({"other": 1})),
        bundle: Default::default(),
    });
    assert!(!p.ready());
}
