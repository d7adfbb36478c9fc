//! `conctl events [KIND/NAME]` (the newest entries of the event log, one resource's or
//! everyone's, optionally followed as they happen) and `conctl history KIND/NAME` (a root's
//! recorded specs, and the difference between two of them).

use anyhow::{Context, bail};
use hyper::Method;
use serde_json::{Value, json};

use crate::client::{Client, query};
use crate::output::{self, Format, age, cell, clip, out, outln, table};

/// The longest MESSAGE shown in an events table.
const MESSAGE_WIDTH: usize = 100;

/// Which events: everyone's, one kind's, or one resource's.
pub struct Filter {
    /// `kind` of the log's query.
    pub kind: Option<String>,
    /// `name` of the log's query (with a kind: one resource).
    pub name: Option<String>,
}

impl Filter {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        q.extend(self.kind.iter().map(|k| ("kind", k.clone())));
        q.extend(self.name.iter().map(|n| ("name", n.clone())));
        q
    }

    /// One resource: its events show without the RESOURCE column.
    fn one(&self) -> bool {
        self.kind.is_some() && self.name.is_some()
    }
}

/// The page of the log (`GET /api/v1/events`, oldest first) after `cursor`: up to `limit`
/// events and whether the page was full (more may follow).
async fn page(
    c: &Client,
    f: &Filter,
    cursor: i64,
    limit: usize,
) -> anyhow::Result<(Vec<Value>, bool)> {
    let mut q = f.pairs();
    q.push(("cursor", cursor.to_string()));
    q.push(("limit", limit.to_string()));
    let body = c
        .call(Method::GET, &format!("/events{}", query(&q)), None)
        .await?
        .body;
    let items = body["items"].as_array().cloned().unwrap_or_default();
    let full = items.len() >= limit;
    Ok((items, full))
}

/// The newest `n` events passing `f`, oldest first. The log pages forward from a cursor (an
/// event id), so the newest are found by search: the largest cursor after which at least
/// `n` events remain holds exactly the last `n` after it. Galloping up from 0 then
/// bisecting takes about 2·log2(newest id / n) page reads; a log of at most `n` events
/// takes one.
async fn tail(c: &Client, f: &Filter, n: usize) -> anyhow::Result<Vec<Value>> {
    let (first, full) = page(c, f, 0, n).await?;
    if !full {
        return Ok(first);
    }
    // lo: a cursor with a full page after it; hi: one without.
    let mut lo: i64 = 0;
    let mut step = i64::try_from(n).unwrap_or(i64::MAX).max(1);
    let mut hi = loop {
        let probe = lo.saturating_add(step);
        let (_, full) = page(c, f, probe, n).await?;
        if !full {
            break probe;
        }
        lo = probe;
        if probe == i64::MAX {
            break probe;
        }
        step = step.saturating_mul(2);
    };
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if page(c, f, mid, n).await?.1 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(page(c, f, lo, n).await?.0)
}

/// What an event says happened: `Reconciling -> Ready`, `created -> Reconciling`, ...
fn what(e: &Value) -> String {
    match e["type"].as_str().unwrap_or_default() {
        "phase" => format!("{} -> {}", cell(&e["from_phase"]), cell(&e["to_phase"])),
        "created" => format!("created -> {}", cell(&e["to_phase"])),
        "deleted" => format!("deleted (was {})", cell(&e["from_phase"])),
        other => other.to_string(),
    }
}

/// An event as table cells: AGE, [RESOURCE,] EVENT, GEN, ACTOR, MESSAGE.
fn row(e: &Value, with_resource: bool) -> Vec<String> {
    let mut r = vec![age(&e["at"])];
    if with_resource {
        r.push(format!("{}/{}", cell(&e["kind"]), cell(&e["name"])));
    }
    r.extend([
        what(e),
        cell(&e["generation"]),
        cell(&e["actor"]),
        clip(e["message"].as_str().unwrap_or("-"), MESSAGE_WIDTH),
    ]);
    r
}

fn headers(with_resource: bool) -> Vec<&'static str> {
    let mut h = vec!["AGE"];
    if with_resource {
        h.push("RESOURCE");
    }
    h.extend(["EVENT", "GEN", "ACTOR", "MESSAGE"]);
    h
}

/// `events [KIND/NAME] [--kind K] [--limit N] [--watch]`: the newest `limit` events, oldest
/// first; with `watch`, then every new one as it commits (the log's watch, resumed from the
/// last shown), until interrupted.
pub async fn show(
    c: &Client,
    f: &Filter,
    limit: usize,
    watch: bool,
    format: Format,
) -> anyhow::Result<()> {
    let items = tail(c, f, limit).await?;
    let with_resource = !f.one();
    match format {
        Format::Table if items.is_empty() && !watch => eprintln!("no events found"),
        Format::Table if !items.is_empty() => {
            let rows: Vec<Vec<String>> = items.iter().map(|e| row(e, with_resource)).collect();
            out!("{}", table(&headers(with_resource), &rows));
        }
        Format::Table => {}
        // Followed: one document a line (JSON) or a YAML stream, as `get --watch`.
        _ if watch => {
            for e in &items {
                print_followed(e, format)?;
            }
        }
        _ => output::document(&Value::Array(items.clone()), format)?,
    }
    if !watch {
        return Ok(());
    }
    let mut q = f.pairs();
    q.push(("watch", "true".into()));
    let mut follow = crate::watch::Follow::new(c, format!("/events{}", query(&q)));
    if let Some(last) = items.last() {
        follow.resume_after(last["id"].to_string());
    }
    loop {
        let m = follow.next().await?;
        if format == Format::Table {
            outln!("{}", row(&m.data, with_resource).join("   "));
        } else {
            print_followed(&m.data, format)?;
        }
    }
}

fn print_followed(e: &Value, format: Format) -> anyhow::Result<()> {
    match format {
        Format::Yaml => out!("---\n{}", serde_yaml::to_string(e)?),
        _ => outln!("{}", serde_json::to_string(e)?),
    }
    Ok(())
}

/// One difference between two specs, at a JSON pointer.
#[derive(Debug, PartialEq)]
pub enum Change {
    /// Present only in the newer spec.
    Added(String, Value),
    /// Present only in the older spec.
    Removed(String, Value),
    /// Present in both, different.
    Changed(String, Value, Value),
}

/// The differences from `old` to `new`, by JSON pointer below `at`, in key order: objects
/// are compared key by key and arrays index by index (a longer array adds its tail, a
/// shorter one removes it); anything else differs as a whole.
pub fn diff(old: &Value, new: &Value, at: &str, out: &mut Vec<Change>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = format!("{at}/{}", converge_proto::json_pointer::escape(k));
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => diff(x, y, &p, out),
                    (Some(x), None) => out.push(Change::Removed(p, x.clone())),
                    (None, Some(y)) => out.push(Change::Added(p, y.clone())),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for i in 0..a.len().max(b.len()) {
                let p = format!("{at}/{i}");
                match (a.get(i), b.get(i)) {
                    (Some(x), Some(y)) => diff(x, y, &p, out),
                    (Some(x), None) => out.push(Change::Removed(p, x.clone())),
                    (None, Some(y)) => out.push(Change::Added(p, y.clone())),
                    (None, None) => {}
                }
            }
        }
        (a, b) if a != b => out.push(Change::Changed(at.to_string(), a.clone(), b.clone())),
        _ => {}
    }
}

impl Change {
    /// `+ /a: 1`, `- /b: "x"`, `~ /c: 1 -> 2` (`/` for the whole spec).
    fn line(&self) -> String {
        let at = |p: &str| {
            if p.is_empty() {
                "/".to_string()
            } else {
                p.to_string()
            }
        };
        match self {
            Change::Added(p, v) => format!("+ {}: {v}", at(p)),
            Change::Removed(p, v) => format!("- {}: {v}", at(p)),
            Change::Changed(p, a, b) => format!("~ {}: {a} -> {b}", at(p)),
        }
    }

    fn json(&self) -> Value {
        match self {
            Change::Added(p, v) => json!({"op": "add", "path": p, "value": v}),
            Change::Removed(p, v) => json!({"op": "remove", "path": p, "old": v}),
            Change::Changed(p, a, b) => json!({"op": "change", "path": p, "old": a, "value": b}),
        }
    }
}

/// A short account of the changes: `~/greeting +/x` (pointers), clipped.
fn summary(changes: &[Change]) -> String {
    if changes.is_empty() {
        return "no change".into();
    }
    let parts: Vec<String> = changes
        .iter()
        .map(|c| match c {
            Change::Added(p, _) => format!("+{p}"),
            Change::Removed(p, _) => format!("-{p}"),
            Change::Changed(p, _, _) => format!("~{p}"),
        })
        .collect();
    clip(&parts.join(" "), 80)
}

/// `--diff` of `history`: nothing (the newest against the one before it), `N` (N against
/// the generation recorded before it) or `A..B`.
pub fn parse_range(s: &str) -> Result<(Option<i64>, i64), String> {
    let num = |x: &str| {
        x.trim()
            .parse::<i64>()
            .map_err(|_| format!("{x:?} is not a generation number (N or A..B)"))
    };
    match s.split_once("..") {
        Some((a, b)) => Ok((Some(num(a)?), num(b)?)),
        None => Ok((None, num(s)?)),
    }
}

/// `history KIND/NAME [--diff [N|A..B]]`: the recorded specs of a root, newest first, each
/// with what changed from the one before; with `--diff`, the changes between two of them.
pub async fn history(
    c: &Client,
    target: &str,
    resource_path: &str,
    range: Option<Option<(Option<i64>, i64)>>,
    format: Format,
) -> anyhow::Result<()> {
    let body = c
        .call(Method::GET, &format!("{resource_path}/spec-history"), None)
        .await?
        .body;
    let items = body["items"].as_array().cloned().unwrap_or_default();
    // Oldest first from here on: a generation's predecessor is the item before it.
    let mut by_gen: Vec<(i64, Value)> = items
        .iter()
        .map(|i| (i["generation"].as_i64().unwrap_or(0), i.clone()))
        .collect();
    by_gen.sort_by_key(|(g, _)| *g);
    let spec_of = |g: i64| -> anyhow::Result<&Value> {
        by_gen
            .iter()
            .find(|(x, _)| *x == g)
            .map(|(_, i)| &i["spec"])
            .with_context(|| format!("generation {g} of {target} is not recorded"))
    };
    let before = |g: i64| by_gen.iter().rev().find(|(x, _)| *x < g).map(|(x, _)| *x);
    let Some(range) = range else {
        if format != Format::Table {
            return output::document(&Value::Array(items), format);
        }
        if items.is_empty() {
            eprintln!("no spec history for {target} (only roots keep one)");
            return Ok(());
        }
        let mut rows = Vec::new();
        for (i, (g, item)) in by_gen.iter().enumerate().rev() {
            let change = match i.checked_sub(1).map(|p| &by_gen[p]) {
                Some((_, prev)) => {
                    let mut changes = Vec::new();
                    diff(&prev["spec"], &item["spec"], "", &mut changes);
                    summary(&changes)
                }
                None => "first recorded".into(),
            };
            rows.push(vec![g.to_string(), age(&item["created_at"]), change]);
        }
        out!("{}", table(&["GEN", "AGE", "CHANGES"], &rows));
        return Ok(());
    };
    let newest = by_gen.last().map(|(g, _)| *g);
    let (from, to) = match range {
        Some((Some(a), b)) => (a, b),
        Some((None, b)) => match before(b) {
            Some(a) => (a, b),
            None => bail!("generation {b} of {target} has no earlier recorded generation"),
        },
        None => match newest.and_then(|b| before(b).map(|a| (a, b))) {
            Some(pair) => pair,
            None => bail!("{target} has fewer than two recorded generations"),
        },
    };
    let mut changes = Vec::new();
    diff(spec_of(from)?, spec_of(to)?, "", &mut changes);
    if format != Format::Table {
        let answer = json!({"from": from, "to": to,
                            "changes": changes.iter().map(Change::json).collect::<Vec<_>>()});
        return output::document(&answer, format);
    }
    outln!("--- {target} generation {from}");
    outln!("+++ {target} generation {to}");
    if changes.is_empty() {
        outln!("(no change)");
    }
    for ch in &changes {
        outln!("{}", ch.line());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_name_every_changed_pointer() {
        let old = json!({"a": 1, "b": {"c": "x", "gone": true}, "list": [1, 2, 3], "s/l": 0});
        let new = json!({"a": 2, "b": {"c": "x", "new": null}, "list": [1, 5], "s/l": 0});
        let mut changes = Vec::new();
        diff(&old, &new, "", &mut changes);
        let lines: Vec<String> = changes.iter().map(Change::line).collect();
        assert_eq!(
            lines,
            [
                "~ /a: 1 -> 2",
                "- /b/gone: true",
                "+ /b/new: null",
                "~ /list/1: 2 -> 5",
                "- /list/2: 3",
            ]
        );
        assert_eq!(summary(&changes), "~/a -/b/gone +/b/new ~/list/1 -/list/2");
        let mut none = Vec::new();
        diff(&old, &old, "", &mut none);
        assert!(none.is_empty());
        assert_eq!(summary(&none), "no change");
        let mut whole = Vec::new();
        diff(&json!(1), &json!({"a": 1}), "", &mut whole);
        assert_eq!(whole[0].line(), "~ /: 1 -> {\"a\":1}");
        let mut esc = Vec::new();
        diff(&json!({"a/b": 1}), &json!({"a/b": 2}), "", &mut esc);
        assert_eq!(esc[0].line(), "~ /a~1b: 1 -> 2");
    }

    #[test]
    fn ranges_are_one_generation_or_two() {
        assert_eq!(parse_range("3"), Ok((None, 3)));
        assert_eq!(parse_range("2..5"), Ok((Some(2), 5)));
        assert!(parse_range("x").is_err());
        assert!(parse_range("1..").is_err());
    }

    #[test]
    fn events_read_as_what_happened() {
        let e = json!({"type": "phase", "from_phase": "Reconciling", "to_phase": "Ready",
                       "at": null, "kind": "k", "name": "n", "generation": 2,
                       "actor": null, "message": null});
        assert_eq!(what(&e), "Reconciling -> Ready");
        assert_eq!(
            row(&e, true),
            ["-", "k/n", "Reconciling -> Ready", "2", "-", "-"]
        );
        assert_eq!(row(&e, false).len(), 5);
        assert_eq!(
            what(&json!({"type": "deleted", "from_phase": "Ready"})),
            "deleted (was Ready)"
        );
    }
}
