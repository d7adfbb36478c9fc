//! `netbom`: a composer that turns a small network bill of materials into one VPC and its
//! subnets, each subnet waiting for the VPC and receiving its `vpc_id`.
//!
//! The same semantics are implemented in Starlark, CEL and Python for a differential test,
//! so every detail here is part of the contract: the whole spec is validated before
//! `enabled` is looked at (a malformed spec fails the same way whether or not it is
//! enabled), fields are checked in the order prefix, region, cidr, enabled, subnets (then
//! each subnet's name and cidr, in order), children and edges come out in subnet order, and
//! a disabled spec gives an outcome with no status and no children.
//!
//! Fuel is the guest's CPU budget, so the per-subnet work avoids what dominated it when
//! measured: `format!` (field names are only built for an error) and a `serde_json::Value`
//! map per child spec (the specs are written directly, strings escaped by serde_json).

use serde_json::{Map, Value};

use crate::converge::handler::types::{
    ChildSpec, DepEdge, HandlerError, Outcome, Request, ResourceRef, Stage, ValueFlow,
};
use crate::{empty, spec};

/// One subnet of the bill.
struct Subnet<'a> {
    name: &'a str,
    cidr: &'a str,
}

/// The validated spec.
struct Bill<'a> {
    prefix: &'a str,
    region: &'a str,
    cidr: &'a str,
    enabled: bool,
    subnets: Vec<Subnet<'a>>,
}

/// A malformed spec cannot get better by retrying: terminal, naming the field.
fn invalid(field: &str, expected: &str, value: Option<&Value>) -> HandlerError {
    HandlerError::Terminal(match value {
        None => format!("netbom: spec.{field} is missing"),
        Some(v) => format!("netbom: spec.{field} must be {expected}, got {v}"),
    })
}

/// The string at `key`; `field` names it (as a path from the spec) in the error.
fn string<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    field: impl FnOnce() -> String,
) -> Result<&'a str, HandlerError> {
    let v = obj.get(key);
    v.and_then(Value::as_str)
        .ok_or_else(|| invalid(&field(), "a string", v))
}

fn parse_bill(spec: &Value) -> Result<Bill<'_>, HandlerError> {
    let obj = spec.as_object().ok_or_else(|| {
        HandlerError::Terminal(format!("netbom: spec must be an object, got {spec}"))
    })?;
    let prefix = string(obj, "prefix", || "prefix".into())?;
    let region = string(obj, "region", || "region".into())?;
    let cidr = string(obj, "cidr", || "cidr".into())?;
    let enabled = obj.get("enabled");
    let enabled = enabled
        .and_then(Value::as_bool)
        .ok_or_else(|| invalid("enabled", "a boolean", enabled))?;
    let subnets = obj.get("subnets");
    let subnets = subnets
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("subnets", "an array", subnets))?
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let s = s
                .as_object()
                .ok_or_else(|| invalid(&format!("subnets[{i}]"), "an object", Some(s)))?;
            Ok(Subnet {
                name: string(s, "name", || format!("subnets[{i}].name"))?,
                cidr: string(s, "cidr", || format!("subnets[{i}].cidr"))?,
            })
        })
        .collect::<Result<Vec<_>, HandlerError>>()?;
    Ok(Bill {
        prefix,
        region,
        cidr,
        enabled,
        subnets,
    })
}

/// `s` as a JSON string literal.
fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("a str always serializes")
}

/// A JSON object from constant keys (which need no escaping) and JSON-encoded values, in
/// the order given (sorted, as serde_json would write them).
fn object(fields: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(64);
    out.push('{');
    for (i, (key, value)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('"');
        out.push_str(key);
        out.push_str("\":");
        out.push_str(value);
    }
    out.push('}');
    out
}

/// `<prefix>-<suffix>`.
fn child_name(prefix: &str, suffix: &str) -> String {
    let mut name = String::with_capacity(prefix.len() + 1 + suffix.len());
    name.push_str(prefix);
    name.push('-');
    name.push_str(suffix);
    name
}

/// Serves `netbom`: compose builds the network; every other stage has nothing to do.
pub(crate) fn reconcile(req: &Request) -> Result<Outcome, HandlerError> {
    if req.stage != Stage::Compose {
        return Ok(empty());
    }
    let spec = spec(req)?;
    let bill = parse_bill(&spec)?;
    if !bill.enabled {
        return Ok(empty());
    }
    let region = quote(bill.region);
    let vpc = ResourceRef {
        kind: "vpc".into(),
        name: child_name(bill.prefix, "vpc"),
    };
    let mut children = Vec::with_capacity(bill.subnets.len() + 1);
    children.push(ChildSpec {
        kind: vpc.kind.clone(),
        kind_version: 1,
        name: vpc.name.clone(),
        spec: object(&[("cidr", &quote(bill.cidr)), ("region", &region)]),
        labels: Vec::new(),
    });
    let mut edges = Vec::with_capacity(bill.subnets.len());
    for subnet in &bill.subnets {
        let name = child_name(bill.prefix, subnet.name);
        children.push(ChildSpec {
            kind: "subnet".into(),
            kind_version: 1,
            name: name.clone(),
            // `vpc_id` is filled by the value flow once the VPC reports it.
            spec: object(&[
                ("cidr", &quote(subnet.cidr)),
                ("region", &region),
                ("vpc_id", "null"),
            ]),
            labels: Vec::new(),
        });
        edges.push(DepEdge {
            dependent: ResourceRef {
                kind: "subnet".into(),
                name,
            },
            dependency: vpc.clone(),
            values: vec![ValueFlow {
                dependent_field: "/vpc_id".into(),
                source_field: "/vpc_id".into(),
            }],
        });
    }
    Ok(Outcome {
        status: Some(object(&[("subnets", &bill.subnets.len().to_string())])),
        children,
        edges,
        ..empty()
    })
}
