//! The completion writer: batches task results from every stream into one fenced
//! `work_complete` statement, then answers each worker with a `CompleteAck`.
//!
//! Batching is natural: while one statement runs, results queue up and the next statement
//! takes them all (up to [`MAX_BATCH`]), so throughput grows with load and an idle system
//! pays one round trip per result.

use std::{collections::HashSet, sync::atomic::Ordering, time::Duration};

use tokio::sync::mpsc;
use uuid::Uuid;

use converge_proto::pb::{self, work_stream_server_msg::Body};

use crate::{
    Broker, convert,
    db::{self, queue::Completion},
    ids::{ClaimEpoch, LeaseToken},
    registry::StreamId,
};

/// Most results written by one statement.
pub(crate) const MAX_BATCH: usize = 1024;

/// One result to record.
pub(crate) enum Job {
    /// A result for a lease this broker holds (or a failure the broker decided itself).
    Known {
        completion: Completion,
        reply: Option<StreamId>,
    },
    /// A result for a lease this broker did not hand out (resent after a reconnect).
    Unknown {
        token: LeaseToken,
        epoch: ClaimEpoch,
        msg: pb::StageComplete,
        reply: StreamId,
    },
}

impl Broker {
    /// Queues a result for the writer.
    pub(crate) fn submit(&self, job: Job) {
        self.inner
            .pending_completions
            .fetch_add(1, Ordering::SeqCst);
        if self.inner.completions.send(job).is_err() {
            self.inner
                .pending_completions
                .fetch_sub(1, Ordering::SeqCst);
            // Only after shutdown: the lease lapses and the task re-runs elsewhere.
            tracing::info!("broker stopped; late result dropped (the task will be retried)");
        }
    }

    /// Results queued but not yet written.
    pub(crate) fn pending_completions(&self) -> usize {
        self.inner.pending_completions.load(Ordering::SeqCst)
    }
}

/// Runs until the job channel closes.
pub(crate) async fn run(b: Broker, mut rx: mpsc::UnboundedReceiver<Job>) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(_) => break,
            }
        }
        let n = jobs.len();
        process(&b, jobs).await;
        b.inner.pending_completions.fetch_sub(n, Ordering::SeqCst);
    }
}

async fn process(b: &Broker, jobs: Vec<Job>) {
    let pool = &b.inner.pool;
    let mut items: Vec<(Completion, Option<StreamId>)> = Vec::with_capacity(jobs.len());
    let mut unknown = Vec::new();
    for j in jobs {
        match j {
            Job::Known { completion, reply } => items.push((completion, reply)),
            Job::Unknown {
                token,
                epoch,
                msg,
                reply,
            } => unknown.push((token, epoch, msg, reply)),
        }
    }
    if !unknown.is_empty() {
        let leases: Vec<_> = unknown.iter().map(|u| (u.0, u.1)).collect();
        let found = match db::queue::lease_lookup(pool, &leases).await {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "lease lookup failed; unacked results will be resent");
                Vec::new()
            }
        };
        for (token, epoch, msg, reply) in unknown {
            let found = found
                .iter()
                .find(|(k, _)| k.lease_token == token && k.claim_epoch == epoch);
            match found {
                // Only a single-stage result is final on its own (a plain leaf's WORK, a
                // teardown, an operation); a composite's stage result cannot be adopted
                // without its pipeline (compose not applied, rollup not run), so it is
                // refused and the task re-runs.
                Some((key, pair)) if is_single_stage_result(b, key, pair, msg.stage) => {
                    items.push((convert::completion(key.clone(), 0, &msg), Some(reply)));
                }
                _ => ack(b, reply, token, epoch, false),
            }
        }
    }
    if items.is_empty() {
        return;
    }
    let completions: Vec<Completion> = items.iter().map(|(c, _)| c.clone()).collect();
    let accepted = append_with_fallback(b, &completions).await;
    let Some(accepted) = accepted else {
        // The database is unreachable: no ack, so workers keep their results; the leases
        // lapse and the reaper re-runs the tasks (at-least-once, epoch-fenced).
        return;
    };
    let set: HashSet<Uuid> = accepted.iter().map(|k| k.lease_token.0).collect();
    if items
        .iter()
        .any(|(c, _)| c.composite && set.contains(&c.key.lease_token.0))
        && let Some(n) = b.inner.express_hook.get()
    {
        n.notify_one();
    }
    for (c, reply) in items {
        if let Some(s) = reply {
            ack(
                b,
                s,
                c.key.lease_token,
                c.key.claim_epoch,
                set.contains(&c.key.lease_token.0),
            );
        }
    }
    if !accepted.is_empty()
        && let Some(n) = b.inner.outbox_hook.get()
    {
        n.notify_one();
    }
}

/// Writes the batch; if one row poisons it (a data error), writes rows one by one and turns
/// each unstorable result into a terminal failure of its task. A deadlock or serialization
/// failure is no data error: the whole batch is written again at once (a task must never
/// fail terminally because another transaction crossed it). Returns the accepted keys, or
/// `None` when the database could not be reached after retries.
async fn append_with_fallback(
    b: &Broker,
    batch: &[Completion],
) -> Option<Vec<db::queue::LeaseKey>> {
    let pool = &b.inner.pool;
    let mut delay = Duration::from_millis(100);
    for attempt in 0..6 {
        match db::queue::outbox_append(pool, batch).await {
            Ok(acc) => return Some(acc),
            Err(e) if db::is_conflict(&e) => {
                tracing::warn!(error = %e, attempt, "result batch crossed another transaction; writing it again");
            }
            Err(sqlx::Error::Database(e)) => {
                tracing::warn!(error = %e, "result batch refused; writing results one by one");
                let mut acc = Vec::new();
                for c in batch {
                    match db::queue::outbox_append(pool, std::slice::from_ref(c)).await {
                        Ok(a) => acc.extend(a),
                        // Not this result's fault: left unacked, so the worker resends it
                        // (or the lease lapses and the task re-runs).
                        Err(e) if db::is_conflict(&e) => {}
                        Err(e) => {
                            let f = convert::failure(
                                c.key.clone(),
                                format!("the task's result could not be stored: {e}"),
                                true,
                            );
                            if let Ok(a) = db::queue::outbox_append(pool, &[f]).await {
                                acc.extend(a);
                            }
                        }
                    }
                }
                return Some(acc);
            }
            Err(e) => {
                tracing::warn!(error = %e, attempt, "writing results failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
    None
}

/// Whether a result re-sent for a lease this broker did not hand out answers a whole task.
fn is_single_stage_result(
    b: &Broker,
    key: &db::queue::LeaseKey,
    pair: &crate::ids::KindPair,
    stage: i32,
) -> bool {
    match key.task_type.as_str() {
        "delete" => stage == pb::Stage::Delete as i32,
        "operate" => stage == pb::Stage::Operate as i32,
        db::queue::REACT => false,
        _ => stage == pb::Stage::Work as i32 && b.is_plain_leaf(pair),
    }
}

pub(crate) fn ack(
    b: &Broker,
    stream: StreamId,
    token: LeaseToken,
    epoch: ClaimEpoch,
    accepted: bool,
) {
    let body = Body::Ack(pb::CompleteAck {
        lease_token: token.to_string(),
        claim_epoch: epoch.0,
        accepted,
    });
    b.inner.registry.push(stream, body);
}
