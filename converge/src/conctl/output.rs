//! Output: aligned tables for people, JSON or YAML documents for scripts, and the one
//! writer every line to stdout goes through ([`out!`]/[`outln!`]), which ends the process
//! quietly when stdout is a closed pipe (`conctl list | head -1`).

use std::{
    fmt,
    io::Write,
    sync::atomic::{AtomicBool, Ordering},
};

use chrono::{DateTime, Utc};
use clap::ValueEnum;
use serde_json::Value;

/// Set by a command that changes several things in a row (`apply`, `sync`): when stdout
/// closes, it goes on (its output dropped) rather than stopping half-way.
static FINISH_WHEN_STDOUT_CLOSES: AtomicBool = AtomicBool::new(false);
/// Stdout was found closed: nothing more is written to it.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Makes a closed stdout drop further output instead of ending the process, so that the
/// calling command finishes its work (and its exit status still says how that went).
pub fn finish_work_when_stdout_closes() {
    FINISH_WHEN_STDOUT_CLOSES.store(true, Ordering::Relaxed);
}

/// Writes to stdout. Rust ignores SIGPIPE, so a write to a closed pipe is an error
/// (`print!` would panic on it): here a reader that went away (`| head -1`) ends the
/// process with status 0 and no message, as a reader stopping early is no failure, unless
/// [`finish_work_when_stdout_closes`] was called. Any other write error ends it with
/// status 1.
pub fn write_stdout(args: fmt::Arguments<'_>) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| out.flush());
    drop(out);
    let Err(e) = written else { return };
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if !FINISH_WHEN_STDOUT_CLOSES.load(Ordering::Relaxed) {
            std::process::exit(0);
        }
    } else {
        eprintln!("error: writing to stdout: {e}");
        std::process::exit(1);
    }
}

/// `print!` through [`write_stdout`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` through [`write_stdout`].
macro_rules! outln {
    () => {
        $crate::output::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};

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
        Format::Yaml => out!("{}", serde_yaml::to_string(v)?),
        Format::Json | Format::Table => outln!("{}", serde_json::to_string_pretty(v)?),
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

/// `s` cut to at most `max` characters on one line (newlines become spaces), with `…` when
/// something was cut: a table cell for a free-form message.
pub fn clip(s: &str, max: usize) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
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
    fn clipped_cells_stay_on_one_line() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("a\nb", 10), "a b");
        assert_eq!(clip("0123456789abc", 10), "012345678…");
        assert_eq!(clip("0123456789abc", 10).chars().count(), 10);
    }

    #[test]
    fn ages_are_short() {
        let t = (Utc::now() - chrono::Duration::seconds(7200)).to_rfc3339();
        assert_eq!(age(&Value::String(t)), "2h");
        assert_eq!(age(&Value::Null), "-");
    }
}
