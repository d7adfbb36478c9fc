//! Conversions between the SDK's task vocabulary and the `converge:handler` world's records.
//!
//! The world carries every per-kind document (spec, status, config, operation input and
//! output) as a JSON string, so these conversions serialise on the way in and parse on the
//! way out. The host has already checked that every JSON string in an outcome parses (its
//! outcome validation), so a parse failure here is still reported, never unwrapped.

use converge_sdk::{
    ChildSpec, Condition, DepEdge, Operation, Outcome, ProviderConfigSpec, ReactionRequest,
    Resource, ResourceRef, Stage, Transition, ValueFlow,
};
use converge_wasm_host::wit;
use serde_json::Value;

/// Builds the world's request for one task; `config` is the JSON handed to the guest as its
/// effective config (`None` when the kind has none).
pub fn request(
    req: &ReactionRequest,
    config: Option<&Value>,
    descendants: &[Resource],
) -> wit::Request {
    wit::Request {
        reaction: req.reaction.clone(),
        stage: stage(req.stage),
        trigger: req.trigger.clone(),
        kind: req.kind.clone(),
        kind_version: req.kind_version,
        target: row(&req.resource),
        status: req.status.as_ref().map(Value::to_string),
        generation: req.generation,
        attempt: req.attempt,
        config: config.map(Value::to_string),
        observed: req.observed.iter().map(row).collect(),
        descendants: descendants.iter().map(row).collect(),
        operation: req.operation.as_ref().map(operation),
        transition: req.transition.and_then(transition),
        dedup_token: req.dedup_token.clone(),
    }
}

/// The SDK's stage as the world's enum. `Unspecified` never reaches a provider (the SDK
/// refuses such a task); it maps to `work` only so the conversion is total.
fn stage(s: Stage) -> wit::Stage {
    match s {
        Stage::Compose => wit::Stage::Compose,
        Stage::Rollup => wit::Stage::Rollup,
        Stage::Delete => wit::Stage::Delete,
        Stage::Operate => wit::Stage::Operate,
        Stage::React => wit::Stage::React,
        Stage::Work | Stage::Unspecified => wit::Stage::Work,
    }
}

fn transition(t: Transition) -> Option<wit::Transition> {
    Some(match t {
        Transition::Created => wit::Transition::Created,
        Transition::Synced => wit::Transition::Synced,
        Transition::Degraded => wit::Transition::Degraded,
        Transition::Failed => wit::Transition::Failed,
        Transition::Deleted => wit::Transition::Deleted,
        Transition::Unspecified => return None,
    })
}

fn row(r: &Resource) -> wit::ResourceRow {
    wit::ResourceRow {
        id: r.id.to_string(),
        kind: r.kind.clone(),
        kind_version: r.kind_version,
        name: r.name.clone(),
        owner_id: r.owner_id.map(|u| u.to_string()),
        root_id: r.root_id.map(|u| u.to_string()),
        spec: r.spec.to_string(),
        status: r.status.as_ref().map(ToString::to_string),
        generation: r.generation,
        synced_gen: r.synced_gen,
        is_ready: r.is_ready,
        phase: r.phase.clone(),
        labels: r
            .labels
            .iter()
            .map(|(k, v)| wit::Label {
                key: k.clone(),
                value: v.clone(),
            })
            .collect(),
        finalizers: r.finalizers.clone(),
    }
}

fn operation(o: &Operation) -> wit::Operation {
    wit::Operation {
        resource_id: o.resource_id.map(|u| u.to_string()),
        verb: o.verb.clone(),
        input: o.input.as_ref().map(Value::to_string),
        attempts: o.attempts,
        requested_by: o.requested_by.clone(),
    }
}

/// Parses one JSON string of an outcome, naming the field on failure.
fn json(field: &str, s: &str) -> Result<Value, String> {
    serde_json::from_str(s).map_err(|e| format!("{field} is not valid JSON: {e}"))
}

/// Converts a (validated) outcome into the SDK's.
pub fn outcome(o: wit::Outcome) -> Result<Outcome, String> {
    let children = o
        .children
        .into_iter()
        .map(|c| {
            Ok(ChildSpec {
                spec: json(&format!("child {}/{} spec", c.kind, c.name), &c.spec)?,
                kind: c.kind,
                kind_version: c.kind_version,
                name: c.name,
                labels: c.labels.into_iter().map(|l| (l.key, l.value)).collect(),
            })
        })
        .collect::<Result<_, String>>()?;
    let configs = o
        .configs
        .into_iter()
        .map(|c| {
            Ok(ProviderConfigSpec {
                spec: json(&format!("config {} spec", c.name), &c.spec)?,
                name: c.name,
                kind: c.kind,
                kind_version: c.kind_version,
                is_default: c.is_default,
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Outcome {
        status: o.status.as_deref().map(|s| json("status", s)).transpose()?,
        conditions: o
            .conditions
            .into_iter()
            .map(|c| Condition {
                type_: c.condition_type,
                status: match c.status {
                    wit::ConditionStatus::True => "True",
                    wit::ConditionStatus::False => "False",
                    wit::ConditionStatus::Unknown => "Unknown",
                }
                .to_string(),
                reason: c.reason,
                message: c.message,
            })
            .collect(),
        children,
        edges: o
            .edges
            .into_iter()
            .map(|e| DepEdge {
                from: ResourceRef::new(e.dependent.kind, e.dependent.name),
                to: ResourceRef::new(e.dependency.kind, e.dependency.name),
                values: e
                    .values
                    .into_iter()
                    .map(|v| ValueFlow::new(v.dependent_field, v.source_field))
                    .collect(),
            })
            .collect(),
        configs,
        operation_output: o
            .operation_output
            .as_deref()
            .map(|s| json("operation output", s))
            .transpose()?,
    })
}
