//! Output: aligned tables for people, JSON or YAML documents for scripts.

use chrono::{DateTime, Utc};
use clap::ValueEnum;
use serde_json::Value;

/// `-o/--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns.
    Table,
    /// Pretty-printed JSON.
    Json,
    /// YAML.
    Yaml,
}

/// Prints `v` as JSON or YAML (for `Format::Table` the caller prints its own view).
pub fn document(v: &Value, format: Format) -> anyhow::Result<()> {
    match format {
        Format::Yaml => print!("{}", serde_yaml::to_string(v)?),
        Format::Json | Format::Table => println!("{}", serde_json::to_string_pretty(v)?),
    }
    Ok(())
}

/// Renders rows under headers, columns padded to their widest cell.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}   "));
            }
        }
        s.trim_end().to_string()
    };
    let mut out = line(headers.to_vec());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// A JSON value as a table cell: strings bare, null as "-", anything else as JSON.
pub fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// How long ago an RFC 3339 timestamp was, kubectl style (`45s`, `12m`, `3h`, `5d`).
pub fn age(v: &Value) -> String {
    let Some(t) = v
        .as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
    else {
        return "-".into();
    };
    let secs = (Utc::now() - t.with_timezone(&Utc)).num_seconds().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns() {
        let t = table(
            &["KIND", "NAME"],
            &[
                vec!["hello".into(), "w".into()],
                vec!["x".into(), "world".into()],
            ],
        );
        assert_eq!(t, "KIND    NAME\nhello   w\nx       world\n");
    }

    #[test]
    fn ages_are_short() {
        let t = (Utc::now() - chrono::Duration::seconds(7200)).to_rfc3339();
        assert_eq!(age(&Value::String(t)), "2h");
        assert_eq!(age(&Value::Null), "-");
    }
}
