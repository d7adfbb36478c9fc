//! The compose result: plain serde structs that map 1:1 onto the SDK's `ChildSpec`,
//! `DepEdge`, `ValueFlow`, `ProviderConfigSpec` and `Outcome.status` (the same shapes as
//! `converge-starlark`'s, kept separate because the two crates share no dependency).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Error;

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
    /// Checks what rendering cannot guarantee by construction: every child has a kind and
    /// a name, `kind_version >= 1`, and `(kind, name)` is unique (a `forEach` whose names do
    /// not differ per item collides here).
    pub(crate) fn validate(&self) -> Result<(), Error> {
        let mut known = BTreeSet::new();
        for c in &self.children {
            if c.kind.is_empty() || c.name.is_empty() {
                return Err(Error::InvalidOutput(
                    "a child needs a non-empty kind and name".into(),
                ));
            }
            if c.kind_version < 1 {
                return Err(Error::InvalidOutput(format!(
                    "child {}/{}: kind_version must be at least 1",
                    c.kind, c.name
                )));
            }
            if !known.insert((&c.kind, &c.name)) {
                return Err(Error::InvalidOutput(format!(
                    "duplicate child {}/{}",
                    c.kind, c.name
                )));
            }
        }
        debug_assert!(
            self.edges.iter().all(|e| e
                .values
                .iter()
                .all(|v| is_pointer(&v.dependent_field) && is_pointer(&v.source_field)))
        );
        Ok(())
    }
}

fn is_pointer(p: &str) -> bool {
    p.starts_with('/')
}
