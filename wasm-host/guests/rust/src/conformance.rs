//! The conformance kinds (`conformance/KINDS.md`) as a pure WASM handler serves them.
//!
//! Each conformance manifest declares at most one reaction per stage, so the stage alone
//! picks the behaviour; a stage a kind has nothing to do in gets an empty outcome. What a
//! component cannot do is left out rather than faked: it writes no event log (no files), it
//! cannot see the provider config's bundle (`conf-config` reports the effective config
//! only), and it has no cooperative cancellation (the host enforces deadlines).
//!
//! Specs are read leniently, as in the other forms (the manifests' schemas own validation),
//! except `conf-composite`'s child count, which bounds the outcome's size.

use std::time::Duration;

use serde_json::{Value, json};

use crate::converge::handler::types::{
    ChildSpec, DepEdge, HandlerError, Outcome, Request, ResourceRef, Stage, ValueFlow,
};
use crate::{FORM, empty, parse, spec, with_status};

/// The kind all children of `conf-composite` have; every conformance kind is version 1.
const LEAF: &str = "conf-leaf";

/// Serves `kind` if it is a conformance kind; `None` lets the caller refuse it.
pub(crate) fn reconcile(kind: &str, req: &Request) -> Option<Result<Outcome, HandlerError>> {
    let result = match (kind, req.stage) {
        ("conf-leaf" | "conf-final" | "conf-ready", Stage::Work) => echo(req),
        ("conf-leaf", Stage::Operate) => ping(req),
        ("conf-composite", Stage::Compose) => compose(req),
        ("conf-composite", Stage::Rollup) => rollup(req),
        ("conf-final", Stage::Delete) => teardown(req),
        ("conf-fail", Stage::Work) => fail(req),
        ("conf-slow" | "conf-hold", Stage::Work) => slow(req),
        ("conf-react", Stage::React) => react(req),
        ("conf-config", Stage::Work) => config(req),
        (
            "conf-leaf" | "conf-composite" | "conf-final" | "conf-fail" | "conf-slow" | "conf-hold"
            | "conf-react" | "conf-ready" | "conf-config",
            _,
        ) => Ok(empty()),
        _ => return None,
    };
    Some(result)
}

/// An integer field of the spec, if present and integral (the lenient reading).
fn spec_int(spec: &Value, key: &str) -> Option<i64> {
    spec.get(key).and_then(Value::as_i64)
}

/// `work` of the leaf kinds: the spec echoed with what the host told the handler, so the
/// suite can check that every field of the request arrived.
fn echo(req: &Request) -> Result<Outcome, HandlerError> {
    Ok(with_status(&json!({
        "echo": spec(req)?,
        "form": FORM,
        "generation": req.generation,
        "attempt": req.attempt,
        "trigger": req.trigger,
    })))
}

/// Verb `ping`: answers with the operation's input (null without one) and the target.
fn ping(req: &Request) -> Result<Outcome, HandlerError> {
    let input = match req.operation.as_ref().and_then(|op| op.input.as_deref()) {
        Some(json) => parse("operation input", json)?,
        None => Value::Null,
    };
    Ok(Outcome {
        operation_output: Some(json!({"pong": input, "name": req.target.name}).to_string()),
        ..empty()
    })
}

/// The composite's child count: 2 by default, else an integer in 0..=50. Anything else is
/// terminal: the same spec would fail again, and a composer must never guess its children
/// (an empty list would prune them all).
fn child_count(spec: &Value) -> Result<i64, HandlerError> {
    match spec.get("children") {
        None => Ok(2),
        Some(v) => match v.as_i64() {
            Some(n) if (0..=50).contains(&n) => Ok(n),
            _ => Err(HandlerError::Terminal(format!(
                "spec.children must be an integer in 0..=50, got {v}"
            ))),
        },
    }
}

/// `compose`: a chain of leaves, each waiting for the previous one and receiving its echoed
/// index through a value flow, so the suite can check both ordering and flows.
fn compose(req: &Request) -> Result<Outcome, HandlerError> {
    let n = child_count(&spec(req)?)?;
    let name = |i: i64| format!("{}-{i}", req.target.name);
    let leaf = |i: i64| ResourceRef {
        kind: LEAF.into(),
        name: name(i),
    };
    let children = (0..n)
        .map(|i| ChildSpec {
            kind: LEAF.into(),
            kind_version: 1,
            name: name(i),
            spec: json!({"index": i}).to_string(),
            labels: Vec::new(),
        })
        .collect();
    let edges = (1..n)
        .map(|i| DepEdge {
            dependent: leaf(i),
            dependency: leaf(i - 1),
            values: vec![ValueFlow {
                dependent_field: "/upstream_index".into(),
                source_field: "/echo/index".into(),
            }],
        })
        .collect();
    Ok(Outcome {
        children,
        edges,
        ..with_status(&json!({"composed": n}))
    })
}

/// `rollup`: how many descendants exist and how many are ready.
fn rollup(req: &Request) -> Result<Outcome, HandlerError> {
    let n = child_count(&spec(req)?)?;
    let ready = req.descendants.iter().filter(|d| d.is_ready).count();
    Ok(with_status(&json!({
        "composed": n,
        "descendants": req.descendants.len(),
        "ready": ready,
    })))
}

/// `teardown` (the delete stage): fails transiently for the first `delete_failures`
/// attempts, so the suite can watch the finalizer hold the row; then an empty outcome
/// releases it.
fn teardown(req: &Request) -> Result<Outcome, HandlerError> {
    let failures = spec_int(&spec(req)?, "delete_failures").unwrap_or(0);
    if failures > 0 && i64::from(req.attempt) <= failures {
        return Err(HandlerError::Transient(format!(
            "teardown failure {}",
            req.attempt
        )));
    }
    Ok(empty())
}

/// `conf-fail` work: each failure class on demand.
fn fail(req: &Request) -> Result<Outcome, HandlerError> {
    let spec = spec(req)?;
    let ok = || with_status(&json!({"ok": true, "attempt": req.attempt}));
    match spec.get("mode").and_then(Value::as_str).unwrap_or("ok") {
        "ok" => Ok(ok()),
        "terminal" => Err(HandlerError::Terminal("conformance terminal".into())),
        "transient" => {
            let times = spec_int(&spec, "times").unwrap_or(0);
            if times == 0 || i64::from(req.attempt) <= times {
                Err(HandlerError::Transient(format!(
                    "conformance transient {}",
                    req.attempt
                )))
            } else {
                Ok(ok())
            }
        }
        // Not a handler-error on purpose: on wasm32 a panic aborts, which the host sees as a
        // trap, the class this mode exists to exercise.
        "panic" => panic!("conformance panic"),
        other => Err(HandlerError::Terminal(format!(
            "unknown conf-fail mode {other:?}"
        ))),
    }
}

/// `conf-slow` work: a real sleep. std's `thread::sleep` becomes a WASI monotonic-clock
/// subscription the host waits on, so the time passes on the host's clock while the guest
/// executes nothing (and burns no fuel); a spin loop would test fuel, not wall time.
fn slow(req: &Request) -> Result<Outcome, HandlerError> {
    let ms = spec_int(&spec(req)?, "sleep_ms").unwrap_or(0).max(0);
    std::thread::sleep(Duration::from_millis(ms.unsigned_abs()));
    Ok(with_status(
        &json!({"slept_ms": ms, "attempt": req.attempt}),
    ))
}

/// `conf-react` react: fails transiently while the attempt is at most the watched resource's
/// `react_failures`, then succeeds (the host journals the transition and dedup token).
fn react(req: &Request) -> Result<Outcome, HandlerError> {
    let failures = spec_int(&spec(req)?, "react_failures").unwrap_or(0);
    if i64::from(req.attempt) <= failures {
        return Err(HandlerError::Transient(format!(
            "react failure {}",
            req.attempt
        )));
    }
    Ok(empty())
}

/// `conf-config` work: the effective config as the host passed it (null without one).
fn config(req: &Request) -> Result<Outcome, HandlerError> {
    let config = match req.config.as_deref() {
        Some(json) => parse("config", json)?,
        None => Value::Null,
    };
    Ok(with_status(&json!({"config": config})))
}
