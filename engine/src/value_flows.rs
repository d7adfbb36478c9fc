//! Value flows without a database: the Rust twin of `apply_value_flows` and `jsonptr_path`
//! (engine/sql/flows.sql), for `conctl render`, which shows what a composer's children will
//! look like with no server to ask. The SQL functions are what the engine runs; this module
//! follows them case for case (missing intermediate keys, array indices counted from the end,
//! appends past the end, `~0`/`~1` escapes, a bare field name as a one-segment pointer), and
//! `engine/tests/value_flows.rs` runs both on the same inputs so they cannot drift apart.

use serde_json::Value;

/// One flow: the dependent's `dep_field` gets the upstream status's `src_field`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// JSON pointer into the dependent's spec.
    pub dep_field: String,
    /// JSON pointer into the upstream's status.
    pub src_field: String,
}

/// Why a flow could not be applied (the engine's compose fails the same way).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// A segment walking into an array is not an integer.
    #[error("path element at position {position} is not an integer: {segment:?}")]
    NotAnInteger {
        /// 1-based, as PostgreSQL counts.
        position: usize,
        /// The segment.
        segment: String,
    },
    /// The spec itself is a scalar.
    #[error("cannot set path in scalar")]
    Scalar,
}

/// An RFC 6901 pointer as path segments, exactly as `jsonptr_path` splits it: a leading `/`
/// is optional (a bare name is one segment), `""` and `"/"` are the empty path, and `~1` /
/// `~0` unescape to `/` / `~`.
pub fn pointer_path(p: &str) -> Vec<String> {
    let body = p.strip_prefix('/').unwrap_or(p);
    if body.is_empty() {
        return Vec::new();
    }
    body.split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// PostgreSQL's reading of an array path element (`strtoint`): leading whitespace, an
/// optional sign, decimal digits, and nothing after them.
fn array_index(segment: &str) -> Option<i64> {
    let t = segment.trim_start_matches([' ', '\t', '\n', '\u{b}', '\u{c}', '\r']);
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse::<i32>().ok().map(i64::from)
}

/// `value #> path`: the element at `path`, if any (a non-integer array segment finds nothing).
fn get_path<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = value;
    for seg in path {
        cur = match cur {
            Value::Object(m) => m.get(seg)?,
            Value::Array(a) => {
                let i = array_index(seg)?;
                let len = a.len() as i64;
                let i = if i < 0 { len + i } else { i };
                if i < 0 || i >= len {
                    return None;
                }
                &a[i as usize]
            }
            _ => return None,
        };
    }
    Some(cur)
}

/// `jsonb_set(target, path, new, create_missing => true)`: sets the element at `path`,
/// creating only its last segment; a missing intermediate leaves `target` unchanged.
fn set_path(target: &mut Value, path: &[String], new: Value) -> Result<(), FlowError> {
    if path.is_empty() {
        return Ok(());
    }
    if !(target.is_object() || target.is_array()) {
        return Err(FlowError::Scalar);
    }
    let mut cur = target;
    for (i, seg) in path.iter().enumerate() {
        let last = i + 1 == path.len();
        match cur {
            Value::Object(m) => {
                if last {
                    m.insert(seg.clone(), new);
                    return Ok(());
                }
                match m.get_mut(seg) {
                    Some(next) => cur = next,
                    None => return Ok(()),
                }
            }
            Value::Array(a) => {
                let idx = array_index(seg).ok_or_else(|| FlowError::NotAnInteger {
                    position: i + 1,
                    segment: seg.clone(),
                })?;
                let len = a.len() as i64;
                let at = if idx < 0 { len + idx } else { idx };
                if last {
                    if at < 0 {
                        a.insert(0, new);
                    } else if at >= len {
                        a.push(new);
                    } else {
                        a[at as usize] = new;
                    }
                    return Ok(());
                }
                if at < 0 || at >= len {
                    return Ok(());
                }
                cur = &mut a[at as usize];
            }
            // A scalar below the top: nothing to walk into, the target stays as it is.
            _ => return Ok(()),
        }
    }
    Ok(())
}

/// `apply_value_flows(spec, flows, status)`: each flow's `dep_field` of `spec` gets its
/// `src_field` of `status` (null when the upstream has not reported it), in order.
pub fn apply_value_flows(spec: &Value, flows: &[Flow], status: &Value) -> Result<Value, FlowError> {
    let mut out = spec.clone();
    for f in flows {
        let v = get_path(status, &pointer_path(&f.src_field))
            .cloned()
            .unwrap_or(Value::Null);
        set_path(&mut out, &pointer_path(&f.dep_field), v)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn flow(dep: &str, src: &str) -> Flow {
        Flow {
            dep_field: dep.into(),
            src_field: src.into(),
        }
    }

    #[test]
    fn pointers_split_as_the_engine_splits_them() {
        assert!(pointer_path("").is_empty());
        assert!(pointer_path("/").is_empty());
        assert_eq!(pointer_path("vpc_id"), ["vpc_id"]);
        assert_eq!(pointer_path("/a~1b/c~0"), ["a/b", "c~"]);
        assert_eq!(pointer_path("/a/"), ["a", ""]);
    }

    #[test]
    fn a_flow_copies_a_status_field_into_the_spec() {
        let spec = json!({"net": {"cidr": "10.0.0.0/16"}});
        let status = json!({"vpc": {"id": "vpc-1"}});
        let out = apply_value_flows(&spec, &[flow("/net/vpc_id", "/vpc/id")], &status).unwrap();
        assert_eq!(
            out,
            json!({"net": {"cidr": "10.0.0.0/16", "vpc_id": "vpc-1"}})
        );
        // Missing upstream field: null. Missing intermediate: unchanged.
        let out = apply_value_flows(&spec, &[flow("/x", "/nope"), flow("/a/b", "/vpc")], &status)
            .unwrap();
        assert_eq!(out, json!({"net": {"cidr": "10.0.0.0/16"}, "x": null}));
    }
}
