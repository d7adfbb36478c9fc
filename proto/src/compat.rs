//! Manifest compatibility: which changes to a kind version's manifest would break the
//! resources and workers already using that version (the API refuses them with 409 while
//! resources of that version exist; a new kind version is the way to make them).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::manifest::KindManifest;

/// Every breaking difference from `old` to `new`, described for a human. Empty: compatible.
///
/// Breaking: a reaction removed or changed in trigger, verb or finalizer; the finalizer name
/// changed; in the spec schema, a property removed, a property's `type` changed, a newly
/// required property, or `additionalProperties` turned off (specs already applied would
/// break it); in the status schema, the same four: the status is written by the kind's
/// workers already running (a newly required property, or a property they write that is now
/// refused, fails their every result terminally) and read by whoever consumes it (a removed
/// or retyped property breaks a client, a UI, and any value flow that reads it: see also the
/// catalog's check of the flows other kinds declare, which holds whether or not resources
/// use the version). Adding optional properties, reactions, descriptions or policy changes
/// are compatible.
pub fn breaking_changes(old: &KindManifest, new: &KindManifest) -> Vec<String> {
    let mut out = Vec::new();
    for r in &old.reactions {
        match new.reactions.iter().find(|n| n.name == r.name) {
            None => out.push(format!("reaction {:?} removed", r.name)),
            Some(n) => {
                if n.trigger != r.trigger {
                    out.push(format!(
                        "reaction {:?} changes trigger {} → {}",
                        r.name, r.trigger, n.trigger
                    ));
                }
                if n.verb != r.verb {
                    out.push(format!("reaction {:?} changes its verb", r.name));
                }
                if n.finalizer != r.finalizer {
                    out.push(format!("reaction {:?} changes its finalizer", r.name));
                }
            }
        }
    }
    if old.finalizer_name != new.finalizer_name {
        out.push("finalizer_name changes".to_string());
    }
    schema_breaks(
        old.spec_schema.as_ref(),
        new.spec_schema.as_ref(),
        "spec_schema",
        &mut out,
    );
    schema_breaks(
        old.status_schema.as_ref(),
        new.status_schema.as_ref(),
        "status_schema",
        &mut out,
    );
    out
}

fn props(s: &Value) -> Option<&serde_json::Map<String, Value>> {
    s.get("properties").and_then(Value::as_object)
}

fn required(s: &Value) -> BTreeSet<&str> {
    s.get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Compares two object schemas one level at a time, recursing into shared properties.
fn schema_breaks(old: Option<&Value>, new: Option<&Value>, at: &str, out: &mut Vec<String>) {
    let (Some(old), Some(new)) = (old, new) else {
        if old.is_none() && new.is_some() {
            out.push(format!("{at}: a schema is added to an untyped axis"));
        }
        return;
    };
    if old.get("type") != new.get("type") {
        out.push(format!("{at}: type changes"));
        return;
    }
    let newly_required: Vec<&str> = required(new).difference(&required(old)).copied().collect();
    for r in newly_required {
        out.push(format!("{at}: {r:?} becomes required"));
    }
    if old.get("additionalProperties") != Some(&Value::Bool(false))
        && new.get("additionalProperties") == Some(&Value::Bool(false))
    {
        out.push(format!("{at}: additionalProperties turned off"));
    }
    if let (Some(op), Some(np)) = (props(old), props(new)) {
        for (k, ov) in op {
            match np.get(k) {
                None => out.push(format!("{at}: property {k:?} removed")),
                Some(nv) => schema_breaks(Some(ov), Some(nv), &format!("{at}.{k}"), out),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m(v: Value) -> KindManifest {
        serde_json::from_value(v).unwrap()
    }

    fn base() -> Value {
        json!({
            "kind": "k", "kind_version": 1,
            "spec_schema": {"type": "object", "properties": {
                "a": {"type": "string"}, "n": {"type": "object", "properties": {"x": {"type": "integer"}}}
            }},
            "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]
        })
    }

    #[test]
    fn compatible_changes_pass() {
        let mut v = base();
        v["spec_schema"]["properties"]["b"] = json!({"type": "integer"});
        v["description"] = json!("more words");
        v["max_inflight"] = json!(3);
        v["reactions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "ping", "trigger": "operation", "verb": "ping", "emits": ["operationOutput"]}));
        assert_eq!(breaking_changes(&m(base()), &m(v)), Vec::<String>::new());
    }

    #[test]
    fn the_status_schema_breaks_as_the_spec_schema_does() {
        let with_status = |status: Value| {
            let mut v = base();
            v["status_schema"] = status;
            m(v)
        };
        let old = with_status(json!({"type": "object", "properties": {
            "endpoint": {"type": "string"}, "port": {"type": "integer"}}}));
        // Adding an optional property is compatible.
        let added = with_status(json!({"type": "object", "properties": {
            "endpoint": {"type": "string"}, "port": {"type": "integer"}, "extra": {}}}));
        assert_eq!(breaking_changes(&old, &added), Vec::<String>::new());
        let b = breaking_changes(
            &old,
            &with_status(json!({"type": "object", "required": ["port"],
                "additionalProperties": false, "properties": {"port": {"type": "string"}}})),
        );
        for want in [
            "status_schema: property \"endpoint\" removed",
            "status_schema.port: type changes",
            "status_schema: \"port\" becomes required",
            "status_schema: additionalProperties turned off",
        ] {
            assert!(b.iter().any(|s| s == want), "{want:?} not in {b:?}");
        }
        // A status schema added to a kind that had none constrains its workers anew.
        let b = breaking_changes(&m(base()), &old);
        assert_eq!(b, ["status_schema: a schema is added to an untyped axis"]);
    }

    #[test]
    fn removals_type_changes_and_new_requirements_break() {
        let mut v = base();
        v["spec_schema"]["properties"]
            .as_object_mut()
            .unwrap()
            .remove("a");
        v["spec_schema"]["properties"]["n"]["properties"]["x"] = json!({"type": "string"});
        v["spec_schema"]["required"] = json!(["n"]);
        v["reactions"] = json!([]);
        let b = breaking_changes(&m(base()), &m(v));
        assert!(b.iter().any(|s| s.contains("\"a\" removed")), "{b:?}");
        assert!(
            b.iter()
                .any(|s| s.contains("spec_schema.n.x: type changes")),
            "{b:?}"
        );
        assert!(
            b.iter().any(|s| s.contains("\"n\" becomes required")),
            "{b:?}"
        );
        assert!(
            b.iter().any(|s| s.contains("reaction \"work\" removed")),
            "{b:?}"
        );
    }
}
