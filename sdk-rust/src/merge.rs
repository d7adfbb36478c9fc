//! Effective-config helpers: combine a kind's default provider config with a per-resource
//! override, the same way in every SDK.

use serde_json::Value;

/// Deep-merges `over` onto `default`, the override winning per key.
///
/// Objects merge recursively; any other value in the override (including arrays and `null`)
/// replaces the default's value. With only one side present, that side is returned; with
/// neither, `Null`.
pub fn effective_config(default: Option<&Value>, over: Option<&Value>) -> Value {
    match (default, over) {
        (None, None) => Value::Null,
        (Some(d), None) => d.clone(),
        (None, Some(o)) => o.clone(),
        (Some(d), Some(o)) => {
            let mut out = d.clone();
            merge_into(&mut out, o);
            out
        }
    }
}

fn merge_into(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(existing) => merge_into(existing, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// The override bundle if it is non-empty, otherwise the default bundle.
pub fn effective_bundle<'a>(default: &'a [u8], over: &'a [u8]) -> &'a [u8] {
    if over.is_empty() { default } else { over }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn deep_merge_override_wins_per_key() {
        let d = json!({"a": 1, "nested": {"x": 1, "y": {"deep": true}}, "list": [1, 2]});
        let o = json!({"b": 2, "nested": {"x": 9, "y": {"more": 1}}, "list": [3]});
        assert_eq!(
            effective_config(Some(&d), Some(&o)),
            json!({"a": 1, "b": 2, "nested": {"x": 9, "y": {"deep": true, "more": 1}}, "list": [3]})
        );
    }

    #[test]
    fn one_side_or_none() {
        let v = json!({"a": 1});
        assert_eq!(effective_config(Some(&v), None), v);
        assert_eq!(effective_config(None, Some(&v)), v);
        assert_eq!(effective_config(None, None), Value::Null);
    }

    #[test]
    fn non_object_replaces() {
        assert_eq!(
            effective_config(Some(&json!({"a": 1})), Some(&json!(5))),
            json!(5)
        );
        assert_eq!(
            effective_config(Some(&json!({"a": {"b": 1}})), Some(&json!({"a": null}))),
            json!({"a": null})
        );
        assert_eq!(
            effective_config(Some(&json!("s")), Some(&json!({"a": 1}))),
            json!({"a": 1})
        );
    }

    #[test]
    fn bundle_override_wins_when_present() {
        assert_eq!(effective_bundle(b"def", b""), b"def");
        assert_eq!(effective_bundle(b"def", b"over"), b"over");
        assert_eq!(effective_bundle(b"", b""), b"");
    }
}
