//! Checking a kind manifest as applied: the whole document against the manifest's own JSON
//! Schema (strict, so a misspelt field anywhere is refused with its pointer), then the
//! legality rules and every JSON Schema it holds, all in one pass, so one answer lists every
//! problem.
//!
//! The schema's problems and the rules' are collected together: the values the schema
//! refused are taken out ([`KindManifest::salvage`]) and the rules run on what is left, so a
//! bad trigger in one reaction does not hide a missing verb in another.

use std::sync::LazyLock;

use converge_proto::{
    json_pointer::{self, escape, unescape},
    manifest::{KindManifest, manifest_schema},
};
use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use crate::{
    flows,
    kind::Kind,
    schema::local_ref,
    text::{MAX_MESSAGE, clipped, quote, quote_value},
    violation::Violation,
};

/// The manifest's schema ([`manifest_schema`]) and its compiled validator.
struct ManifestSchema {
    schema: Value,
    validator: jsonschema::Validator,
}

static MANIFEST_SCHEMA: LazyLock<ManifestSchema> = LazyLock::new(|| {
    let schema = manifest_schema();
    let validator = jsonschema::validator_for(&schema).expect("the manifest schema compiles");
    ManifestSchema { schema, validator }
});

/// Every problem of an applied manifest (the schema's, the rules', and those of the JSON
/// Schemas it holds that do not compile), ordered by location.
#[derive(Debug, Default)]
pub struct ManifestProblems {
    /// The located problems.
    pub errors: Vec<Violation>,
}

/// [`check_with`] with no other kind registered (every edge joining another kind is a
/// warning, dropped here).
pub fn check(doc: Value, path_kind: &str) -> Result<Kind, ManifestProblems> {
    check_with(doc, path_kind, |_, _| None).map(|(k, _)| k)
}

/// Checks `doc`, a manifest applied at `PUT /kinds/{path_kind}/manifest`. A `kind` left out
/// is taken from the path; the envelope fields (`$schema`, `type`, `manifest_version`) are
/// allowed (the schema lists them) and dropped (decoding ignores them). The value flows of
/// its `edges` are type-checked ([`flows::check`]) against the kinds they join:
/// `registered(kind, version)` gives another kind's manifest, and an edge of the kind with
/// itself uses the manifest applied. `Ok`: the manifest, ready to store, with its schemas
/// compiled, and a warning for each flow left unchecked because a kind it joins is not
/// registered.
pub fn check_with<'k>(
    mut doc: Value,
    path_kind: &str,
    registered: impl Fn(&str, i32) -> Option<&'k KindManifest>,
) -> Result<(Kind, Vec<String>), ManifestProblems> {
    let mut errors = Vec::new();
    let Some(obj) = doc.as_object_mut() else {
        errors.push(Violation::new("", "a manifest must be a JSON object"));
        return Err(ManifestProblems { errors });
    };
    match obj.get("kind") {
        None => {
            obj.insert("kind".into(), Value::String(path_kind.to_string()));
        }
        Some(Value::String(k)) if k == path_kind => {}
        // Another string: reported here. Not a string: the schema reports it.
        Some(k @ Value::String(_)) => errors.push(Violation::new(
            "/kind",
            format!(
                "{} does not match the kind in the path, {}",
                quote_value(k),
                quote(path_kind)
            ),
        )),
        Some(_) => {}
    }

    let ms = &*MANIFEST_SCHEMA;
    // The pointers whose values the schema refused: taken out before the rules run.
    let mut refused: Vec<String> = Vec::new();
    for e in ms.validator.iter_errors(&doc) {
        let at = e.instance_path().as_str().to_string();
        match e.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let known = keyword_parent(&ms.schema, e.schema_path().as_str())
                    .and_then(|s| s.get("properties"))
                    .and_then(Value::as_object);
                for name in unexpected {
                    let hint = known
                        .and_then(|k| closest(name, k.keys().map(String::as_str)))
                        .map(|c| format!(" (did you mean {c:?}?)"))
                        .unwrap_or_default();
                    errors.push(located(
                        format!("{at}/{}", escape(name)),
                        format!("unknown field {}{hint}", quote(name)),
                        "additionalProperties",
                    ));
                }
            }
            // A closed set (a trigger, an emits value, descendants, provider): name the
            // values it takes.
            ValidationErrorKind::OneOfNotValid { .. }
            | ValidationErrorKind::AnyOf { .. }
            | ValidationErrorKind::Enum { .. } => {
                let keyword = e.kind().keyword();
                let allowed = match e.kind() {
                    ValidationErrorKind::Enum { options } => options.as_array().cloned(),
                    _ => keyword_parent(&ms.schema, e.schema_path().as_str())
                        .and_then(|s| closed_values(&ms.schema, s)),
                };
                let message = match allowed.as_deref().and_then(closed_set) {
                    Some(set) => format!(
                        "{} {} is not one of {set}",
                        subject(&at),
                        quote_value(e.instance())
                    ),
                    None => e.masked_with(quote_value(e.instance())).to_string(),
                };
                errors.push(located(at.clone(), message, keyword));
                refused.push(at);
            }
            ValidationErrorKind::Required { property } => {
                // Located at the missing field, where the fix goes.
                let name = property.as_str().unwrap_or_default();
                let at = format!("{at}/{}", escape(name));
                errors.push(located(
                    at.clone(),
                    format!("{} is required", quote(name)),
                    "required",
                ));
                refused.push(at);
            }
            kind => {
                let message = e.masked_with(quote_value(e.instance())).to_string();
                errors.push(located(at.clone(), message, kind.keyword()));
                refused.push(at);
            }
        }
    }

    let refused_refs: Vec<&str> = refused.iter().map(String::as_str).collect();
    let Some(salvaged) = KindManifest::salvage(&doc, &refused_refs) else {
        if errors.is_empty() {
            // The schema passed it and serde did not: say what serde says.
            let e = serde_json::from_value::<KindManifest>(doc).err();
            errors.push(Violation::new(
                "",
                clipped(
                    MAX_MESSAGE,
                    format_args!(
                        "manifest does not decode: {}",
                        e.map(|e| e.to_string()).unwrap_or_default()
                    ),
                ),
            ));
        }
        return Err(ManifestProblems::sorted(errors));
    };
    // A rule about a value the schema refused (at, under or above it: a composer whose
    // emits held a bad value) would only restate that problem, or judge a guess.
    let under = |p: &str, r: &str| p.strip_prefix(r).is_some_and(|t| t.starts_with('/'));
    let reported = |p: &str| refused.iter().any(|r| p == r || under(p, r) || under(r, p));
    for p in salvaged.problems() {
        if !reported(&p.pointer) {
            errors.push(Violation::new(p.pointer, p.message));
        }
    }
    let me = &salvaged.manifest;
    let edge_flows = flows::edge_flows(&me.edges, |i| salvaged.edge_doc_index(i));
    let (flow_errors, warnings) = flows::check(&edge_flows, "", |kind, version| {
        if kind == me.kind && version == me.kind_version {
            Some(me)
        } else {
            registered(kind, version)
        }
    });
    errors.extend(flow_errors.into_iter().filter(|e| !reported(&e.pointer)));
    let at = |i| salvaged.doc_index(i);
    match Kind::build(salvaged.manifest.clone(), 0, &at) {
        Ok(k) if errors.is_empty() => Ok((k, warnings)),
        Ok(_) => Err(ManifestProblems::sorted(errors)),
        Err(more) => {
            errors.extend(more.into_iter().filter(|e| !reported(&e.pointer)));
            Err(ManifestProblems::sorted(errors))
        }
    }
}

impl ManifestProblems {
    /// `errors` in document order by location (array indices as numbers; problems at one
    /// location in the order found).
    fn sorted(mut errors: Vec<Violation>) -> ManifestProblems {
        errors.sort_by(|a, b| json_pointer::cmp(&a.pointer, &b.pointer));
        ManifestProblems { errors }
    }
}

fn located(location: String, message: String, keyword: &str) -> Violation {
    Violation::of_keyword(location, keyword, message)
}

/// What the value at pointer `at` is, for a message: its field's name (`trigger`), or, for
/// an array item, the array's (`emits value`).
fn subject(at: &str) -> String {
    let mut tokens = at.rsplit('/');
    match (tokens.next(), tokens.next()) {
        (Some(last), Some(parent)) if last.parse::<usize>().is_ok() => {
            format!("{} value", unescape(parent))
        }
        (Some(last), _) => unescape(last),
        _ => "value".into(),
    }
}

/// Every value `schema` (in `root`) allows, when it is a closed set: a `const`, an `enum`,
/// `{"type": "null"}`, or a `oneOf` / `anyOf` / `$ref` of those; `None` otherwise.
fn closed_values(root: &Value, schema: &Value) -> Option<Vec<Value>> {
    if let Some(c) = schema.get("const") {
        return Some(vec![c.clone()]);
    }
    if let Some(e) = schema.get("enum") {
        return e.as_array().cloned();
    }
    if let Some(r) = schema.get("$ref") {
        return closed_values(root, local_ref(root, r.as_str()?)?);
    }
    if schema.get("type") == Some(&Value::from("null")) {
        return Some(vec![Value::Null]);
    }
    let alts = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))?
        .as_array()?;
    let mut out = Vec::new();
    for a in alts {
        out.extend(closed_values(root, a)?);
    }
    Some(out)
}

/// `allowed` as a list for a message (`a, b, c`, plus "(or leave it out)" when null is one
/// of them); `None` unless every value is a string or null.
fn closed_set(allowed: &[Value]) -> Option<String> {
    if allowed.is_empty() || !allowed.iter().all(|v| v.is_string() || v.is_null()) {
        return None;
    }
    let names: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
    let or_absent = if allowed.iter().any(|v| v.is_null()) {
        " (or leave it out)"
    } else {
        ""
    };
    Some(format!("{}{or_absent}", names.join(", ")))
}

/// The schema object holding the keyword at `keyword_path` (a validation error's schema
/// path), following `$ref`s into the root's `$defs`.
fn keyword_parent<'a>(root: &'a Value, keyword_path: &str) -> Option<&'a Value> {
    let tokens = json_pointer::tokens(keyword_path);
    let (_, parent) = tokens.split_last()?;
    let mut node = root;
    for t in parent {
        node = if t == "$ref" {
            local_ref(root, node.get("$ref")?.as_str()?)?
        } else {
            match node {
                Value::Object(o) => o.get(t)?,
                Value::Array(a) => a.get(t.parse::<usize>().ok()?)?,
                _ => return None,
            }
        };
    }
    // The keyword's own object may itself be a reference (`{"$ref": ...}` with siblings).
    Some(node)
}

/// The longest unknown field name [`closest`] looks for a typo of: no field is longer, and
/// the distance costs the name's length times each candidate's.
const MAX_TYPO_LEN: usize = 64;

/// The candidate closest to `name` by edit distance, if it is close enough to be a typo
/// (at most a third of the name's length, and at most 3 edits).
fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    if name.len() > MAX_TYPO_LEN {
        return None;
    }
    let limit = (name.chars().count() / 3).clamp(1, 3);
    candidates
        .map(|c| (distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance between `a` and `b`, in characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn problems(doc: Value) -> Vec<Violation> {
        problems_of(doc, "k")
    }

    fn problems_of(doc: Value, kind: &str) -> Vec<Violation> {
        match check(doc, kind) {
            Ok(_) => Vec::new(),
            Err(p) => p.errors,
        }
    }

    fn locations(errors: &[Violation]) -> Vec<&str> {
        errors.iter().map(|e| e.pointer.as_str()).collect()
    }

    fn leaf() -> Value {
        json!({"kind": "k", "kind_version": 1,
               "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]})
    }

    #[test]
    fn a_good_manifest_passes_with_or_without_its_envelope() {
        let k = check(leaf(), "k").unwrap();
        assert_eq!(k.manifest.kind, "k");
        let mut doc = leaf();
        doc.as_object_mut().unwrap().remove("kind");
        for (f, v) in [
            (
                "$schema",
                json!("https://example.invalid/manifest.schema.json"),
            ),
            ("type", json!("manifest")),
            ("manifest_version", json!(12345)),
        ] {
            doc[f] = v;
        }
        let k = check(doc, "k").unwrap();
        assert_eq!(k.manifest.kind, "k");
    }

    #[test]
    fn unknown_fields_bad_triggers_and_bad_emits_are_listed_together() {
        let doc = json!({
            "kind": "k", "kind_version": 1, "task_deadline_sec": 5,
            "reactions": [
                {"name": "a", "trigger": "whenever", "emits": ["status"]},
                {"name": "b", "trigger": "specChange", "emits": ["status", "colour"]},
                {"name": "c", "trigger": "operation", "emits": ["operationOutput"], "verbb": "x"}
            ]
        });
        let errors = problems(doc);
        assert_eq!(
            locations(&errors),
            [
                "/reactions/0/trigger",
                "/reactions/1/emits/1",
                "/reactions/2/verb",
                "/reactions/2/verbb",
                "/task_deadline_sec",
            ],
            "{errors:#?}"
        );
        let message = |i: usize| errors[i].message.as_str();
        assert!(
            message(0)
                .starts_with("trigger \"whenever\" is not one of specChange, childrenSettled"),
            "{errors:#?}"
        );
        assert!(
            message(1).starts_with("emits value \"colour\" is not one of children, edges"),
            "{errors:#?}"
        );
        assert!(message(2).contains("requires a verb"), "{errors:#?}");
        assert_eq!(
            message(3),
            "unknown field \"verbb\" (did you mean \"verb\"?)"
        );
        assert_eq!(
            message(4),
            "unknown field \"task_deadline_sec\" (did you mean \"task_deadline_secs\"?)"
        );
    }

    #[test]
    fn a_closed_set_names_the_values_it_takes() {
        let doc = json!({
            "kind": "k", "kind_version": 1, "provider": "Exec",
            "reactions": [{"name": "r", "trigger": "childrenSettled", "emits": ["status"],
                           "descendants": "all"}]
        });
        let errors = problems(doc);
        let messages: Vec<&str> = errors.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "provider \"Exec\" is not one of exec, starlark, cel, wasm, sdk (or leave it out)",
                "descendants \"all\" is not one of summary, full (or leave it out)",
            ]
        );
        assert_eq!(subject("/a~1b"), "a/b");
        assert_eq!(subject("/reactions/0/emits/3"), "emits value");
    }

    #[test]
    fn rules_and_schemas_are_checked_in_the_same_pass() {
        let doc = json!({
            "kind": "other", "kind_version": 0, "max_inflight": -1,
            "spec_schema": {"type": "strin"},
            "finalizer_name": 7,
            "reactions": [
                {"name": "c1", "trigger": "specChange", "emits": ["children", "status"]},
                {"name": "c2", "trigger": "specChange", "emits": ["children"]},
                {"name": "del", "trigger": "deleteRequested", "emits": ["finalizer"]},
                {"name": "op", "trigger": "operation", "verb": "go",
                 "output_schema": {"type": "nope"}},
                {"name": "r", "trigger": "resync"}
            ]
        });
        let errors = problems(doc);
        let at = locations(&errors);
        for want in [
            "/kind",
            "/kind_version",
            "/max_inflight",
            "/finalizer_name",
            "/reactions/1/emits",
            "/reactions/4/trigger",
            "/spec_schema",
            "/reactions/3/output_schema",
        ] {
            assert!(at.contains(&want), "{want} missing from {errors:#?}");
        }
        // Each problem once: the schema's minimum and the rule's range are one problem.
        assert_eq!(
            at.iter().filter(|p| **p == "/kind_version").count(),
            1,
            "{errors:#?}"
        );
    }

    #[test]
    fn not_an_object_and_missing_parts() {
        assert_eq!(locations(&problems(json!([1]))), [""]);
        // Located where the missing field goes; the rules say nothing more about it.
        let errors = problems(json!({"reactions": [{"trigger": "specChange"}]}));
        assert_eq!(
            locations(&errors),
            ["/kind_version", "/reactions/0/name"],
            "{errors:#?}"
        );
        assert_eq!(errors[0].message, "\"kind_version\" is required");
        let errors = problems(json!({"kind_version": 1, "reactions": []}));
        assert_eq!(locations(&errors), ["/reactions"], "{errors:#?}");
        assert_eq!(
            json_pointer::cmp("/a/10", "/a/9"),
            std::cmp::Ordering::Greater
        );
        assert_eq!(json_pointer::cmp("/a", "/a/0"), std::cmp::Ordering::Less);
    }

    #[test]
    fn typos_are_matched_to_the_closest_field() {
        let names = ["task_deadline_secs", "kind", "kind_version", "reactions"];
        assert_eq!(
            closest("task_deadline_sec", names.into_iter()),
            Some("task_deadline_secs")
        );
        assert_eq!(closest("reaction", names.into_iter()), Some("reactions"));
        assert_eq!(closest("colour", names.into_iter()), None);
        let long = format!("{}s", "reaction".repeat(100_000));
        assert_eq!(closest(&long, names.into_iter()), None);
        assert_eq!(distance("kitten", "sitting"), 3);
    }

    /// Every JSON file under `dir` (recursively) whose top level declares `reactions`.
    fn manifests_under(dir: &std::path::Path, out: &mut Vec<(String, Value)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "node_modules" || name == "target" {
                continue;
            }
            if path.is_dir() {
                manifests_under(&path, out);
            } else if name.ends_with(".json")
                && let Ok(text) = std::fs::read_to_string(&path)
                && let Ok(v) = serde_json::from_str::<Value>(&text)
                && v.get("reactions").is_some()
            {
                out.push((path.display().to_string(), v));
            }
        }
    }

    #[test]
    fn every_shipped_manifest_passes() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = Vec::new();
        for dir in ["examples", "conformance"] {
            manifests_under(&root.join(dir), &mut found);
        }
        assert!(found.len() >= 10, "only {} manifests found", found.len());
        for (path, doc) in found {
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            if let Err(p) = check(doc, &kind) {
                panic!("{path}: {:#?}", p.errors);
            }
        }
    }

    /// The fenced blocks of `text` in `lang`.
    fn blocks<'a>(text: &'a str, lang: &str) -> Vec<&'a str> {
        let open = format!("```{lang}\n");
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find(&open) {
            let body = &rest[start + open.len()..];
            let end = body.find("```").expect("a fenced block is closed");
            out.push(&body[..end]);
            rest = &body[end..];
        }
        out
    }

    /// docs/manifest.md against the schema: it names every field (`reactions[].x` for a
    /// reaction's), every trigger and every emits value, and its YAML examples pass every
    /// check an apply makes; the first, the complete example, uses every field.
    #[test]
    fn the_manifest_doc_covers_the_schema() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/manifest.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let schema = manifest_schema();
        let names = |v: &Value| -> Vec<String> {
            v["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        };
        let top = names(&schema);
        let reaction = names(&schema["$defs"]["ReactionDecl"]);
        let mut paths: Vec<String> = top.clone();
        paths.extend(reaction.iter().map(|p| format!("reactions[].{p}")));
        for def in ["Trigger", "Emit", "Descendants"] {
            for alt in schema["$defs"][def]["oneOf"].as_array().unwrap() {
                paths.push(alt["const"].as_str().unwrap().to_string());
            }
        }
        for p in &paths {
            assert!(
                doc.contains(&format!("`{p}`")),
                "docs/manifest.md does not describe `{p}`"
            );
        }

        let examples = blocks(&doc, "yaml");
        assert!(examples.len() >= 2, "{} YAML examples", examples.len());
        for (i, text) in examples.iter().enumerate() {
            let v: Value = serde_yaml::from_str(text).unwrap();
            let kind = v["kind"].as_str().unwrap().to_string();
            if let Err(p) = check(v, &kind) {
                panic!("docs/manifest.md YAML example {i}: {:#?}", p.errors);
            }
        }
        let complete: Value = serde_yaml::from_str(examples[0]).unwrap();

        // The 422 shown is the one the complete example gets with these three mistakes.
        let mut bad = complete.clone();
        bad["reactions"][0]["trigger"] = json!("specChang");
        bad["reactions"][1]["emits"][1] = json!("statuss");
        bad["task_deadline_sec"] = json!(300);
        // (The problem's `detail` around them is the API's: control checks it.)
        let errors: Vec<Value> = problems_of(bad, "database")
            .into_iter()
            .map(|e| {
                let mut v = json!({"location": e.pointer, "message": e.message});
                if let Some(k) = e.keyword {
                    v["keyword"] = json!(k);
                }
                v
            })
            .collect();
        let shown: Value = serde_json::from_str(blocks(&doc, "json")[0]).unwrap();
        assert_eq!(shown["errors"], json!(errors));
        for p in top
            .iter()
            .filter(|p| !["$schema", "manifest_version"].contains(&p.as_str()))
        {
            assert!(complete.get(p).is_some(), "the complete example has no {p}");
        }
        for p in &reaction {
            assert!(
                complete["reactions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r.get(p).is_some()),
                "no reaction of the complete example has {p}"
            );
        }
    }
}
