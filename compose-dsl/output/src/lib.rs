//! The compose result both composers (`converge-cel`, `converge-starlark`) return, defined
//! once: plain serde structs that map 1:1 onto the SDK's `ChildSpec`, `DepEdge`,
//! `ValueFlow`, `ProviderConfigSpec` and `Outcome.status`, plus the shape rules every
//! compose result must meet. Each engine re-exports these types and adds its own limits.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A kind and name naming one child.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceRef {
    /// The kind.
    pub kind: String,
    /// The name.
    pub name: String,
}

/// Copies one upstream status field into one dependent spec field (JSON pointers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValueFlow {
    /// JSON pointer into the dependent's spec, e.g. `/vpc_id`.
    pub dependent_field: String,
    /// JSON pointer into the upstream's status, e.g. `/vpc_id`.
    pub source_field: String,
}

/// One desired child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildSpec {
    /// The child's kind.
    pub kind: String,
    /// The child's kind version, at least 1 (default 1).
    #[serde(default = "one")]
    pub kind_version: i32,
    /// The child's name.
    pub name: String,
    /// The child's spec (default `{}`).
    #[serde(default = "empty_object")]
    pub spec: Value,
    /// The child's labels (default none).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// `from` waits for `to`; `values` copy `to`'s status fields into `from`'s spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DepEdge {
    /// The dependent.
    pub from: ResourceRef,
    /// The dependency (upstream).
    pub to: ResourceRef,
    /// Value flows from `to`'s status into `from`'s spec.
    #[serde(default)]
    pub values: Vec<ValueFlow>,
}

/// A provider config owned by the root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfigSpec {
    /// The config's global name.
    pub name: String,
    /// The kind it configures.
    pub kind: String,
    /// The kind version it configures, at least 1 (default 1).
    #[serde(default = "one")]
    pub kind_version: i32,
    /// Whether it is the kind's default config (default false).
    #[serde(default)]
    pub is_default: bool,
    /// The config spec (default `{}`).
    #[serde(default = "empty_object")]
    pub spec: Value,
}

/// What one compose produced. An empty `children` list on success prunes every child.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComposeOutput {
    /// Desired children, in the order the script produced them.
    #[serde(default)]
    pub children: Vec<ChildSpec>,
    /// Dependency edges between those children.
    #[serde(default)]
    pub edges: Vec<DepEdge>,
    /// Provider configs owned by the root.
    #[serde(default)]
    pub configs: Vec<ProviderConfigSpec>,
    /// The root's status, if the script set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

fn one() -> i32 {
    1
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// A compose result that breaks a shape rule; the message names the offending item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidOutput(String);

impl InvalidOutput {
    fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }

    /// The message, for an engine's own error type.
    pub fn into_message(self) -> String {
        self.0
    }
}

impl ValueFlow {
    /// Whether both fields are JSON pointers (start with `/`).
    pub fn fields_are_pointers(&self) -> bool {
        is_pointer(&self.dependent_field) && is_pointer(&self.source_field)
    }
}

impl ComposeOutput {
    /// Checks the children: each has a non-empty kind and name and `kind_version >= 1`, and
    /// `(kind, name)` is unique.
    pub fn validate_children(&self) -> Result<(), InvalidOutput> {
        self.child_names().map(drop)
    }

    /// Checks every shape rule: the children (as [`Self::validate_children`]); each edge
    /// joins two distinct children of this result, appears once, and its value flows are
    /// JSON pointers; the edges form no cycle; each config has a name, a kind and
    /// `kind_version >= 1`, and its name is unique.
    pub fn validate(&self) -> Result<(), InvalidOutput> {
        let known = self.child_names()?;
        let mut seen_edges = BTreeSet::new();
        for e in &self.edges {
            for end in [&e.from, &e.to] {
                if !known.contains(&(end.kind.as_str(), end.name.as_str())) {
                    return Err(InvalidOutput(format!(
                        "edge endpoint {}/{} is not a child of this compose",
                        end.kind, end.name
                    )));
                }
            }
            if e.from == e.to {
                return Err(InvalidOutput(format!(
                    "edge from {}/{} to itself",
                    e.from.kind, e.from.name
                )));
            }
            if !seen_edges.insert((&e.from, &e.to)) {
                return Err(InvalidOutput(format!(
                    "duplicate edge {}/{} -> {}/{}",
                    e.from.kind, e.from.name, e.to.kind, e.to.name
                )));
            }
            for v in &e.values {
                if !v.fields_are_pointers() {
                    return Err(InvalidOutput(format!(
                        "value flow fields must be JSON pointers starting with '/': {:?} <- {:?}",
                        v.dependent_field, v.source_field
                    )));
                }
            }
        }
        check_acyclic(&self.edges)?;
        let mut names = BTreeSet::new();
        for c in &self.configs {
            if c.name.is_empty() || c.kind.is_empty() || c.kind_version < 1 {
                return Err(InvalidOutput::new(
                    "a config needs a name, a kind and kind_version >= 1",
                ));
            }
            if !names.insert(&c.name) {
                return Err(InvalidOutput(format!("duplicate config {}", c.name)));
            }
        }
        Ok(())
    }

    /// The children's `(kind, name)`s, after checking each child.
    fn child_names(&self) -> Result<BTreeSet<(&str, &str)>, InvalidOutput> {
        let mut known = BTreeSet::new();
        for c in &self.children {
            if c.kind.is_empty() || c.name.is_empty() {
                return Err(InvalidOutput::new(
                    "a child needs a non-empty kind and name",
                ));
            }
            if c.kind_version < 1 {
                return Err(InvalidOutput(format!(
                    "child {}/{}: kind_version must be at least 1",
                    c.kind, c.name
                )));
            }
            if !known.insert((c.kind.as_str(), c.name.as_str())) {
                return Err(InvalidOutput(format!(
                    "duplicate child {}/{}",
                    c.kind, c.name
                )));
            }
        }
        Ok(known)
    }
}

fn is_pointer(p: &str) -> bool {
    p.starts_with('/')
}

/// Rejects a dependency cycle among the edges (Kahn's algorithm).
fn check_acyclic(edges: &[DepEdge]) -> Result<(), InvalidOutput> {
    let mut indegree: HashMap<&ResourceRef, usize> = HashMap::new();
    let mut out: HashMap<&ResourceRef, Vec<&ResourceRef>> = HashMap::new();
    for e in edges {
        indegree.entry(&e.to).or_default();
        *indegree.entry(&e.from).or_default() += 1;
        out.entry(&e.to).or_default().push(&e.from);
    }
    let mut ready: Vec<&ResourceRef> = indegree
        .iter()
        .filter(|(_, d)| **d == 0)
        .map(|(r, _)| *r)
        .collect();
    let mut visited = 0;
    while let Some(r) = ready.pop() {
        visited += 1;
        for next in out.get(r).into_iter().flatten() {
            let d = indegree.get_mut(next).expect("every endpoint has a degree");
            *d -= 1;
            if *d == 0 {
                ready.push(next);
            }
        }
    }
    if visited != indegree.len() {
        return Err(InvalidOutput::new("the edges form a dependency cycle"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn output(value: Value) -> ComposeOutput {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn defaults_fill_kind_version_spec_and_labels() {
        let out = output(json!({"children": [{"kind": "vpc", "name": "a"}]}));
        let c = &out.children[0];
        assert_eq!((c.kind_version, &c.spec), (1, &json!({})));
        assert!(c.labels.is_empty());
        assert!(out.validate().is_ok());
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let r = serde_json::from_value::<ComposeOutput>(json!({"childs": []}));
        assert!(r.is_err());
    }

    #[test]
    fn duplicate_children_fail_both_checks() {
        let out = output(json!({"children": [
            {"kind": "vpc", "name": "a"}, {"kind": "vpc", "name": "a"}
        ]}));
        let want = InvalidOutput::new("duplicate child vpc/a");
        assert_eq!(out.validate_children(), Err(want.clone()));
        assert_eq!(out.validate(), Err(want));
    }

    #[test]
    fn a_cycle_fails_validate_but_not_validate_children() {
        let out = output(json!({
            "children": [{"kind": "k", "name": "a"}, {"kind": "k", "name": "b"}],
            "edges": [
                {"from": {"kind": "k", "name": "a"}, "to": {"kind": "k", "name": "b"}},
                {"from": {"kind": "k", "name": "b"}, "to": {"kind": "k", "name": "a"}}
            ]
        }));
        assert!(out.validate_children().is_ok());
        assert_eq!(
            out.validate().map_err(InvalidOutput::into_message),
            Err("the edges form a dependency cycle".to_string())
        );
    }
}
