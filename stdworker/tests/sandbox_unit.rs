//! The composers' sandbox pool without a broker, with real children (the `stdworker` built
//! with these tests): a normal evaluation round-trips and reuses its child; a runaway is
//! killed on its deadline and replaced; memory runaways die of their bound and say so; an
//! abandoned evaluation kills its child; one runaway child does not hold up the others; the
//! death classification, the budget and the configuration.

mod common;

use std::{os::unix::process::ExitStatusExt, process::ExitStatus, time::Duration};

use common::{alive, hostile, wait_for};
use converge_sdk::{ConfigError, HandlerError};
use converge_stdworker::{
    providers::{
        cel::graph_key,
        starlark::{LimitsConfig, bundle_key},
    },
    sandbox::{
        MEMORY_VAR, PROCS_VAR, RunawayClass, SandboxConfig, SandboxError, SandboxPool, TIMEOUT_VAR,
        classify_death,
        wire::{CelInput, Job, Program, StarlarkInput},
    },
};
use serde_json::{Value, json, value::RawValue};

/// Liveness bound for anything that should take milliseconds.
const LIVE: Duration = Duration::from_secs(30);

fn pool(procs: usize, timeout: Duration, memory_mib: u64) -> SandboxPool {
    SandboxPool::new(SandboxConfig {
        procs,
        timeout,
        memory_bytes: memory_mib << 20,
        ..SandboxConfig::with_program(env!("CARGO_BIN_EXE_stdworker"))
    })
}

fn raw(v: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(v).unwrap()
}

/// Parses a compose output (JSON text).
fn parsed(out: Option<Box<RawValue>>) -> Value {
    serde_json::from_str(out.expect("a compose returns an output").get()).unwrap()
}

/// Composes `graph` for a root named `root` with `spec`.
async fn cel(pool: &SandboxPool, graph: &Value, spec: Value) -> Result<Value, SandboxError> {
    let job = Job::Cel {
        compose: Some(CelInput {
            root_name: "root".into(),
            spec: raw(&spec),
        }),
    };
    let out = pool
        .evaluate(graph_key(graph), job, || Program::Cel(graph.clone()), None)
        .await?;
    Ok(parsed(out))
}

/// Loads `src` as a bundle and composes it with `spec`.
async fn starlark(pool: &SandboxPool, src: &str, spec: Value) -> Result<Value, SandboxError> {
    let bytes = hostile::bundle(src);
    let limits = converge_starlark::Limits::default();
    let job = Job::Starlark {
        limits: Box::new(LimitsConfig::from_limits(&limits)),
        compose: Some(StarlarkInput {
            root: json!({"name": "root"}),
            spec: raw(&spec),
            config: json!({}),
        }),
    };
    let program = || {
        use base64::Engine;
        Program::Starlark(base64::engine::general_purpose::STANDARD.encode(&bytes))
    };
    let out = pool
        .evaluate(bundle_key(&bytes, &limits), job, program, None)
        .await?;
    Ok(parsed(out))
}

/// The child spec field `v` of a one-resource CEL compose.
fn cel_value(out: &Value) -> &Value {
    &out["children"][0]["spec"]["v"]
}

/// Asserts a runaway of `class`: terminal, and the task's message starts with the class.
/// Returns that message.
fn assert_class(r: Result<Value, SandboxError>, class: RunawayClass) -> String {
    let e = r.expect_err("the runaway failed");
    assert_eq!(e.class(), Some(class), "{e}");
    assert!(e.is_terminal(), "a runaway is terminal: {e}");
    let h = HandlerError::from(e);
    assert!(
        h.is_terminal() && h.message().starts_with(&format!("{class}: ")),
        "the task's message starts with its class: {h:?}"
    );
    eprintln!("runaway: {}", h.message());
    h.message().to_string()
}

#[tokio::test]
async fn a_normal_evaluation_round_trips_and_reuses_its_child() {
    let p = pool(1, LIVE, 256);
    for n in [1, 2, 3] {
        let out = cel(&p, &hostile::cel_ok(), json!({"n": n})).await.unwrap();
        assert_eq!(out["children"][0]["name"], "root-x", "{out}");
        assert_eq!(cel_value(&out).as_i64(), Some(n), "ints stay ints: {out}");
    }
    let out = starlark(&p, hostile::STARLARK_ECHO, json!({"i": 7}))
        .await
        .unwrap();
    assert_eq!(out["status"], json!({"i": 7}));
    let s = p.stats();
    assert_eq!(s.spawned, 1, "one child served every evaluation: {s:?}");
    assert_eq!(s.programs_sent, 2, "each program sent once: {s:?}");
    assert_eq!((s.killed, s.died, s.idle), (0, 0, 1), "{s:?}");

    // An engine error is terminal, carries the engine's message, and keeps the child.
    let e = cel(&p, &hostile::cel_ok(), json!({})).await.unwrap_err();
    assert!(e.is_terminal() && e.class().is_none(), "{e}");
    assert!(e.to_string().contains("cel compose failed"), "{e}");
    let bad =
        json!({"resources": [{"id": "a", "template": {"kind": "x", "name": "${nope.name}"}}]});
    let e = cel(&p, &bad, json!({})).await.unwrap_err();
    assert!(
        e.to_string().contains("/resources/0/template/name"),
        "compile errors keep their pointer: {e}"
    );
    assert_eq!(p.stats().spawned, 1);
}

#[tokio::test]
async fn a_runaway_is_killed_at_its_deadline_and_replaced() {
    let p = pool(1, Duration::from_millis(500), 256);
    cel(&p, &hostile::cel_ok(), json!({"n": 1})).await.unwrap();
    let before = p.idle_pids();
    assert_eq!(before.len(), 1);

    let r = cel(
        &p,
        &hostile::cel_nested_all(),
        hostile::items_spec(hostile::ALL_ITEMS),
    )
    .await;
    let e = assert_class(r, RunawayClass::Deadline);
    assert!(e.contains("500 ms"), "names its budget: {e}");
    assert!(!alive(before[0]), "the runaway child is dead and reaped");
    assert!(p.pids().is_empty(), "and forgotten");
    let s = p.stats();
    assert_eq!((s.killed, s.idle), (1, 0), "{s:?}");

    // The next evaluation gets a fresh child, which compiles the graph again.
    let out = cel(&p, &hostile::cel_ok(), json!({"n": 2})).await.unwrap();
    assert_eq!(cel_value(&out).as_i64(), Some(2));
    let after = p.idle_pids();
    assert_eq!(after.len(), 1);
    assert_ne!(after, before, "replaced by a new process");
    let s = p.stats();
    assert_eq!((s.spawned, s.programs_sent), (2, 3), "{s:?}");
}

#[tokio::test]
async fn memory_runaways_die_of_their_bound_and_say_so() {
    // A generous deadline: these must hit the memory bound, not the clock. A small bound:
    // a debug build fills the integer lists of the plain nested map slowly.
    let p = pool(1, Duration::from_secs(300), 64);
    let r = starlark(&p, hostile::STARLARK_HUGE_AT_LOAD, json!({})).await;
    let e = assert_class(r, RunawayClass::Memory);
    assert!(e.contains("starlark"), "{e}");
    let r = starlark(&p, hostile::STARLARK_DOUBLING, json!({})).await;
    assert_class(r, RunawayClass::Memory);
    let r = cel(
        &p,
        &hostile::cel_nested_map(),
        hostile::items_spec(hostile::MAP_ITEMS),
    )
    .await;
    let e = assert_class(r, RunawayClass::Memory);
    assert!(e.contains("64 MiB"), "names its bound: {e}");
    let r = cel(
        &p,
        &hostile::cel_nested_map_strings(),
        hostile::padded_items_spec(hostile::MAP_ITEMS),
    )
    .await;
    assert_class(r, RunawayClass::Memory);

    // The pool recovers: a fresh child serves the next evaluation.
    let out = starlark(&p, hostile::STARLARK_ECHO, json!({"i": 1}))
        .await
        .unwrap();
    assert_eq!(out["status"]["i"], 1);
    let s = p.stats();
    assert!(s.died >= 3, "at least the load and the maps died: {s:?}");
    assert_eq!(s.killed, 0, "no deadline kill: {s:?}");
}

#[tokio::test]
async fn an_abandoned_evaluation_kills_its_child() {
    let p = pool(1, Duration::from_secs(600), 256);
    let runaway = tokio::spawn({
        let p = p.clone();
        async move {
            cel(
                &p,
                &hostile::cel_nested_all(),
                hostile::items_spec(hostile::ALL_ITEMS),
            )
            .await
        }
    });
    let pid = wait_for(LIVE, "the runaway's child", || async {
        p.pids().first().copied()
    })
    .await;
    runaway.abort();
    let _ = runaway.await;
    wait_for(LIVE, "the abandoned child to die", || async {
        (!alive(pid)).then_some(())
    })
    .await;
    // Its slot is free again: the next evaluation runs at once.
    let out = tokio::time::timeout(LIVE, cel(&p, &hostile::cel_ok(), json!({"n": 5})))
        .await
        .expect("the slot was freed")
        .unwrap();
    assert_eq!(cel_value(&out).as_i64(), Some(5));
    assert_eq!(p.stats().killed, 0, "no deadline fired");
}

#[tokio::test]
async fn one_runaway_child_does_not_hold_up_the_others() {
    let p = pool(2, Duration::from_secs(600), 256);
    let runaway = tokio::spawn({
        let p = p.clone();
        async move {
            cel(
                &p,
                &hostile::cel_nested_all(),
                hostile::items_spec(hostile::ALL_ITEMS),
            )
            .await
        }
    });
    // The runaway holds one child before the others start.
    wait_for(LIVE, "the runaway's child", || async {
        (p.pids().len() == 1 && p.stats().idle == 0).then_some(())
    })
    .await;
    for n in 0..20 {
        let out = tokio::time::timeout(LIVE, cel(&p, &hostile::cel_ok(), json!({"n": n})))
            .await
            .expect("served beside the runaway")
            .unwrap();
        assert_eq!(cel_value(&out).as_i64(), Some(n));
    }
    assert!(!runaway.is_finished(), "the runaway was still running");
    assert_eq!(
        p.stats().spawned,
        2,
        "one child for the runaway, one for the rest"
    );
    runaway.abort();
}

#[tokio::test]
async fn no_time_left_is_transient_and_the_budget_keeps_a_margin() {
    let p = pool(1, Duration::from_secs(30), 256);
    assert_eq!(p.budget(None), Duration::from_secs(30));
    let now = tokio::time::Instant::now();
    let b = p.budget(Some(now + Duration::from_secs(10)));
    assert!(
        b <= Duration::from_secs(9) && b > Duration::from_secs(8),
        "{b:?}"
    );
    assert!(p.budget(Some(now + Duration::from_millis(100))) <= Duration::from_millis(90));
    assert!(p.budget(Some(now + Duration::from_secs(600))) == Duration::from_secs(30));

    let graph = hostile::cel_ok();
    let job = Job::Cel {
        compose: Some(CelInput {
            root_name: "r".into(),
            spec: raw(&json!({"n": 1})),
        }),
    };
    let e = p
        .evaluate(
            graph_key(&graph),
            job,
            || Program::Cel(graph.clone()),
            Some(now),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, SandboxError::NoTime { .. }), "{e}");
    assert!(!HandlerError::from(e).is_terminal());
}

#[test]
fn a_death_is_classified_by_its_signal_and_stderr() {
    let sig = |n: i32| Some(ExitStatus::from_raw(n));
    let memory = 512 << 20;
    let e = classify_death(
        "starlark",
        memory,
        sig(6),
        "memory allocation of 1500000000 bytes failed\n".into(),
    );
    assert_eq!(e.class(), Some(RunawayClass::Memory));
    assert!(
        e.to_string().contains("512 MiB") && e.to_string().contains("1500000000"),
        "{e}"
    );
    let e = classify_death(
        "cel",
        memory,
        sig(11),
        "\nthread 'main' has overflowed its stack\n".into(),
    );
    assert_eq!(e.class(), Some(RunawayClass::Memory), "{e}");
    let e = classify_death("cel", memory, sig(24), String::new());
    assert_eq!(e.class(), Some(RunawayClass::Deadline), "SIGXCPU: {e}");
    let e = classify_death("cel", memory, sig(9), String::new());
    assert_eq!(
        e.class(),
        Some(RunawayClass::Memory),
        "an unasked SIGKILL: {e}"
    );
    let e = classify_death("cel", memory, sig(11), "segfault".into());
    assert!(
        matches!(e, SandboxError::Crashed { .. }) && e.is_terminal(),
        "{e}"
    );
    assert!(e.to_string().contains("segfault"), "{e}");
    let e = classify_death("cel", memory, None, String::new());
    assert!(e.to_string().contains("without exiting"), "{e}");
    let e = classify_death(
        "cel",
        memory,
        Some(ExitStatus::from_raw(3 << 8)),
        "stdworker sandbox: cannot apply resource limits: EPERM".into(),
    );
    assert!(
        matches!(e, SandboxError::Unavailable { .. }) && !e.is_terminal(),
        "a child that cannot bound itself is the host's problem: {e}"
    );
}

#[test]
fn the_configuration_has_safe_defaults_and_names_bad_variables() {
    let lookup = |pairs: Vec<(&'static str, &'static str)>| {
        move |var: &str| -> Result<Option<String>, ConfigError> {
            Ok(pairs
                .iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| (*v).to_string()))
        }
    };
    let d = SandboxConfig::from_lookup(lookup(vec![])).unwrap();
    assert_eq!(d, SandboxConfig::default());
    assert_eq!(d.memory_bytes, 512 << 20);
    assert_eq!(d.timeout, Duration::from_secs(30));
    assert!((2..=8).contains(&d.procs));

    let c = SandboxConfig::from_lookup(lookup(vec![
        (PROCS_VAR, "3"),
        (MEMORY_VAR, "256"),
        (TIMEOUT_VAR, "5s"),
    ]))
    .unwrap();
    assert_eq!(
        (c.procs, c.memory_bytes, c.timeout),
        (3, 256 << 20, Duration::from_secs(5))
    );
    for (var, bad) in [
        (PROCS_VAR, "0"),
        (PROCS_VAR, "many"),
        (MEMORY_VAR, "1"),
        (MEMORY_VAR, "512MiB"),
        (TIMEOUT_VAR, "1ms"),
        (TIMEOUT_VAR, "soon"),
    ] {
        let e = SandboxConfig::from_lookup(lookup(vec![(var, bad)])).unwrap_err();
        assert_eq!(e.var(), var, "{bad}: {e}");
    }
}
