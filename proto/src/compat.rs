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
/// required property, or `additionalProperties` turned off. Adding optional properties,
/// reactions, descriptions or policy changes are compatible.
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
