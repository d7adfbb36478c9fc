//! Conversions between queue rows and wire frames, and validation of what workers send.
//! Everything a worker sends is untrusted: malformed JSON becomes a terminal failure of that
//! task, never a broker error.

use std::collections::HashMap;

use converge_proto::pb;

use crate::db::queue::{ClaimedTask, Completion, LeaseKey};

/// Largest status, output or conditions document the broker stores for one task.
pub const MAX_RESULT_JSON_BYTES: usize = 4 * 1024 * 1024;
/// Longest failure message stored.
pub const MAX_ERROR_CHARS: usize = 4096;

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

/// The wire view of the resource a claimed task acts on.
pub fn resource(t: &ClaimedTask, kind: &str, kind_version: i32) -> pb::Resource {
    pb::Resource {
        id: t.resource_id.as_bytes().to_vec(),
        kind: kind.to_string(),
        name: t.name.clone(),
        owner_id: t
            .owner_id
            .map(|u| u.as_bytes().to_vec())
            .unwrap_or_default(),
        root_id: t.root_id.map(|u| u.as_bytes().to_vec()).unwrap_or_default(),
        spec: json_bytes(&t.spec),
        status: t.status.as_ref().map(json_bytes).unwrap_or_default(),
        generation: t.r_generation,
        synced_gen: t.synced_gen,
        is_ready: t.is_ready,
        finalizers: t.finalizers.clone(),
        deletion_requested_at_ms: t.deletion_requested_at_ms,
        frozen_until_ms: t.frozen_until_ms,
        quarantined: t.phase == "Quarantined",
        labels: labels(&t.labels),
        kind_version,
        phase: t.phase.clone(),
    }
}

/// Builds the STAGE_WORK task for a claimed reconcile.
pub fn work_task(
    t: &ClaimedTask,
    kind: &str,
    kind_version: i32,
    reaction: &str,
    manifest_version: i64,
    deadline_ms: i64,
) -> pb::StageTask {
    let res = resource(t, kind, kind_version);
    pb::StageTask {
        stage: pb::Stage::Work as i32,
        kind: kind.to_string(),
        kind_version,
        resource_id: res.id.clone(),
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
        request: Some(pb::stage_task::Request::WorkReq(pb::WorkRequest {
            status: res.status.clone(),
            resource: Some(res),
        })),
        trigger: t.trigger.clone(),
        attempt: t.attempt,
    }
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
    let status = match parse_json("status", &msg.status) {
        Ok(s) => s,
        Err(e) => return failure(key, format!("invalid result: {e}"), true),
    };
    let mut conds = Vec::with_capacity(msg.conditions.len());
    let mut health_ok = true;
    for c in &msg.conditions {
        if c.r#type.is_empty() {
            continue;
        }
        let status = match c.status.as_str() {
            "True" | "False" | "Unknown" => c.status.as_str(),
            _ => "Unknown",
        };
        if c.r#type == "Ready" && status != "True" {
            health_ok = false;
        }
        conds.push(serde_json::json!({
            "type": truncate(&c.r#type, 128),
            "status": status,
            "reason": truncate(&c.reason, 256),
            "message": truncate(&c.message.replace('\0', ""), MAX_ERROR_CHARS),
        }));
    }
    Completion {
        key,
        ok: true,
        terminal: false,
        error_message: None,
        status,
        conditions: (!conds.is_empty()).then_some(serde_json::Value::Array(conds)),
        health_ok,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ClaimEpoch, LeaseToken, ResourceId, ShardId};

    fn key() -> LeaseKey {
        LeaseKey {
            resource_id: ResourceId(uuid::Uuid::nil()),
            shard_id: ShardId(0),
            task_type: "reconcile".into(),
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
