//! Conversions between the wire (`StageTask`, `StageComplete`) and the SDK's value types:
//! `request_from_task`, `complete_from_outcome` and `fail_complete`, as in every SDK.

use std::collections::BTreeMap;

use converge_proto::pb;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::descendants::{Lister, RollupSummary, Subtree};
use crate::json::Json;
use crate::types::{
    CancelReason, ChildSpec, Condition, DepEdge, Operation, Outcome, ProviderConfig,
    ProviderConfigSpec, ReactionRequest, Resource, ResourceRef, Stage, Transition, trigger,
};

/// What a `StageComplete` must echo from its `StageTask`.
#[derive(Debug, Clone)]
pub(crate) struct TaskEcho {
    pub(crate) lease_token: String,
    pub(crate) stage: i32,
    pub(crate) claim_epoch: i64,
}

impl TaskEcho {
    pub(crate) fn of(task: &pb::StageTask) -> Self {
        Self {
            lease_token: task.lease_token.clone(),
            stage: task.stage,
            claim_epoch: task.claim_epoch,
        }
    }
}

/// A version on the wire where 0 means 1 (older senders leave it unset).
pub(crate) fn wire_version(v: i32) -> i32 {
    if v == 0 { 1 } else { v }
}

fn uuid_opt(b: &[u8]) -> Option<Uuid> {
    Uuid::from_slice(b).ok()
}

fn parse_json(b: &[u8]) -> Result<Option<Value>, serde_json::Error> {
    if b.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(b).map(Some)
}

fn json_opt(b: &[u8], what: &str) -> Result<Option<Value>, String> {
    parse_json(b).map_err(|e| format!("malformed {what} JSON: {e}"))
}

pub(crate) fn resource_from_pb(r: pb::Resource, what: &str) -> Result<Resource, String> {
    // The message is formatted only on error: a rollup decodes thousands of these. The
    // documents are checked here and decoded only when a handler reads them (see `Json`).
    let field = |b: bytes::Bytes, name: &str| -> Result<Option<Json>, String> {
        if b.is_empty() {
            return Ok(None);
        }
        Json::from_text(b)
            .map(Some)
            .map_err(|e| format!("malformed {what} {name} JSON: {e}"))
    };
    let spec =
        field(r.spec, "spec")?.unwrap_or_else(|| Json::from(Value::Object(serde_json::Map::new())));
    let status = field(r.status, "status")?;
    Ok(Resource {
        id: uuid_opt(&r.id).unwrap_or_else(Uuid::nil),
        kind: r.kind,
        kind_version: wire_version(r.kind_version),
        name: r.name,
        owner_id: uuid_opt(&r.owner_id),
        root_id: uuid_opt(&r.root_id),
        spec,
        status,
        generation: r.generation,
        synced_gen: r.synced_gen,
        is_ready: r.is_ready,
        phase: r.phase,
        labels: r.labels.into_iter().collect::<BTreeMap<_, _>>(),
        finalizers: r.finalizers,
    })
}

fn resources_from_pb(rs: Vec<pb::Resource>, what: &str) -> Result<Vec<Resource>, String> {
    rs.into_iter().map(|r| resource_from_pb(r, what)).collect()
}

fn required(r: Option<pb::Resource>, what: &str) -> Result<Resource, String> {
    resource_from_pb(
        r.ok_or_else(|| format!("task payload has no {what}"))?,
        what,
    )
}

/// The trigger a stage implies when the broker did not say (older brokers).
fn default_trigger(stage: Stage) -> &'static str {
    match stage {
        Stage::Rollup => trigger::CHILDREN_SETTLED,
        Stage::Delete => trigger::DELETE_REQUESTED,
        Stage::Operate => trigger::OPERATION,
        Stage::React => trigger::REACTOR,
        Stage::Compose | Stage::Work | Stage::Unspecified => trigger::SPEC_CHANGE,
    }
}

/// Decodes a task into a request. An `Err` is a terminal failure message: the task is
/// malformed (no reaction, a payload missing or not matching the stage, bad JSON).
pub(crate) fn request_from_task(
    task: pb::StageTask,
    config: ProviderConfig,
    cancel: CancellationToken,
    deadline: Option<tokio::time::Instant>,
    lister: Option<&Lister>,
) -> Result<ReactionRequest, String> {
    use pb::stage_task::Request as R;

    if task.reaction.is_empty() {
        return Err("task has an empty reaction name".into());
    }
    let stage = Stage::try_from(task.stage)
        .ok()
        .filter(|s| *s != Stage::Unspecified)
        .ok_or_else(|| format!("task has unknown stage {}", task.stage))?;
    let subtree = match (stage, lister) {
        (Stage::Rollup, Some(l)) => l.subtree(&task),
        _ => Subtree::default(),
    };
    let config_override = json_opt(&task.provider_config, "provider_config override")?;
    let mut req = ReactionRequest {
        reaction: task.reaction,
        stage,
        trigger: if task.trigger.is_empty() {
            default_trigger(stage).to_string()
        } else {
            task.trigger
        },
        kind: task.kind,
        kind_version: wire_version(task.kind_version),
        resource: Resource::default(),
        status: None,
        generation: task.generation,
        attempt: task.attempt,
        deadline,
        cancel,
        cancel_reason: CancelReason::default(),
        config,
        config_override,
        bundle_override: task.provider_bundle,
        observed: Vec::new(),
        descendants: Vec::new(),
        descendants_included: false,
        summary: None,
        subtree,
        operation: None,
        transition: None,
        dedup_token: String::new(),
        // Only a compose can be a dry run.
        dry_run: task.dry_run && stage == Stage::Compose,
    };
    let mismatch = || format!("task payload does not match stage {}", stage.as_str_name());
    match (stage, task.request) {
        (Stage::Compose, Some(R::ComposeReq(c))) => {
            req.resource = required(c.root, "root")?;
            req.observed = resources_from_pb(c.observed, "observed")?;
        }
        (Stage::Work, Some(R::WorkReq(w))) => {
            req.resource = required(w.resource, "resource")?;
            req.status = json_opt(&w.status, "status")?;
        }
        (Stage::Rollup, Some(R::RollupReq(r))) => {
            req.resource = required(r.root, "root")?;
            req.descendants = resources_from_pb(r.descendants, "descendant")?;
            req.descendants_included = r.descendants_included;
            req.summary = Some(RollupSummary::from_pb(r.summary.unwrap_or_default()));
            req.status = json_opt(&r.status, "status")?;
        }
        (Stage::Delete, Some(R::DeleteReq(d))) => {
            req.resource = required(d.resource, "resource")?;
        }
        (Stage::Operate, Some(R::OperateReq(o))) => {
            req.resource = required(o.resource, "resource")?;
            let op = o.operation.ok_or("task payload has no operation")?;
            req.operation = Some(Operation {
                resource_id: uuid_opt(&op.resource_id),
                verb: op.verb,
                input: json_opt(&op.input, "operation input")?,
                attempts: op.attempts,
                requested_by: op.requested_by,
            });
        }
        (Stage::React, Some(R::ReactReq(r))) => {
            req.resource = required(r.resource, "resource")?;
            req.transition = Transition::try_from(r.transition)
                .ok()
                .filter(|t| *t != Transition::Unspecified);
            req.dedup_token = r.dedup_token;
        }
        (_, None) => {
            return Err(format!(
                "task has no payload for stage {}",
                stage.as_str_name()
            ));
        }
        _ => return Err(mismatch()),
    }
    Ok(req)
}

fn json_bytes(v: &Option<Value>) -> Result<Vec<u8>, String> {
    match v {
        None => Ok(Vec::new()),
        Some(v) => serde_json::to_vec(v).map_err(|e| format!("cannot encode JSON: {e}")),
    }
}

fn condition_to_pb(c: Condition) -> pb::Condition {
    pb::Condition {
        r#type: c.type_,
        status: c.status,
        reason: c.reason,
        message: c.message,
    }
}

fn ref_to_pb(r: ResourceRef) -> pb::ResourceRef {
    pb::ResourceRef {
        kind: r.kind,
        name: r.name,
    }
}

fn child_to_pb(c: ChildSpec) -> Result<pb::ChildSpec, String> {
    if c.kind_version < 1 {
        return Err(format!(
            "child {}/{} has kind_version {}; it must be at least 1",
            c.kind, c.name, c.kind_version
        ));
    }
    Ok(pb::ChildSpec {
        spec: serde_json::to_vec(&c.spec).map_err(|e| format!("cannot encode child spec: {e}"))?,
        kind: c.kind,
        name: c.name,
        labels: c.labels.into_iter().collect(),
        kind_version: c.kind_version,
    })
}

fn edge_to_pb(e: DepEdge) -> pb::DepEdge {
    pb::DepEdge {
        from: Some(ref_to_pb(e.from)),
        to: Some(ref_to_pb(e.to)),
        values: e
            .values
            .into_iter()
            .map(|v| pb::ValueFlow {
                dependent_field: v.dependent_field,
                source_field: v.source_field,
            })
            .collect(),
    }
}

fn config_to_pb(c: ProviderConfigSpec) -> Result<pb::ProviderConfigSpec, String> {
    if c.kind_version < 1 {
        return Err(format!(
            "provider config {} has kind_version {}; it must be at least 1",
            c.name, c.kind_version
        ));
    }
    Ok(pb::ProviderConfigSpec {
        spec: serde_json::to_vec(&c.spec)
            .map_err(|e| format!("cannot encode provider config spec: {e}"))?,
        name: c.name,
        kind: c.kind,
        is_default: c.is_default,
        kind_version: c.kind_version,
    })
}

/// Encodes a successful outcome. An `Err` is a terminal failure message (an outcome that
/// cannot be encoded, e.g. a child without a version).
pub(crate) fn complete_from_outcome(
    echo: &TaskEcho,
    outcome: Outcome,
) -> Result<pb::StageComplete, String> {
    let mut out = pb::StageComplete {
        lease_token: echo.lease_token.clone(),
        stage: echo.stage,
        claim_epoch: echo.claim_epoch,
        output: json_bytes(&outcome.operation_output)?,
        ..Default::default()
    };
    let status = json_bytes(&outcome.status)?;
    let conditions = outcome
        .conditions
        .into_iter()
        .map(condition_to_pb)
        .collect();
    if echo.stage == Stage::Compose as i32 {
        out.compose = Some(pb::ComposeResult {
            desired: outcome
                .children
                .into_iter()
                .map(child_to_pb)
                .collect::<Result<_, _>>()?,
            edges: outcome.edges.into_iter().map(edge_to_pb).collect(),
            configs: outcome
                .configs
                .into_iter()
                .map(config_to_pb)
                .collect::<Result<_, _>>()?,
            status,
            conditions,
        });
    } else {
        out.status = status;
        out.conditions = conditions;
    }
    Ok(out)
}

/// Encodes a failure. `message` must not be empty (empty means success on the wire).
pub(crate) fn fail_complete(echo: &TaskEcho, message: &str, terminal: bool) -> pb::StageComplete {
    pb::StageComplete {
        lease_token: echo.lease_token.clone(),
        stage: echo.stage,
        claim_epoch: echo.claim_epoch,
        error_message: if message.is_empty() {
            "handler failed".into()
        } else {
            message.into()
        },
        terminal,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_related_resource_decodes_and_names_its_malformed_field() {
        let ok = resource_from_pb(
            pb::Resource {
                status: bytes::Bytes::from_static(br#"{"x":1}"#),
                ..Default::default()
            },
            "descendant",
        )
        .unwrap();
        assert_eq!(
            ok.spec,
            serde_json::json!({}),
            "an empty spec is an empty object"
        );
        assert_eq!(ok.status.unwrap(), serde_json::json!({"x": 1}));
        let bad_spec = pb::Resource {
            spec: bytes::Bytes::from_static(b"{"),
            ..Default::default()
        };
        let e = resource_from_pb(bad_spec, "descendant").unwrap_err();
        assert!(e.starts_with("malformed descendant spec JSON: "), "{e}");
        let bad_status = pb::Resource {
            status: bytes::Bytes::from_static(b"["),
            ..Default::default()
        };
        let e = resource_from_pb(bad_status, "observed").unwrap_err();
        assert!(e.starts_with("malformed observed status JSON: "), "{e}");
    }

    #[test]
    fn dry_run_is_read_from_a_compose_only() {
        let task = |stage: pb::Stage, request| pb::StageTask {
            stage: stage as i32,
            reaction: "r".into(),
            dry_run: true,
            request: Some(request),
            ..Default::default()
        };
        let root = || pb::Resource {
            name: "n".into(),
            ..Default::default()
        };
        let decode = |t| {
            request_from_task(t, ProviderConfig::default(), Default::default(), None, None).unwrap()
        };
        let compose = decode(task(
            Stage::Compose,
            pb::stage_task::Request::ComposeReq(pb::ComposeRequest {
                root: Some(root()),
                ..Default::default()
            }),
        ));
        assert!(compose.dry_run());
        let work = decode(task(
            Stage::Work,
            pb::stage_task::Request::WorkReq(pb::WorkRequest {
                resource: Some(root()),
                ..Default::default()
            }),
        ));
        assert!(!work.dry_run(), "only a compose is a dry run");
    }
}
