//! The conformance kinds on single requests, without a broker: the parts of KINDS.md a
//! handler decides by itself (statuses, children and flows, failure kinds, event lines).

use std::sync::Arc;

use converge_conformance_worker::{EventLog, kinds};
use converge_sdk::{CancelReason, Provider, ProviderConfig, Resource, Stage, Transition, testing};
use serde_json::{Value, json};

/// A fresh event log file for one test (tests run in parallel, so each gets its own).
fn fresh_log(tag: &str) -> (Arc<EventLog>, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("conf-kinds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{tag}.jsonl"));
    let _ = std::fs::remove_file(&path);
    (
        Arc::new(EventLog::to_file("rust".into(), &path).unwrap()),
        path,
    )
}

fn quiet() -> Arc<EventLog> {
    Arc::new(
        EventLog::to_file(
            "rust".into(),
            &std::env::temp_dir().join("conf-kinds-null.jsonl"),
        )
        .unwrap(),
    )
}

fn events(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn leaf_echoes_and_logs_one_line() {
    let (log, path) = fresh_log("leaf");
    let p = kinds::Leaf::new(log);
    let out = testing::run(&p, testing::request("conf-leaf", json!({"v": 1})))
        .await
        .unwrap();
    assert_eq!(
        out.status,
        Some(
            json!({"echo": {"v": 1}, "form": "rust", "generation": 1, "attempt": 1, "trigger": "specChange"})
        )
    );
    let ev = events(&path);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["event"], "work");
    assert_eq!(ev[0]["stage"], "STAGE_WORK");
    assert_eq!(ev[0]["kind"], "conf-leaf");
}

#[tokio::test]
async fn composite_chains_children_with_value_flows() {
    let p = kinds::Composite::new(quiet());
    let mut req = testing::request("conf-composite", json!({"children": 3}));
    req.reaction = "compose".into();
    req.stage = Stage::Compose;
    req.resource.name = "c".into();
    let out = testing::run(&p, req).await.unwrap();
    let names: Vec<_> = out.children.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["c-0", "c-1", "c-2"]);
    assert_eq!(out.children[2].spec, json!({"index": 2}));
    assert_eq!(out.edges.len(), 2);
    assert_eq!(out.edges[1].from.name, "c-2");
    assert_eq!(out.edges[1].to.name, "c-1");
    assert_eq!(out.edges[1].values[0].dependent_field, "/upstream_index");
    assert_eq!(out.edges[1].values[0].source_field, "/echo/index");
    assert_eq!(out.status, Some(json!({"composed": 3})));
}

#[tokio::test]
async fn rollup_counts_ready_descendants() {
    let p = kinds::Composite::new(quiet());
    let mut req = testing::request("conf-composite", json!({"children": 2}));
    req.reaction = "rollup".into();
    req.stage = Stage::Rollup;
    let ready = Resource {
        is_ready: true,
        ..Resource::default()
    };
    req.descendants = vec![ready, Resource::default()];
    let out = testing::run(&p, req).await.unwrap();
    assert_eq!(
        out.status,
        Some(json!({"composed": 2, "descendants": 2, "ready": 1}))
    );
}

#[tokio::test]
async fn fail_modes_map_to_terminal_and_transient() {
    let p = kinds::Fail::new(quiet());
    let e = testing::run(
        &p,
        testing::request("conf-fail", json!({"mode": "terminal"})),
    )
    .await
    .unwrap_err();
    assert!(e.is_terminal());
    assert_eq!(e.message(), "conformance terminal");
    let mut req = testing::request("conf-fail", json!({"mode": "transient", "times": 2}));
    req.attempt = 2;
    let e = testing::run(&p, req.clone()).await.unwrap_err();
    assert!(!e.is_terminal());
    assert_eq!(e.message(), "conformance transient 2");
    req.attempt = 3;
    let out = testing::run(&p, req).await.unwrap();
    assert_eq!(out.status, Some(json!({"ok": true, "attempt": 3})));
}

#[tokio::test]
async fn slow_logs_cancelled_when_its_token_is_cancelled() {
    let (log, path) = fresh_log("slow");
    let p = kinds::Slow::new(log);
    let req = testing::request("conf-slow", json!({"sleep_ms": 5000}));
    // What the runtime does on CancelTask: record the reason, then cancel the token.
    let (cancel, reason) = (req.cancel.clone(), req.cancel_reason.clone());
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        reason.set(CancelReason::SUPERSEDED);
        cancel.cancel();
    });
    let e = testing::run(&p, req).await.unwrap_err();
    assert!(!e.is_terminal());
    let ev = events(&path);
    let names: Vec<_> = ev.iter().map(|e| e["event"].clone()).collect();
    assert_eq!(names, [json!("work"), json!("cancelled")]);
    assert_eq!(ev[1]["reason"], json!("superseded"));
}

#[tokio::test]
async fn react_logs_the_transition_and_token_and_fails_first_when_asked() {
    let (log, path) = fresh_log("react");
    let p = kinds::React::new(log);
    let mut req = testing::request("conf-react", json!({"react_failures": 1}));
    req.reaction = "react".into();
    req.stage = Stage::React;
    req.transition = Some(Transition::Synced);
    req.dedup_token = "id:synced:1:b".into();
    let e = testing::run(&p, req.clone()).await.unwrap_err();
    assert!(!e.is_terminal());
    assert_eq!(e.message(), "react failure 1");
    req.attempt = 2;
    testing::run(&p, req).await.unwrap();
    let ev = events(&path);
    assert_eq!(ev.len(), 2);
    for e in &ev {
        assert_eq!(e["event"], json!("react"));
        assert_eq!(e["stage"], json!("STAGE_REACT"));
        assert_eq!(e["transition"], json!("TRANSITION_SYNCED"));
        assert_eq!(e["dedup_token"], json!("id:synced:1:b"));
    }
}

#[test]
fn readiness_follows_the_default_config() {
    let p = kinds::Ready::new(quiet());
    assert!(p.ready(), "no config means ready");
    p.on_config(ProviderConfig {
        spec: Some(json!({"ready": false})),
        bundle: Default::default(),
    });
    assert!(!p.ready());
    p.on_config(ProviderConfig {
        spec: Some(json!({"ready": true})),
        bundle: Default::default(),
    });
    assert!(p.ready());
}

#[tokio::test]
async fn config_echoes_the_deep_merge() {
    let p = kinds::Config::new(quiet());
    let mut req = testing::request("conf-config", json!({}));
    req.config = ProviderConfig {
        spec: Some(json!({"a": 1, "b": {"c": 2}})),
        bundle: vec![1, 2].into(),
    };
    req.config_override = Some(json!({"b": {"d": 3}}));
    let out = testing::run(&p, req).await.unwrap();
    assert_eq!(
        out.status,
        Some(json!({"config": {"a": 1, "b": {"c": 2, "d": 3}}, "bundle_len": 2}))
    );
}
