//! End-to-end tests of the host against real components built offline from WAT: describe,
//! reconcile, every limit breach and its failure class, outcome validation, the compile
//! cache, isolation of concurrent tasks, and a per-call cost figure.

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{Body, World, child, edge, guest, request, test_info};
use converge_wasm_host::{HandlerFailure, HostConfig, Limits, LogLevel, WasmHost, wit};
use serde_json::{Value, json};

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(World::load)
}

fn host() -> WasmHost {
    WasmHost::new(HostConfig::default()).expect("host")
}

fn ok_status(status: &str) -> Value {
    json!({"ok": {
        "status": status,
        "conditions": [{"condition-type": "Ready", "status": "true", "reason": "Done", "message": "all good"}],
    }})
}

fn outcome_with(children: Vec<Value>, edges: Vec<Value>) -> Value {
    json!({"ok": {"status": "{}", "children": children, "edges": edges}})
}

async fn run(body: Body, limits: &Limits) -> Result<wit::Outcome, HandlerFailure> {
    let h = host();
    let c = h
        .load(&guest(world(), &test_info(), body))
        .expect("load guest");
    c.reconcile(&request(r#"{"greeting":"hi"}"#), limits).await
}

#[tokio::test]
async fn describe_reports_name_version_and_kinds() {
    let h = host();
    let c = h
        .load(&guest(world(), &test_info(), Body::Unreachable))
        .unwrap();
    let info = c.describe().await.unwrap();
    assert_eq!(info.name, "wat-guest");
    assert_eq!(info.version, "1.2.3");
    let kinds: Vec<_> = info
        .kinds
        .iter()
        .map(|k| (k.kind.as_str(), k.version))
        .collect();
    assert_eq!(kinds, vec![("hello", 1), ("bye", 2)]);
}

#[tokio::test]
async fn reconcile_returns_status_and_conditions() {
    let out = run(
        Body::Return(ok_status(r#"{"phase":"up"}"#)),
        &Limits::default(),
    )
    .await
    .unwrap();
    assert_eq!(out.status.as_deref(), Some(r#"{"phase":"up"}"#));
    assert_eq!(out.conditions.len(), 1);
    assert_eq!(out.conditions[0].condition_type, "Ready");
    assert_eq!(out.conditions[0].status, wit::ConditionStatus::True);
    assert!(out.children.is_empty());
}

#[tokio::test]
async fn request_is_lowered_into_the_guest() {
    let out = run(Body::EchoSpec(json!({})), &Limits::default())
        .await
        .unwrap();
    assert_eq!(out.status.as_deref(), Some(r#"{"greeting":"hi"}"#));
}

#[tokio::test]
async fn children_edges_and_configs_round_trip() {
    let result = json!({"ok": {
        "children": [child("db", "main"), child("app", "web")],
        "edges": [edge(("app", "web"), ("db", "main"))],
        "configs": [{"name": "cfg", "kind": "app", "kind-version": 1, "is-default": true, "spec": "{\"a\":1}"}],
        "operation-output": "[1,2]",
    }});
    let out = run(Body::Return(result), &Limits::default()).await.unwrap();
    assert_eq!(out.children.len(), 2);
    assert_eq!(out.edges[0].dependent.name, "web");
    assert_eq!(out.edges[0].dependency.kind, "db");
    assert_eq!(out.edges[0].values[0].source_field, "/address");
    assert!(out.configs[0].is_default);
    assert_eq!(out.operation_output.as_deref(), Some("[1,2]"));
}

#[tokio::test]
async fn handler_errors_keep_their_class() {
    let err = run(
        Body::Return(json!({"err": {"terminal": "bad spec"}})),
        &Limits::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        HandlerFailure::Handler {
            terminal: true,
            message: "bad spec".into()
        }
    );
    assert!(err.is_terminal());
    let err = run(
        Body::Return(json!({"err": {"transient": "try later"}})),
        &Limits::default(),
    )
    .await
    .unwrap_err();
    assert!(!err.is_terminal());
}

#[tokio::test]
async fn infinite_loop_runs_out_of_fuel_deterministically() {
    let limits = Limits {
        fuel: 1_000_000,
        ..Limits::default()
    };
    let h = host();
    let c = h.load(&guest(world(), &test_info(), Body::Spin)).unwrap();
    let req = request("{}");
    let (first, report1) = c.reconcile_with_report(&req, &limits).await;
    let (_, report2) = c.reconcile_with_report(&req, &limits).await;
    assert_eq!(
        first.unwrap_err(),
        HandlerFailure::OutOfFuel { budget: 1_000_000 }
    );
    assert_eq!(report1.fuel_consumed, 1_000_000);
    assert_eq!(report1.fuel_consumed, report2.fuel_consumed);
    assert!(HandlerFailure::OutOfFuel { budget: 1 }.is_terminal());
}

#[tokio::test]
async fn infinite_loop_with_huge_fuel_hits_the_deadline() {
    let limits = Limits {
        fuel: u64::MAX / 2,
        timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let h = host();
    let c = h.load(&guest(world(), &test_info(), Body::Spin)).unwrap();
    let started = Instant::now();
    let err = c.reconcile(&request("{}"), &limits).await.unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(err, HandlerFailure::Deadline { timeout_ms: 200 });
    assert!(!err.is_terminal());
    assert!(
        elapsed >= Duration::from_millis(200) && elapsed < Duration::from_millis(300),
        "deadline hit after {elapsed:?}"
    );
    eprintln!("deadline of 200 ms enforced after {elapsed:?}");
}

#[tokio::test]
async fn growing_memory_past_the_cap_is_out_of_memory() {
    let limits = Limits {
        memory_bytes: 2 * 1024 * 1024,
        ..Limits::default()
    };
    let err = run(Body::GrowForever, &limits).await.unwrap_err();
    assert_eq!(
        err,
        HandlerFailure::OutOfMemory {
            cap_bytes: 2 * 1024 * 1024
        }
    );
    assert!(err.is_terminal());
}

#[tokio::test]
async fn memory_cap_below_the_initial_memory_fails_at_instantiation() {
    let limits = Limits {
        memory_bytes: 64 * 1024,
        ..Limits::default()
    };
    let err = run(Body::Return(ok_status("{}")), &limits)
        .await
        .unwrap_err();
    assert!(matches!(err, HandlerFailure::OutOfMemory { .. }), "{err:?}");
}

#[tokio::test]
async fn unreachable_is_a_trap() {
    let err = run(Body::Unreachable, &Limits::default())
        .await
        .unwrap_err();
    match &err {
        HandlerFailure::Trap(msg) => assert!(msg.contains("unreachable"), "{msg}"),
        other => panic!("expected a trap, got {other:?}"),
    }
    assert!(err.is_terminal());
}

#[tokio::test]
async fn unbounded_recursion_is_a_stack_overflow() {
    let err = run(Body::Recurse, &Limits::default()).await.unwrap_err();
    assert_eq!(err, HandlerFailure::StackOverflow);
}

async fn invalid(result: Value, limits: &Limits) -> String {
    match run(Body::Return(result), limits).await {
        Err(HandlerFailure::InvalidOutcome(msg)) => msg,
        other => panic!("expected an invalid outcome, got {other:?}"),
    }
}

#[tokio::test]
async fn invalid_outcomes_are_rejected() {
    let l = Limits::default();
    let msg = invalid(
        outcome_with(vec![child("db", "a"), child("db", "a")], vec![]),
        &l,
    )
    .await;
    assert!(msg.contains("duplicate child db/a"), "{msg}");

    let msg = invalid(
        outcome_with(
            vec![child("db", "a")],
            vec![edge(("db", "a"), ("db", "ghost"))],
        ),
        &l,
    )
    .await;
    assert!(msg.contains("does not emit"), "{msg}");

    let msg = invalid(
        outcome_with(
            vec![child("x", "a"), child("x", "b"), child("x", "c")],
            vec![
                edge(("x", "a"), ("x", "b")),
                edge(("x", "b"), ("x", "c")),
                edge(("x", "c"), ("x", "a")),
            ],
        ),
        &l,
    )
    .await;
    assert!(msg.contains("cycle"), "{msg}");

    let msg = invalid(json!({"ok": {"status": "{not json"}}), &l).await;
    assert!(msg.contains("status is not valid JSON"), "{msg}");

    let capped = Limits {
        max_children: 2,
        ..Limits::default()
    };
    let msg = invalid(
        outcome_with(
            vec![child("x", "a"), child("x", "b"), child("x", "c")],
            vec![],
        ),
        &capped,
    )
    .await;
    assert!(msg.contains("3 children, over the cap of 2"), "{msg}");

    let small = Limits {
        output_bytes: 10,
        ..Limits::default()
    };
    let msg = invalid(ok_status(r#"{"a":"0123456789"}"#), &small).await;
    assert!(msg.contains("over the cap of 10 bytes"), "{msg}");
}

#[tokio::test]
async fn oversized_request_is_refused_before_the_call() {
    let h = host();
    let c = h
        .load(&guest(world(), &test_info(), Body::Return(ok_status("{}"))))
        .unwrap();
    let limits = Limits {
        input_bytes: 1024,
        ..Limits::default()
    };
    let big = format!(r#"{{"blob":"{}"}}"#, "x".repeat(2048));
    let err = c.reconcile(&request(&big), &limits).await.unwrap_err();
    assert!(matches!(err, HandlerFailure::InvalidRequest(_)), "{err:?}");
}

#[tokio::test]
async fn limits_above_the_operator_maximum_are_clamped() {
    let cfg = HostConfig {
        max_limits: Limits {
            fuel: 500_000,
            ..Limits::default_max()
        },
        ..HostConfig::default()
    };
    let h = WasmHost::new(cfg).unwrap();
    let c = h.load(&guest(world(), &test_info(), Body::Spin)).unwrap();
    let asked = Limits {
        fuel: 10_000_000,
        ..Limits::default()
    };
    let (res, report) = c.reconcile_with_report(&request("{}"), &asked).await;
    assert_eq!(
        res.unwrap_err(),
        HandlerFailure::OutOfFuel { budget: 500_000 }
    );
    assert_eq!(report.limits.fuel, 500_000);
}

#[tokio::test]
async fn log_is_bounded() {
    let h = host();
    let body = Body::LogThenReturn {
        count: 250,
        len: 10_000,
        result: ok_status("{}"),
    };
    let c = h.load(&guest(world(), &test_info(), body)).unwrap();
    let (res, report) = c
        .reconcile_with_report(&request("{}"), &Limits::default())
        .await;
    res.unwrap();
    assert_eq!(report.logs.len(), 100);
    assert_eq!(report.logs_dropped, 150);
    assert!(
        report
            .logs
            .iter()
            .all(|l| l.truncated && l.message.len() == 4096 && l.level == LogLevel::Info)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tasks_are_isolated() {
    let h = host();
    let echo = h
        .load(&guest(world(), &test_info(), Body::EchoSpec(json!({}))))
        .unwrap();
    let spin = h.load(&guest(world(), &test_info(), Body::Spin)).unwrap();
    let small_fuel = Limits {
        fuel: 5_000_000,
        ..Limits::default()
    };
    let ra = request(r#"{"n":"a"}"#);
    let rb = request(r#"{"n":"b"}"#);
    let rs = request("{}");
    let l = Limits::default();
    let (a, b, s) = tokio::join!(
        echo.reconcile(&ra, &l),
        echo.reconcile(&rb, &l),
        spin.reconcile(&rs, &small_fuel),
    );
    assert_eq!(a.unwrap().status.as_deref(), Some(r#"{"n":"a"}"#));
    assert_eq!(b.unwrap().status.as_deref(), Some(r#"{"n":"b"}"#));
    assert!(matches!(s, Err(HandlerFailure::OutOfFuel { .. })));

    // The same on separate runtime threads, interleaved many times.
    let mut handles = Vec::new();
    for i in 0..8 {
        let echo = echo.clone();
        handles.push(tokio::spawn(async move {
            for j in 0..20 {
                let spec = format!(r#"{{"task":{i},"round":{j}}}"#);
                let out = echo
                    .reconcile(&request(&spec), &Limits::default())
                    .await
                    .unwrap();
                assert_eq!(out.status.as_deref(), Some(spec.as_str()));
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
}

#[test]
fn components_of_the_wrong_world_or_garbage_are_refused() {
    let h = host();
    let err = h.load(b"not wasm at all").unwrap_err();
    assert!(
        matches!(err, converge_wasm_host::LoadError::Compile(_)),
        "{err}"
    );

    let mut resolve = wit_parser::Resolve::default();
    let pkg = resolve
        .push_str(
            "other.wit",
            "package test:other; world other { export answer: func() -> u32; }",
        )
        .unwrap();
    let wid = resolve.select_world(&[pkg], Some("other")).unwrap();
    let mut module = wat::parse_str(
        r#"(module (memory (export "memory") 1)
             (func (export "answer") (result i32) (i32.const 42)))"#,
    )
    .unwrap();
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        wid,
        wit_component::StringEncoding::UTF8,
    )
    .unwrap();
    let component = wit_component::ComponentEncoder::default()
        .module(&module)
        .unwrap()
        .encode()
        .unwrap();
    let err = h.load(&component).unwrap_err();
    assert!(
        matches!(err, converge_wasm_host::LoadError::World(_)),
        "{err}"
    );
}

/// Loads of the same bytes racing on several threads compile it once: the others wait for
/// the first and share its component (stdworker loads one component per kind it serves).
#[test]
fn concurrent_loads_of_one_component_compile_it_once() {
    let host = WasmHost::new(HostConfig {
        cache_dir: None,
        ..HostConfig::default()
    })
    .unwrap();
    let bytes = guest(
        world(),
        &test_info(),
        Body::Return(ok_status("{\"race\":1}")),
    );
    let loaded: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|_| s.spawn(|| host.load(&bytes).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(host.cache_stats().compiles, 1);
    assert!(loaded.iter().all(|c| std::sync::Arc::ptr_eq(c, &loaded[0])));
}

#[tokio::test]
async fn disk_cache_compiles_once_and_recovers_from_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = HostConfig {
        cache_dir: Some(dir.path().to_path_buf()),
        ..HostConfig::default()
    };
    let bytes = guest(world(), &test_info(), Body::Return(ok_status("{}")));

    // First host: compiles and writes the entry; a second load is a memory hit.
    let h1 = WasmHost::new(cfg.clone()).unwrap();
    let c1 = h1.load(&bytes).unwrap();
    let c1b = h1.load(&bytes).unwrap();
    assert!(std::sync::Arc::ptr_eq(&c1, &c1b));
    assert_eq!(h1.cache_stats().compiles, 1);
    assert_eq!(h1.cache_stats().memory_hits, 1);
    let path = h1.cache_path(&bytes).unwrap();
    assert!(path.exists());

    // A restart (new host, same dir) loads from disk without compiling.
    let h2 = WasmHost::new(cfg.clone()).unwrap();
    let c2 = h2.load(&bytes).unwrap();
    assert_eq!(h2.cache_stats().compiles, 0);
    assert_eq!(h2.cache_stats().disk_hits, 1);
    c2.reconcile(&request("{}"), &Limits::default())
        .await
        .unwrap();

    // Changed bytes are a different entry.
    let other = guest(world(), &test_info(), Body::Return(ok_status("[]")));
    h2.load(&other).unwrap();
    assert_eq!(h2.cache_stats().compiles, 1);

    // A flipped byte in the payload: detected, recompiled, still works.
    let mut file = std::fs::read(&path).unwrap();
    let mid = file.len() / 2;
    file[mid] ^= 0xff;
    std::fs::write(&path, &file).unwrap();
    let h3 = WasmHost::new(cfg.clone()).unwrap();
    let c3 = h3.load(&bytes).unwrap();
    assert_eq!(h3.cache_stats().corrupt_entries, 1);
    assert_eq!(h3.cache_stats().compiles, 1);
    c3.reconcile(&request("{}"), &Limits::default())
        .await
        .unwrap();

    // A truncated file: the same.
    let file = std::fs::read(&path).unwrap();
    std::fs::write(&path, &file[..file.len() / 3]).unwrap();
    let h4 = WasmHost::new(cfg.clone()).unwrap();
    h4.load(&bytes).unwrap();
    assert_eq!(h4.cache_stats().corrupt_entries, 1);
    assert_eq!(h4.cache_stats().compiles, 1);

    // And the rewritten entry is good again.
    let h5 = WasmHost::new(cfg).unwrap();
    h5.load(&bytes).unwrap();
    assert_eq!(h5.cache_stats().disk_hits, 1);
    assert_eq!(h5.cache_stats().compiles, 0);
}

#[tokio::test]
async fn hot_swap_keeps_in_flight_tasks_on_the_old_component() {
    let h = host();
    let old = h
        .load(&guest(
            world(),
            &test_info(),
            Body::Return(ok_status(r#""v1""#)),
        ))
        .unwrap();
    let current = std::sync::Arc::new(std::sync::Mutex::new(old.clone()));
    // A task takes the current component...
    let in_flight = current.lock().unwrap().clone();
    // ...a config push swaps it...
    let new = h
        .load(&guest(
            world(),
            &test_info(),
            Body::Return(ok_status(r#""v2""#)),
        ))
        .unwrap();
    *current.lock().unwrap() = new;
    drop(old);
    // ...the in-flight task finishes on v1, the next task runs v2.
    let req = request("{}");
    let l = Limits::default();
    let a = in_flight.reconcile(&req, &l).await.unwrap();
    assert_eq!(a.status.as_deref(), Some(r#""v1""#));
    let next = current.lock().unwrap().clone();
    let b = next.reconcile(&req, &l).await.unwrap();
    assert_eq!(b.status.as_deref(), Some(r#""v2""#));
}

/// The measured figure: instantiate + reconcile of the tiny WAT guest, steady state.
#[tokio::test(flavor = "current_thread")]
async fn per_call_cost() {
    let h = host();
    let c = h
        .load(&guest(
            world(),
            &test_info(),
            Body::Return(ok_status(r#"{"ok":true}"#)),
        ))
        .unwrap();
    let req = request(r#"{"greeting":"hi"}"#);
    let l = Limits::default();
    for _ in 0..200 {
        c.reconcile(&req, &l).await.unwrap();
    }
    let n = 2000;
    let started = Instant::now();
    for _ in 0..n {
        c.reconcile(&req, &l).await.unwrap();
    }
    let per_call = started.elapsed() / n;
    eprintln!(
        "per-call cost (fresh store + instantiate + reconcile + validate), tiny WAT guest, pooling={}: {per_call:?}",
        h.is_pooling()
    );
    // A generous smoke bound, not a benchmark (debug builds, contended CI machines).
    assert!(per_call < Duration::from_millis(20), "{per_call:?}");
}

/// Minimal WASI p2 packages (just the functions the probe calls) and a world that adds them
/// to the handler world, the way a `wasm32-wasip2` toolchain guest imports WASI.
const WASI_CLOCKS: &str = "package wasi:clocks@0.2.6;
interface wall-clock {
    record datetime { seconds: u64, nanoseconds: u32 }
    now: func() -> datetime;
}
interface monotonic-clock {
    type instant = u64;
    now: func() -> instant;
}";
const WASI_CLI: &str = "package wasi:cli@0.2.6;
interface environment {
    get-environment: func() -> list<tuple<string, string>>;
    get-arguments: func() -> list<string>;
}";
const WASI_RANDOM: &str = "package wasi:random@0.2.6;
interface random {
    get-random-u64: func() -> u64;
}";
const PROBE_WORLD: &str = "package test:probe;
world probe {
    include converge:handler/handler@0.1.0;
    import wasi:clocks/wall-clock@0.2.6;
    import wasi:clocks/monotonic-clock@0.2.6;
    import wasi:cli/environment@0.2.6;
    import wasi:random/random@0.2.6;
}";

/// A guest that traps unless WASI shows the sandbox: the wall clock fixed at
/// `HostConfig::fixed_wall_clock`, the monotonic clock at 0, no environment variables, no
/// arguments, and the same "random" value as `expected_random` (0 = don't check).
fn wasi_probe(expected_random: i64) -> Vec<u8> {
    let world = World::load_with(&[WASI_CLOCKS, WASI_CLI, WASI_RANDOM, PROBE_WORLD], "probe");
    let fixed = HostConfig::default().fixed_wall_clock.as_secs();
    let check_random = if expected_random == 0 {
        String::new()
    } else {
        format!("(if (i64.ne (call $rand) (i64.const {expected_random})) (then unreachable))")
    };
    let body = Body::Custom {
        imports: r#"(import "wasi:clocks/wall-clock@0.2.6" "now" (func $now (param i32)))
  (import "wasi:clocks/monotonic-clock@0.2.6" "now" (func $mono (result i64)))
  (import "wasi:cli/environment@0.2.6" "get-environment" (func $env (param i32)))
  (import "wasi:cli/environment@0.2.6" "get-arguments" (func $args (param i32)))
  (import "wasi:random/random@0.2.6" "get-random-u64" (func $rand (result i64)))"#
            .to_string(),
        code: format!(
            "(call $now (i32.const 200000))
             (if (i64.ne (i64.load (i32.const 200000)) (i64.const {fixed})) (then unreachable))
             (if (i64.ne (call $mono) (i64.const 0)) (then unreachable))
             (call $env (i32.const 200016))
             (if (i32.ne (i32.load (i32.const 200020)) (i32.const 0)) (then unreachable))
             (call $args (i32.const 200032))
             (if (i32.ne (i32.load (i32.const 200036)) (i32.const 0)) (then unreachable))
             {check_random}
             (i32.const {{RESULT}})"
        ),
    };
    guest(&world, &test_info(), body)
}

#[tokio::test]
async fn wasi_is_linked_but_denies_env_and_fixes_clock_and_random() {
    let h = host();
    let c = h
        .load(&wasi_probe(0))
        .expect("a WASI-importing guest loads");
    c.reconcile(&request("{}"), &Limits::default())
        .await
        .expect("fixed clocks and an empty environment");

    // The random source is seeded: every fresh store yields the same first value. The host
    // cycles through sha256(seed || counter) blocks, and wasmtime-wasi's `Deterministic`
    // reads a u64 big-endian from the first 8 bytes.
    let cfg = HostConfig::default();
    let expected = {
        use sha2::Digest;
        let mut block = cfg.random_seed.to_le_bytes().to_vec();
        block.extend_from_slice(&0u64.to_le_bytes());
        let d = sha2::Sha256::digest(&block);
        let hi = u32::from_be_bytes(d[0..4].try_into().unwrap()) as u64;
        let lo = u32::from_be_bytes(d[4..8].try_into().unwrap()) as u64;
        ((hi << 32) | lo) as i64
    };
    let c = h.load(&wasi_probe(expected)).unwrap();
    for _ in 0..3 {
        c.reconcile(&request("{}"), &Limits::default())
            .await
            .expect("the same seeded random value in every task");
    }
    // Negative control: the probe really checks (a wrong expectation traps).
    let wrong = h.load(&wasi_probe(expected ^ 1)).unwrap();
    let err = wrong
        .reconcile(&request("{}"), &Limits::default())
        .await
        .unwrap_err();
    assert!(matches!(err, HandlerFailure::Trap(_)), "{err:?}");
}
