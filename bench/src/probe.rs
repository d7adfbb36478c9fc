//! `--probe`: the machine's PostgreSQL ceiling, measured by `pg_limit.py` right before and
//! right after the benchmark, and every throughput figure as a ratio to it. Absolute rates on
//! shared machines move by ±30 % from hour to hour; the probe moves with them, so a target
//! stated as a ratio is met or missed on any machine, in any hour.

use std::path::Path;

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// The probe figure every throughput ratio divides by.
pub const QUEUE_RATE: &str = "queue_claim_delete_rows_per_s";

/// Runs the probe script once and returns its JSON line.
pub fn measure(script: &Path) -> anyhow::Result<Value> {
    eprintln!("probing the PostgreSQL ceiling ({}) ...", script.display());
    let out = std::process::Command::new("python3")
        .arg(script)
        .output()
        .with_context(|| format!("running python3 {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .with_context(|| format!("{} printed no JSON line", script.display()))?;
    let v: Value = serde_json::from_str(line).context("parsing the probe's JSON")?;
    if v[QUEUE_RATE].as_f64().is_none() {
        bail!("the probe's JSON has no {QUEUE_RATE}: {v}");
    }
    Ok(v)
}

/// Adds `probe` (both measurements and the mean queue rate) and `ratios` (each throughput
/// figure of `out` divided by that rate) to a benchmark's JSON.
pub fn attach(out: &mut Value, before: &Value, after: &Value) {
    let rate = (before[QUEUE_RATE].as_f64().unwrap_or(0.0)
        + after[QUEUE_RATE].as_f64().unwrap_or(0.0))
        / 2.0;
    let mut ratios = serde_json::Map::new();
    if rate > 0.0 {
        for (name, pointer) in [
            ("reconciles_per_sec", "/reconciles_per_sec"),
            ("applies_per_sec", "/applies_per_sec"),
            ("teardown_nodes_per_sec", "/teardown/nodes_per_sec"),
        ] {
            if let Some(v) = out.pointer(pointer).and_then(Value::as_f64) {
                ratios.insert(name.into(), json!(v / rate));
            }
        }
    }
    out["probe"] = json!({"before": before, "after": after, QUEUE_RATE: rate});
    out["ratios"] = Value::Object(ratios);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_divide_by_the_mean_queue_rate() {
        let mut out = json!({"reconciles_per_sec": 5000.0, "teardown": {"nodes_per_sec": 2000.0}});
        attach(
            &mut out,
            &json!({QUEUE_RATE: 30000.0}),
            &json!({QUEUE_RATE: 50000.0}),
        );
        assert_eq!(out["probe"][QUEUE_RATE], 40000.0);
        assert_eq!(out["ratios"]["reconciles_per_sec"], 0.125);
        assert_eq!(out["ratios"]["teardown_nodes_per_sec"], 0.05);
        assert!(out["ratios"].get("applies_per_sec").is_none());
    }
}
