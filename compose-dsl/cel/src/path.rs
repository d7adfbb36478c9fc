//! Plain path expressions (`spec.region`, `s.cidr`, `vpc.spec.ids[0]`) evaluated straight
//! on the JSON they select from, without the CEL interpreter.
//!
//! Most template expressions are such paths, and `cel` converts every bound variable into
//! its own value tree (the whole root spec, once per scope) and every result back, which
//! dominated a compose. A path that resolves here gives exactly the value CEL would: numbers
//! are normalised the way [`json_to_cel`](crate::json_to_cel) then
//! [`cel_to_json`](crate::cel_to_json) would. Anything else (a missing key, a type mismatch,
//! a non-finite number, a variable only CEL holds) returns `None` and the caller runs the
//! real program, so errors and edge cases keep CEL's own behaviour and messages.

use serde_json::{Number, Value as Json};

use crate::refs::Step;

/// An expression that is nothing but a variable and literal field/index steps.
#[derive(Debug, Clone)]
pub(crate) struct PathExpr {
    /// The variable (`spec`, `root`, a sibling id or a `forEach` variable).
    pub root: String,
    /// The steps after it.
    pub steps: Vec<Step>,
}

impl PathExpr {
    /// The JSON `self` selects from `value`, or `None` when CEL must decide.
    pub fn select<'j>(&self, value: &'j Json) -> Option<&'j Json> {
        self.steps
            .iter()
            .try_fold(value, |v, step| match (v, step) {
                (Json::Object(m), Step::Field(f)) => m.get(f),
                (Json::Array(items), Step::Index(i)) => {
                    usize::try_from(*i).ok().and_then(|i| items.get(i))
                }
                _ => None,
            })
    }
}

/// `value` as CEL would hand it back: integers that fit `i64`, then `u64`, stay integers;
/// any other number becomes its `f64`. `None` when a number has no finite `f64` (CEL's
/// conversion reports that error).
pub(crate) fn normalize(value: &Json) -> Option<Json> {
    Some(match value {
        Json::Number(n) => Json::Number(number(n)?),
        Json::Array(items) => Json::Array(items.iter().map(normalize).collect::<Option<_>>()?),
        Json::Object(fields) => Json::Object(
            fields
                .iter()
                .map(|(k, v)| Some((k.clone(), normalize(v)?)))
                .collect::<Option<_>>()?,
        ),
        other => other.clone(),
    })
}

fn number(n: &Number) -> Option<Number> {
    if let Some(i) = n.as_i64() {
        Some(i.into())
    } else if let Some(u) = n.as_u64() {
        Some(u.into())
    } else {
        n.as_f64().and_then(Number::from_f64)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{cel_to_json, json_to_cel};

    #[test]
    fn normalize_matches_the_cel_round_trip() {
        for doc in [
            json!({"a": [1, -0, 2.5, 1e2, "x", null, true, {"b": u64::MAX}], "c": {}}),
            json!(3),
            json!(-7.25),
            json!([[], {}, [0.0]]),
        ] {
            assert_eq!(
                normalize(&doc),
                Some(cel_to_json(&json_to_cel(&doc)).unwrap()),
                "{doc}"
            );
        }
    }

    #[test]
    fn select_walks_fields_and_indexes_only() {
        let doc = json!({"a": {"b": [10, 20]}});
        let path = |steps: Vec<Step>| PathExpr {
            root: "x".into(),
            steps,
        };
        let f = |s: &str| Step::Field(s.into());
        assert_eq!(
            path(vec![f("a"), f("b"), Step::Index(1)]).select(&doc),
            Some(&json!(20))
        );
        assert_eq!(path(vec![f("a"), f("c")]).select(&doc), None);
        assert_eq!(path(vec![f("a"), Step::Index(0)]).select(&doc), None);
        assert_eq!(
            path(vec![f("a"), f("b"), Step::Index(-1)]).select(&doc),
            None
        );
        assert_eq!(
            path(vec![f("a"), f("b"), Step::Index(2)]).select(&doc),
            None
        );
        assert_eq!(path(vec![f("a"), f("b"), f("0")]).select(&doc), None);
    }
}
