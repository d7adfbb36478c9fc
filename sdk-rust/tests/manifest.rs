//! Kind manifests from types (`converge_sdk::manifest`): the schemas schemars generates,
//! the reaction helpers, the builder's checks, and the document's JSON.

use converge_sdk::KindVersion;
use converge_sdk::manifest::{Descendants, Manifest, reaction, schema_of};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
#[expect(dead_code, reason = "only the schema is under test")]
struct NoteSpec {
    /// What the note says.
    #[schemars(length(max = 200))]
    text: String,
    #[serde(default)]
    copies: Option<u32>,
    #[serde(default)]
    mode: Option<Mode>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Append,
    Replace,
}

#[derive(Debug, Serialize, JsonSchema)]
struct NoteStatus {
    path: String,
    bytes: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[expect(dead_code, reason = "only the schema is under test")]
struct NoteConfig {
    directory: String,
    #[serde(default)]
    #[schemars(extend("writeOnly" = true))]
    token: Option<String>,
}

#[test]
fn schema_of_a_strict_struct_with_its_constraints() {
    let s = schema_of::<NoteSpec>();
    assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(s["type"], "object");
    assert_eq!(s["additionalProperties"], false);
    assert_eq!(s["required"], json!(["text"]));
    assert_eq!(
        s["properties"]["text"],
        json!({"type": "string", "maxLength": 200, "description": "What the note says."})
    );
    assert_eq!(s["properties"]["mode"]["anyOf"][0]["$ref"], "#/$defs/Mode");
    assert_eq!(s["$defs"]["Mode"]["enum"], json!(["append", "replace"]));
    let st = schema_of::<NoteStatus>();
    assert_eq!(st["required"], json!(["path", "bytes"]));
    assert_eq!(
        st.get("additionalProperties"),
        None,
        "open unless the type says so"
    );
}

#[test]
fn the_manifest_is_the_whole_document() {
    let m = Manifest::new(KindVersion::new("note", 2))
        .description("A note on disk.")
        .spec::<NoteSpec>()
        .status::<NoteStatus>()
        .config::<NoteConfig>()
        .reaction(reaction::work())
        .reaction(reaction::teardown())
        .finalizer("example.dev/note")
        .task_deadline_secs(30)
        .build()
        .expect("legal");
    let doc = serde_json::to_value(&m).unwrap();
    assert_eq!(doc["kind"], "note");
    assert_eq!(doc["kind_version"], 2);
    assert_eq!(doc["provider"], "sdk");
    assert_eq!(doc["spec_schema"], schema_of::<NoteSpec>());
    assert_eq!(
        doc["config_schema"]["properties"]["token"]["writeOnly"],
        true
    );
    assert_eq!(
        doc["reactions"],
        json!([
            {"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]},
            {"name": "teardown", "trigger": "deleteRequested", "emits": ["finalizer"]}
        ])
    );
    assert_eq!(doc["finalizer_name"], "example.dev/note");
    assert_eq!(doc["task_deadline_secs"], 30);
    // It reads back as the same manifest (what converge decodes).
    let back: converge_sdk::manifest::KindManifest = serde_json::from_value(doc).unwrap();
    assert_eq!(back, m);
}

#[test]
fn build_lists_every_problem() {
    let errs = Manifest::new(KindVersion::new("Note", 1))
        .reaction(reaction::teardown())
        .build()
        .unwrap_err();
    assert!(errs.iter().any(|e| e.starts_with("/kind:")), "{errs:?}");
    assert!(
        errs.iter().any(|e| e.contains("finalizer_name")),
        "a teardown without a finalizer: {errs:?}"
    );
}

#[test]
fn reaction_helpers() {
    let doc = |r| serde_json::to_value(r).unwrap();
    assert_eq!(
        doc(reaction::compose())["emits"],
        json!(["children", "edges", "status", "conditions"])
    );
    assert_eq!(
        doc(reaction::rollup(Some(Descendants::Full))),
        json!({"name": "rollup", "trigger": "childrenSettled", "emits": ["status", "conditions"], "descendants": "full"})
    );
    #[derive(JsonSchema)]
    #[expect(dead_code, reason = "only the schema is under test")]
    struct Snapshot {
        snapshot_id: String,
    }
    let op = doc(reaction::operation("backup", Some(schema_of::<Snapshot>())));
    assert_eq!(op["verb"], "backup");
    assert_eq!(op["output_schema"]["required"], json!(["snapshot_id"]));
    assert_eq!(
        doc(reaction::reactor()),
        json!({"name": "react", "trigger": "reactor", "emits": ["sideEffect"]})
    );
    let _: Value = doc(reaction::work());
}
