//! A kind's secrets: a `config_schema` subschema marked `"writeOnly": true` covers config
//! values no API read shows ([`MASK`] instead) and no violation message quotes, while workers
//! read them intact from the database. The secrets are found by the validator that checks the
//! config (its evaluation reports where it applied a writeOnly subschema, however the schema
//! reaches it: `$ref`, `$anchor`, `$id`-relative URIs, `$dynamicRef`), united with a
//! structural walk that covers the branches a document does not take
//! ([`write_only_pointers`]).

use serde_json::Value;

use crate::schema::{MAX_SEARCHED_VALUES, local_ref, values_beyond};

/// The locations (JSON pointers) of `config` a writeOnly subschema of `root` (a kind's
/// config_schema, compiled as `validator`) covers, outermost only, in document order of
/// their pointers. Two sources, united so that a secret is masked if either finds it:
///
/// - the validator itself ([`jsonschema::Validator::evaluate`]): every place it applied
///   a subschema carrying `"writeOnly": true` (an annotation, kept or dropped because
///   the subschema failed). It reaches a subschema exactly as validation does, through
///   the one resolver: `$ref` to a pointer, an `$anchor`, an `$id`-relative URI,
///   `$dynamicRef`, every applicator, `patternProperties` by its regex;
/// - a walk of the schema's structure beside the document ([`WriteOnlyWalk`]), which
///   errs on the side of covering: it follows every branch whether or not the document
///   takes it (a stored config that fails a later schema, an `anyOf` branch a `"***"`
///   written back makes fail, an evaluation an unfinished regex match cut short).
///
/// A document of more than [`MAX_SEARCHED_VALUES`] values is not evaluated (its output
/// would grow with it): every string, number and boolean in it counts as covered.
pub(crate) fn write_only_pointers(
    root: &Value,
    validator: &jsonschema::Validator,
    config: &Value,
) -> Vec<String> {
    let mut found = Vec::new();
    if values_beyond(config, MAX_SEARCHED_VALUES) {
        scalar_pointers(config, &mut String::new(), &mut found);
        return found;
    }
    evaluated_write_only(validator, config, &mut found);
    let mut w = WriteOnlyWalk {
        root,
        found: &mut found,
    };
    w.walk(vec![root], config, &mut String::new());
    outermost(found)
}

/// Whether any subschema of `schema` is marked `"writeOnly": true`: without one, a config
/// has no secrets and nothing needs to look for them.
pub(crate) fn has_write_only(schema: &Value) -> bool {
    let mut todo = vec![schema];
    while let Some(v) = todo.pop() {
        match v {
            Value::Object(o) => {
                if o.get("writeOnly") == Some(&Value::Bool(true)) {
                    return true;
                }
                todo.extend(o.values());
            }
            Value::Array(a) => todo.extend(a),
            _ => {}
        }
    }
    false
}

/// Pushes to `out` the instance location of every place `validator`, evaluating `doc`,
/// applied a subschema carrying `"writeOnly": true`: the annotations it collected, and the
/// ones it dropped because that subschema (or one beside it) failed.
fn evaluated_write_only(validator: &jsonschema::Validator, doc: &Value, out: &mut Vec<String>) {
    let marks = |a: Option<&Value>| a.and_then(|a| a.get("writeOnly")) == Some(&Value::Bool(true));
    let evaluation = validator.evaluate(doc);
    let mut todo = vec![evaluation.root()];
    while let Some(unit) = todo.pop() {
        if marks(unit.annotations().map(|a| a.value()))
            || marks(unit.dropped_annotations().map(|a| a.value()))
        {
            out.push(unit.instance_location().as_str().to_string());
        }
        todo.extend(unit.children());
    }
}

/// The pointers of every string, number and boolean of `v` (at `ptr`).
fn scalar_pointers(v: &Value, ptr: &mut String, out: &mut Vec<String>) {
    let at = |ptr: &mut String, token: &str, child: &Value, out: &mut Vec<String>| {
        let len = ptr.len();
        ptr.push('/');
        ptr.push_str(token);
        scalar_pointers(child, ptr, out);
        ptr.truncate(len);
    };
    match v {
        Value::Object(o) => {
            for (k, child) in o {
                at(ptr, &converge_proto::json_pointer::escape(k), child, out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                at(ptr, &i.to_string(), child, out);
            }
        }
        Value::Null => {}
        _ => out.push(ptr.clone()),
    }
}

/// `pointers` sorted, each once, without any that lies under another (the outer one covers
/// it whole).
pub fn outermost(mut pointers: Vec<String>) -> Vec<String> {
    pointers.sort();
    pointers.dedup();
    let mut out: Vec<String> = Vec::with_capacity(pointers.len());
    for p in pointers {
        // Sorted, so an ancestor comes before its descendants (though not always right
        // before: "/a/b" < "/a-" < "/a/c" sorts "/a-" between two children of "/a").
        let covered = out.iter().any(|o| {
            o.is_empty()
                || p.strip_prefix(o.as_str())
                    .is_some_and(|r| r.starts_with('/'))
        });
        if !covered {
            out.push(p);
        }
    }
    out
}

/// What a writeOnly value reads as.
pub const MASK: &str = "***";

pub(crate) const WITHHELD: &str = " (message withheld: it would show a writeOnly value)";

/// A config's writeOnly locations (JSON pointers) and the texts of their values.
#[derive(Default)]
pub(crate) struct Secrets {
    pointers: Vec<String>,
    texts: Vec<String>,
}

impl Secrets {
    /// The secrets of `config` at `pointers` (see [`write_only_pointers`]).
    pub(crate) fn of(config: &Value, pointers: Vec<String>) -> Secrets {
        let mut s = Secrets::default();
        for ptr in pointers {
            if let Some(v) = config.pointer(&ptr) {
                leaf_texts(v, &mut s.texts);
            }
            s.pointers.push(ptr);
        }
        s
    }

    /// Whether a message about `location` (a pointer into the config) could show a secret:
    /// it is at or under a writeOnly location, or quotes a secret's text.
    pub(crate) fn shows(&self, location: &str, message: &str) -> bool {
        self.covers(location) || self.quotes(message)
    }

    /// Whether `location` is at or under a writeOnly location.
    pub(crate) fn covers(&self, location: &str) -> bool {
        self.pointers.iter().any(|p| {
            location == p
                || location
                    .strip_prefix(p.as_str())
                    .is_some_and(|r| r.starts_with('/'))
        })
    }

    /// Whether the value at `location` holds a writeOnly value further down.
    pub(crate) fn inside(&self, location: &str) -> bool {
        self.pointers
            .iter()
            .any(|p| p.strip_prefix(location).is_some_and(|r| r.starts_with('/')))
    }

    /// Whether `message` quotes a secret's text.
    pub(crate) fn quotes(&self, message: &str) -> bool {
        self.texts.iter().any(|t| message.contains(t.as_str()))
    }
}

/// The string and number leaves of `v` (what a validation message could quote).
fn leaf_texts(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if !s.is_empty() => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(a) => a.iter().for_each(|v| leaf_texts(v, out)),
        Value::Object(o) => o.values().for_each(|v| leaf_texts(v, out)),
        _ => {}
    }
}

/// A walk of a document beside its schema, to find what `"writeOnly": true` covers: the
/// covering half of [`write_only_pointers`] (the validator's evaluation is the
/// exact half, and the only one that follows `$anchor`, `$id` and `$dynamicRef`). It errs
/// on the side of covering: every subschema that *could* apply is followed whether or not it
/// validates (a stored config that fails a later schema keeps its secrets hidden): the
/// in-place applicators (`allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`,
/// `dependentSchemas`), local `$ref`s (`#`, `#/...`), `properties`, `additionalProperties` and
/// `unevaluatedProperties` (for keys not in `properties`), `patternProperties` (taken to match
/// every key: there is no regex engine here), `prefixItems`, `items` (both forms),
/// `additionalItems`, `contains` and `unevaluatedItems`.
struct WriteOnlyWalk<'s, 'o> {
    root: &'s Value,
    /// The covered locations found.
    found: &'o mut Vec<String>,
}

impl<'s> WriteOnlyWalk<'s, '_> {
    /// `schemas` all apply to `doc`, found at `ptr`.
    fn walk(&mut self, schemas: Vec<&'s Value>, doc: &Value, ptr: &mut String) {
        let applying = self.in_place_closure(schemas);
        if applying
            .iter()
            .any(|s| s.get("writeOnly") == Some(&Value::Bool(true)))
        {
            self.found.push(ptr.clone());
            return;
        }
        match doc {
            Value::Object(map) => {
                for (key, child) in map {
                    let mut subs = Vec::new();
                    for s in &applying {
                        let named = s.get("properties").and_then(|p| p.get(key));
                        match named {
                            Some(sub) => subs.push(sub),
                            None => subs.extend(
                                ["additionalProperties", "unevaluatedProperties"]
                                    .iter()
                                    .filter_map(|k| s.get(*k)),
                            ),
                        }
                        if let Some(Value::Object(pats)) = s.get("patternProperties") {
                            subs.extend(pats.values());
                        }
                    }
                    descend(
                        self,
                        subs,
                        child,
                        ptr,
                        &converge_proto::json_pointer::escape(key),
                    );
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    let mut subs = Vec::new();
                    for s in &applying {
                        let prefix = s.get("prefixItems").and_then(Value::as_array);
                        match (prefix, s.get("items")) {
                            (_, Some(Value::Array(tuple))) => match tuple.get(i) {
                                Some(sub) => subs.push(sub),
                                None => subs.extend(s.get("additionalItems")),
                            },
                            (Some(p), items) => match p.get(i) {
                                Some(sub) => subs.push(sub),
                                None => subs.extend(items),
                            },
                            (None, items) => subs.extend(items),
                        }
                        subs.extend(
                            ["contains", "unevaluatedItems"]
                                .iter()
                                .filter_map(|k| s.get(*k)),
                        );
                    }
                    descend(self, subs, child, ptr, &i.to_string());
                }
            }
            _ => {}
        }

        fn descend<'s>(
            w: &mut WriteOnlyWalk<'s, '_>,
            subs: Vec<&'s Value>,
            child: &Value,
            ptr: &mut String,
            token: &str,
        ) {
            if subs.is_empty() {
                return;
            }
            let len = ptr.len();
            ptr.push('/');
            ptr.push_str(token);
            w.walk(subs, child, ptr);
            ptr.truncate(len);
        }
    }

    /// Every object schema applying in place to one instance: `schemas` and, transitively,
    /// their in-place applicators and local `$ref` targets. Each schema appears once, so a
    /// `$ref` cycle (`{"$ref": "#"}`) ends.
    fn in_place_closure(&self, schemas: Vec<&'s Value>) -> Vec<&'s Value> {
        let mut out: Vec<&'s Value> = Vec::new();
        let mut todo = schemas;
        while let Some(s) = todo.pop() {
            if !s.is_object() || out.iter().any(|o| std::ptr::eq(*o, s)) {
                continue;
            }
            out.push(s);
            for k in ["allOf", "anyOf", "oneOf"] {
                if let Some(Value::Array(subs)) = s.get(k) {
                    todo.extend(subs);
                }
            }
            todo.extend(
                ["not", "if", "then", "else"]
                    .iter()
                    .filter_map(|k| s.get(*k)),
            );
            if let Some(Value::Object(deps)) = s.get("dependentSchemas") {
                todo.extend(deps.values());
            }
            for k in ["$ref", "$dynamicRef"] {
                if let Some(target) = s
                    .get(k)
                    .and_then(Value::as_str)
                    .and_then(|r| self.resolve(r))
                {
                    todo.push(target);
                }
            }
        }
        out
    }

    fn resolve(&self, reference: &str) -> Option<&'s Value> {
        local_ref(self.root, reference)
    }
}

#[cfg(test)]
mod tests {
    use super::outermost;

    #[test]
    fn outermost_pointers_cover_their_descendants() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            outermost(p(&["/a/b", "/a", "/a-", "/c", "/c"])),
            p(&["/a", "/a-", "/c"])
        );
    }
}
