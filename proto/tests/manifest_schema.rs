//! The kind manifest's JSON Schema: the committed `proto/manifest.schema.json` is what the
//! Rust types generate (`BLESS=1 cargo test -p converge-proto --test manifest_schema`
//! rewrites it), and it is strict and agrees with the types.

use std::path::PathBuf;

use converge_proto::manifest::{Emit, PROVIDERS, Trigger, manifest_schema};
use serde_json::{Value, json};

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("manifest.schema.json")
}

#[test]
fn manifest_schema_is_committed() {
    let generated = manifest_schema();
    let text = serde_json::to_string_pretty(&generated).unwrap() + "\n";
    let path = committed_path();
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{} is stale: regenerate it with \
         `BLESS=1 cargo test -p converge-proto --test manifest_schema` and commit it",
        path.display()
    );
}

/// Every object schema in `v` (anything with `properties`), with its location.
fn object_schemas<'a>(v: &'a Value, at: String, out: &mut Vec<(String, &'a Value)>) {
    match v {
        Value::Object(o) => {
            if o.contains_key("properties") {
                out.push((at.clone(), v));
            }
            for (k, c) in o {
                object_schemas(c, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                object_schemas(c, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_object_in_the_manifest_schema_refuses_unknown_fields() {
    let schema = manifest_schema();
    let mut objects = Vec::new();
    object_schemas(&schema, String::new(), &mut objects);
    assert!(objects.len() >= 2, "{objects:?}");
    for (at, o) in objects {
        assert_eq!(o["additionalProperties"], json!(false), "{at}");
    }
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(required, ["kind", "kind_version", "reactions"]);
}

fn consts(def: &Value) -> Vec<&str> {
    def["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["const"].as_str().unwrap())
        .collect()
}

#[test]
fn the_schemas_closed_sets_are_the_types_closed_sets() {
    let schema = manifest_schema();
    let triggers: Vec<&str> = Trigger::ALL.iter().map(|t| t.as_str()).collect();
    assert_eq!(consts(&schema["$defs"]["Trigger"]), triggers);
    let emits: Vec<&str> = Emit::ALL.iter().map(|e| e.as_str()).collect();
    assert_eq!(consts(&schema["$defs"]["Emit"]), emits);
    for e in Emit::ALL {
        // The spelling the manifest uses is serde's.
        assert_eq!(serde_json::to_value(e).unwrap(), json!(e.as_str()));
    }
    let mut providers: Vec<Value> = PROVIDERS.iter().map(|p| json!(p)).collect();
    providers.push(Value::Null);
    assert_eq!(
        schema["properties"]["provider"]["enum"],
        Value::Array(providers)
    );
    // Every description reads as prose: doc-comment line breaks are joined.
    let text = schema.to_string();
    assert!(!text.contains("\\n`"), "{text}");
}
