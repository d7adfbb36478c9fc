//! Run a provider with no broker: build a request, call the handler, inspect the outcome.
//!
//! `run` calls `Provider::work` directly; `execute_task` runs the real wire path (StageTask
//! decode → work → StageComplete encode) that the worker runtime uses.

use std::{sync::Arc, time::Duration};

use converge_proto::pb;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{
    convert::{TaskEcho, fail_complete, request_from_task, wire_version},
    error::HandlerError,
    provider::{Provider, Registry},
    runtime::task::result_complete,
    types::{CancelReason, Outcome, ProviderConfig, ReactionRequest, Resource, Stage, trigger},
};

/// A WORK request for a fresh resource of `kind` (version 1) named `test` with `spec`:
/// reaction `work`, trigger `specChange`, generation 1, attempt 1, no deadline, no config.
/// Adjust the public fields for other cases.
pub fn request(kind: impl Into<String>, spec: Value) -> ReactionRequest {
    let kind = kind.into();
    ReactionRequest {
        reaction: "work".to_string(),
        stage: Stage::Work,
        trigger: trigger::SPEC_CHANGE.to_string(),
        kind: kind.clone(),
        kind_version: 1,
        resource: Resource {
            id: Uuid::new_v4(),
            kind,
            kind_version: 1,
            name: "test".to_string(),
            spec: spec.into(),
            generation: 1,
            phase: "Reconciling".to_string(),
            ..Resource::default()
        },
        status: None,
        generation: 1,
        attempt: 1,
        deadline: None,
        cancel: CancellationToken::new(),
        cancel_reason: CancelReason::default(),
        config: ProviderConfig::default(),
        config_override: None,
        bundle_override: Vec::new(),
        observed: Vec::new(),
        descendants: Vec::new(),
        descendants_included: false,
        summary: None,
        subtree: Default::default(),
        operation: None,
        transition: None,
        dedup_token: String::new(),
        dry_run: false,
    }
}

/// Runs `p.work(req)`. With `req.deadline` set, the request's token is cancelled when it
/// passes and the result is a transient "deadline exceeded", as in the runtime.
pub async fn run<P: Provider>(p: &P, req: ReactionRequest) -> Result<Outcome, HandlerError> {
    let (cancel, reason) = (req.cancel.clone(), req.cancel_reason.clone());
    match req.deadline {
        None => p.work(req).await,
        Some(d) => match tokio::time::timeout_at(d, p.work(req)).await {
            Ok(r) => r,
            Err(_) => {
                reason.set(CancelReason::DEADLINE);
                cancel.cancel();
                Err(HandlerError::transient("deadline exceeded"))
            }
        },
    }
}

/// Runs one wire task through the registry exactly as the runtime does (dispatch by
/// (kind, kind_version), decode, handler with panic capture and deadline, encode), with
/// `config` as the kind's cached default. Returns the StageComplete the worker would send.
pub async fn execute_task(
    registry: &Registry,
    task: pb::StageTask,
    config: ProviderConfig,
) -> pb::StageComplete {
    let echo = TaskEcho::of(&task);
    let version = wire_version(task.kind_version);
    let Some(reg) = registry.find(&task.kind, version) else {
        let msg = format!("no provider for {}@v{version} on this worker", task.kind);
        return fail_complete(&echo, &msg, true);
    };
    let deadline = (task.task_deadline_ms > 0).then(|| {
        tokio::time::Instant::now() + Duration::from_millis(task.task_deadline_ms.unsigned_abs())
    });
    let cancel = CancellationToken::new();
    let req = match request_from_task(task, config, cancel.clone(), deadline, None) {
        Ok(r) => r,
        Err(msg) => return fail_complete(&echo, &msg, true),
    };
    let provider = Arc::clone(&reg.provider);
    let mut handler = tokio::spawn(async move { provider.work(req).await });
    let res = match deadline {
        None => (&mut handler).await,
        Some(d) => match tokio::time::timeout_at(d, &mut handler).await {
            Ok(r) => r,
            Err(_) => {
                cancel.cancel();
                return fail_complete(&echo, "deadline exceeded", false);
            }
        },
    };
    result_complete(&echo, res)
        .unwrap_or_else(|| fail_complete(&echo, "handler was aborted", false))
}
