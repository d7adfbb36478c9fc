//! JSON ↔ CEL value conversion, written by hand.
//!
//! `cel`'s serde path must not be used: the `starlark` crate (built in the same workspace
//! and binary) turns on `serde_json/arbitrary_precision`, under which a `serde_json::Number`
//! serializes as a map `{"$serde_json::private::Number": "3"}`, so `{"n": 3}` would reach
//! CEL as a map instead of `Int(3)`. Walking `serde_json::Value` ourselves avoids that.

use std::{collections::HashMap, sync::Arc};

use cel::objects::{Key, Map};
use serde_json::Value as Json;

/// Converts JSON to a CEL value: integers that fit `i64` become `Int`, larger positive ones
/// `UInt`, everything else numeric `Float`; objects become string-keyed maps.
pub fn json_to_cel(json: &Json) -> cel::Value {
    match json {
        Json::Null => cel::Value::Null,
        Json::Bool(b) => cel::Value::Bool(*b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                cel::Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                cel::Value::UInt(u)
            } else {
                cel::Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Json::String(s) => cel::Value::String(Arc::new(s.clone())),
        Json::Array(items) => cel::Value::List(Arc::new(items.iter().map(json_to_cel).collect())),
        Json::Object(fields) => {
            let map: HashMap<Key, cel::Value> = fields
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), json_to_cel(v)))
                .collect();
            cel::Value::Map(Map { map: Arc::new(map) })
        }
    }
}

/// Converts a CEL value back to JSON. Map keys become strings (ints and bools are
/// stringified); bytes, functions, durations, timestamps, opaque values, NaN and infinities
/// have no JSON form and are errors.
pub fn cel_to_json(value: &cel::Value) -> Result<Json, String> {
    Ok(match value {
        cel::Value::Null => Json::Null,
        cel::Value::Bool(b) => Json::Bool(*b),
        cel::Value::Int(i) => Json::from(*i),
        cel::Value::UInt(u) => Json::from(*u),
        cel::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Json::Number)
            .ok_or_else(|| format!("{f} has no JSON form"))?,
        cel::Value::String(s) => Json::String(s.to_string()),
        cel::Value::List(items) => {
            Json::Array(items.iter().map(cel_to_json).collect::<Result<_, _>>()?)
        }
        cel::Value::Map(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map.map.iter() {
                let key = match k {
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                out.insert(key, cel_to_json(v)?);
            }
            Json::Object(out)
        }
        other => return Err(format!("a {:?} value has no JSON form", other.type_of())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ints_stay_ints_even_with_arbitrary_precision() {
        let v = json_to_cel(&json!({"n": 3}));
        let cel::Value::Map(m) = v else {
            panic!("not a map: {v:?}")
        };
        assert_eq!(
            m.map.get(&Key::String(Arc::new("n".into()))),
            Some(&cel::Value::Int(3))
        );
    }

    #[test]
    fn numbers_keep_their_kind() {
        assert_eq!(json_to_cel(&json!(-4)), cel::Value::Int(-4));
        assert_eq!(json_to_cel(&json!(u64::MAX)), cel::Value::UInt(u64::MAX));
        assert_eq!(json_to_cel(&json!(1.0)), cel::Value::Float(1.0));
        assert_eq!(json_to_cel(&json!(2.5)), cel::Value::Float(2.5));
    }

    #[test]
    fn round_trip() {
        let doc = json!({"a": [1, 2.5, "x", null, true, {"b": u64::MAX}], "c": {}});
        assert_eq!(cel_to_json(&json_to_cel(&doc)).unwrap(), doc);
    }
}
