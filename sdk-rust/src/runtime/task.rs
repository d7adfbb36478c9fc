//! Running one task: admission, the concurrency permit, the deadline, panic capture, and
//! turning the handler's result into a kept `StageComplete`.
//!
//! Each task runs on its own tokio task owned by the worker, not by the stream, so a stream
//! drop never cancels a handler; only a `CancelTask`, the deadline or the end of shutdown
//! does.

use std::{sync::Arc, time::Duration};

use converge_proto::pb;
use tokio::{task::JoinError, time::Instant};
use tracing::{Instrument, debug, info_span, warn};

use super::state::{Admission, LeaseKey, Shared};
use crate::{
    convert::{TaskEcho, complete_from_outcome, fail_complete, request_from_task, wire_version},
    descendants::Lister,
    error::HandlerError,
    types::{CancelReason, KindVersion, Outcome, ReactionRequest},
};

/// How long a cancelled handler may keep running before it is aborted at its next await.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// Takes in a task frame from the broker. `refuse` (draining or shutting down) answers it
/// with a transient failure instead of running it.
pub(crate) fn accept(
    shared: &Arc<Shared>,
    task: pb::StageTask,
    refuse: Option<&str>,
    lister: &Lister,
) {
    let key = LeaseKey::new(task.lease_token.clone(), task.claim_epoch);
    let echo = TaskEcho::of(&task);
    if let Some(reason) = refuse {
        debug!(lease = %key.token, reason, "task refused");
        shared.finish_untracked(key, fail_complete(&echo, reason, false));
        return;
    }
    let (cancel, reason) = match shared.admit(&key) {
        Admission::Run(cancel, reason) => (cancel, reason),
        Admission::Duplicate => {
            debug!(lease = %key.token, "duplicate task ignored; it is already running");
            return;
        }
        Admission::Resent => {
            debug!(lease = %key.token, "duplicate task; its kept result was re-sent");
            return;
        }
    };
    let span = info_span!(
        "task",
        lease = %key.token,
        claim_epoch = key.epoch,
        kind = %task.kind,
        reaction = %task.reaction,
        stage = task.stage,
        attempt = task.attempt,
    );
    let lister = lister.clone();
    let token = Cancel { cancel, reason };
    tokio::spawn(run(Arc::clone(shared), key, echo, task, token, lister).instrument(span));
}

/// A running task's cancellation: the token the runtime cancels and the reason set first.
struct Cancel {
    cancel: tokio_util::sync::CancellationToken,
    reason: CancelReason,
}

async fn run(
    shared: Arc<Shared>,
    key: LeaseKey,
    echo: TaskEcho,
    task: pb::StageTask,
    Cancel { cancel, reason }: Cancel,
    lister: Lister,
) {
    let deadline = (task.task_deadline_ms > 0)
        .then(|| Instant::now() + Duration::from_millis(task.task_deadline_ms.unsigned_abs()));
    let kv = KindVersion::new(task.kind.clone(), wire_version(task.kind_version));
    let Some(reg) = shared.registry.find(&kv.kind, kv.version).cloned() else {
        let msg = format!("no provider for {kv} on this worker");
        shared.finish(key, fail_complete(&echo, &msg, true));
        return;
    };
    // The handler gets a child token: a handler cancelling its own token must not look like
    // a broker CancelTask (which drops the result).
    let handler_cancel = cancel.child_token();
    let req = match request_from_task(
        task,
        shared.config_for(&kv),
        handler_cancel.clone(),
        deadline,
        Some(&lister),
    ) {
        Ok(req) => ReactionRequest {
            cancel_reason: reason.clone(),
            ..req
        },
        Err(msg) => {
            shared.finish(key, fail_complete(&echo, &msg, true));
            return;
        }
    };
    let deadline_passed = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline_passed);

    let permit = tokio::select! {
        biased;
        () = cancel.cancelled() => return,
        () = &mut deadline_passed => {
            shared.finish(key, fail_complete(&echo, "deadline exceeded before the handler started", false));
            return;
        }
        p = Arc::clone(&shared.permits).acquire_owned() => match p {
            Ok(p) => p,
            Err(_) => return,
        },
    };
    let provider = Arc::clone(&reg.provider);
    let guard = shared.handler_guard();
    let mut handler = tokio::spawn(
        async move {
            let _permit = permit;
            let _guard = guard;
            provider.work(req).await
        }
        .in_current_span(),
    );
    shared.set_abort(&key, handler.abort_handle());

    let complete = tokio::select! {
        biased;
        res = &mut handler => match result_complete(&echo, res) {
            Some(c) => c,
            None => return,
        },
        () = cancel.cancelled() => {
            debug!("task cancelled; its result will not be sent");
            abort_after_grace(handler);
            return;
        }
        () = &mut deadline_passed => {
            warn!("task deadline exceeded; cancelling the handler");
            reason.set(CancelReason::DEADLINE);
            handler_cancel.cancel();
            abort_after_grace(handler);
            fail_complete(&echo, "deadline exceeded", false)
        }
    };
    shared.finish(key, complete);
}

/// Maps a handler's join result to the StageComplete to send; `None` when it was aborted.
pub(crate) fn result_complete(
    echo: &TaskEcho,
    res: Result<Result<Outcome, HandlerError>, JoinError>,
) -> Option<pb::StageComplete> {
    Some(match res {
        Ok(Ok(outcome)) => complete_from_outcome(echo, outcome).unwrap_or_else(|msg| {
            fail_complete(echo, &format!("cannot encode outcome: {msg}"), true)
        }),
        Ok(Err(e)) => {
            debug!(terminal = e.is_terminal(), error = %e, "handler failed");
            fail_complete(echo, e.message(), e.is_terminal())
        }
        Err(e) if e.is_panic() => {
            let payload = e.into_panic();
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_string());
            warn!(panic = %msg, "handler panicked");
            fail_complete(echo, &format!("handler panicked: {msg}"), false)
        }
        Err(_) => return None,
    })
}

fn abort_after_grace(handler: tokio::task::JoinHandle<Result<Outcome, HandlerError>>) {
    tokio::spawn(async move {
        let abort = handler.abort_handle();
        if tokio::time::timeout(CANCEL_GRACE, handler).await.is_err() {
            warn!(grace = ?CANCEL_GRACE, "cancelled handler ignored its token; aborting it");
            abort.abort();
        }
    });
}
