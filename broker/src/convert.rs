//! Conversions between queue rows and wire frames, and validation of what workers send.
//! Everything a worker sends is untrusted: malformed JSON becomes a terminal failure of that
//! task, never a broker error.

use std::collections::HashMap;

use bytes::Bytes;

use converge_proto::pb;

use converge_engine::{
    db::{
        compose::RelatedRow,
        descendants::{Summary, SummaryRef},
        queue::{ClaimedTask, Completion, LeaseKey},
    },
    ids::KindPair,
    words::{Phase, Stage, TaskTrigger, Transition},
};

/// Largest status, output or conditions document the broker stores for one task.
pub const MAX_RESULT_JSON_BYTES: usize = 4 * 1024 * 1024;
/// Longest failure message stored.
pub const MAX_ERROR_CHARS: usize = 4096;

/// A kind's task deadline (`kind_config.task_deadline_secs`; 0 or less: none).
pub fn kind_deadline(secs: i32) -> Option<std::time::Duration> {
    u64::try_from(secs)
        .ok()
        .filter(|s| *s > 0)
        .map(std::time::Duration::from_secs)
}

/// `StageTask.task_deadline_ms` for a remaining budget (rule 6): at least 1 ms when there is a
/// deadline, 0 when there is none.
pub fn deadline_ms(budget: Option<std::time::Duration>) -> i64 {
    budget.map_or(0, |b| {
        i64::try_from(b.as_millis()).unwrap_or(i64::MAX).max(1)
    })
}

fn json_bytes(v: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

fn labels(v: &serde_json::Value) -> HashMap<String, String> {
    v.as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| {
                    let s = match v {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), s)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A resource id on the wire: its 16 bytes, or none.
fn uuid_wire(id: Option<uuid::Uuid>) -> Bytes {
    id.map(|u| Bytes::copy_from_slice(u.as_bytes()))
        .unwrap_or_default()
}

/// The wire view of the resource a claimed task acts on.
pub fn resource(t: &ClaimedTask, kind: &str, kind_version: i32) -> pb::Resource {
    pb::Resource {
        id: uuid_wire(Some(t.resource_id)),
        kind: kind.to_string(),
        name: t.name.clone(),
        owner_id: uuid_wire(t.owner_id),
        root_id: uuid_wire(t.root_id),
        spec: json_bytes(&t.spec).into(),
        status: t
            .status
            .as_ref()
            .map(|s| json_bytes(s).into())
            .unwrap_or_default(),
        generation: t.r_generation,
        synced_gen: t.synced_gen,
        is_ready: t.is_ready,
        finalizers: t.finalizers.clone(),
        deletion_requested_at_ms: t.deletion_requested_at_ms,
        frozen_until_ms: t.frozen_until_ms,
        quarantined: t.phase == Phase::Quarantined,
        labels: labels(&t.labels),
        kind_version,
        phase: t.phase.to_string(),
    }
}

/// The wire view of a child or descendant carried in a compose or rollup request.
pub fn related_resource(r: RelatedRow) -> pb::Resource {
    pb::Resource {
        id: uuid_wire(Some(r.id)),
        labels: labels(&r.labels),
        kind: r.kind,
        name: r.name,
        owner_id: uuid_wire(r.owner_id),
        root_id: uuid_wire(r.root_id),
        // The text PostgreSQL printed becomes the frame's bytes as is (no copy).
        spec: Bytes::from(r.spec),
        status: r.status.map(Bytes::from).unwrap_or_default(),
        generation: r.generation,
        synced_gen: r.synced_gen,
        is_ready: r.is_ready,
        kind_version: r.kind_version,
        phase: r.phase.to_string(),
        ..Default::default()
    }
}

/// The wire view of a resource snapshot taken at a lifecycle transition (`to_jsonb` of its
/// row), for a reactor.
pub fn snapshot_resource(v: &serde_json::Value) -> pb::Resource {
    let uuid_bytes = |k: &str| uuid_wire(v[k].as_str().and_then(|s| uuid::Uuid::parse_str(s).ok()));
    let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    let json = |k: &str| match &v[k] {
        serde_json::Value::Null => Bytes::new(),
        x => Bytes::from(json_bytes(x)),
    };
    let finalizers = v["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let phase = text("phase");
    pb::Resource {
        id: uuid_bytes("id"),
        kind: text("kind"),
        name: text("name"),
        owner_id: uuid_bytes("owner_id"),
        root_id: uuid_bytes("root_id"),
        spec: json("spec"),
        status: json("status"),
        generation: v["generation"].as_i64().unwrap_or(0),
        synced_gen: v["synced_gen"].as_i64().unwrap_or(0),
        is_ready: v["is_ready"].as_bool().unwrap_or(false),
        finalizers,
        quarantined: Phase::parse(&phase) == Some(Phase::Quarantined),
        labels: labels(&v["labels"]),
        kind_version: i32::try_from(v["kind_version"].as_i64().unwrap_or(1)).unwrap_or(1),
        phase,
        ..Default::default()
    }
}

/// The wire enum of a lifecycle transition.
pub fn transition(t: Transition) -> pb::Transition {
    match t {
        Transition::Created => pb::Transition::Created,
        Transition::Synced => pb::Transition::Synced,
        Transition::Degraded => pb::Transition::Degraded,
        Transition::Failed => pb::Transition::Failed,
        Transition::Deleted => pb::Transition::Deleted,
    }
}

/// The stage word of a wire stage number (`StageTask.stage`, `StageResult.stage`), `None`
/// for `STAGE_UNSPECIFIED` or a number this build does not know.
pub fn stage_word(stage: i32) -> Option<Stage> {
    match pb::Stage::try_from(stage).ok()? {
        pb::Stage::Unspecified => None,
        pb::Stage::Compose => Some(Stage::Compose),
        pb::Stage::Work => Some(Stage::Work),
        pb::Stage::Rollup => Some(Stage::Rollup),
        pb::Stage::Delete => Some(Stage::Delete),
        pb::Stage::Operate => Some(Stage::Operate),
        pb::Stage::React => Some(Stage::React),
    }
}

/// A STAGE_REACT task delivering `d` to reactor `pair`'s `reaction`.
pub fn react_task(
    d: &converge_engine::db::queue::ClaimedDelivery,
    pair: &KindPair,
    reaction: &str,
    manifest_version: i64,
) -> pb::StageTask {
    pb::StageTask {
        stage: pb::Stage::React as i32,
        kind: pair.kind.clone(),
        kind_version: pair.version,
        resource_id: d.resource_id.as_bytes().to_vec(),
        generation: d.generation,
        reaction: reaction.to_string(),
        lease_token: d.claim_token.to_string(),
        claim_epoch: d.claim_epoch,
        manifest_version,
        request: Some(pb::stage_task::Request::ReactReq(pb::ReactRequest {
            resource: Some(snapshot_resource(&d.resource)),
            transition: transition(d.transition) as i32,
            dedup_token: d.dedup_token(),
        })),
        trigger: TaskTrigger::Reactor.to_string(),
        attempt: d.attempts,
        task_deadline_ms: deadline_ms(kind_deadline(d.task_deadline_secs)),
        ..Default::default()
    }
}

/// Builds a task of `stage` for a claimed reconcile; `request` is the stage's payload.
pub fn stage_task(
    t: &ClaimedTask,
    pair: &KindPair,
    stage: pb::Stage,
    reaction: &str,
    manifest_version: i64,
    deadline_ms: i64,
    request: pb::stage_task::Request,
) -> pb::StageTask {
    pb::StageTask {
        stage: stage as i32,
        kind: pair.kind.clone(),
        kind_version: pair.version,
        resource_id: t.resource_id.as_bytes().to_vec(),
        generation: t.generation,
        reaction: reaction.to_string(),
        lease_token: t.lease_token.to_string(),
        claim_epoch: t.claim_epoch,
        manifest_version,
        provider_config: t
            .provider_config
            .as_ref()
            .map(json_bytes)
            .unwrap_or_default(),
        provider_bundle: t.provider_bundle.clone().unwrap_or_default(),
        task_deadline_ms: deadline_ms,
        request: Some(request),
        trigger: t.trigger.to_string(),
        attempt: t.attempt,
        dry_run: false,
    }
}

/// The request payload of `stage` for the claimed resource. `status` is what earlier stages
/// of this reconcile reported; `related` the observed children (compose) or descendants
/// (rollup of the full form); `summary` a rollup's summary and whether `related` is the
/// whole subtree (the full form).
pub fn stage_request(
    t: &ClaimedTask,
    pair: &KindPair,
    stage: pb::Stage,
    status: Option<&serde_json::Value>,
    related: Vec<pb::Resource>,
    summary: Option<(pb::RollupSummary, bool)>,
) -> pb::stage_task::Request {
    use pb::stage_task::Request;
    let res = resource(t, &pair.kind, pair.version);
    let status = status
        .map(json_bytes)
        .unwrap_or_else(|| res.status.to_vec());
    match stage {
        pb::Stage::Compose => Request::ComposeReq(pb::ComposeRequest {
            root: Some(res),
            observed: related,
            ..Default::default()
        }),
        pb::Stage::Rollup => {
            let (summary, full) = summary.unwrap_or_default();
            Request::RollupReq(pb::RollupRequest {
                root: Some(res),
                descendants: related,
                status,
                summary: Some(summary),
                descendants_included: full,
            })
        }
        pb::Stage::Delete => Request::DeleteReq(pb::DeleteRequest {
            resource: Some(res),
        }),
        _ => Request::WorkReq(pb::WorkRequest {
            resource: Some(res),
            status,
        }),
    }
}

/// A rollup summary on the wire.
pub fn rollup_summary(s: &Summary) -> pb::RollupSummary {
    let refs = |v: &[SummaryRef]| {
        v.iter()
            .map(|r| pb::ResourceRef {
                kind: r.kind.clone(),
                name: r.name.clone(),
            })
            .collect()
    };
    pb::RollupSummary {
        total: s.total,
        by_phase: s
            .by_phase
            .iter()
            .map(|(p, n)| (p.to_string(), *n))
            .collect(),
        by_kind: s.by_kind.clone().into_iter().collect(),
        failed: refs(&s.failed),
        not_ready: refs(&s.not_ready),
        failed_total: s.failed_total,
        not_ready_total: s.not_ready_total,
    }
}

/// The request payload of an operate task: the resource and the operation to run.
pub fn operate_request(
    t: &ClaimedTask,
    pair: &KindPair,
    op: &converge_engine::db::queue::StartedOperation,
) -> pb::stage_task::Request {
    pb::stage_task::Request::OperateReq(pb::OperateRequest {
        resource: Some(resource(t, &pair.kind, pair.version)),
        operation: Some(pb::Operation {
            resource_id: t.resource_id.as_bytes().to_vec(),
            verb: op.verb.clone(),
            input: op.input.as_ref().map(json_bytes).unwrap_or_default(),
            attempts: op.attempts,
            requested_by: op.requested_by.clone(),
        }),
    })
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A failure completion for `key` (deadline, protocol violation, bad payload).
pub fn failure(key: LeaseKey, message: impl Into<String>, terminal: bool) -> Completion {
    Completion {
        key,
        ok: false,
        terminal,
        error_message: Some(truncate(&message.into(), MAX_ERROR_CHARS)),
        status: None,
        conditions: None,
        health_ok: true,
        advance: true,
        output: None,
        composite: false,
    }
}

fn parse_json(field: &str, b: &[u8]) -> Result<Option<serde_json::Value>, String> {
    if b.is_empty() {
        return Ok(None);
    }
    if b.len() > MAX_RESULT_JSON_BYTES {
        return Err(format!(
            "{field} is {} bytes, over the {MAX_RESULT_JSON_BYTES}-byte limit",
            b.len()
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(b).map_err(|e| format!("{field} is not valid JSON: {e}"))?;
    // PostgreSQL's jsonb cannot store NUL characters; refuse them here, per task.
    if std::str::from_utf8(b).is_ok_and(|s| s.contains("\\u0000")) {
        return Err(format!(
            "{field} contains a NUL character (\\u0000), which cannot be stored"
        ));
    }
    Ok(Some(v))
}

/// A stage's validated status and conditions.
#[derive(Debug, Clone, Default)]
pub struct StageOutcome {
    /// Status JSON, if reported.
    pub status: Option<serde_json::Value>,
    /// Conditions as JSON objects (type, status, reason, message).
    pub conditions: Vec<serde_json::Value>,
}

/// Validates a status document and conditions reported by a worker.
pub fn stage_outcome(status: &[u8], conditions: &[pb::Condition]) -> Result<StageOutcome, String> {
    let status = parse_json("status", status)?;
    let mut conds = Vec::with_capacity(conditions.len());
    for c in conditions {
        if c.r#type.is_empty() {
            continue;
        }
        let st = match c.status.as_str() {
            "True" | "False" | "Unknown" => c.status.as_str(),
            _ => "Unknown",
        };
        conds.push(serde_json::json!({
            "type": truncate(&c.r#type, 128),
            "status": st,
            "reason": truncate(&c.reason.replace('\0', ""), 256),
            "message": truncate(&c.message.replace('\0', ""), MAX_ERROR_CHARS),
        }));
    }
    Ok(StageOutcome {
        status,
        conditions: conds,
    })
}

/// Merges `later` conditions over `acc` (same type: the later one wins).
pub fn merge_conditions(acc: &mut Vec<serde_json::Value>, later: Vec<serde_json::Value>) {
    for c in later {
        match acc.iter_mut().find(|x| x["type"] == c["type"]) {
            Some(slot) => *slot = c,
            None => acc.push(c),
        }
    }
}

/// Health from conditions: only a Ready condition that is not "True" makes it unhealthy.
pub fn healthy(conditions: &[serde_json::Value]) -> bool {
    !conditions
        .iter()
        .any(|c| c["type"] == "Ready" && c["status"] != "True")
}

/// A successful completion carrying `status` and `conditions`.
pub fn success(
    key: LeaseKey,
    status: Option<serde_json::Value>,
    conditions: Vec<serde_json::Value>,
    advance: bool,
) -> Completion {
    let health_ok = healthy(&conditions);
    Completion {
        key,
        ok: true,
        terminal: false,
        error_message: None,
        status,
        conditions: (!conditions.is_empty()).then_some(serde_json::Value::Array(conditions)),
        health_ok,
        advance,
        output: None,
        composite: false,
    }
}

/// Validates a worker's StageComplete for the task `key` (sent as `expected_stage`) and turns
/// it into a completion to record. Anything malformed is a terminal failure of the task.
pub fn completion(key: LeaseKey, expected_stage: i32, msg: &pb::StageComplete) -> Completion {
    if !msg.error_message.is_empty() {
        return failure(key, msg.error_message.clone(), msg.terminal);
    }
    if expected_stage != 0 && msg.stage != expected_stage {
        return failure(
            key,
            format!(
                "worker answered stage {} for a stage {} task",
                msg.stage, expected_stage
            ),
            true,
        );
    }
    if msg.stage == pb::Stage::Operate as i32 {
        return match parse_json("output", &msg.output) {
            Ok(output) => Completion {
                output,
                ..success(key, None, Vec::new(), true)
            },
            Err(e) => failure(key, format!("invalid result: {e}"), true),
        };
    }
    match stage_outcome(&msg.status, &msg.conditions) {
        Ok(o) => success(key, o.status, o.conditions, true),
        Err(e) => failure(key, format!("invalid result: {e}"), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use converge_engine::ids::{ClaimEpoch, LeaseToken, ResourceId, ShardId};

    fn key() -> LeaseKey {
        LeaseKey {
            resource_id: ResourceId(uuid::Uuid::nil()),
            shard_id: ShardId(0),
            task_type: converge_engine::words::TaskType::Reconcile,
            lease_token: LeaseToken(uuid::Uuid::nil()),
            claim_epoch: ClaimEpoch(1),
        }
    }

    #[test]
    fn success_with_ready_false_is_unhealthy() {
        let msg = pb::StageComplete {
            stage: pb::Stage::Work as i32,
            status: br#"{"a":1}"#.to_vec(),
            conditions: vec![pb::Condition {
                r#type: "Ready".into(),
                status: "False".into(),
                reason: "Down".into(),
                message: "db unreachable".into(),
            }],
            ..Default::default()
        };
        let c = completion(key(), pb::Stage::Work as i32, &msg);
        assert!(c.ok);
        assert!(!c.health_ok);
        assert_eq!(c.status, Some(serde_json::json!({"a": 1})));
    }

    #[test]
    fn bad_json_and_nul_are_terminal_failures() {
        for body in [&b"{nope"[..], &br#"{"a":"\u0000"}"#[..]] {
            let msg = pb::StageComplete {
                stage: pb::Stage::Work as i32,
                status: body.to_vec(),
                ..Default::default()
            };
            let c = completion(key(), pb::Stage::Work as i32, &msg);
            assert!(!c.ok && c.terminal, "{c:?}");
        }
    }

    #[test]
    fn error_message_keeps_terminal_flag_and_is_bounded() {
        let msg = pb::StageComplete {
            error_message: "x".repeat(10_000),
            terminal: false,
            ..Default::default()
        };
        let c = completion(key(), pb::Stage::Work as i32, &msg);
        assert!(!c.ok && !c.terminal);
        assert!(c.error_message.unwrap().chars().count() <= MAX_ERROR_CHARS + 1);
    }

    #[test]
    fn wrong_stage_is_terminal() {
        let msg = pb::StageComplete {
            stage: pb::Stage::Compose as i32,
            ..Default::default()
        };
        let c = completion(key(), pb::Stage::Work as i32, &msg);
        assert!(!c.ok && c.terminal);
    }
}
