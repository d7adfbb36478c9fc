//! Compositions that run away, and the process probes that watch what they cost, shared by
//! the sandbox's unit tests and its end-to-end test.
//!
//! Each input is one that took the whole stdworker down before the composers ran in a
//! sandbox (issue 24): CEL with nested comprehensions, starlark allocating past its heap cap
//! in a single native step.

use serde_json::{Value, json};

/// Items in the list a nested `all()` walks three deep: 10⁹ predicate evaluations, far past
/// any deadline.
pub const ALL_ITEMS: usize = 1_000;

/// Items in the list a nested `map()` walks two deep: 4·10⁸ values, far past any memory
/// bound.
pub const MAP_ITEMS: usize = 20_000;

/// A spec holding `n` integers under `items`.
pub fn items_spec(n: usize) -> Value {
    json!({"items": (0..n).collect::<Vec<_>>()})
}

/// A one-resource CEL graph whose child spec field `v` is `expr`.
pub fn cel_graph(expr: &str) -> Value {
    json!({"resources": [
        {"id": "x", "template": {"kind": "leaf", "name": "${root.name}-x",
                                 "spec": {"v": format!("${{{expr}}}")}}}
    ]})
}

/// Nested `all()` three deep over `spec.items`: CPU without end (class `deadline`).
pub fn cel_nested_all() -> Value {
    cel_graph("spec.items.all(a, spec.items.all(b, spec.items.all(c, a + b + c >= 0)))")
}

/// Nested `map()` over `spec.items`: memory without end (class `memory`). Each value is a
/// few dozen bytes, so a debug build needs tens of seconds per 100 MiB.
pub fn cel_nested_map() -> Value {
    cel_graph("spec.items.map(a, spec.items.map(b, b + a))")
}

/// Nested `map()` over `spec.items` building a fresh `2 × len(spec.pad)`-byte string per
/// value: the same runaway, reaching any memory bound in well under a second.
pub fn cel_nested_map_strings() -> Value {
    cel_graph("spec.items.map(a, spec.items.map(b, spec.pad + spec.pad))")
}

/// `n` items and a 4 KiB `pad` string, for [`cel_nested_map_strings`].
pub fn padded_items_spec(n: usize) -> Value {
    let mut spec = items_spec(n);
    spec["pad"] = Value::String("x".repeat(4096));
    spec
}

/// A graph that composes one child echoing `spec.n`.
pub fn cel_ok() -> Value {
    cel_graph("spec.n")
}

/// A bundle whose module top level builds a 1.5 GB string: it runs away while the bundle
/// loads, before any resource is composed (class `memory`).
pub const STARLARK_HUGE_AT_LOAD: &str = r#"
big = "x" * 1500000000

def compose(spec, config):
    return {"status": {"len": len(big)}}
"#;

/// A compose that doubles a string until memory runs out (class `memory`).
pub const STARLARK_DOUBLING: &str = r#"
def compose(spec, config):
    s = "x"
    for i in range(64):
        s = s + s
    return {"status": {"len": len(s)}}
"#;

/// A compose that reports `spec["i"]` back as its status.
pub const STARLARK_ECHO: &str = r#"
def compose(spec, config):
    return {"status": {"i": spec["i"]}}
"#;

/// A bundle of one `compose.star`.
pub fn bundle(src: &str) -> Vec<u8> {
    converge_starlark::pack(&[("compose.star", src)])
}

/// A field of `/proc/<pid>/status` in KiB (`VmHWM`, `VmRSS`, `VmSize`); `None` once the
/// process is gone.
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..]
        .trim_start_matches(':')
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// The live sandbox children (`… __sandbox …`) whose parent is `parent`.
pub fn sandbox_children(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // After the parenthesised command name: state, then the parent's pid.
            let mut rest = stat
                .rsplit_once(')')
                .map_or("", |(_, r)| r)
                .split_whitespace();
            let (state, ppid) = (rest.next(), rest.next());
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            state.is_some_and(|s| s != "Z" && s != "X")
                && ppid == Some(parent.to_string().as_str())
                && cmdline.split(|b| *b == 0).any(|a| a == b"__sandbox")
        })
        .collect()
}
