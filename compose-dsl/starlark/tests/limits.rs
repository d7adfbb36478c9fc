//! Every evaluation limit surfaces as its own `Error::Limit` kind.

use std::time::{Duration, Instant};

use converge_starlark::{Bundle, Error, LimitKind, Limits, pack};
use serde_json::json;

fn run(src: &str, limits: &Limits) -> Error {
    let b = Bundle::from_zip(&pack(&[("compose.star", src)]), &Limits::default()).unwrap();
    b.compose(&json!({}), &json!({}), limits).unwrap_err()
}

const SPIN: &str =
    "def compose(spec, config):\n    for i in range(2000000000):\n        pass\n    return {}\n";

#[test]
fn an_infinite_loop_runs_out_of_ticks() {
    // The default 1 s deadline is a wall clock: on a loaded machine a debug build can spend
    // it before 100,000 ticks, and the deadline would answer first.
    let limits = Limits {
        max_ticks: 100_000,
        deadline: Duration::from_secs(60),
        ..Limits::default()
    };
    assert_eq!(run(SPIN, &limits), Error::Limit(LimitKind::Ticks));
}

#[test]
fn an_infinite_loop_hits_the_deadline() {
    let limits = Limits {
        max_ticks: u64::MAX,
        deadline: Duration::from_millis(100),
        ..Limits::default()
    };
    let start = Instant::now();
    assert_eq!(run(SPIN, &limits), Error::Limit(LimitKind::Deadline));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn deep_recursion_hits_the_call_stack_limit() {
    let src = "def f(n):\n    return f(n + 1)\n\ndef compose(spec, config):\n    return f(0)\n";
    assert_eq!(
        run(src, &Limits::default()),
        Error::Limit(LimitKind::CallStack)
    );
    // Bounded recursion within the limit is fine.
    let src = "def f(n):\n    return 0 if n == 0 else f(n - 1)\n\ndef compose(spec, config):\n    return {\"status\": f(30)}\n";
    let b = Bundle::from_zip(&pack(&[("compose.star", src)]), &Limits::default()).unwrap();
    assert!(
        b.compose(&json!({}), &json!({}), &Limits::default())
            .is_ok()
    );
}

#[test]
fn the_largest_call_stack_does_not_overflow_the_native_stack() {
    let src = "def f(n):\n    return f(n + 1)\n\ndef compose(spec, config):\n    return f(0)\n";
    let limits = Limits {
        max_call_stack: usize::MAX,
        deadline: Duration::from_secs(60),
        ..Limits::default()
    };
    assert_eq!(run(src, &limits), Error::Limit(LimitKind::CallStack));
}

#[test]
fn a_growing_heap_hits_the_heap_limit() {
    let src = "def compose(spec, config):\n    xs = []\n    for i in range(100000000):\n        xs.append(\"item-%d\" % i)\n    return {}\n";
    let limits = Limits {
        max_ticks: u64::MAX,
        max_heap_bytes: 8 << 20,
        deadline: Duration::from_secs(30),
        ..Limits::default()
    };
    assert_eq!(run(src, &limits), Error::Limit(LimitKind::Heap));
}

#[test]
fn one_big_allocation_hits_the_heap_limit() {
    // Not a constant expression, so the compiler cannot fold it at load time.
    let src = "def compose(spec, config):\n    x = \"a\" * spec[\"n\"]\n    return {}\n";
    let b = Bundle::from_zip(&pack(&[("compose.star", src)]), &Limits::default()).unwrap();
    let limits = Limits {
        max_heap_bytes: 8 << 20,
        deadline: Duration::from_secs(30),
        ..Limits::default()
    };
    let err = b
        .compose(&json!({"n": 50_000_000}), &json!({}), &limits)
        .unwrap_err();
    assert_eq!(err, Error::Limit(LimitKind::Heap));
}

#[test]
fn oversized_input_and_output_are_rejected() {
    let src = "def compose(spec, config):\n    return {\"status\": \"x\" * 5000}\n";
    let limits = Limits {
        max_output_bytes: 1000,
        ..Limits::default()
    };
    assert_eq!(run(src, &limits), Error::Limit(LimitKind::OutputSize));

    let b = Bundle::from_zip(
        &pack(&[(
            "compose.star",
            "def compose(spec, config):\n    return {}\n",
        )]),
        &Limits::default(),
    )
    .unwrap();
    let limits = Limits {
        max_input_bytes: 100,
        ..Limits::default()
    };
    let err = b
        .compose(&json!({"x": "y".repeat(200)}), &json!({}), &limits)
        .unwrap_err();
    assert_eq!(err, Error::Limit(LimitKind::InputSize));
}

#[test]
fn child_count_is_capped() {
    let src = "def compose(spec, config):\n    return {\"children\": [child(\"k\", \"c%d\" % i) for i in range(20)]}\n";
    let limits = Limits {
        max_children: 10,
        ..Limits::default()
    };
    assert_eq!(run(src, &limits), Error::Limit(LimitKind::Children));
}

#[test]
fn a_top_level_loop_in_a_module_is_bounded_at_load() {
    // Module top levels run at load under the same limits (a comprehension is allowed at the
    // top level even though `for` statements are not).
    let src = "X = [i for i in range(2000000000)]\ndef compose(spec, config):\n    return {}\n";
    let limits = Limits {
        max_ticks: 10_000,
        deadline: Duration::from_secs(60),
        ..Limits::default()
    };
    let err = Bundle::from_zip(&pack(&[("compose.star", src)]), &limits)
        .err()
        .unwrap();
    assert!(
        matches!(err, Error::Limit(LimitKind::Ticks | LimitKind::Heap)),
        "{err:?}"
    );
}
