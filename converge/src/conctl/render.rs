//! `conctl render`: what a data-driven composer will make of a root, with no server — the
//! answer to "what will this composition do?" before anything is applied.
//!
//! The composer is the provider config the API takes (`--config`): a CEL graph in its
//! `spec` (`{"resources": [...]}`), or a Starlark bundle in its `data` (a zip, base64) or in
//! a directory (`--bundle DIR`). It runs on the root document (`-f`: kind, name, spec,
//! labels) by the code the stdworker runs: `converge_cel` in process for a graph, the
//! `converge-starlark-compose` child for a bundle (the config's `limits` apply and its
//! `sample_spec` is dropped, as on a worker). The answer is `{children, edges, configs,
//! status}`.
//!
//! Value flows: the engine copies an upstream child's status into its dependents' specs when
//! it composes, for the upstreams that already report one. `--observed FILE` supplies those
//! statuses (`KIND/NAME: status` pairs, or documents with `kind`, `name` and `status`, such
//! as `conctl get -o json` prints); each child's spec is then shown flowed, by the Rust twin
//! of the engine's `apply_value_flows` (`converge_engine::value_flows`), applied as the plan
//! applies it (`converge_control::app::plan::substitute_flows`). Without it, specs
//! are shown as composed, as on a first compose.

use std::{collections::HashMap, path::PathBuf, time::Duration};

use anyhow::{Context, bail};
use base64::Engine;
use converge_cel::ComposeOutput;
use converge_control::app::plan::substitute_flows;
use converge_control::app::starlark_sample::{BundleSource, Runner, Sample};
use serde_json::{Value, json};

use crate::{
    docs,
    output::{Format, cell, clip, document, out, table},
};

/// What `conctl render` was given.
pub struct Args {
    /// The root document.
    pub root: String,
    /// The provider config document.
    pub config: String,
    /// A directory holding the Starlark bundle's files (instead of the config's `data`).
    pub bundle: Option<PathBuf>,
    /// Observed statuses of children, for value flows.
    pub observed: Option<String>,
    /// How long a Starlark compose may run.
    pub timeout: Duration,
}

/// Reads exactly one document from `file`.
fn one_document(file: &str, what: &str) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?;
    let mut docs = docs::parse(&text).with_context(|| format!("{what} {file}"))?;
    match docs.len() {
        1 => Ok(docs.remove(0)),
        n => bail!("{what} {file} holds {n} documents; give exactly one"),
    }
}

/// `KIND/NAME` → status, from `--observed`.
fn observed_statuses(file: &str) -> anyhow::Result<HashMap<String, Value>> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?;
    let mut out = HashMap::new();
    for d in docs::parse(&text).with_context(|| format!("observed statuses {file}"))? {
        let Some(o) = d.as_object() else {
            bail!("{file}: every observed document must be an object");
        };
        if let (Some(kind), Some(name)) = (o.get("kind"), o.get("name")) {
            let (Some(kind), Some(name)) = (kind.as_str(), name.as_str()) else {
                bail!("{file}: kind and name must be strings");
            };
            out.insert(
                format!("{kind}/{name}"),
                o.get("status").cloned().unwrap_or(Value::Null),
            );
        } else {
            for (k, status) in o {
                if !k.contains('/') {
                    bail!(
                        "{file}: {k:?} is not KIND/NAME (or give documents with kind, name and status)"
                    );
                }
                out.insert(k.clone(), status.clone());
            }
        }
    }
    Ok(out)
}

/// Runs the composer and returns `{children, edges, configs, status}`, flows applied.
pub async fn compose(args: &Args) -> anyhow::Result<Value> {
    let root = one_document(&args.root, "root")?;
    let config = one_document(&args.config, "provider config")?;
    let field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let (Some(kind), Some(name)) = (field(&root, "kind"), field(&root, "name")) else {
        bail!("the root document needs a kind and a name");
    };
    let spec = root.get("spec").cloned().unwrap_or_else(|| json!({}));
    let config_spec = config.get("spec").cloned().unwrap_or_else(|| json!({}));
    let is_graph = config_spec.get("resources").is_some_and(Value::is_array);
    let mut output: ComposeOutput = if is_graph {
        if args.bundle.is_some() {
            bail!("--bundle is for a Starlark composer; this config's spec is a CEL graph");
        }
        converge_cel::render(&config_spec, &name, &spec).map_err(anyhow::Error::msg)?
    } else {
        let data = match (&args.bundle, config.get("data").and_then(Value::as_str)) {
            (Some(_), Some(_)) => {
                bail!("the config carries a bundle (data) and --bundle names one: give one")
            }
            (None, None) => bail!(
                "the config's spec is not a CEL graph (no \"resources\" array) and no Starlark bundle is given (its data, or --bundle DIR)"
            ),
            (None, Some(b64)) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(b64.trim())
                    .context("the config's data is not base64")?,
            ),
            (Some(_), None) => None,
        };
        let source = match (&data, &args.bundle) {
            (Some(bytes), _) => BundleSource::Zip(bytes),
            (None, Some(dir)) => BundleSource::Dir(dir),
            (None, None) => unreachable!("refused above"),
        };
        let mut runner = Runner::find()
            .map_err(|why| anyhow::anyhow!("cannot run the Starlark bundle: {why}"))?;
        runner.timeout = args.timeout;
        let identity = json!({
            "name": name,
            "kind": kind,
            "kind_version": root.get("kind_version").cloned().unwrap_or(json!(1)),
            "labels": root.get("labels").cloned().unwrap_or_else(|| json!({})),
        });
        match runner.compose(source, &spec, &config_spec, &identity).await {
            Sample::Composed(out) => out,
            Sample::Failed(why) => bail!("the Starlark bundle's compose fails: {why}"),
            Sample::NotRun(why) => bail!("cannot run the Starlark bundle: {why}"),
        }
    };
    if let Some(file) = &args.observed {
        let observed = observed_statuses(file)?;
        substitute_flows(&mut output, |kind, name| {
            observed.get(&format!("{kind}/{name}"))
        })
        .map_err(|why| anyhow::anyhow!(why))?;
    }
    Ok(serde_json::to_value(output)?)
}

/// `conctl render`: prints the composition (`-o json|yaml` the whole answer; the table
/// lists children, then edges, then the status).
pub async fn render(args: Args, format: Format) -> anyhow::Result<()> {
    let out = compose(&args).await?;
    if format != Format::Table {
        return document(&out, format);
    }
    let children: Vec<Vec<String>> = out["children"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            vec![
                cell(&c["kind"]),
                cell(&c["name"]),
                clip(&c["spec"].to_string(), 80),
            ]
        })
        .collect();
    out!("{}", table(&["KIND", "NAME", "SPEC"], &children));
    let edges: Vec<Vec<String>> = out["edges"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let flows = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| {
                    format!(
                        "{} <- {}",
                        cell(&v["dependent_field"]),
                        cell(&v["source_field"])
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            vec![
                format!("{}/{}", cell(&e["from"]["kind"]), cell(&e["from"]["name"])),
                format!("{}/{}", cell(&e["to"]["kind"]), cell(&e["to"]["name"])),
                if flows.is_empty() { "-".into() } else { flows },
            ]
        })
        .collect();
    if !edges.is_empty() {
        out!(
            "\n{}",
            table(&["DEPENDENT", "DEPENDS ON", "VALUE FLOWS"], &edges)
        );
    }
    if !out["status"].is_null() {
        out!("\nstatus: {}\n", out["status"]);
    }
    Ok(())
}
