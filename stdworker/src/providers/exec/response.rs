//! The response document an exec handler writes on stdout, and its translation to an SDK
//! `Outcome`.
//!
//! `{status, conditions:[{type,status,reason,message}], children:[{kind,kind_version,name,
//! spec,labels}], edges:[{from:{kind,name},to:{kind,name},values:[{dependent_field,
//! source_field}]}], configs:[{name,kind,kind_version,is_default,spec}], output}` — every
//! field optional. Empty (or all-whitespace) stdout is an empty outcome. Unknown fields are
//! rejected so a misspelt `"stauts"` fails loudly instead of silently dropping the status.

use std::collections::BTreeMap;

use converge_sdk::{
    ChildSpec, Condition, DepEdge, Outcome, ProviderConfigSpec, ResourceRef, ValueFlow,
};
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Response {
    #[serde(default)]
    status: Option<Value>,
    #[serde(default)]
    conditions: Vec<ConditionDoc>,
    #[serde(default)]
    children: Vec<ChildDoc>,
    #[serde(default)]
    edges: Vec<EdgeDoc>,
    #[serde(default)]
    configs: Vec<ConfigDoc>,
    #[serde(default)]
    output: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConditionDoc {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
}

fn one() -> i32 {
    1
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChildDoc {
    kind: String,
    #[serde(default = "one")]
    kind_version: i32,
    name: String,
    #[serde(default = "empty_object")]
    spec: Value,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RefDoc {
    kind: String,
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowDoc {
    dependent_field: String,
    source_field: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EdgeDoc {
    from: RefDoc,
    to: RefDoc,
    #[serde(default)]
    values: Vec<FlowDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigDoc {
    name: String,
    kind: String,
    #[serde(default = "one")]
    kind_version: i32,
    #[serde(default)]
    is_default: bool,
    #[serde(default = "empty_object")]
    spec: Value,
}

/// A bare field name (`"index"`) becomes the one-segment JSON pointer `/index`, escaped per
/// RFC 6901; anything already starting with `/` (or empty, the whole document) is kept.
pub fn to_pointer(field: &str) -> String {
    if field.is_empty() || field.starts_with('/') {
        field.to_string()
    } else {
        format!("/{}", field.replace('~', "~0").replace('/', "~1"))
    }
}

/// Parses a handler's stdout. An `Err` is the reason it is unusable (the caller makes it a
/// terminal failure: running the same handler on the same input again gives the same bytes).
pub fn parse_response(stdout: &[u8]) -> Result<Outcome, String> {
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return Ok(Outcome::default());
    }
    let doc: Value =
        serde_json::from_slice(stdout).map_err(|e| format!("stdout is not valid JSON: {e}"))?;
    if !doc.is_object() {
        return Err("stdout must be a JSON object".into());
    }
    let r = Response::deserialize(doc).map_err(|e| format!("invalid response: {e}"))?;
    let mut out = Outcome {
        status: r.status,
        operation_output: r.output,
        ..Outcome::default()
    };
    for c in r.conditions {
        if c.type_.is_empty() {
            return Err("invalid response: a condition has an empty type".into());
        }
        if !matches!(c.status.as_str(), "True" | "False" | "Unknown") {
            return Err(format!(
                "invalid response: condition {:?} has status {:?} (expected True, False or Unknown)",
                c.type_, c.status
            ));
        }
        out.conditions
            .push(Condition::new(c.type_, c.status, c.reason, c.message));
    }
    for c in r.children {
        if c.kind_version < 1 {
            return Err(format!(
                "invalid response: child {}/{} has kind_version {} (must be at least 1)",
                c.kind, c.name, c.kind_version
            ));
        }
        out.children.push(ChildSpec {
            kind: c.kind,
            kind_version: c.kind_version,
            name: c.name,
            spec: c.spec,
            labels: c.labels,
        });
    }
    for e in r.edges {
        out.edges.push(DepEdge {
            from: ResourceRef::new(e.from.kind, e.from.name),
            to: ResourceRef::new(e.to.kind, e.to.name),
            values: e
                .values
                .into_iter()
                .map(|v| {
                    ValueFlow::new(to_pointer(&v.dependent_field), to_pointer(&v.source_field))
                })
                .collect(),
        });
    }
    for c in r.configs {
        if c.kind_version < 1 {
            return Err(format!(
                "invalid response: config {} has kind_version {} (must be at least 1)",
                c.name, c.kind_version
            ));
        }
        out.configs.push(ProviderConfigSpec {
            name: c.name,
            kind: c.kind,
            kind_version: c.kind_version,
            is_default: c.is_default,
            spec: c.spec,
        });
    }
    Ok(out)
}
