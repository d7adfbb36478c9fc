//! End to end: the real `converge` (from `CONVERGE_BIN`) and the real `stdworker` running
//! the Python fixture handler: success with status, exit codes 2 and 1, invalid JSON, a
//! deadline killing the whole process group, live config edits and overrides, overrides and
//! programs refused before anything runs (`STDWORKER_EXEC_ALLOW`), and the documented
//! `examples/exec-hello` handler.

mod common;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use common::{Converge, Stdworker, alive, fixture, scratch_dir, wait_for};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);

fn manifest(kind: &str, deadline_secs: i64) -> Value {
    json!({
        "kind": kind,
        "kind_version": 1,
        "description": "stdworker e2e test kind",
        "config_schema": {"type": "object"},
        "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]}],
        "task_deadline_secs": deadline_secs,
    })
}

fn handler_config(args: &[&str], settings: Value) -> Value {
    let mut argv = vec![fixture("handler.py")];
    argv.extend(args.iter().map(|s| (*s).to_string()));
    json!({
        "program": "python3",
        "args": argv,
        "env": {"FROM_CONFIG": "yes"},
        "settings": settings,
    })
}

/// Converge with kind `exec-test` served by a stdworker running the fixture handler.
async fn setup() -> (Converge, Stdworker) {
    let c = Converge::start().await;
    c.apply_manifest(&manifest("exec-test", 30)).await;
    c.put_config(
        "exec-test-default",
        "exec-test",
        true,
        handler_config(&["v1"], json!({"a": 1, "b": {"c": 2}})),
    )
    .await;
    // A "secret" in the worker's environment must never reach a handler.
    let w = Stdworker::start(
        &c.broker,
        "exec-test",
        &[("STDWORKER_TEST_SECRET", "hunter2")],
    );
    (c, w)
}

fn failed(v: &Value) -> bool {
    v["phase"] == "Failed"
}

fn message(v: &Value) -> &str {
    v["failure_message"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_map_to_success_terminal_and_transient() {
    let (c, w) = setup().await;
    for (name, mode) in [
        ("ok", "ok"),
        ("term", "exit2"),
        ("trans", "exit1"),
        ("flaky", "flaky"),
        ("bad", "badjson"),
    ] {
        c.apply("exec-test", name, json!({"mode": mode})).await;
    }

    let r = c
        .wait_resource("exec-test", "ok", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    let s = &r["status"];
    assert_eq!(s["spec"], json!({"mode": "ok"}), "{r}");
    assert_eq!(s["args"], json!(["v1"]));
    assert_eq!(s["settings"], json!({"a": 1, "b": {"c": 2}}));
    assert_eq!(s["stage"], "STAGE_WORK");
    assert_eq!(
        (s["attempt"].as_i64(), s["generation"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(
        s["from_config"], "yes",
        "the config's env reaches the handler"
    );
    assert!(
        s["secret"].is_null(),
        "the worker's environment leaked: {r}"
    );

    let r = c
        .wait_resource("exec-test", "term", "terminally Failed", T, failed)
        .await;
    assert_eq!(r["failure_terminal"], true, "{r}");
    assert!(message(&r).contains("exit code 2"), "{r}");
    assert!(
        message(&r).contains("boom terminal 1"),
        "stderr tail in the message: {r}"
    );

    let r = c
        .wait_resource("exec-test", "trans", "retried transient failures", T, |v| {
            failed(v) && v["failure_attempts"].as_i64().unwrap_or(0) >= 2
        })
        .await;
    assert_eq!(r["failure_terminal"], false, "{r}");
    assert!(message(&r).contains("exit code 1"), "{r}");
    assert!(message(&r).contains("boom transient"), "{r}");

    let r = c
        .wait_resource("exec-test", "flaky", "Ready after a retry", T, |v| {
            v["phase"] == "Ready"
        })
        .await;
    assert_eq!(r["status"]["attempt"], 2, "exit 1 was retried: {r}");

    let r = c
        .wait_resource("exec-test", "bad", "Failed on invalid JSON", T, failed)
        .await;
    assert_eq!(r["failure_terminal"], true, "{r}");
    assert!(message(&r).contains("not valid JSON"), "{r}");

    assert!(w.stop().await.success(), "stdworker exits 0 after SIGTERM");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn deadline_kills_the_whole_process_group() {
    let c = Converge::start().await;
    c.apply_manifest(&manifest("exec-slow", 1)).await;
    c.put_config(
        "exec-slow-default",
        "exec-slow",
        true,
        handler_config(&[], json!(null)),
    )
    .await;
    let w = Stdworker::start(&c.broker, "exec-slow", &[]);
    let dir = scratch_dir("deadline");
    c.apply(
        "exec-slow",
        "slow",
        json!({"mode": "sleep", "pid_dir": dir.to_str().unwrap()}),
    )
    .await;

    // The handler's own child (a grandchild of stdworker) announces itself.
    let pid_file = dir.join("1.pid");
    let pid: u32 = wait_for(T, "the grandchild's pid file", || {
        let p = pid_file.clone();
        async move { std::fs::read_to_string(p).ok()?.trim().parse().ok() }
    })
    .await;

    let r = c
        .wait_resource("exec-slow", "slow", "a deadline failure", T, |v| {
            failed(v) && message(v).to_lowercase().contains("deadline")
        })
        .await;
    assert_eq!(r["failure_terminal"], false, "a deadline is transient: {r}");

    // SIGTERM at the deadline, SIGKILL a second later at most: the grandchild goes too.
    wait_for(
        Duration::from_secs(10),
        "the grandchild `sleep` to be killed",
        || async { (!alive(pid)).then_some(()) },
    )
    .await;

    assert!(w.stop().await.success());
    // Retries may have started more sleepers; the stop killed them. Verify, then clean up.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if let Some(p) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        {
            wait_for(
                Duration::from_secs(10),
                "retry sleepers killed at shutdown",
                || async { (!alive(p)).then_some(()) },
            )
            .await;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn config_edits_and_overrides_apply_without_restart() {
    let (c, w) = setup().await;
    c.apply("exec-test", "edit", json!({"n": 0})).await;
    let r = c
        .wait_resource("exec-test", "edit", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert_eq!(r["status"]["args"], json!(["v1"]));

    // Edit the default: new args. The push is asynchronous, so a stale answer is followed
    // by a new generation until the deadline.
    c.put_config(
        "exec-test-default",
        "exec-test",
        true,
        handler_config(&["v2"], json!({"a": 1, "b": {"c": 2}})),
    )
    .await;
    let mut n = 0;
    let r = wait_for(T, "a run with the edited args", || {
        let c = &c;
        n += 1;
        let gen_n = n;
        async move {
            let r = c.get("exec-test", "edit").await?;
            let settled = r["phase"] == "Ready" && r["synced_gen"] == r["generation"];
            if settled && r["status"]["args"] == json!(["v2"]) {
                return Some(r);
            }
            if settled {
                c.apply("exec-test", "edit", json!({"n": gen_n})).await;
            }
            None
        }
    })
    .await;
    assert_eq!(r["status"]["from_config"], "yes");

    // A per-resource override's settings deep-merge onto the default's (override wins per
    // key); what runs stays the default's.
    c.put_config(
        "exec-test-override",
        "exec-test",
        false,
        json!({"settings": {"b": {"d": 3}}}),
    )
    .await;
    c.apply_body(&json!({
        "kind": "exec-test", "kind_version": 1, "name": "with-ref", "spec": {},
        "provider_config_ref": "exec-test-override",
    }))
    .await;
    let r = c
        .wait_resource("exec-test", "with-ref", "Ready", T, |v| {
            v["phase"] == "Ready"
        })
        .await;
    assert_eq!(r["status"]["args"], json!(["v2"]), "{r}");
    assert_eq!(
        r["status"]["settings"],
        json!({"a": 1, "b": {"c": 2, "d": 3}}),
        "{r}"
    );
    assert_eq!(
        r["status"]["from_config"], "yes",
        "env comes from the default: {r}"
    );

    assert!(w.stop().await.success());
    c.stop().await;
}

/// An executable script at `dir/name` that creates `marker` and answers `{}`: if it ever
/// runs, the marker says so.
fn marker_script(dir: &Path, name: &str, marker: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!("#!/bin/sh\ntouch '{}'\necho '{{}}'\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[tokio::test(flavor = "multi_thread")]
async fn an_override_that_sets_the_program_fails_terminally_and_runs_nothing() {
    let (c, w) = setup().await;
    let dir = scratch_dir("override-program");
    let marker = dir.join("ran");
    let evil = marker_script(&dir, "evil.sh", &marker);
    // Without the refusal the effective config would run the script with the default's
    // args: the resource would go Ready and the marker would appear.
    c.put_config(
        "exec-test-evil",
        "exec-test",
        false,
        json!({"program": evil, "settings": {"a": 2}}),
    )
    .await;
    c.apply_body(&json!({
        "kind": "exec-test", "kind_version": 1, "name": "hijack", "spec": {},
        "provider_config_ref": "exec-test-evil",
    }))
    .await;
    let r = c
        .wait_resource("exec-test", "hijack", "a terminal failure", T, failed)
        .await;
    assert_eq!(r["failure_terminal"], true, "{r}");
    assert!(message(&r).contains("`program`"), "names the field: {r}");
    assert!(message(&r).contains("nothing was run"), "{r}");
    assert!(!marker.exists(), "the override's program ran");

    // The kind itself still works: the refusal is about the override, not the worker.
    c.apply("exec-test", "plain", json!({"mode": "ok"})).await;
    c.wait_resource("exec-test", "plain", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert!(!marker.exists());
    let _ = std::fs::remove_dir_all(&dir);
    assert!(w.stop().await.success());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_program_outside_stdworker_exec_allow_fails_terminally_and_runs_nothing() {
    let c = Converge::start().await;
    let outside = scratch_dir("allow-outside");
    let marker = outside.join("ran");
    let evil = marker_script(&outside, "evil.sh", &marker);
    let allowed = scratch_dir("allow-inside");
    let good_marker = allowed.join("ran");
    let good = marker_script(&allowed, "good.sh", &good_marker);
    for (kind, program) in [("exec-evil", &evil), ("exec-good", &good)] {
        c.apply_manifest(&manifest(kind, 30)).await;
        c.put_config(
            &format!("{kind}-default"),
            kind,
            true,
            json!({"program": program}),
        )
        .await;
    }
    let w = Stdworker::start(
        &c.broker,
        "exec-evil,exec-good",
        &[("STDWORKER_EXEC_ALLOW", allowed.to_str().unwrap())],
    );
    c.apply("exec-evil", "denied", json!({})).await;
    c.apply("exec-good", "allowed", json!({})).await;

    let r = c
        .wait_resource("exec-evil", "denied", "a terminal failure", T, failed)
        .await;
    assert_eq!(r["failure_terminal"], true, "{r}");
    assert!(
        message(&r).contains(evil.to_str().unwrap())
            && message(&r).contains("STDWORKER_EXEC_ALLOW"),
        "names the program and the variable: {r}"
    );
    assert!(
        !marker.exists(),
        "a program outside STDWORKER_EXEC_ALLOW ran"
    );

    // A program inside the allowed directory runs (so the worker did take tasks).
    c.wait_resource("exec-good", "allowed", "Ready", T, |v| {
        v["phase"] == "Ready"
    })
    .await;
    assert!(good_marker.exists(), "the allowed program ran");
    assert!(!marker.exists());

    assert!(w.stop().await.success());
    let _ = std::fs::remove_dir_all(&outside);
    let _ = std::fs::remove_dir_all(&allowed);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_exec_hello_example_greets() {
    let c = Converge::start().await;
    let example = format!("{}/../examples/exec-hello", common::manifest_dir());
    let read = |f: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(format!("{example}/{f}")).unwrap()).unwrap()
    };
    c.apply_manifest(&read("kind-exec-hello.json")).await;
    let mut cfg = read("providerconfig.json");
    // The documented config is relative to the repository root; tests run elsewhere.
    cfg["spec"]["args"] = json!([format!("{example}/handler.py")]);
    let (s, body) = c
        .call(reqwest::Method::POST, "providerconfigs", Some(&cfg))
        .await;
    assert!((200..300).contains(&s), "{s} {body}");
    let w = Stdworker::start(&c.broker, "exec-hello", &[]);
    c.apply_body(&read("world.json")).await;
    let r = c
        .wait_resource("exec-hello", "world", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert_eq!(r["status"]["message"], "hi, world!", "{r}");
    c.apply("exec-hello", "plain", json!({})).await;
    let r = c
        .wait_resource("exec-hello", "plain", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert_eq!(
        r["status"]["message"], "hello, plain!",
        "settings.greeting applies: {r}"
    );
    c.apply("exec-hello", "doomed", json!({"fail": "terminal"}))
        .await;
    let r = c
        .wait_resource("exec-hello", "doomed", "Failed", T, failed)
        .await;
    assert_eq!(r["failure_terminal"], true, "{r}");
    assert!(
        message(&r).contains("spec.fail asks for a terminal failure"),
        "{r}"
    );
    assert!(w.stop().await.success());
    c.stop().await;
}
