//! Unit tests of the exec provider's parts, no broker: kind-list parsing, the config,
//! request building, response parsing, exit-code mapping, the process runner's caps,
//! environment scrubbing and process-group killing (with real `sh` processes), and the
//! refusals that keep data from choosing what runs (override fields, `STDWORKER_EXEC_ALLOW`).

use std::{collections::BTreeMap, path::Path, time::Duration};

use converge_sdk::KindVersion;
use converge_sdk::{Operation, Provider, ProviderConfig, Resource, Stage, Transition, testing};
use converge_stdworker::{
    kinds::parse_kind_list,
    providers::exec::{
        CommandSpec, EXEC_ALLOW_VAR, ExecAllow, ExecConfig, ExecProvider, Exit, Limits, RunReport,
        Stop, build_request, check_override, child_env, execute, outcome_of, parse_response,
        process::Tail, resolve_program, response::to_pointer, run_process,
    },
};
use converge_testkit::alive;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------- kind lists

#[test]
fn kind_lists_parse_with_default_versions() {
    let got = parse_kind_list("V", " a , b:2,c.d_e-1:1,").unwrap();
    assert_eq!(
        got,
        vec![
            KindVersion::new("a", 1),
            KindVersion::new("b", 2),
            KindVersion::new("c.d_e-1", 1)
        ]
    );
    // The same kind at two versions is two pairs.
    assert_eq!(parse_kind_list("V", "a,a:2").unwrap().len(), 2);
}

#[test]
fn malformed_kind_lists_name_the_variable_and_entry() {
    for (bad, needle) in [
        ("a:x", "\"a:x\""),
        ("a:0", "versions start at 1"),
        ("a:-3", "versions start at 1"),
        ("Upper", "not a valid kind name"),
        ("has space", "not a valid kind name"),
        (":2", "not a valid kind name"),
        ("a,a:1", "listed twice"),
        (",,", "comma-separated"),
    ] {
        let e = parse_kind_list("STDWORKER_EXEC_KINDS", bad).unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.var(), "STDWORKER_EXEC_KINDS");
        assert!(msg.contains(needle), "{bad:?}: {msg}");
    }
}

// ---------------------------------------------------------------- config

#[test]
fn exec_config_reads_every_field_and_rejects_typos() {
    let c = ExecConfig::from_value(&json!({
        "program": "prog", "args": ["a"], "env": {"K": "V"}, "settings": {"x": 1},
        "timeout_secs": 1.5, "ready": true
    }))
    .unwrap();
    assert_eq!(c.program(), Some("prog"));
    assert_eq!(c.args, vec!["a"]);
    assert_eq!(c.env.get("K").map(String::as_str), Some("V"));
    assert_eq!(c.settings, Some(json!({"x": 1})));
    assert_eq!(c.timeout(), Some(Duration::from_millis(1500)));
    assert!(c.is_ready());

    assert_eq!(
        ExecConfig::from_value(&Value::Null).unwrap(),
        ExecConfig::default()
    );
    assert_eq!(
        ExecConfig::from_value(&json!({"timeout_secs": 0}))
            .unwrap()
            .timeout(),
        None
    );
    for bad in [
        json!({"programm": "x"}),
        json!({"args": "not-a-list"}),
        json!({"env": {"K": 1}}),
        json!({"env": {"A=B": "x"}}),
        json!({"timeout_secs": -1}),
        json!("a string"),
    ] {
        let e = ExecConfig::from_value(&bad).unwrap_err();
        assert!(e.contains("invalid exec config"), "{bad}: {e}");
    }
}

#[test]
fn readiness_needs_a_program_and_no_ready_false() {
    let ready = |v: Value| ExecConfig::from_value(&v).unwrap().is_ready();
    assert!(ready(json!({"program": "p"})));
    assert!(ready(json!({"program": "p", "ready": true})));
    assert!(!ready(json!({"program": "p", "ready": false})));
    assert!(!ready(json!({"program": "  "})));
    assert!(!ready(json!({"settings": {}})));
}

#[test]
fn on_config_flips_provider_readiness() {
    let p = ExecProvider::new(KindVersion::new("k", 1));
    assert!(!p.ready(), "unready until a config names a program");
    let push = |spec: Option<Value>| ProviderConfig {
        spec,
        bundle: Default::default(),
    };
    p.on_config(push(Some(json!({"program": "p"}))));
    assert!(p.ready());
    p.on_config(push(Some(json!({"program": "p", "ready": false}))));
    assert!(!p.ready());
    p.on_config(push(Some(json!({"program": "p", "ready": true}))));
    assert!(p.ready());
    p.on_config(push(Some(json!({"programm": "typo"}))));
    assert!(!p.ready(), "an unusable config is unready");
    p.on_config(push(None));
    assert!(!p.ready(), "a deleted config is unready");
}

#[test]
fn child_env_is_path_home_and_config_only() {
    let mut cfg = BTreeMap::new();
    cfg.insert("K".to_string(), "V".to_string());
    cfg.insert("HOME".to_string(), "/elsewhere".to_string());
    let env = child_env(&cfg);
    let keys: Vec<&str> = env.keys().map(String::as_str).collect();
    assert_eq!(keys, vec!["HOME", "K", "PATH"]);
    assert_eq!(env["HOME"], "/elsewhere", "the config wins");
}

// ---------------------------------------------------------------- request

fn resource(kind: &str, name: &str, ready: bool) -> Resource {
    Resource {
        kind: kind.into(),
        name: name.into(),
        spec: json!({"i": 1}).into(),
        status: Some(json!({"s": 2}).into()),
        is_ready: ready,
        phase: "Ready".into(),
        ..Resource::default()
    }
}

#[test]
fn work_request_has_the_core_fields() {
    let mut req = testing::request("k", json!({"greeting": "hi"}));
    req.attempt = 3;
    let doc = build_request(&req, Some(&json!({"x": 1})), b"", &[]);
    assert_eq!(
        doc,
        json!({
            "reaction": "work", "trigger": "specChange", "stage": "STAGE_WORK",
            "kind": "k", "kind_version": 1, "name": "test", "generation": 1, "attempt": 3,
            "spec": {"greeting": "hi"}, "status": null, "settings": {"x": 1},
        })
    );
    // A bundle is base64; a deadline becomes the remaining milliseconds.
    req.deadline = Some(tokio::time::Instant::now() + Duration::from_secs(10));
    let doc = build_request(&req, None, b"hello", &[]);
    assert_eq!(doc["bundle"], "aGVsbG8=");
    assert_eq!(doc["settings"], Value::Null);
    let left = doc["deadline_ms"].as_u64().unwrap();
    assert!(left > 9_000 && left <= 10_000, "{left}");
}

#[test]
fn stage_specific_fields_appear_only_for_their_stage() {
    let mut req = testing::request("k", json!({}));
    req.stage = Stage::Compose;
    req.reaction = "compose".into();
    req.observed = vec![resource("c", "a", true)];
    let doc = build_request(&req, None, b"", &[]);
    assert_eq!(doc["stage"], "STAGE_COMPOSE");
    assert_eq!(
        doc["observed"],
        json!([{"kind": "c", "name": "a", "spec": {"i": 1}, "status": {"s": 2}, "phase": "Ready", "is_ready": true}])
    );
    assert!(doc.get("descendants").is_none() && doc.get("operation").is_none());
    assert!(doc.get("dry_run").is_none(), "a real compose says nothing");
    req.dry_run = true;
    let doc = build_request(&req, None, b"", &[]);
    assert_eq!(doc["dry_run"], true, "a plan's dry run says so");

    req.stage = Stage::Rollup;
    req.observed.clear();
    let descendants = vec![resource("c", "a", false)];
    req.status = Some(json!({"so": "far"}));
    let doc = build_request(&req, None, b"", &descendants);
    assert_eq!(doc["descendants"][0]["is_ready"], false);
    assert_eq!(doc["status"], json!({"so": "far"}));
    assert!(doc.get("observed").is_none());

    req.stage = Stage::Operate;
    req.operation = Some(Operation {
        resource_id: None,
        verb: "ping".into(),
        input: Some(json!({"x": 1})),
        attempts: 1,
        requested_by: "me".into(),
    });
    let doc = build_request(&req, None, b"", &[]);
    assert_eq!(doc["operation"], json!({"verb": "ping", "input": {"x": 1}}));

    req.stage = Stage::React;
    req.transition = Some(Transition::Failed);
    req.dedup_token = "tok".into();
    let doc = build_request(&req, None, b"", &[]);
    assert_eq!(doc["transition"], "TRANSITION_FAILED");
    assert_eq!(doc["dedup_token"], "tok");
    assert!(doc.get("operation").is_none());

    req.stage = Stage::Delete;
    let doc = build_request(&req, None, b"", &[]);
    for absent in [
        "observed",
        "descendants",
        "operation",
        "transition",
        "dedup_token",
        "bundle",
        "dry_run",
    ] {
        assert!(doc.get(absent).is_none(), "{absent} in {doc}");
    }
}

// ---------------------------------------------------------------- response

#[test]
fn empty_stdout_is_an_empty_outcome() {
    assert_eq!(parse_response(b"").unwrap(), Default::default());
    assert_eq!(parse_response(b" \n\t").unwrap(), Default::default());
    assert_eq!(parse_response(b"{}").unwrap(), Default::default());
}

#[test]
fn full_response_maps_to_an_outcome() {
    let out = parse_response(
        br#"{
        "status": {"a": 1},
        "conditions": [{"type": "Ready", "status": "True", "reason": "R"}],
        "children": [{"kind": "c", "name": "x", "spec": {"i": 0}, "labels": {"l": "v"}},
                     {"kind": "c", "kind_version": 2, "name": "y"}],
        "edges": [{"from": {"kind": "c", "name": "y"}, "to": {"kind": "c", "name": "x"},
                   "values": [{"dependent_field": "up", "source_field": "/echo/i"}]}],
        "configs": [{"name": "cfg", "kind": "c", "spec": {"k": 1}}],
        "output": [1, 2]
    }"#,
    )
    .unwrap();
    assert_eq!(out.status, Some(json!({"a": 1})));
    assert_eq!(out.conditions[0].type_, "Ready");
    assert_eq!(out.conditions[0].reason, "R");
    assert_eq!(out.conditions[0].message, "");
    assert_eq!(out.children.len(), 2);
    assert_eq!(
        out.children[0].kind_version, 1,
        "kind_version defaults to 1"
    );
    assert_eq!(out.children[0].labels["l"], "v");
    assert_eq!(out.children[1].spec, json!({}), "spec defaults to {{}}");
    assert_eq!(out.edges[0].from.name, "y");
    assert_eq!(
        out.edges[0].values[0].dependent_field, "/up",
        "a bare name is a pointer"
    );
    assert_eq!(out.edges[0].values[0].source_field, "/echo/i");
    assert_eq!(out.configs[0].kind_version, 1);
    assert!(!out.configs[0].is_default);
    assert_eq!(out.operation_output, Some(json!([1, 2])));
}

#[test]
fn bad_responses_are_errors() {
    for (bad, needle) in [
        (&b"not json"[..], "not valid JSON"),
        (b"[1]", "must be a JSON object"),
        (b"{\"stauts\": {}}", "unknown field"),
        (
            b"{\"conditions\": [{\"type\": \"Ready\", \"status\": \"yes\"}]}",
            "True, False or Unknown",
        ),
        (
            b"{\"conditions\": [{\"type\": \"\", \"status\": \"True\"}]}",
            "empty type",
        ),
        (
            b"{\"children\": [{\"kind\": \"c\", \"name\": \"x\", \"kind_version\": 0}]}",
            "at least 1",
        ),
        (b"{\"children\": [{\"name\": \"x\"}]}", "kind"),
    ] {
        let e = parse_response(bad).unwrap_err();
        assert!(e.contains(needle), "{}: {e}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn pointers_escape_bare_names() {
    assert_eq!(to_pointer("a"), "/a");
    assert_eq!(to_pointer("/a/b"), "/a/b");
    assert_eq!(to_pointer("a/b~c"), "/a~1b~0c");
    assert_eq!(to_pointer(""), "");
}

// ---------------------------------------------------------------- exit mapping

fn report(exit: Exit, stop: Option<Stop>, stdout: &str, stderr: &str) -> RunReport {
    RunReport {
        pid: 42,
        exit,
        stop,
        stdout: stdout.as_bytes().to_vec(),
        stderr_tail: stderr.into(),
        stderr_dropped: 0,
    }
}

#[test]
fn exit_codes_map_to_results() {
    let l = Limits::default();
    let ok = outcome_of(
        &report(Exit::Code(0), None, r#"{"status": {"a": 1}}"#, ""),
        &l,
    )
    .unwrap();
    assert_eq!(ok.status, Some(json!({"a": 1})));
    assert_eq!(
        outcome_of(&report(Exit::Code(0), None, "", "noise"), &l).unwrap(),
        Default::default()
    );

    let e = outcome_of(&report(Exit::Code(0), None, "nope", "why\n"), &l).unwrap_err();
    assert!(e.is_terminal(), "invalid JSON on exit 0 is terminal");
    assert!(e.message().contains("stderr: why"), "{e}");

    let e = outcome_of(&report(Exit::Code(2), None, "{}", "bad spec\n"), &l).unwrap_err();
    assert!(e.is_terminal());
    assert!(
        e.message().contains("exit code 2") && e.message().ends_with("stderr: bad spec"),
        "{e}"
    );

    for exit in [
        Exit::Code(1),
        Exit::Code(3),
        Exit::Code(255),
        Exit::Signal(9),
    ] {
        let e = outcome_of(&report(exit, None, "{}", "flaky"), &l).unwrap_err();
        assert!(!e.is_terminal(), "{exit:?}");
        assert!(e.message().contains("flaky"), "{e}");
    }
    assert!(
        outcome_of(&report(Exit::Signal(9), None, "", ""), &l)
            .unwrap_err()
            .message()
            .contains("killed by signal 9")
    );
}

#[test]
fn stopped_runs_are_transient_whatever_the_exit_code() {
    let l = Limits::default();
    for (stop, needle) in [
        (Stop::Cancelled, "cancelled"),
        (Stop::Deadline, "deadline exceeded"),
        (Stop::TimedOut(Duration::from_secs(3)), "timed out after 3s"),
    ] {
        // Exit 0 with a valid response, or exit 2: still transient once stopped.
        for exit in [Exit::Code(0), Exit::Code(2), Exit::Signal(15)] {
            let e = outcome_of(&report(exit, Some(stop), "{}", ""), &l).unwrap_err();
            assert!(!e.is_terminal(), "{stop:?} {exit:?}");
            assert!(e.message().contains(needle), "{e}");
        }
    }
    let e = outcome_of(
        &report(Exit::Signal(9), Some(Stop::OutputTooLarge), "", ""),
        &l,
    )
    .unwrap_err();
    assert!(e.is_terminal());
    assert!(e.message().contains("output too large"), "{e}");
}

#[test]
fn stderr_tail_keeps_the_last_bytes() {
    let mut t = Tail::new(8);
    for _ in 0..100 {
        t.push(b"0123456789");
    }
    let (text, dropped) = t.finish();
    assert_eq!(text, "23456789");
    assert_eq!(dropped, 992);
    // A multi-byte character cut at the front is dropped, not mangled.
    let mut t = Tail::new(4);
    t.push("aé€".as_bytes()); // 1 + 2 + 3 bytes
    let (text, _) = t.finish();
    assert_eq!(text, "€");
}

// ---------------------------------------------------------------- processes

fn sh(script: &str) -> CommandSpec {
    CommandSpec {
        program: "sh".into(),
        arg0: None,
        args: vec!["-c".into(), script.into()],
        env: child_env(&BTreeMap::new()),
    }
}

fn small_limits() -> Limits {
    Limits {
        stdout_max: 1024,
        stderr_tail: 64,
        kill_grace: Duration::from_millis(300),
        pipe_grace: Duration::from_millis(300),
    }
}

async fn run(cmd: &CommandSpec, input: &str, timeout: Option<Duration>) -> RunReport {
    run_process(
        cmd,
        input.as_bytes().to_vec(),
        &CancellationToken::new(),
        None,
        timeout,
        &small_limits(),
    )
    .await
    .unwrap()
}

async fn wait_gone(pid: u32) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(tokio::time::Instant::now() < deadline, "pid {pid} survived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn stdin_reaches_the_program_and_stdout_comes_back() {
    let r = run(&sh("cat; echo err >&2; exit 3"), "{\"x\":1}", None).await;
    assert_eq!(r.exit, Exit::Code(3));
    assert_eq!(r.stop, None);
    assert_eq!(r.stdout, b"{\"x\":1}");
    assert_eq!(r.stderr_tail, "err\n");
}

#[tokio::test]
async fn the_environment_is_scrubbed() {
    // The test process's own environment has plenty (CARGO_*, at least); none may leak.
    let mut cmd = sh("env");
    cmd.env.insert("FROM_CONFIG".into(), "1".into());
    let r = run(&cmd, "", None).await;
    let mut names: Vec<String> = String::from_utf8(r.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
        // sh itself may export these.
        .filter(|k| !matches!(k.as_str(), "PWD" | "SHLVL" | "_" | "OLDPWD"))
        .collect();
    names.sort();
    let mut want = vec!["FROM_CONFIG".to_string(), "PATH".to_string()];
    if std::env::var_os("HOME").is_some() {
        want.insert(1, "HOME".into());
    }
    assert_eq!(names, want);
}

#[tokio::test]
async fn stdout_over_the_cap_kills_the_run() {
    let r = run(
        &sh("while :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done"),
        "",
        None,
    )
    .await;
    assert_eq!(r.stop, Some(Stop::OutputTooLarge));
    assert!(r.stdout.len() <= 1024);
    let e = outcome_of(&r, &small_limits()).unwrap_err();
    assert!(
        e.is_terminal() && e.message().contains("output too large"),
        "{e}"
    );
}

#[tokio::test]
async fn stderr_is_kept_as_a_bounded_tail() {
    let r = run(
        &sh("i=0; while [ $i -lt 200 ]; do echo line-$i >&2; i=$((i+1)); done; exit 1"),
        "",
        None,
    )
    .await;
    assert!(r.stderr_tail.len() <= 64);
    assert!(r.stderr_tail.ends_with("line-199\n"), "{:?}", r.stderr_tail);
    assert!(r.stderr_dropped > 0);
    let e = outcome_of(&r, &small_limits()).unwrap_err();
    assert!(e.message().contains("line-199"), "{e}");
}

#[tokio::test]
async fn a_program_that_ignores_stdin_is_fine() {
    // 1 MiB of input that is never read: the broken pipe must not fail the run.
    let input = "x".repeat(1 << 20);
    let r = run(&sh("echo '{}'"), &input, None).await;
    assert_eq!(r.exit, Exit::Code(0));
    assert_eq!(r.stdout, b"{}\n");
}

#[tokio::test]
async fn timeout_kills_the_group_including_grandchildren() {
    let dir = std::env::temp_dir().join(format!("stdworker-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("timeout.pid");
    let script = format!("sleep 60 & echo $! > {}; wait", pidfile.display());
    let started = std::time::Instant::now();
    let r = run(&sh(&script), "", Some(Duration::from_millis(300))).await;
    assert_eq!(r.stop, Some(Stop::TimedOut(Duration::from_millis(300))));
    assert!(started.elapsed() < Duration::from_secs(5));
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_gone(pid).await;
    let _ = std::fs::remove_file(pidfile);
}

#[tokio::test]
async fn sigterm_is_escalated_to_sigkill_after_the_grace() {
    // The shell ignores SIGTERM; only SIGKILL ends it.
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c2.cancel();
    });
    let started = std::time::Instant::now();
    let r = run_process(
        &sh("trap '' TERM; while :; do sleep 0.05; done"),
        Vec::new(),
        &cancel,
        None,
        None,
        &small_limits(),
    )
    .await
    .unwrap();
    assert_eq!(r.stop, Some(Stop::Cancelled));
    assert_eq!(r.exit, Exit::Signal(9));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn leftovers_in_the_group_are_killed_when_the_program_exits() {
    let dir = std::env::temp_dir().join(format!("stdworker-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("leftover.pid");
    // The background sleep keeps stdout open: without the group kill this would hang.
    let script = format!("sleep 60 & echo $! > {}; echo '{{}}'", pidfile.display());
    let started = std::time::Instant::now();
    let r = run(&sh(&script), "", None).await;
    assert_eq!(r.exit, Exit::Code(0));
    assert_eq!(r.stdout, b"{}\n");
    assert!(started.elapsed() < Duration::from_secs(5));
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_gone(pid).await;
    let _ = std::fs::remove_file(pidfile);
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_error() {
    let cmd = CommandSpec {
        program: "/nonexistent/handler".into(),
        arg0: None,
        args: vec![],
        env: child_env(&BTreeMap::new()),
    };
    let e = run_process(
        &cmd,
        Vec::new(),
        &CancellationToken::new(),
        None,
        None,
        &small_limits(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
}

// ---------------------------------------------------------------- execute

fn configured(spec: Value, config: Value) -> converge_sdk::ReactionRequest {
    let mut req = testing::request("k", spec);
    req.config = ProviderConfig {
        spec: Some(config),
        bundle: Default::default(),
    };
    req
}

#[tokio::test]
async fn execute_runs_the_effective_config() {
    // The handler answers with its argv, an env var and the request's settings/bundle.
    let script = r#"python3 -c '
import json, sys, os
req = json.load(sys.stdin)
json.dump({"status": {"argv": sys.argv[1:], "k": os.environ.get("K"), "settings": req["settings"], "bundle": req.get("bundle")}}, sys.stdout)
' "$@""#;
    let mut req = configured(
        json!({}),
        json!({"program": "sh", "args": ["-c", script, "sh", "one"], "env": {"K": "V"}, "settings": {"a": 1, "b": {"c": 2}}}),
    );
    req.config_override = Some(json!({"settings": {"b": {"d": 3}}}));
    req.bundle_override = b"xyz".to_vec();
    let out = execute(&req, &Limits::default(), None).await.unwrap();
    assert_eq!(
        out.status,
        Some(
            json!({"argv": ["one"], "k": "V", "settings": {"a": 1, "b": {"c": 2, "d": 3}}, "bundle": "eHl6"})
        )
    );
}

#[tokio::test]
async fn execute_without_a_program_is_transient() {
    let e = execute(
        &configured(json!({}), json!({"settings": {}})),
        &Limits::default(),
        None,
    )
    .await
    .unwrap_err();
    assert!(
        !e.is_terminal() && e.message().contains("no program"),
        "{e}"
    );
    let e = execute(
        &configured(json!({}), json!({"program": "/nonexistent/x"})),
        &Limits::default(),
        None,
    )
    .await
    .unwrap_err();
    assert!(
        !e.is_terminal() && e.message().contains("cannot start"),
        "{e}"
    );
}

#[tokio::test]
async fn execute_honours_timeout_secs_and_cancellation() {
    let req = configured(
        json!({}),
        json!({"program": "sleep", "args": ["30"], "timeout_secs": 0.2}),
    );
    let limits = small_limits();
    let e = execute(&req, &limits, None).await.unwrap_err();
    assert!(!e.is_terminal() && e.message().contains("timed out"), "{e}");

    let req = configured(json!({}), json!({"program": "sleep", "args": ["30"]}));
    let cancel = req.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let e = execute(&req, &limits, None).await.unwrap_err();
    assert!(!e.is_terminal() && e.message().contains("cancelled"), "{e}");

    let mut req = configured(
        json!({}),
        json!({"program": "sleep", "args": ["30"], "timeout_secs": 60}),
    );
    req.deadline = Some(tokio::time::Instant::now() + Duration::from_millis(200));
    let e = execute(&req, &limits, None).await.unwrap_err();
    assert!(!e.is_terminal() && e.message().contains("deadline"), "{e}");
}

// ---------------------------------------------------------------- refusals

/// A fresh scratch directory under the system temp dir.
fn scratch(tag: &str) -> std::path::PathBuf {
    converge_auth::testing::scratch_dir(&format!("stdworker-unit-{tag}"))
}

/// An executable script at `dir/name` that creates `marker` and answers `{}`: if it ever
/// runs, the marker says so.
fn marker_script(dir: &Path, name: &str, marker: &Path) -> std::path::PathBuf {
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

#[test]
fn an_override_may_set_only_settings() {
    for ok in [
        None,
        Some(Value::Null),
        Some(json!({})),
        Some(json!({"settings": {"a": 1}})),
    ] {
        assert!(check_override(ok.as_ref()).is_ok(), "{ok:?}");
    }
    for field in ["program", "args", "env", "timeout_secs", "ready", "progam"] {
        let mut over = json!({"settings": {}});
        over[field] = json!("x");
        let e = check_override(Some(&over)).unwrap_err();
        assert!(e.is_terminal(), "{field}: {e}");
        assert!(e.message().contains(&format!("sets `{field}`")), "{e}");
        assert!(e.message().contains("nothing was run"), "{e}");
    }
    let e = check_override(Some(&json!({"args": [], "program": "p", "settings": {}}))).unwrap_err();
    assert!(e.message().contains("sets `args`, `program`:"), "{e}");
    for not_an_object in [json!("program"), json!([1]), json!(5)] {
        let e = check_override(Some(&not_an_object)).unwrap_err();
        assert!(
            e.is_terminal() && e.message().contains("not an object"),
            "{e}"
        );
    }
}

#[tokio::test]
async fn an_override_setting_what_runs_fails_terminally_and_runs_nothing() {
    let dir = scratch("override");
    let marker = dir.join("ran");
    // The default program itself writes the marker: if anything at all ran, it shows.
    let script = marker_script(&dir, "handler.sh", &marker);
    for (field, value) in [
        ("program", json!("/bin/sh")),
        ("args", json!(["-c", "echo {}"])),
        ("env", json!({"LD_PRELOAD": "/tmp/x.so"})),
        ("timeout_secs", json!(1)),
    ] {
        let mut req = configured(json!({}), json!({"program": script}));
        let mut over = json!({"settings": {"a": 1}});
        over[field] = value;
        req.config_override = Some(over);
        let e = execute(&req, &Limits::default(), None).await.unwrap_err();
        assert!(e.is_terminal(), "{field}: {e}");
        assert!(e.message().contains(&format!("`{field}`")), "{e}");
        assert!(!marker.exists(), "{field}: the handler ran");
    }
    // Control: with a settings-only override the same config runs and leaves the marker.
    let mut req = configured(json!({}), json!({"program": script}));
    req.config_override = Some(json!({"settings": {"a": 1}}));
    execute(&req, &Limits::default(), None).await.unwrap();
    assert!(marker.exists(), "the control run wrote its marker");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn exec_allow_entries_are_absolute_existing_and_canonical() {
    let dir = scratch("allow-parse");
    let prog = marker_script(&dir, "p.sh", &dir.join("m"));
    std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
    let canon = dir.canonicalize().unwrap();
    let allow = ExecAllow::parse(
        EXEC_ALLOW_VAR,
        &format!(" {}/sub/../p.sh , {}/sub ,", dir.display(), dir.display()),
    )
    .unwrap();
    assert!(allow.allows(&prog.canonicalize().unwrap()));
    assert!(allow.allows(&canon.join("sub/x")));
    assert!(allow.allows(&canon.join("sub/deeper/x")), "any depth");
    assert!(!allow.allows(&canon.join("other.sh")));
    assert!(
        !allow.allows(&canon.join("subx/x")),
        "whole path components: sub does not cover subx"
    );
    assert_eq!(allow.entries().len(), 2);
    // `*` is "any program", said on purpose.
    let any = ExecAllow::parse(EXEC_ALLOW_VAR, " * ").unwrap();
    assert!(any.is_any() && any.allows(&canon.join("other.sh")));
    assert!(!allow.is_any());

    for (bad, needle) in [
        ("bin/python3", "not an absolute path"),
        ("/nonexistent/handler", "cannot be resolved"),
        (" , ", "comma-separated"),
    ] {
        let e = ExecAllow::parse(EXEC_ALLOW_VAR, bad).unwrap_err();
        assert_eq!(e.var(), EXEC_ALLOW_VAR);
        assert!(e.to_string().contains(needle), "{bad:?}: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn programs_resolve_through_the_given_path() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("resolve");
    let handler = marker_script(&dir, "handler", &dir.join("m"));
    let plain = dir.join("plain");
    std::fs::write(&plain, "not executable").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    let path = format!("/nonexistent:{}", dir.display());
    assert_eq!(resolve_program("handler", Some(&path)).unwrap(), handler);
    assert_eq!(
        resolve_program(handler.to_str().unwrap(), None).unwrap(),
        handler,
        "a path is taken as is"
    );
    for (name, path) in [
        ("plain", Some(path.as_str())),
        ("handler", Some("/nonexistent")),
        ("handler", None),
    ] {
        let e = resolve_program(name, path).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{name} in {path:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_program_outside_the_allowlist_fails_terminally_and_runs_nothing() {
    let allowed = scratch("allowed");
    let outside = scratch("outside");
    let marker = outside.join("ran");
    let evil = marker_script(&outside, "evil.sh", &marker);
    // A link inside the allowed directory to a program outside it is outside too.
    let link = allowed.join("link.sh");
    std::os::unix::fs::symlink(&evil, &link).unwrap();
    let allow = ExecAllow::parse(EXEC_ALLOW_VAR, allowed.to_str().unwrap()).unwrap();
    for program in [&evil, &link] {
        let req = configured(json!({}), json!({"program": program}));
        let e = execute(&req, &Limits::default(), Some(&allow))
            .await
            .unwrap_err();
        assert!(e.is_terminal(), "{e}");
        assert!(
            e.message().contains(program.to_str().unwrap()) && e.message().contains(EXEC_ALLOW_VAR),
            "names the program and the variable: {e}"
        );
        assert!(!marker.exists(), "{}: the program ran", program.display());
    }

    // Through the provider: a bare name found in the config's PATH inside the allowlist runs.
    let good_marker = allowed.join("ran");
    marker_script(&allowed, "good", &good_marker);
    let p = ExecProvider::new(KindVersion::new("k", 1))
        .with_allow(Some(std::sync::Arc::new(allow.clone())));
    let path = format!(
        "{}:{}",
        allowed.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let req = configured(json!({}), json!({"program": "good", "env": {"PATH": path}}));
    p.work(req).await.unwrap();
    assert!(good_marker.exists(), "the allowed program ran");
    let req = configured(json!({}), json!({"program": evil}));
    let e = p.work(req).await.unwrap_err();
    assert!(e.is_terminal() && !marker.exists(), "{e}");

    let _ = std::fs::remove_dir_all(&allowed);
    let _ = std::fs::remove_dir_all(&outside);
}

#[tokio::test]
async fn an_allowed_program_runs_by_canonical_path_under_its_configured_name() {
    // `sh` is usually a link (to dash, bash or busybox): allow its target, run it by name,
    // and the process still sees `sh` as argv[0] (multi-call binaries depend on it).
    let sh = resolve_program("sh", std::env::var("PATH").ok().as_deref())
        .unwrap()
        .canonicalize()
        .unwrap();
    let allow = ExecAllow::parse(EXEC_ALLOW_VAR, sh.to_str().unwrap()).unwrap();
    let script = r#"a0=$(tr '\0' '\n' < /proc/$$/cmdline | head -n1); printf '{"status": {"argv0": "%s"}}' "$a0""#;
    let req = configured(json!({}), json!({"program": "sh", "args": ["-c", script]}));
    let out = execute(&req, &Limits::default(), Some(&allow))
        .await
        .unwrap();
    assert_eq!(out.status, Some(json!({"argv0": "sh"})));
}
