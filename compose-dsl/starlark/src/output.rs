//! The compose result: plain serde structs that map 1:1 onto the SDK's `ChildSpec`,
//! `DepEdge`, `ValueFlow`, `ProviderConfigSpec` and `Outcome.status`, plus their validation.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Error, LimitKind, Limits};

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

impl ComposeOutput {
    /// Decodes and validates the JSON returned by `compose`.
    pub fn from_json(value: Value, limits: &Limits) -> Result<Self, Error> {
        if crate::json::len(&value) > limits.max_output_bytes {
            return Err(Error::Limit(LimitKind::OutputSize));
        }
        if !value.is_object() {
            return Err(Error::output(
                "compose must return a dict with keys children, edges, configs, status",
            ));
        }
        let mut out: Self =
            serde_json::from_value(value).map_err(|e| Error::output(e.to_string()))?;
        if out.status.as_ref().is_some_and(Value::is_null) {
            out.status = None;
        }
        out.validate(limits)?;
        Ok(out)
    }

    /// Checks caps, uniqueness, edge endpoints, pointers and acyclicity.
    pub fn validate(&self, limits: &Limits) -> Result<(), Error> {
        if self.children.len() > limits.max_children {
            return Err(Error::Limit(LimitKind::Children));
        }
        if self.edges.len() > limits.max_edges {
            return Err(Error::Limit(LimitKind::Edges));
        }
        if self.configs.len() > limits.max_configs {
            return Err(Error::Limit(LimitKind::Configs));
        }
        let mut known = BTreeSet::new();
        for c in &self.children {
            if c.kind.is_empty() || c.name.is_empty() {
                return Err(Error::output("a child needs a non-empty kind and name"));
            }
            if c.kind_version < 1 {
                return Err(Error::output(format!(
                    "child {}/{}: kind_version must be at least 1",
                    c.kind, c.name
                )));
            }
            let r = ResourceRef {
                kind: c.kind.clone(),
                name: c.name.clone(),
            };
            if !known.insert(r) {
                return Err(Error::output(format!(
                    "duplicate child {}/{}",
                    c.kind, c.name
                )));
            }
        }
        let mut seen_edges = BTreeSet::new();
        for e in &self.edges {
            for end in [&e.from, &e.to] {
                if !known.contains(end) {
                    return Err(Error::output(format!(
                        "edge endpoint {}/{} is not a child of this compose",
                        end.kind, end.name
                    )));
                }
            }
            if e.from == e.to {
                return Err(Error::output(format!(
                    "edge from {}/{} to itself",
                    e.from.kind, e.from.name
                )));
            }
            if !seen_edges.insert((&e.from, &e.to)) {
                return Err(Error::output(format!(
                    "duplicate edge {}/{} -> {}/{}",
                    e.from.kind, e.from.name, e.to.kind, e.to.name
                )));
            }
            for v in &e.values {
                if !is_pointer(&v.dependent_field) || !is_pointer(&v.source_field) {
                    return Err(Error::output(format!(
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
                return Err(Error::output(
                    "a config needs a name, a kind and kind_version >= 1",
                ));
            }
            if !names.insert(&c.name) {
                return Err(Error::output(format!("duplicate config {}", c.name)));
            }
        }
        Ok(())
    }
}

fn is_pointer(p: &str) -> bool {
    p.starts_with('/')
}

/// Rejects a dependency cycle among the edges (Kahn's algorithm).
fn check_acyclic(edges: &[DepEdge]) -> Result<(), Error> {
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
        return Err(Error::output("the edges form a dependency cycle"));
    }
    Ok(())
}
