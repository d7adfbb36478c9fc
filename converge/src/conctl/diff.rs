//! `conctl diff -f FILE|DIR`: what `conctl apply` of the same files would change, from the
//! server's plan (`POST /api/v1/resources:plan`), with nothing written. Like `kubectl diff`,
//! the exit code is the answer: 0 nothing would change, 1 something would, 2 an error (a
//! document the apply would refuse, a compose that would fail, or a failed call).
//!
//! The output is unified-style: per resource that would change, a `---`/`+++` header (the
//! stored resource and the applied document; `/dev/null` for one that does not exist), then
//! `-` lines for stored values and `+` lines for new ones, each `POINTER: VALUE`; for a
//! composite, its children and edges follow (`+` added, `-` removed, and a changed child
//! with its own `-`/`+` lines, indented). Unchanged resources print nothing. `-o json|yaml`
//! prints the plan itself: the counts and one result per resource document.
//!
//! Only resources are planned: manifests, provider configs and reactor bindings among the
//! files are named on stderr and left out (the plan answers for resources; a kind or config
//! the same files would change is not taken into account).

use hyper::Method;
use serde_json::{Value, json};

use crate::{
    client::{ApiProblem, Client},
    docs::{self, DocType},
    output::{self, Format, cell, out},
};

/// Documents per plan request: the server composes at most this many composites in one
/// (`MAX_PLAN_COMPOSES`), so no composite goes unplanned.
const PLAN_CHUNK: usize = 8;

/// What a diff found, as its exit code says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// Nothing would change (exit 0).
    NoChanges,
    /// Something would change (exit 1).
    Changes,
    /// An error: a document refused, a compose failing, a call failing (exit 2).
    Error,
}

impl Found {
    /// The exit code `kubectl diff` gives the same finding.
    pub fn code(self) -> u8 {
        match self {
            Found::NoChanges => 0,
            Found::Changes => 1,
            Found::Error => 2,
        }
    }
}

/// `conctl diff`: plans every resource document of `files` and prints what would change.
pub async fn diff(
    c: &Client,
    files: &[String],
    forced: Option<DocType>,
    format: Format,
) -> anyhow::Result<Found> {
    let docs = docs::load(files, forced)?;
    let mut error = false;
    let mut resources = Vec::new();
    for d in &docs {
        if d.doc_type == DocType::Resource {
            resources.push(d);
        } else {
            eprintln!(
                "note: {}: not diffed (only resources are planned)",
                d.label()
            );
        }
    }
    output::finish_work_when_stdout_closes();
    let mut results = Vec::new();
    let (mut create, mut update, mut unchanged, mut failed, mut changed) = (0, 0, 0, 0, 0);
    for chunk in resources.chunks(PLAN_CHUNK) {
        let body = Value::Array(chunk.iter().map(|d| d.body.clone()).collect());
        let reply = match c.call(Method::POST, "/resources:plan", Some(&body)).await {
            Ok(r) => r.body,
            Err(e) => {
                if e.downcast_ref::<ApiProblem>()
                    .is_some_and(|p| p.status == hyper::StatusCode::UNAUTHORIZED)
                {
                    return Err(e);
                }
                eprintln!(
                    "error: {} resources from {}: {e:#}",
                    chunk.len(),
                    chunk[0].label()
                );
                error = true;
                continue;
            }
        };
        let count = |k: &str| reply[k].as_u64().unwrap_or(0);
        create += count("create");
        update += count("update");
        unchanged += count("unchanged");
        failed += count("failed");
        changed += count("changed");
        for (doc, item) in chunk
            .iter()
            .zip(reply["results"].as_array().into_iter().flatten())
        {
            error |= report_problems(&doc.label(), item);
            if format == Format::Table {
                print_item(doc.label(), &doc.body, item);
            } else {
                let mut item = item.clone();
                if let Some(o) = item.as_object_mut() {
                    o.remove("index");
                    o.insert("origin".into(), json!(doc.origin));
                }
                results.push(item);
            }
        }
    }
    if format != Format::Table {
        output::document(
            &json!({"items": resources.len(), "create": create, "update": update,
                    "unchanged": unchanged, "failed": failed, "changed": changed,
                    "results": results}),
            format,
        )?;
    }
    Ok(if error || failed > 0 {
        Found::Error
    } else if changed > 0 {
        Found::Changes
    } else {
        Found::NoChanges
    })
}

/// Prints an item's error, compose error and warnings on stderr; whether it has an error.
fn report_problems(label: &str, item: &Value) -> bool {
    for w in item["warnings"].as_array().into_iter().flatten() {
        eprintln!("warning: {label}: {}", w.as_str().unwrap_or_default());
    }
    let mut error = false;
    if !item["error"].is_null() {
        let status = hyper::StatusCode::from_u16(
            u16::try_from(item["status"].as_u64().unwrap_or(500)).unwrap_or(500),
        )
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
        let problem = ApiProblem::from_body(status, &item["error"].to_string());
        eprintln!("error: {label}: {problem}");
        error = true;
    }
    if let Some(why) = item["compose_error"].as_str() {
        eprintln!("error: {label}: its compose would fail: {why}");
        error = true;
    }
    error
}

/// A value on one line.
fn one_line(v: &Value) -> String {
    v.to_string()
}

/// The `-`/`+` lines of a diff's entries, each prefixed by `indent` after its sign.
fn diff_lines(entries: &Value, indent: &str) -> String {
    let mut s = String::new();
    for e in entries.as_array().into_iter().flatten() {
        let path = cell(&e["path"]);
        if let Some(old) = e.get("old") {
            s.push_str(&format!("-{indent}{path}: {}\n", one_line(old)));
        }
        if let Some(new) = e.get("new") {
            s.push_str(&format!("+{indent}{path}: {}\n", one_line(new)));
        }
    }
    s
}

fn omitted(n: &Value, indent: &str) -> String {
    match n.as_u64() {
        Some(n) if n > 0 => format!(" {indent}... {n} more differences\n"),
        _ => String::new(),
    }
}

/// The unified-style text of one item (nothing when it changes nothing or is refused).
fn item_text(label: &str, body: &Value, item: &Value) -> String {
    if !item["error"].is_null() {
        return String::new();
    }
    let children = &item["children"];
    let edges = &item["edges"];
    let composes = |v: &Value| {
        ["add", "change", "remove"]
            .iter()
            .any(|k| v[*k].as_array().is_some_and(|a| !a.is_empty()))
    };
    let action = item["action"].as_str().unwrap_or_default();
    if action == "unchanged" && !composes(children) && !composes(edges) {
        return String::new();
    }
    let mut s = String::new();
    if action == "create" {
        s.push_str(&format!("--- /dev/null\n+++ {label} (applied)\n"));
        for k in ["labels", "spec"] {
            if body[k].as_object().is_some_and(|o| !o.is_empty()) {
                s.push_str(&format!("+/{k}: {}\n", one_line(&body[k])));
            }
        }
    } else {
        s.push_str(&format!("--- {label} (stored)\n+++ {label} (applied)\n"));
        s.push_str(&diff_lines(&item["diff"], ""));
        s.push_str(&omitted(&item["diff_omitted"], ""));
    }
    if composes(children) {
        s.push_str(&format!(" children of {label}:\n"));
        for c in children["add"].as_array().into_iter().flatten() {
            s.push_str(&format!(
                "+  {}/{}: {}\n",
                cell(&c["kind"]),
                cell(&c["name"]),
                one_line(&c["spec"])
            ));
        }
        for c in children["remove"].as_array().into_iter().flatten() {
            s.push_str(&format!("-  {}/{}\n", cell(&c["kind"]), cell(&c["name"])));
        }
        for c in children["change"].as_array().into_iter().flatten() {
            s.push_str(&format!("   {}/{}:\n", cell(&c["kind"]), cell(&c["name"])));
            s.push_str(&diff_lines(&c["diff"], "    "));
            s.push_str(&omitted(&c["diff_omitted"], "    "));
        }
    }
    if composes(edges) {
        s.push_str(&format!(" edges of {label}:\n"));
        let edge = |e: &Value| {
            let flows: Vec<String> = e["value_mappings"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|m| {
                    format!(
                        "{} <- {}",
                        cell(&m["dependent_field"]),
                        cell(&m["source_field"])
                    )
                })
                .collect();
            format!(
                "{}/{} -> {}/{}{}",
                cell(&e["from"]["kind"]),
                cell(&e["from"]["name"]),
                cell(&e["to"]["kind"]),
                cell(&e["to"]["name"]),
                if flows.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", flows.join(", "))
                }
            )
        };
        for e in edges["add"].as_array().into_iter().flatten() {
            s.push_str(&format!("+  {}\n", edge(e)));
        }
        for e in edges["remove"].as_array().into_iter().flatten() {
            s.push_str(&format!("-  {}\n", edge(e)));
        }
        for e in edges["change"].as_array().into_iter().flatten() {
            let mut old = e.clone();
            old["value_mappings"] = e["old_value_mappings"].clone();
            s.push_str(&format!("-  {}\n+  {}\n", edge(&old), edge(e)));
        }
    }
    s
}

/// Prints one item's text on stdout.
fn print_item(label: String, body: &Value, item: &Value) {
    let text = item_text(&label, body, item);
    if !text.is_empty() {
        out!("{text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_prints_minus_and_plus_lines_and_the_composition() {
        let item = json!({
            "action": "update", "error": null, "diff_omitted": 0,
            "diff": [{"op": "replace", "path": "/spec/size", "old": 1, "new": 2},
                     {"op": "add", "path": "/labels/team", "new": "a"}],
            "children": {"add": [{"kind": "vpc", "name": "c", "spec": {"size": 1}}],
                         "remove": [{"kind": "vpc", "name": "b"}],
                         "change": [{"kind": "vpc", "name": "a", "diff_omitted": 0,
                                     "diff": [{"op": "replace", "path": "/spec/size", "old": 1, "new": 2}]}],
                         "unchanged": 1},
            "edges": {"add": [{"from": {"kind": "sub", "name": "c"}, "to": {"kind": "vpc", "name": "c"},
                               "value_mappings": [{"dependent_field": "/vpc_id", "source_field": "/id"}]}],
                      "remove": [], "change": [], "unchanged": 0}
        });
        assert_eq!(
            item_text("net/r", &json!({}), &item),
            "--- net/r (stored)\n+++ net/r (applied)\n\
             -/spec/size: 1\n+/spec/size: 2\n+/labels/team: \"a\"\n\
             \x20children of net/r:\n+  vpc/c: {\"size\":1}\n-  vpc/b\n   vpc/a:\n\
             -    /spec/size: 1\n+    /spec/size: 2\n\
             \x20edges of net/r:\n+  sub/c -> vpc/c [/vpc_id <- /id]\n"
        );
    }

    #[test]
    fn a_create_shows_the_document_and_unchanged_or_refused_show_nothing() {
        let create =
            json!({"action": "create", "error": null, "diff": [], "children": null, "edges": null});
        assert_eq!(
            item_text("h/w", &json!({"spec": {"greeting": "hi"}}), &create),
            "--- /dev/null\n+++ h/w (applied)\n+/spec: {\"greeting\":\"hi\"}\n"
        );
        let same = json!({"action": "unchanged", "error": null, "diff": [], "children": null, "edges": null});
        assert_eq!(item_text("h/w", &json!({}), &same), "");
        let refused = json!({"action": null, "error": {"status": 422}});
        assert_eq!(item_text("h/w", &json!({}), &refused), "");
        assert_eq!(
            (
                Found::NoChanges.code(),
                Found::Changes.code(),
                Found::Error.code()
            ),
            (0, 1, 2)
        );
    }
}
