//! End to end: the real `converge` (from `CONVERGE_BIN`) and one real `stdworker` serving
//! four runaway compositions beside an ordinary one (issue 24): a CEL graph with `all()`
//! nested three deep over 1,000 items, a CEL graph with `map()` nested over 20,000 items
//! (building strings, so that a debug build reaches the memory bound long before the
//! deadline), a starlark bundle building a 1.5 GB string while it loads, and one doubling a
//! string in `compose`. Each fails terminally with its class (`deadline`, `memory`) while a fifth
//! kind on the same stdworker completes 100 composes; stdworker itself never restarts and
//! its peak RSS (`VmHWM` in `/proc`; the sandbox children are other processes) stays small.

mod common;

use std::time::{Duration, Instant};

use common::{
    Converge, Stdworker,
    hostile::{self, proc_status_kib, sandbox_children},
    wait_for,
};
use serde_json::{Value, json};

/// Liveness bound for everything below; nothing is expected to come near it.
const T: Duration = Duration::from_secs(180);

/// The sandbox's pool size in this test: room for the two slow runaways and the rest.
const PROCS: usize = 4;

/// stdworker's peak RSS bound. Before the sandbox, the starlark load alone took 2.8 GB.
const RSS_BOUND_KIB: u64 = 300 * 1024;

fn composite_manifest(kind: &str) -> Value {
    json!({"kind": kind, "kind_version": 1, "reactions": [
        {"name": "compose", "trigger": "specChange", "emits": ["children", "edges", "status"]}]})
}

/// Waits until `kind/name` is Failed; returns it and when that was seen.
async fn wait_failed(c: &Converge, kind: &str, name: &str) -> (Value, Instant) {
    let r = c
        .wait_resource(kind, name, &format!("{kind}/{name} Failed"), T, |v| {
            v["phase"] == "Failed"
        })
        .await;
    (r, Instant::now())
}

/// Failed terminally at the first attempt, and stdworker's message (after converge's
/// `stage STAGE_COMPOSE failed: `) starts with the class.
fn assert_terminal_class(r: &Value, class: &str) {
    assert_eq!(r["failure_terminal"], true, "{r}");
    assert_eq!(r["failure_attempts"], 1, "never retried: {r}");
    let msg = r["failure_message"].as_str().unwrap_or_default();
    let ours = msg.split_once("failed: ").map_or(msg, |(_, m)| m);
    assert!(
        ours.starts_with(&format!("{class}: ")),
        "class {class} first in stdworker's message: {r}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn runaway_compositions_fail_with_their_class_while_another_kind_keeps_composing() {
    let c = Converge::start().await;
    for kind in ["celall", "celmap", "slhuge", "sldouble", "slok"] {
        c.apply_manifest(&composite_manifest(kind)).await;
    }
    c.put_config("celall-default", "celall", true, hostile::cel_nested_all())
        .await;
    c.put_config(
        "celmap-default",
        "celmap",
        true,
        hostile::cel_nested_map_strings(),
    )
    .await;
    for (kind, src) in [
        ("slhuge", hostile::STARLARK_HUGE_AT_LOAD),
        ("sldouble", hostile::STARLARK_DOUBLING),
        ("slok", hostile::STARLARK_ECHO),
    ] {
        let name = format!("{kind}-default");
        c.put_config_bundle(&name, kind, true, json!({}), &hostile::bundle(src))
            .await;
    }
    let procs = PROCS.to_string();
    let mut w = Stdworker::start_env(
        &c.broker,
        &[
            ("STDWORKER_CEL_KINDS", "celall,celmap"),
            ("STDWORKER_STARLARK_KINDS", "slhuge,sldouble,slok"),
            ("STDWORKER_SANDBOX_PROCS", &procs),
            // The default bounds: 512 MiB per child, 30 s per evaluation.
        ],
    );
    let pid = w.child.id().expect("stdworker runs");

    // The runaways first, then 100 ordinary composes of another kind.
    let started = Instant::now();
    c.apply("celall", "all", hostile::items_spec(hostile::ALL_ITEMS))
        .await;
    c.apply(
        "celmap",
        "map",
        hostile::padded_items_spec(hostile::MAP_ITEMS),
    )
    .await;
    c.apply("slhuge", "huge", json!({})).await;
    c.apply("sldouble", "double", json!({})).await;
    for i in 0..100 {
        c.apply("slok", &format!("ok-{i}"), json!({"i": i})).await;
    }

    // Everything is watched at once, so each time is its own.
    let composes = async {
        let ok = wait_for(T, "100 slok composes Ready", || async {
            let (_, body) = c
                .call(
                    reqwest::Method::GET,
                    "resources?kind=slok&phase=Ready&limit=500",
                    None,
                )
                .await;
            let ready = body["resources"].as_array().cloned().unwrap_or_default();
            (ready.len() == 100).then_some(ready)
        })
        .await;
        let done = Instant::now();
        (ok, done, c.get("celall", "all").await.unwrap())
    };
    let ((ok, ok_done, all_then), all, map, huge, double) = tokio::join!(
        composes,
        wait_failed(&c, "celall", "all"),
        wait_failed(&c, "celmap", "map"),
        wait_failed(&c, "slhuge", "huge"),
        wait_failed(&c, "sldouble", "double"),
    );
    for r in &ok {
        let name = r["name"].as_str().unwrap();
        let i: u64 = name["ok-".len()..].parse().unwrap();
        let r = c.get("slok", name).await.unwrap();
        assert_eq!(r["status"]["i"], i, "each compose ran its own spec: {r}");
    }
    // The deadline runaway held its child for its whole 30 s budget; the 100 composes
    // needed nothing from it.
    assert_ne!(
        all_then["phase"], "Failed",
        "the 100 composes finished while the deadline runaway still ran: {all_then}"
    );
    let failed = [
        ("celall (nested all)", all, "deadline"),
        ("celmap (nested map)", map, "memory"),
        ("slhuge (1.5 GB at load)", huge, "memory"),
        ("sldouble (doubling)", double, "memory"),
    ];
    for (what, (r, at), class) in &failed {
        assert_terminal_class(r, class);
        eprintln!(
            "e2e_sandbox: {what} failed terminally ({class}) after {:?}",
            *at - started
        );
    }

    // stdworker itself: still the same process, small, with at most PROCS children.
    assert!(
        w.child.try_wait().unwrap().is_none(),
        "stdworker kept running"
    );
    let hwm = proc_status_kib(pid, "VmHWM").expect("stdworker's /proc status");
    let rss = proc_status_kib(pid, "VmRSS").unwrap_or(0);
    let children = sandbox_children(pid);
    eprintln!(
        "e2e_sandbox: stdworker VmHWM {} MiB, VmRSS {} MiB, {} sandbox children; 100 composes Ready after {:?}",
        hwm / 1024,
        rss / 1024,
        children.len(),
        ok_done - started
    );
    assert!(
        hwm < RSS_BOUND_KIB,
        "stdworker's peak RSS {hwm} KiB is above {RSS_BOUND_KIB} KiB"
    );
    assert!(!children.is_empty(), "the evaluations ran in children");
    assert!(children.len() <= PROCS, "{children:?}");

    assert!(w.stop().await.success());
    c.stop().await;
}
