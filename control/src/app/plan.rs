//! The pure half of a plan (`POST /api/v1/resources:plan`): how a stored document differs
//! from a new one, and how a compose's children and edges differ from those a composite owns
//! now. No I/O here: the handler ([`crate::http::resource_plan`]) reads the rows and runs
//! the composer, and hands both sides to these functions.
//!
//! Equality is the database's: the engine writes a row only where its `jsonb` differs
//! (`IS DISTINCT FROM`), and `jsonb` compares numbers by value, so `1` and `1.0` are equal
//! here too ([`json_eq`]); a plan that says "unchanged" is an apply that writes nothing.

use std::collections::{BTreeMap, HashMap};

use converge_cel::{ChildSpec, ComposeOutput, DepEdge};
use converge_engine::{
    db::resource_deps::OwnedEdge,
    value_flows::{Flow, apply_value_flows},
};
use serde_json::{Map, Value};

use crate::http::wire::{
    DiffEntry, DiffOp, PlanChild, PlanChildChange, PlanChildren, PlanEdge, PlanEdgeChange,
    PlanEdges, ResourceRef, ValueMapping,
};

/// Differences listed per document; the rest are counted.
pub const MAX_DIFF_ENTRIES: usize = 256;

/// Differences listed per changed child; the rest are counted.
pub const MAX_CHILD_DIFF_ENTRIES: usize = 64;

/// What a masked value reads.
const MASK: &str = "***";

/// Whether two JSON values are equal as `jsonb` compares them: numbers by value, objects
/// regardless of key order.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                x == y
            } else if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                x == y
            } else {
                x.as_f64() == y.as_f64()
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A bounded list of differences.
#[derive(Debug, Default)]
pub struct Diff {
    /// Listed, in document order.
    pub entries: Vec<DiffEntry>,
    /// Found past the limit, not listed.
    pub omitted: u64,
    limit: usize,
}

impl Diff {
    /// An empty diff listing at most `limit` entries.
    pub fn with_limit(limit: usize) -> Diff {
        Diff {
            entries: Vec::new(),
            omitted: 0,
            limit,
        }
    }

    /// Whether anything differs.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.omitted == 0
    }

    fn push(&mut self, op: DiffOp, path: &str, old: Option<Value>, new: Option<Value>) {
        if self.entries.len() < self.limit {
            self.entries.push(DiffEntry {
                op,
                path: path.to_owned(),
                old,
                new,
            });
        } else {
            self.omitted += 1;
        }
    }

    /// Adds the differences between `old` and `new` (either absent) under `prefix`. The
    /// values shown are read from `shown_old` and `shown_new`, the same documents with their
    /// secrets masked: a location inside a masked value reads `"***"`. Objects are compared
    /// key by key (in key order), arrays of one length item by item; an array whose length
    /// changes is replaced whole.
    pub fn compare(
        &mut self,
        prefix: &str,
        old: Option<&Value>,
        new: Option<&Value>,
        shown_old: Option<&Value>,
        shown_new: Option<&Value>,
    ) {
        let mut path = prefix.to_owned();
        self.walk(
            &mut path,
            old,
            new,
            &Shown(shown_old),
            &Shown(shown_new),
            "",
        );
    }

    fn walk(
        &mut self,
        path: &mut String,
        old: Option<&Value>,
        new: Option<&Value>,
        shown_old: &Shown<'_>,
        shown_new: &Shown<'_>,
        rel: &str,
    ) {
        match (old, new) {
            (None, None) => {}
            (None, Some(_)) => self.push(DiffOp::Add, path, None, Some(shown_new.at(rel))),
            (Some(_), None) => self.push(DiffOp::Remove, path, Some(shown_old.at(rel)), None),
            (Some(a), Some(b)) if json_eq(a, b) => {}
            (Some(Value::Object(a)), Some(Value::Object(b))) => {
                let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                for k in keys {
                    let len = path.len();
                    let step = format!("/{}", converge_proto::json_pointer::escape(k));
                    path.push_str(&step);
                    let rel = format!("{rel}{step}");
                    self.walk(path, a.get(k), b.get(k), shown_old, shown_new, &rel);
                    path.truncate(len);
                }
            }
            (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    let len = path.len();
                    let step = format!("/{i}");
                    path.push_str(&step);
                    let rel = format!("{rel}{step}");
                    self.walk(path, Some(x), Some(y), shown_old, shown_new, &rel);
                    path.truncate(len);
                }
            }
            (Some(_), Some(_)) => self.push(
                DiffOp::Replace,
                path,
                Some(shown_old.at(rel)),
                Some(shown_new.at(rel)),
            ),
        }
    }
}

/// A document as shown (its secrets masked).
struct Shown<'a>(Option<&'a Value>);

impl Shown<'_> {
    /// The value at `rel`; `"***"` when the pointer runs into a masked value (a secret's
    /// inside is never shown).
    fn at(&self, rel: &str) -> Value {
        self.0
            .and_then(|v| v.pointer(rel))
            .cloned()
            .unwrap_or_else(|| Value::String(MASK.into()))
    }
}

/// The effective provider config of a resource: its override deep-merged over the kind's
/// default, objects key by key and anything else replaced, exactly as every SDK's
/// `effective_config` merges them for a worker (sdk-rust/src/merge.rs); `Null` when there is
/// neither.
pub fn effective_config(default: Option<&Value>, over: Option<&Value>) -> Value {
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

/// Substitutes the value flows of `output`'s edges into its children's specs, in edge order,
/// from the status `status_of(kind, name)` gives for each upstream (`None`: no row or no
/// status yet, so nothing is substituted), as the engine's compose does
/// (`apply_compose_result`, through the Rust twin of `apply_value_flows`). `conctl render
/// --observed` and the plan both use it.
pub fn substitute_flows<'s>(
    output: &mut ComposeOutput,
    status_of: impl Fn(&str, &str) -> Option<&'s Value>,
) -> Result<(), String> {
    for e in &output.edges {
        if e.values.is_empty() {
            continue;
        }
        let Some(status) = status_of(&e.to.kind, &e.to.name).filter(|s| !s.is_null()) else {
            continue;
        };
        let flows: Vec<Flow> = e
            .values
            .iter()
            .map(|v| Flow {
                dep_field: v.dependent_field.clone(),
                src_field: v.source_field.clone(),
            })
            .collect();
        for c in output
            .children
            .iter_mut()
            .filter(|c| c.kind == e.from.kind && c.name == e.from.name)
        {
            c.spec = apply_value_flows(&c.spec, &flows, status).map_err(|err| {
                format!("value flows into {}/{}: {err}", e.from.kind, e.from.name)
            })?;
        }
    }
    Ok(())
}

/// A child the composite owns now, as the plan compares it.
#[derive(Debug, Clone)]
pub struct StoredChild {
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Name.
    pub name: String,
    /// Spec.
    pub spec: Value,
    /// Labels.
    pub labels: Value,
    /// Set aside by a previous compose (orphaned), being deleted, or quarantined: a compose
    /// that drops it again leaves it as it is.
    pub frozen_or_going: bool,
    /// Orphaned (frozen for the grace window): a compose that emits it again takes it back.
    pub orphaned: bool,
}

/// The children `desired` (a compose's, flows substituted) against `stored` (the children
/// owned now); `mask(kind, version, spec)` masks a spec's secrets for display.
pub fn compare_children(
    desired: &[ChildSpec],
    stored: &[StoredChild],
    mask: impl Fn(&str, i32, &mut Value),
) -> PlanChildren {
    let by_key: HashMap<(&str, &str), &StoredChild> = stored
        .iter()
        .map(|c| ((c.kind.as_str(), c.name.as_str()), c))
        .collect();
    let mut out = PlanChildren::default();
    let mut seen: std::collections::HashSet<(&str, &str)> = std::collections::HashSet::new();
    for d in desired {
        seen.insert((d.kind.as_str(), d.name.as_str()));
        let labels = labels_value(&d.labels);
        let mut shown_new = d.spec.clone();
        mask(&d.kind, d.kind_version, &mut shown_new);
        let Some(s) = by_key.get(&(d.kind.as_str(), d.name.as_str())) else {
            out.add.push(PlanChild {
                kind: d.kind.clone(),
                kind_version: d.kind_version,
                name: d.name.clone(),
                spec: shown_new,
                labels,
            });
            continue;
        };
        let mut diff = Diff::with_limit(MAX_CHILD_DIFF_ENTRIES);
        if s.kind_version != d.kind_version {
            diff.push(
                DiffOp::Replace,
                "/kind_version",
                Some(s.kind_version.into()),
                Some(d.kind_version.into()),
            );
        }
        let mut shown_old = s.spec.clone();
        mask(&s.kind, s.kind_version, &mut shown_old);
        diff.compare(
            "/spec",
            Some(&s.spec),
            Some(&d.spec),
            Some(&shown_old),
            Some(&shown_new),
        );
        diff.compare(
            "/labels",
            Some(&s.labels),
            Some(&labels),
            Some(&s.labels),
            Some(&labels),
        );
        if s.orphaned {
            diff.push(
                DiffOp::Replace,
                "/orphaned",
                Some(true.into()),
                Some(false.into()),
            );
        }
        if diff.is_empty() {
            out.unchanged += 1;
        } else {
            out.change.push(PlanChildChange {
                kind: d.kind.clone(),
                name: d.name.clone(),
                diff: diff.entries,
                diff_omitted: diff.omitted,
            });
        }
    }
    out.remove = stored
        .iter()
        .filter(|s| !s.frozen_or_going && !seen.contains(&(s.kind.as_str(), s.name.as_str())))
        .map(|s| ResourceRef {
            kind: s.kind.clone(),
            name: s.name.clone(),
        })
        .collect();
    out
}

/// Labels as stored (`{}` when none).
fn labels_value(labels: &BTreeMap<String, String>) -> Value {
    Value::Object(
        labels
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect::<Map<String, Value>>(),
    )
}

/// The edges `desired` (a compose's) against `stored` (those the composite owns now). The
/// engine stores one edge per (from, to), the first of duplicates.
pub fn compare_edges(desired: &[DepEdge], stored: &[OwnedEdge]) -> PlanEdges {
    type Key = (String, String, String, String);
    let key_of = |e: &DepEdge| -> Key {
        (
            e.from.kind.clone(),
            e.from.name.clone(),
            e.to.kind.clone(),
            e.to.name.clone(),
        )
    };
    let mut now: BTreeMap<Key, &OwnedEdge> = stored
        .iter()
        .map(|e| {
            (
                (
                    e.from_kind.clone(),
                    e.from_name.clone(),
                    e.to_kind.clone(),
                    e.to_name.clone(),
                ),
                e,
            )
        })
        .collect();
    let mut out = PlanEdges::default();
    let mut seen = std::collections::HashSet::new();
    for e in desired {
        let key = key_of(e);
        if !seen.insert(key.clone()) {
            continue;
        }
        let mappings: Vec<ValueMapping> = e
            .values
            .iter()
            .map(|v| ValueMapping {
                dependent_field: v.dependent_field.clone(),
                source_field: v.source_field.clone(),
            })
            .collect();
        let (from, to) = (
            ResourceRef {
                kind: e.from.kind.clone(),
                name: e.from.name.clone(),
            },
            ResourceRef {
                kind: e.to.kind.clone(),
                name: e.to.name.clone(),
            },
        );
        match now.remove(&key) {
            None => out.add.push(PlanEdge {
                from,
                to,
                value_mappings: mappings,
            }),
            Some(s) => {
                let old: Vec<ValueMapping> = s
                    .value_mappings
                    .iter()
                    .map(|m| ValueMapping {
                        dependent_field: m.dependent_field.clone(),
                        source_field: m.source_field.clone(),
                    })
                    .collect();
                if old == mappings {
                    out.unchanged += 1;
                } else {
                    out.change.push(PlanEdgeChange {
                        from,
                        to,
                        old_value_mappings: old,
                        value_mappings: mappings,
                    });
                }
            }
        }
    }
    out.remove = now
        .into_values()
        .map(|s| PlanEdge {
            from: ResourceRef {
                kind: s.from_kind.clone(),
                name: s.from_name.clone(),
            },
            to: ResourceRef {
                kind: s.to_kind.clone(),
                name: s.to_name.clone(),
            },
            value_mappings: s
                .value_mappings
                .iter()
                .map(|m| ValueMapping {
                    dependent_field: m.dependent_field.clone(),
                    source_field: m.source_field.clone(),
                })
                .collect(),
        })
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn diff(old: Value, new: Value) -> Vec<DiffEntry> {
        let mut d = Diff::with_limit(10);
        d.compare("/spec", Some(&old), Some(&new), Some(&old), Some(&new));
        d.entries
    }

    #[test]
    fn numbers_compare_by_value_and_objects_by_key() {
        assert!(json_eq(
            &json!({"a": 1, "b": [1.0]}),
            &json!({"b": [1], "a": 1.0})
        ));
        assert!(!json_eq(&json!({"a": 1}), &json!({"a": 2})));
        assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": null})));
    }

    #[test]
    fn a_diff_names_each_changed_leaf_by_its_pointer() {
        let d = diff(
            json!({"size": 1, "tags": ["a"], "gone": true, "deep": {"x/y": 1}}),
            json!({"size": 2, "tags": ["a", "b"], "new": 1, "deep": {"x/y": 1.0}}),
        );
        let got: Vec<(DiffOp, &str)> = d.iter().map(|e| (e.op, e.path.as_str())).collect();
        assert_eq!(
            got,
            [
                (DiffOp::Remove, "/spec/gone"),
                (DiffOp::Add, "/spec/new"),
                (DiffOp::Replace, "/spec/size"),
                (DiffOp::Replace, "/spec/tags"),
            ]
        );
        assert_eq!(d[2].old, Some(json!(1)));
        assert_eq!(d[2].new, Some(json!(2)));
        assert!(diff(json!({"a": 1}), json!({"a": 1.0})).is_empty());
    }

    #[test]
    fn a_masked_value_reads_masked_inside_and_out() {
        let (old, new) = (
            json!({"db": {"password": "hunter2", "user": "a"}}),
            json!({"db": {"password": "hunter3", "user": "a"}}),
        );
        let (mut shown_old, mut shown_new) = (old.clone(), new.clone());
        shown_old["db"]["password"] = json!(MASK);
        shown_new["db"]["password"] = json!(MASK);
        let mut d = Diff::with_limit(10);
        d.compare(
            "/spec",
            Some(&old),
            Some(&new),
            Some(&shown_old),
            Some(&shown_new),
        );
        assert_eq!(d.entries.len(), 1);
        assert_eq!(d.entries[0].path, "/spec/db/password");
        assert_eq!(d.entries[0].old, Some(json!(MASK)));
        assert_eq!(d.entries[0].new, Some(json!(MASK)));
        // A whole masked object: what is inside reads masked too.
        let mut d = Diff::with_limit(10);
        d.compare(
            "/spec",
            Some(&json!({"s": {"k": 1}})),
            Some(&json!({"s": {"k": 2}})),
            Some(&json!({"s": MASK})),
            Some(&json!({"s": MASK})),
        );
        assert_eq!(d.entries[0].old, Some(json!(MASK)));
        assert!(!serde_json::to_string(&d.entries).unwrap().contains('2'));
    }

    #[test]
    fn past_the_limit_differences_are_counted() {
        let mut d = Diff::with_limit(2);
        d.compare(
            "",
            Some(&json!({"a": 1, "b": 1, "c": 1})),
            Some(&json!({"a": 2, "b": 2, "c": 2})),
            Some(&json!({})),
            Some(&json!({})),
        );
        assert_eq!((d.entries.len(), d.omitted), (2, 1));
    }

    #[test]
    fn the_effective_config_merges_objects_and_replaces_the_rest() {
        let d = json!({"a": {"x": 1, "y": 2}, "b": [1], "c": 1});
        let o = json!({"a": {"y": 3}, "b": [2]});
        assert_eq!(
            effective_config(Some(&d), Some(&o)),
            json!({"a": {"x": 1, "y": 3}, "b": [2], "c": 1})
        );
        assert_eq!(effective_config(None, None), Value::Null);
    }
}
