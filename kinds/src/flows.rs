//! Value flows typed against the kinds they join: what a kind's JSON Schema says about the
//! value at a pointer, and whether a flow `upstream.status<source> → dependent.spec<target>`
//! can ever carry a value the dependent's `spec_schema` accepts.
//!
//! The check is conservative: it refuses a flow only when the schemas make it impossible —
//! a pointer the schema cannot have (a key `additionalProperties: false` forbids, a step
//! through a scalar, a `false` schema) or types that cannot meet (a string into an integer,
//! an object into a string). Whatever the schema leaves open (no `type`, an open object,
//! `patternProperties`, conditionals, a non-local `$ref`) passes, so a correct graph is never
//! refused. `integer` and `number` meet (3.0 is both).
//!
//! Flows come from a manifest's static `edges` ([`edge_flows`]), and from the API's checks
//! of provider configs (a CEL graph's, a Starlark sample compose's), which build [`Flow`]s of
//! their own. A change to a kind is also checked against the flows other kinds declare
//! ([`broken_declared_flows`]).

use std::collections::BTreeSet;

use converge_proto::{
    json_pointer,
    manifest::{EdgeDecl, EdgeEnd, KindManifest},
};
use serde_json::Value;

use crate::{schema::local_ref, violation::Violation};

/// One value flow: `upstream`'s status at `source_field` fills `dependent`'s spec at
/// `dependent_field`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// The dependent resource (its name, or its kind for a manifest's edge).
    pub dependent: String,
    /// Its (kind, version), when known before the compose runs.
    pub dependent_kind: Option<(String, i32)>,
    /// Pointer into the dependent's spec.
    pub dependent_field: String,
    /// The upstream resource (its name, or its kind for a manifest's edge).
    pub upstream: String,
    /// Its (kind, version), when known before the compose runs.
    pub upstream_kind: Option<(String, i32)>,
    /// Pointer into the upstream's status.
    pub source_field: String,
    /// Where the flow is written: a JSON pointer into the document that declares it
    /// (`/edges/0/values/1`, `/resources/1/template/spec/vpc_id`).
    pub path: String,
}

/// The (kind, version)s the `edges` of a manifest document name, read leniently (before the
/// document is checked: whatever is malformed is left out, the check reports it).
pub fn edge_kinds(doc: &Value) -> Vec<(String, i32)> {
    let Some(edges) = doc.get("edges").and_then(Value::as_array) else {
        return Vec::new();
    };
    edges
        .iter()
        .flat_map(|e| [e.get("from"), e.get("to")])
        .flatten()
        .filter_map(|end| {
            let kind = end.get("kind")?.as_str()?.to_string();
            let version = match end.get("kind_version") {
                None => 1,
                Some(v) => i32::try_from(v.as_i64()?).ok()?,
            };
            Some((kind, version))
        })
        .collect()
}

/// The value flows a manifest's static `edges` declare, each located at its value in the
/// manifest document (`/edges/{i}/values/{j}`, with `doc_index(i)` the document index of
/// `edges[i]`). The resources are named by their kinds.
pub fn edge_flows(edges: &[EdgeDecl], doc_index: impl Fn(usize) -> usize) -> Vec<Flow> {
    let mut out = Vec::new();
    for (i, e) in edges.iter().enumerate() {
        for (j, v) in e.values.iter().enumerate() {
            out.push(Flow {
                dependent: e.from.kind.clone(),
                dependent_kind: Some((e.from.kind.clone(), e.from.kind_version)),
                dependent_field: v.dependent_field.clone(),
                upstream: e.to.kind.clone(),
                upstream_kind: Some((e.to.kind.clone(), e.to.kind_version)),
                source_field: v.source_field.clone(),
                path: format!("/edges/{}/values/{j}", doc_index(i)),
            });
        }
    }
    out
}

/// A graph's flows checked against the kinds they join: one [`Violation`] per flow that
/// can never type-check, located at the flow in the config (`{prefix}{flow.path}`), and one
/// warning per flow left unchecked because a kind it joins is not registered. Flows whose
/// kinds are computed at compose time are not checked (nothing to check against).
/// `lookup(kind, version)` gives a registered kind's manifest.
pub fn check<'k>(
    flows: &[Flow],
    prefix: &str,
    lookup: impl Fn(&str, i32) -> Option<&'k KindManifest>,
) -> (Vec<Violation>, Vec<String>) {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    for f in flows {
        let (Some((up_kind, up_v)), Some((dep_kind, dep_v))) =
            (&f.upstream_kind, &f.dependent_kind)
        else {
            continue;
        };
        let what = format!(
            "value flow {}.status{} (kind {up_kind} v{up_v}) -> {}.spec{} (kind {dep_kind} v{dep_v})",
            f.upstream, f.source_field, f.dependent, f.dependent_field
        );
        let (Some(up), Some(dep)) = (lookup(up_kind, *up_v), lookup(dep_kind, *dep_v)) else {
            let missing = if lookup(up_kind, *up_v).is_none() {
                (up_kind, up_v)
            } else {
                (dep_kind, dep_v)
            };
            warnings.push(format!(
                "{what} at {prefix}{}: not checked, kind {} version {} is not registered",
                f.path, missing.0, missing.1
            ));
            continue;
        };
        if let Some(why) = impossible(f, up, dep) {
            errors.push(Violation::new(
                format!("{prefix}{}", f.path),
                format!("{what}: {why}"),
            ));
        }
    }
    (errors, warnings)
}

/// Why flow `f` from kind `up`'s status into kind `dep`'s spec can never type-check, if it
/// cannot.
fn impossible(f: &Flow, up: &KindManifest, dep: &KindManifest) -> Option<String> {
    let source = up
        .status_schema
        .as_ref()
        .map_or(Shape::Any, |s| shape_at(s, &f.source_field));
    let target = dep
        .spec_schema
        .as_ref()
        .map_or(Shape::Any, |s| shape_at(s, &f.dependent_field));
    match (&source, &target) {
        (Shape::Never(why), _) => Some(format!(
            "the status_schema of {} v{} has no {}: {why}",
            up.kind,
            up.kind_version,
            shown(&f.source_field)
        )),
        (_, Shape::Never(why)) => Some(format!(
            "the spec_schema of {} v{} has no {}: {why}",
            dep.kind,
            dep.kind_version,
            shown(&f.dependent_field)
        )),
        _ => mismatch(&source, &target),
    }
}

/// The flows other kinds declare that applying `new` in place of `old` (the manifest stored
/// for its (kind, version), if any) would break, each described: every value flow of an edge
/// of a manifest of `others` (any registered manifest but `new`'s own (kind, version)) that
/// joins `new`'s (kind, version), when
///
/// - it can no longer type-check ([`check`], with `new` in place of the stored manifest and
///   `lookup` giving every other kind), or
/// - `new` is its upstream and its `status_schema` no longer declares the property the flow
///   reads (`source_field`), or declares it with other types, or
/// - `new` is its dependent and its `spec_schema` no longer declares the property the flow
///   fills, or declares it with other types.
///
/// A flow a kind declares is a promise both kinds keep: removing or retyping what it reads
/// or fills breaks the dependents' specs at run time, so it is refused at apply instead.
pub fn broken_declared_flows<'k>(
    new: &KindManifest,
    old: Option<&KindManifest>,
    others: impl IntoIterator<Item = &'k KindManifest>,
    lookup: impl Fn(&str, i32) -> Option<&'k KindManifest>,
) -> Vec<String> {
    let is_new = |kind: &str, version: i32| kind == new.kind && version == new.kind_version;
    let mut out = Vec::new();
    for m in others {
        if is_new(&m.kind, m.kind_version) {
            continue;
        }
        for (i, e) in m.edges.iter().enumerate() {
            let upstream = is_new(&e.to.kind, e.to.kind_version);
            let dependent = is_new(&e.from.kind, e.from.kind_version);
            if !upstream && !dependent {
                continue;
            }
            for f in edge_flows(std::slice::from_ref(e), |_| i) {
                let mut why: Vec<String> = Vec::new();
                let kind = |end: &EdgeEnd| {
                    if is_new(&end.kind, end.kind_version) {
                        Some(new)
                    } else {
                        lookup(&end.kind, end.kind_version)
                    }
                };
                if let (Some(up), Some(dep)) = (kind(&e.to), kind(&e.from)) {
                    why.extend(impossible(&f, up, dep));
                }
                if let Some(old) = old {
                    if upstream {
                        why.extend(changed_at(
                            old.status_schema.as_ref(),
                            new.status_schema.as_ref(),
                            &f.source_field,
                            "status_schema",
                        ));
                    }
                    if dependent {
                        why.extend(changed_at(
                            old.spec_schema.as_ref(),
                            new.spec_schema.as_ref(),
                            &f.dependent_field,
                            "spec_schema",
                        ));
                    }
                }
                if why.is_empty() {
                    continue;
                }
                out.push(format!(
                    "kind {} v{} declares at {} the value flow {}.status{} -> {}.spec{} \
                     (kind {} v{} -> kind {} v{}): {}",
                    m.kind,
                    m.kind_version,
                    f.path,
                    f.upstream,
                    f.source_field,
                    f.dependent,
                    f.dependent_field,
                    e.to.kind,
                    e.to.kind_version,
                    e.from.kind,
                    e.from.kind_version,
                    why.join("; ")
                ));
            }
        }
    }
    out
}

/// How `new` (a kind's `name` schema, replacing `old`) changes what `old` declared at
/// `pointer`: removed (no longer a declared property), or retyped (other types allowed).
fn changed_at(
    old: Option<&Value>,
    new: Option<&Value>,
    pointer: &str,
    name: &str,
) -> Option<String> {
    let old = old?;
    if !declares_pointer(old, pointer) {
        return None;
    }
    let Some(new) = new.filter(|n| declares_pointer(n, pointer)) else {
        return Some(format!("the new {name} no longer declares {pointer}"));
    };
    let (was, is) = (shape_at(old, pointer), shape_at(new, pointer));
    match (&was, &is) {
        (Shape::Types(a), Shape::Types(b)) if a == b => None,
        (Shape::Types(a), _) => Some(format!(
            "the new {name} retypes {pointer} (it was {}, now {})",
            join(a, " or "),
            match &is {
                Shape::Types(b) => join(b, " or "),
                _ => "any value".into(),
            }
        )),
        _ => None,
    }
}

/// Whether `schema` declares the property (or item) at `pointer`: every step is named by
/// `properties` (an object key) or `prefixItems` / `items` (an array index), following
/// local `$ref`s and the in-place applicators. An open object's undeclared key is not
/// declared, though a value may be there.
pub fn declares_pointer(schema: &Value, pointer: &str) -> bool {
    let tokens = json_pointer::tokens(pointer);
    Walk { root: schema }.declares(schema, &tokens, 0)
}

/// What a schema allows at one pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// Any value, as far as this check can tell.
    Any,
    /// Only values of these JSON types (`"integer"` is a `"number"` that is whole).
    Types(BTreeSet<String>),
    /// No value can be there; why.
    Never(String),
}

/// Deepest `$ref`/applicator nesting followed; beyond it the answer is [`Shape::Any`].
const MAX_DEPTH: usize = 64;

/// What `schema` (a kind's whole spec or status schema) allows at `pointer` (a JSON pointer,
/// `""` for the whole document).
pub fn shape_at(schema: &Value, pointer: &str) -> Shape {
    let tokens = json_pointer::tokens(pointer);
    Walk { root: schema }.shape(schema, &tokens, "", 0)
}

/// Why a flow from a value of shape `source` into a place of shape `target` can never
/// type-check, if it cannot; `None` when it may.
pub fn mismatch(source: &Shape, target: &Shape) -> Option<String> {
    let (Shape::Types(from), Shape::Types(to)) = (source, target) else {
        return None;
    };
    if from.iter().any(|f| to.iter().any(|t| meets(f, t))) {
        return None;
    }
    Some(format!(
        "a {} cannot fill a place that takes {}",
        join(from, " or "),
        join(to, " or ")
    ))
}

fn meets(a: &str, b: &str) -> bool {
    a == b || matches!((a, b), ("integer", "number") | ("number", "integer"))
}

fn join(types: &BTreeSet<String>, sep: &str) -> String {
    types
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(sep)
}

struct Walk<'s> {
    root: &'s Value,
}

impl<'s> Walk<'s> {
    /// The shape `node` allows at `tokens` below `at` (the pointer walked so far, for messages).
    fn shape(&self, node: &'s Value, tokens: &[String], at: &str, depth: usize) -> Shape {
        if depth > MAX_DEPTH {
            return Shape::Any;
        }
        let map = match node {
            Value::Bool(false) => {
                return Shape::Never(format!("the schema at {} allows nothing", shown(at)));
            }
            Value::Object(m) => m,
            _ => return Shape::Any,
        };
        // Every in-place part applies together: the node's own keywords, its `$ref` and each
        // `allOf` branch narrow one another; `anyOf`/`oneOf` allow what any branch allows.
        let mut all = vec![self.own(map, tokens, at, depth)];
        if let Some(r) = map.get("$ref").and_then(Value::as_str) {
            all.push(match self.resolve(r) {
                Some(target) => self.shape(target, tokens, at, depth + 1),
                None => Shape::Any,
            });
        }
        if let Some(Value::Array(branches)) = map.get("allOf") {
            all.extend(
                branches
                    .iter()
                    .map(|b| self.shape(b, tokens, at, depth + 1)),
            );
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = map.get(key) {
                all.push(union(
                    branches
                        .iter()
                        .map(|b| self.shape(b, tokens, at, depth + 1)),
                ));
            }
        }
        intersect(all)
    }

    /// What the node's own keywords (`type`, `const`, `enum`, `properties`, `items`, ...)
    /// allow at `tokens`.
    fn own(
        &self,
        map: &'s serde_json::Map<String, Value>,
        tokens: &[String],
        at: &str,
        depth: usize,
    ) -> Shape {
        let types = own_types(map);
        let Some((token, rest)) = tokens.split_first() else {
            return types.map_or(Shape::Any, Shape::Types);
        };
        let index = token.parse::<usize>().ok();
        let allows = |t: &str| types.as_ref().is_none_or(|ts| ts.contains(t));
        let here = format!("{at}/{}", json_pointer::escape(token));
        let mut ways = Vec::new();
        if allows("object") {
            ways.push(self.property(map, token, rest, &here, depth));
        }
        if let Some(i) = index.filter(|_| allows("array")) {
            ways.push(self.item(map, i, rest, &here, depth));
        }
        if ways.is_empty() {
            let ts = types.unwrap_or_default();
            return Shape::Never(format!(
                "{} is a {}, so {} cannot exist",
                shown(at),
                join(&ts, " or "),
                here
            ));
        }
        union(ways)
    }

    fn property(
        &self,
        map: &'s serde_json::Map<String, Value>,
        key: &str,
        rest: &[String],
        here: &str,
        depth: usize,
    ) -> Shape {
        if let Some(sub) = map.get("properties").and_then(|p| p.get(key)) {
            return self.shape(sub, rest, here, depth + 1);
        }
        // Keywords that may admit the key in ways this check does not evaluate.
        let open = [
            "patternProperties",
            "if",
            "then",
            "else",
            "dependentSchemas",
            "unevaluatedProperties",
        ];
        if open.iter().any(|k| map.contains_key(*k)) {
            return Shape::Any;
        }
        match map.get("additionalProperties") {
            None => Shape::Any,
            Some(Value::Bool(false)) => Shape::Never(format!(
                "{here} is not a declared property and additionalProperties is false"
            )),
            Some(sub) => self.shape(sub, rest, here, depth + 1),
        }
    }

    fn item(
        &self,
        map: &'s serde_json::Map<String, Value>,
        i: usize,
        rest: &[String],
        here: &str,
        depth: usize,
    ) -> Shape {
        let prefix = map.get("prefixItems").and_then(Value::as_array);
        let sub = match (prefix, map.get("items")) {
            (_, Some(Value::Array(tuple))) => tuple.get(i).or_else(|| map.get("additionalItems")),
            (Some(p), items) => p.get(i).or(items),
            (None, items) => items,
        };
        match sub {
            Some(s) => self.shape(s, rest, here, depth + 1),
            None => Shape::Any,
        }
    }

    fn resolve(&self, reference: &str) -> Option<&'s Value> {
        local_ref(self.root, reference)
    }

    /// Whether `node` declares `tokens` (see [`declares_pointer`]).
    fn declares(&self, node: &'s Value, tokens: &[String], depth: usize) -> bool {
        let Some((token, rest)) = tokens.split_first() else {
            return true;
        };
        let Value::Object(map) = node else {
            return false;
        };
        if depth > MAX_DEPTH {
            return false;
        }
        if let Some(sub) = map.get("properties").and_then(|p| p.get(token.as_str()))
            && self.declares(sub, rest, depth + 1)
        {
            return true;
        }
        if let Ok(i) = token.parse::<usize>() {
            let prefix = map.get("prefixItems").and_then(Value::as_array);
            let sub = match (prefix, map.get("items")) {
                (_, Some(Value::Array(tuple))) => tuple.get(i),
                (Some(p), items) => p.get(i).or(items),
                (None, items) => items,
            };
            if sub.is_some_and(|s| self.declares(s, rest, depth + 1)) {
                return true;
            }
        }
        if let Some(target) = map
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.resolve(r))
            && self.declares(target, tokens, depth + 1)
        {
            return true;
        }
        ["allOf", "anyOf", "oneOf"].iter().any(|k| {
            map.get(*k)
                .and_then(Value::as_array)
                .is_some_and(|bs| bs.iter().any(|b| self.declares(b, tokens, depth + 1)))
        })
    }
}

/// The JSON types a node's `type`, `const` or `enum` allows, when it says.
fn own_types(map: &serde_json::Map<String, Value>) -> Option<BTreeSet<String>> {
    let mut found: Option<BTreeSet<String>> = None;
    let mut narrow = |ts: BTreeSet<String>| {
        found = Some(match found.take() {
            None => ts,
            Some(prev) => meet(&prev, &ts),
        });
    };
    match map.get("type") {
        Some(Value::String(t)) => narrow([t.clone()].into()),
        Some(Value::Array(ts)) => narrow(
            ts.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        ),
        _ => {}
    }
    if let Some(c) = map.get("const") {
        narrow(value_types(c));
    }
    if let Some(Value::Array(vs)) = map.get("enum") {
        narrow(vs.iter().flat_map(value_types).collect());
    }
    found
}

/// The JSON types one value has (a whole number is both `integer` and `number`).
fn value_types(v: &Value) -> BTreeSet<String> {
    let names: &[&str] = match v {
        Value::Null => &["null"],
        Value::Bool(_) => &["boolean"],
        Value::Number(n) if n.is_i64() || n.is_u64() => &["integer", "number"],
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => &["integer", "number"],
        Value::Number(_) => &["number"],
        Value::String(_) => &["string"],
        Value::Array(_) => &["array"],
        Value::Object(_) => &["object"],
    };
    names.iter().map(|s| s.to_string()).collect()
}

/// Types both sets allow; an `integer` meets a `number` as `integer`.
fn meet(a: &BTreeSet<String>, b: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = a.intersection(b).cloned().collect();
    let has = |s: &BTreeSet<String>, t: &str| s.contains(t);
    if (has(a, "integer") && has(b, "number")) || (has(a, "number") && has(b, "integer")) {
        out.insert("integer".into());
    }
    out
}

/// All of `parts` hold at once.
fn intersect(parts: Vec<Shape>) -> Shape {
    let mut acc = Shape::Any;
    for p in parts {
        acc = match (acc, p) {
            (n @ Shape::Never(_), _) | (_, n @ Shape::Never(_)) => return n,
            (Shape::Any, x) | (x, Shape::Any) => x,
            (Shape::Types(a), Shape::Types(b)) => {
                let m = meet(&a, &b);
                if m.is_empty() {
                    return Shape::Never(format!(
                        "the schema requires both {} and {}",
                        join(&a, " or "),
                        join(&b, " or ")
                    ));
                }
                Shape::Types(m)
            }
        };
    }
    acc
}

/// Any of `parts` may hold; `Never` only when every one is.
fn union(parts: impl IntoIterator<Item = Shape>) -> Shape {
    let mut types = BTreeSet::new();
    let mut first_never = None;
    let mut any_possible = false;
    for p in parts {
        match p {
            Shape::Any => return Shape::Any,
            Shape::Types(ts) => {
                any_possible = true;
                types.extend(ts);
            }
            Shape::Never(why) => {
                first_never.get_or_insert(why);
            }
        }
    }
    if any_possible {
        Shape::Types(types)
    } else {
        Shape::Never(first_never.unwrap_or_else(|| "no schema branch allows it".into()))
    }
}

fn shown(at: &str) -> &str {
    if at.is_empty() { "the document" } else { at }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn types(ts: &[&str]) -> Shape {
        Shape::Types(ts.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn declared_properties_give_their_types_and_open_objects_allow_anything() {
        let s = json!({"type": "object", "properties": {
            "ids": {"type": "object", "properties": {"vpc": {"type": "string"}}},
            "count": {"type": ["integer", "null"]},
            "mode": {"enum": ["a", "b"]},
        }});
        assert_eq!(shape_at(&s, "/ids/vpc"), types(&["string"]));
        assert_eq!(shape_at(&s, "/count"), types(&["integer", "null"]));
        assert_eq!(shape_at(&s, "/mode"), types(&["string"]));
        assert_eq!(shape_at(&s, "/ids/other"), Shape::Any);
        assert_eq!(shape_at(&s, ""), types(&["object"]));
        assert_eq!(shape_at(&json!({}), "/a/b/0"), Shape::Any);
    }

    #[test]
    fn a_pointer_the_schema_forbids_is_never() {
        let s = json!({"type": "object", "additionalProperties": false, "properties": {
            "cidr": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "integer"}},
        }});
        let Shape::Never(why) = shape_at(&s, "/cdir") else {
            panic!("a key additionalProperties forbids");
        };
        assert!(why.contains("/cdir"), "{why}");
        let Shape::Never(why) = shape_at(&s, "/cidr/x") else {
            panic!("a step through a string");
        };
        assert!(why.contains("/cidr is a string"), "{why}");
        assert_eq!(shape_at(&s, "/tags/3"), types(&["integer"]));
        assert!(matches!(shape_at(&s, "/tags/x"), Shape::Never(_)));
    }

    #[test]
    fn refs_all_of_and_any_of_combine() {
        let s = json!({
            "$defs": {"id": {"type": "string"}},
            "properties": {
                "a": {"$ref": "#/$defs/id"},
                "b": {"allOf": [{"type": ["string", "integer"]}, {"type": "number"}]},
                "c": {"anyOf": [{"type": "string"}, {"type": "boolean"}]},
                "d": {"oneOf": [{"type": "object", "additionalProperties": false},
                                {"type": "object", "properties": {"x": {"type": "null"}}}]},
                "loop": {"$ref": "#"},
            }
        });
        assert_eq!(shape_at(&s, "/a"), types(&["string"]));
        assert_eq!(shape_at(&s, "/b"), types(&["integer"]));
        assert_eq!(shape_at(&s, "/c"), types(&["boolean", "string"]));
        assert_eq!(shape_at(&s, "/d/x"), types(&["null"]));
        assert_eq!(shape_at(&s, "/loop/loop/a"), types(&["string"]));
        assert_eq!(shape_at(&s, "/loop/zzz"), Shape::Any);
    }

    #[test]
    fn conditionals_and_pattern_properties_keep_a_key_possible() {
        let s = json!({"type": "object", "additionalProperties": false,
                       "patternProperties": {"^x-": {"type": "string"}}});
        assert_eq!(shape_at(&s, "/x-a"), Shape::Any);
    }

    #[test]
    fn manifest_edges_give_their_flows() {
        let doc = json!({"edges": [
            {"from": {"kind": "subnet", "kind_version": 2}, "to": {"kind": "vpc"},
             "values": [{"dependent_field": "/a", "source_field": "/b"},
                        {"dependent_field": "/c", "source_field": "/d"}]},
            {"from": {"kind": 7}, "to": {"kind": "x", "kind_version": "one"}},
        ]});
        assert_eq!(
            edge_kinds(&doc),
            [("subnet".to_string(), 2), ("vpc".to_string(), 1)]
        );
        let edges: Vec<EdgeDecl> =
            serde_json::from_value(json!([doc["edges"][0].clone()])).unwrap();
        let flows = edge_flows(&edges, |i| i + 3);
        assert_eq!(flows[1].path, "/edges/3/values/1");
        assert_eq!(flows[1].upstream_kind, Some(("vpc".into(), 1)));
    }

    #[test]
    fn mismatches_are_type_sets_that_never_meet() {
        assert!(mismatch(&types(&["string"]), &types(&["integer"])).is_some());
        assert!(mismatch(&types(&["object"]), &types(&["string"])).is_some());
        assert_eq!(mismatch(&types(&["integer"]), &types(&["number"])), None);
        assert_eq!(mismatch(&types(&["number"]), &types(&["integer"])), None);
        assert_eq!(
            mismatch(&types(&["string", "null"]), &types(&["null"])),
            None
        );
        assert_eq!(mismatch(&Shape::Any, &types(&["integer"])), None);
    }
}
