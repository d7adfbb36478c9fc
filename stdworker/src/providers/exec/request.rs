//! The request document an exec handler reads on stdin.
//!
//! Always present: `reaction, trigger, stage, kind, kind_version, name, generation, attempt,
//! spec, status, settings` (`status`/`settings` may be `null`). Present only when they apply:
//! `bundle` (base64, non-empty bundles only), `observed` (COMPOSE), `descendants` (ROLLUP),
//! `operation` (OPERATE), `transition` and `dedup_token` (REACT), `deadline_ms` (the task
//! has a deadline), `dry_run: true` (a COMPOSE that is a plan's dry run: answer as usual, act
//! on nothing; its output is shown by `POST /api/v1/resources:plan` and never stored).

use base64::Engine;
use converge_sdk::{ReactionRequest, Resource, Stage};
use serde_json::{Map, Value, json};

/// A related resource as the handler sees it (observed children, rollup descendants).
fn resource_view(r: &Resource) -> Value {
    json!({
        "kind": r.kind,
        "name": r.name,
        "spec": r.spec,
        "status": r.status,
        "phase": r.phase,
        "is_ready": r.is_ready,
    })
}

/// Builds the stdin document for one task. `settings` and `bundle` come from the effective
/// provider config, so the handler never has to merge anything itself.
pub fn build_request(
    req: &ReactionRequest,
    settings: Option<&Value>,
    bundle: &[u8],
    descendants: &[Resource],
) -> Value {
    let mut m = Map::new();
    m.insert("reaction".into(), json!(req.reaction));
    m.insert("trigger".into(), json!(req.trigger));
    m.insert("stage".into(), json!(req.stage.as_str_name()));
    m.insert("kind".into(), json!(req.kind));
    m.insert("kind_version".into(), json!(req.kind_version));
    m.insert("name".into(), json!(req.resource.name));
    m.insert("generation".into(), json!(req.generation));
    m.insert("attempt".into(), json!(req.attempt));
    m.insert("spec".into(), req.resource.spec.value().clone());
    // The status accumulated in this reconcile if the stage has one, else the stored one.
    let status = req.status.as_ref().or(req.resource.status.as_deref());
    m.insert("status".into(), status.cloned().unwrap_or(Value::Null));
    m.insert("settings".into(), settings.cloned().unwrap_or(Value::Null));
    if !bundle.is_empty() {
        m.insert(
            "bundle".into(),
            json!(base64::engine::general_purpose::STANDARD.encode(bundle)),
        );
    }
    if let Some(d) = req.deadline {
        let left = d.saturating_duration_since(tokio::time::Instant::now());
        m.insert(
            "deadline_ms".into(),
            json!(u64::try_from(left.as_millis()).unwrap_or(u64::MAX)),
        );
    }
    match req.stage {
        Stage::Compose => {
            let observed: Vec<Value> = req.observed.iter().map(resource_view).collect();
            m.insert("observed".into(), Value::Array(observed));
            if req.dry_run() {
                m.insert("dry_run".into(), json!(true));
            }
        }
        Stage::Rollup => {
            let desc: Vec<Value> = descendants.iter().map(resource_view).collect();
            m.insert("descendants".into(), Value::Array(desc));
        }
        Stage::Operate => {
            if let Some(op) = &req.operation {
                m.insert(
                    "operation".into(),
                    json!({"verb": op.verb, "input": op.input}),
                );
            }
        }
        Stage::React => {
            let t = req.transition.map(|t| t.as_str_name());
            m.insert("transition".into(), json!(t));
            m.insert("dedup_token".into(), json!(req.dedup_token));
        }
        Stage::Work | Stage::Delete | Stage::Unspecified => {}
    }
    Value::Object(m)
}
