//! The OpenAPI document explains itself: every operation has a short summary and a
//! description, every JSON request body and every 2xx JSON answer carries an example (on the
//! media type, or on the named schema it points to), and every example is valid against its
//! schema, so a client generated from the document, or a reader of `/docs`, sees a real body
//! that the server would accept or send. The examples live in
//! `control/src/http/openapi_examples.json`; an entry naming a schema the document no longer
//! has fails here too.

use converge_control::http::openapi;
use serde_json::{Value, json};

/// Answers that are themselves schema documents (the manifest's JSON Schema, this OpenAPI
/// document): their shape is the standard's, and an example would be the whole document.
const SELF_DESCRIBED: [&str; 2] = ["schemas_get_manifest", "openapi_serve_document"];

fn document() -> Value {
    serde_json::from_str(openapi::document_json()).expect("the document is JSON")
}

/// `(operation id, method, path, operation)` of every operation.
fn operations(doc: &Value) -> Vec<(String, String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            if ["get", "put", "post", "delete", "patch"].contains(&method.as_str()) {
                let id = op["operationId"].as_str().unwrap_or_default().to_owned();
                out.push((id, method.clone(), path.clone(), op.clone()));
            }
        }
    }
    out
}

/// The bodies an operation should show an example of: `(where, media type, content)`.
fn bodies(op: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    let json_like = |media: &str| media.contains("json");
    for (media, c) in op["requestBody"]["content"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if json_like(media) {
            out.push(("request".to_owned(), media.clone(), c.clone()));
        }
    }
    for (status, r) in op["responses"].as_object().into_iter().flatten() {
        if !status.starts_with('2') {
            continue;
        }
        for (media, c) in r["content"].as_object().into_iter().flatten() {
            if json_like(media) {
                out.push((status.clone(), media.clone(), c.clone()));
            }
        }
    }
    out
}

/// The named schema a `$ref` points at.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) => {
            let name = r.rsplit('/').next().unwrap_or_default();
            &doc["components"]["schemas"][name]
        }
        None => schema,
    }
}

/// Every validation error of `instance` against `schema` (refs resolved in the document).
fn invalid(doc: &Value, schema: &Value, instance: &Value) -> Vec<String> {
    let mut root = schema.clone();
    if let Some(o) = root.as_object_mut() {
        o.insert(
            "$schema".into(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        o.insert(
            "components".into(),
            json!({"schemas": doc["components"]["schemas"].clone()}),
        );
    }
    let validator = jsonschema::validator_for(&root).expect("the schema compiles");
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn every_operation_has_a_summary_and_a_description() {
    let doc = document();
    let mut missing = Vec::new();
    for (id, method, path, op) in operations(&doc) {
        let summary = op["summary"].as_str().unwrap_or_default();
        let description = op["description"].as_str().unwrap_or_default();
        // A summary is one short line; the description says what the operation does.
        if summary.is_empty() || summary.contains('\n') || summary.len() > 80 {
            missing.push(format!("{id} ({method} {path}): summary {summary:?}"));
        }
        if description.len() < 40 {
            missing.push(format!(
                "{id} ({method} {path}): description {description:?}"
            ));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn every_body_has_an_example_that_its_schema_accepts() {
    let doc = document();
    let mut problems = Vec::new();
    let mut checked = 0;
    for (id, method, path, op) in operations(&doc) {
        if SELF_DESCRIBED.contains(&id.as_str()) {
            continue;
        }
        for (at, media, content) in bodies(&op) {
            let schema = &content["schema"];
            let named = resolve(&doc, schema);
            let example = content
                .get("example")
                .or_else(|| named["examples"].get(0))
                .or_else(|| named.get("example"));
            let Some(example) = example else {
                problems.push(format!("{id} ({method} {path}) {at} {media}: no example"));
                continue;
            };
            // A body sent as one JSON object per line: each line against the item schema.
            if media == "application/x-ndjson" {
                for line in example.as_str().unwrap_or_default().lines() {
                    let item: Value = serde_json::from_str(line).expect("an NDJSON line");
                    let array = &op["requestBody"]["content"]["application/json"]["schema"];
                    for e in invalid(&doc, &array["items"], &item) {
                        problems.push(format!("{id} {at} {media}: {e}"));
                    }
                }
                checked += 1;
                continue;
            }
            for e in invalid(&doc, schema, example) {
                problems.push(format!("{id} ({method} {path}) {at} {media}: {e}"));
            }
            checked += 1;
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked > 40, "only {checked} bodies were checked");
}

#[test]
fn the_examples_file_names_only_what_the_document_has() {
    let doc = document();
    let examples: Value = serde_json::from_str(openapi::EXAMPLES).unwrap();
    let mut stale = Vec::new();
    for name in examples["schemas"].as_object().unwrap().keys() {
        if doc["components"]["schemas"][name].is_null() {
            stale.push(format!("schema {name}"));
        }
    }
    let ids: Vec<String> = operations(&doc).into_iter().map(|o| o.0).collect();
    for id in examples["operations"].as_object().unwrap().keys() {
        if !ids.contains(id) {
            stale.push(format!("operation {id}"));
        }
    }
    assert!(
        stale.is_empty(),
        "examples for what the document lacks: {stale:?}"
    );
}
