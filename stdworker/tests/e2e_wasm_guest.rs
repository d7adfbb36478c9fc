//! End to end with the committed Rust guest (`wasm-host/tests/fixtures/conformance-guest.wasm`,
//! sources in `wasm-host/guests/rust`): the real `converge`, the real `stdworker` serving a
//! composite and its leaves from one component; the children compose with value flows,
//! reconcile in the sandbox and the root rolls up, every task journaled.

mod common;

use std::time::Duration;

use common::{Converge, Stdworker, journal_lines, leaf_manifest, scratch_dir};
use serde_json::json;

const T: Duration = Duration::from_secs(60);

/// The committed Rust guest: one component serving the composite and its leaves.
#[tokio::test(flavor = "multi_thread")]
async fn rust_guest_composes_flows_and_rolls_up() {
    let path = format!(
        "{}/../wasm-host/tests/fixtures/conformance-guest.wasm",
        common::manifest_dir()
    );
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{path}: {e} (build it with wasm-host/guests/build-rust.sh)"));
    let c = Converge::start().await;
    c.apply_manifest(&leaf_manifest("conf-leaf")).await;
    c.apply_manifest(
        &json!({"kind": "conf-composite", "kind_version": 1, "reactions": [
        {"name": "compose", "trigger": "specChange", "emits": ["children", "edges", "status"]},
        {"name": "rollup", "trigger": "childrenSettled", "emits": ["status", "conditions"]}]}),
    )
    .await;
    for kind in ["conf-leaf", "conf-composite"] {
        c.put_config_bundle(&format!("{kind}-default"), kind, true, json!({}), &bytes)
            .await;
    }
    let journal = scratch_dir("wasm-journal").join("tasks.jsonl");
    let w = Stdworker::wasm(&c.broker, "conf-leaf,conf-composite", &journal);

    c.apply("conf-composite", "bom", json!({"children": 4}))
        .await;
    let r = c
        .wait_resource("conf-composite", "bom", "Ready", T, |v| {
            v["phase"] == "Ready" && v["status"]["descendants"] == 4
        })
        .await;
    assert_eq!(
        r["status"],
        json!({"composed": 4, "descendants": 4, "ready": 4}),
        "{r}"
    );
    for i in 0..4 {
        let leaf = c
            .get("conf-leaf", &format!("bom-{i}"))
            .await
            .expect("child exists");
        assert_eq!(leaf["phase"], "Ready", "{leaf}");
        assert_eq!(leaf["status"]["form"], "wasm", "{leaf}");
        assert_eq!(leaf["status"]["echo"]["index"], i, "{leaf}");
        if i > 0 {
            // The value flow: child i's spec got child i-1's echoed index.
            assert_eq!(leaf["spec"]["upstream_index"], i - 1, "{leaf}");
        }
    }
    let events: Vec<String> = journal_lines(&journal)
        .iter()
        .map(|l| l["event"].as_str().unwrap_or_default().to_string())
        .collect();
    for e in ["compose", "work", "rollup"] {
        assert!(events.iter().any(|x| x == e), "{e} missing in {events:?}");
    }
    assert!(w.stop().await.success());
    c.stop().await;
}
