//! `converge-starlark-compose`: runs one Starlark bundle's `compose` once, for a caller that
//! cannot link the interpreter (the control plane checks a bundle's value flows at apply
//! against a sample spec; `starlark` must stay out of its build, see `compose-dsl/Cargo.toml`).
//!
//! Reads one JSON object on stdin:
//! `{"bundle": "<zip, base64>", "spec": {...}, "config": {...} = {}, "root": {...} = null}`
//! (or `"bundle_dir": "<directory>"` instead of `bundle`, packed as `pack_dir` does; and/or
//! `"effective_config": {...}` instead of `config`: a provider config's whole spec, split as
//! the stdworker splits it ([`StarlarkConfig`]: its `limits` apply, `sample_spec` is dropped,
//! the rest is `config`)) and prints one JSON object on stdout: `{"output": <the compose result>}` (children, edges
//! with their value flows, configs, status), or `{"error": "<message>"}` when the bundle does
//! not load or its compose fails. Both exit 0; input that is not that object exits 2 with the
//! reason on stderr. The bundle loads and composes under the crate's default [`Limits`]
//! (ticks, heap, deadline, sizes); the caller bounds the process itself (wall clock, output).
//!
//! A CEL resource graph runs here too (the API's plan, `POST /api/v1/resources:plan`):
//! `{"cel_graph": {"resources": [...]}, "spec": {...}, "root": {"name": ...}}` instead of a
//! bundle compiles the graph under `converge_cel`'s default limits and renders it for the
//! root, with the same answer. CEL has no cost model, so the caller runs it in a process it
//! can kill, as the stdworker's sandbox does.

use std::{
    io::{Read, Write},
    process::ExitCode,
};

use base64::Engine;
use converge_starlark::{Bundle, Limits, config::StarlarkConfig, pack_dir};
use serde::Deserialize;
use serde_json::{Value, json};

/// What stdin carries.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    /// The bundle, a zip, base64 (standard alphabet).
    #[serde(default)]
    bundle: Option<String>,
    /// Or a directory holding the bundle's files.
    #[serde(default)]
    bundle_dir: Option<std::path::PathBuf>,
    /// Or, instead of a bundle, a CEL resource graph (a cel provider config's spec).
    #[serde(default)]
    cel_graph: Option<Value>,
    /// Or, instead of `config`, a provider config's whole spec (limits and sample included).
    #[serde(default)]
    effective_config: Option<Value>,
    /// The spec `compose` gets.
    spec: Value,
    /// The config `compose` gets.
    #[serde(default = "empty_object")]
    config: Value,
    /// The root identity a three-parameter `compose` gets.
    #[serde(default)]
    root: Value,
}

fn empty_object() -> Value {
    json!({})
}

fn main() -> ExitCode {
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("converge-starlark-compose: reading stdin: {e}");
        return ExitCode::from(2);
    }
    let input: Input = match serde_json::from_str(&text) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("converge-starlark-compose: stdin is not the expected JSON object: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(graph) = &input.cel_graph {
        if input.bundle.is_some() || input.bundle_dir.is_some() {
            eprintln!("converge-starlark-compose: give a bundle or a cel_graph, not both");
            return ExitCode::from(2);
        }
        return answer(compose_cel(graph, &input));
    }
    let bytes = match (&input.bundle, &input.bundle_dir) {
        (Some(b), None) => match base64::engine::general_purpose::STANDARD.decode(b.trim()) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("converge-starlark-compose: bundle is not base64: {e}");
                return ExitCode::from(2);
            }
        },
        (None, Some(dir)) => match pack_dir(dir, Limits::default().max_bundle_entries) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("converge-starlark-compose: bundle_dir: {e}");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("converge-starlark-compose: give exactly one of bundle and bundle_dir");
            return ExitCode::from(2);
        }
    };
    if input.effective_config.is_some() && input.config != empty_object() {
        eprintln!("converge-starlark-compose: give config or effective_config, not both");
        return ExitCode::from(2);
    }
    answer(compose(&bytes, &input))
}

/// Prints the answer to a compose on stdout.
fn answer(result: Result<Value, String>) -> ExitCode {
    let answer = match result {
        Ok(out) => json!({ "output": out }),
        Err(message) => json!({ "error": message }),
    };
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "{answer}")
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// Loads the bundle and runs its compose once; the error is the engine's message.
fn compose(bytes: &[u8], input: &Input) -> Result<Value, String> {
    let (limits, config) = match &input.effective_config {
        Some(spec) => {
            let c = StarlarkConfig::from_value(spec)?;
            (c.limits, c.compose_config)
        }
        None => (Limits::default(), input.config.clone()),
    };
    let bundle = Bundle::from_zip(bytes, &limits).map_err(|e| e.to_string())?;
    let out = bundle
        .compose_root(&input.root, &input.spec, &config, &limits)
        .map_err(|e| e.to_string())?;
    serde_json::to_value(out).map_err(|e| format!("compose output is not JSON: {e}"))
}

/// Compiles the CEL graph and renders it for the root (`root.name`); the error lists every
/// compile problem, or the compose's.
fn compose_cel(graph: &Value, input: &Input) -> Result<Value, String> {
    let name = input.root.get("name").and_then(Value::as_str).unwrap_or("");
    let out = converge_cel::render(graph, name, &input.spec)?;
    serde_json::to_value(out).map_err(|e| format!("compose output is not JSON: {e}"))
}
