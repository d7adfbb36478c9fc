//! Handing tasks to streams and what follows from it: placement (a task that finds no
//! stream goes back to the queue, never fails), the broker-side deadline (rule 6) and the
//! suspicion it casts on its stream, and the execution of a composite pipeline's [`Step`]s.
//!
//! It is given the pool, the registry, the completion writer's handle and the dispatcher's
//! wake-up; the dispatcher (for fresh claims) and the sessions (for stage results) call it.

use std::{sync::Arc, time::Duration};

use sqlx::PgPool;
use tokio::sync::Notify;

use converge_engine::{
    db::{self, compose::ComposeApplied, queue::LeaseKey},
    ids::LeaseToken,
    metrics::{KindLabel, TaskResult, metrics},
};
use converge_proto::pb;

use crate::{
    complete::{CompletionHandle, Job},
    convert,
    manifests::Manifests,
    pipeline::{ReadOf, Rows, StageSend, Step},
    registry::{Inflight, Outgoing, Registry, StreamId},
};

/// Places tasks and runs what a pipeline decides; cheap to clone.
#[derive(Clone)]
pub(crate) struct Handout {
    pool: PgPool,
    registry: Arc<Registry>,
    completions: CompletionHandle,
    /// The kinds a compose result is checked against.
    manifests: Arc<Manifests>,
    /// The dispatcher's wake-up: a lease came back or new work appeared.
    dispatch: Arc<Notify>,
    /// How long after a deadline a stream still open has surely answered a keepalive PING
    /// sent after it (the transport's interval plus its timeout, and a margin).
    keepalive_round: Duration,
}

impl Handout {
    /// A handout over `registry`'s streams that records through `completions` and checks
    /// compose results against `manifests`; `keepalive_round` is the longest a connection
    /// that stopped answering stays open.
    pub fn new(
        pool: PgPool,
        registry: Arc<Registry>,
        completions: CompletionHandle,
        manifests: Arc<Manifests>,
        dispatch: Arc<Notify>,
        keepalive_round: Duration,
    ) -> Self {
        Handout {
            pool,
            registry,
            completions,
            manifests,
            dispatch,
            keepalive_round,
        }
    }

    /// Hands each task to the ready stream with the most free slots, arms the deadlines of
    /// those placed, and releases the leases of those that found no stream (a stream went
    /// away or turned unready since capacity was read), so they go back to the queue.
    pub async fn place(&self, tasks: Vec<Outgoing>) -> Result<(), sqlx::Error> {
        let assigned = self.registry.assign(tasks);
        self.arm_or_release(assigned).await
    }

    /// As [`Handout::place`], but tasks that find every slot of their kind taken wait in the
    /// registry for one (a claim taken ahead of free slots, see [`crate::ahead`]).
    pub async fn place_or_hold(&self, tasks: Vec<Outgoing>) -> Result<(), sqlx::Error> {
        let assigned = self.registry.assign_or_hold(tasks);
        self.arm_or_release(assigned).await
    }

    async fn arm_or_release(
        &self,
        (unplaced, deadlines): (Vec<LeaseKey>, Vec<(LeaseToken, Duration)>),
    ) -> Result<(), sqlx::Error> {
        for (token, after) in deadlines {
            self.arm_deadline(token, after);
        }
        if unplaced.is_empty() {
            return Ok(());
        }
        db::queue::lease_release(&self.pool, &unplaced)
            .await
            .map(drop)
    }

    /// Rule 6: the broker's timer is authoritative. Past `after` the task is recorded as a
    /// transient failure and the worker is told to cancel it; its late result is refused
    /// (the lease is no longer in flight here, and the failure moved its epoch on). The
    /// stream is suspect from then on (see [`Registry::suspect`]): a worker that hung whole
    /// must not be handed the retry.
    fn arm_deadline(&self, token: LeaseToken, after: Duration) {
        let this = self.clone();
        let h = tokio::spawn(async move {
            tokio::time::sleep(after).await;
            this.expire(token, after);
        });
        self.registry.set_timer(token, h.abort_handle());
    }

    fn expire(&self, token: LeaseToken, after: Duration) {
        let Some(f) = self.registry.take_token(token) else {
            return;
        };
        tracing::info!(lease = %token, resource = %f.key.resource_id, stream = f.stream, "task deadline exceeded; cancelling, and no new task for the stream until its worker is heard from");
        metrics().task_ended(
            &f.pair.kind,
            convert::stage_word(f.stage),
            TaskResult::Deadline,
            None,
        );
        let at = tokio::time::Instant::now();
        self.registry.suspect(f.stream, at);
        // A connection still open a whole keepalive round later answered a PING sent after
        // the deadline (hyper drops one that does not): the stream may take tasks again
        // even if its reads are not tracked.
        let (registry, dispatch, sid) = (self.registry.clone(), self.dispatch.clone(), f.stream);
        let round = self.keepalive_round;
        tokio::spawn(async move {
            tokio::time::sleep(round).await;
            if registry.clear_suspicion(sid, at) {
                dispatch.notify_one();
            }
        });
        self.registry.push(
            f.stream,
            pb::work_stream_server_msg::Body::Cancel(pb::CancelTask {
                lease_token: token.to_string(),
                claim_epoch: f.key.claim_epoch.0,
                reason: "deadline".into(),
            }),
        );
        self.completions.submit(Job::Known {
            completion: convert::failure(
                f.key,
                // `after` is what was left of the claim's deadline when this stage went out.
                format!("task deadline exceeded: no result within {after:.1?}"),
                false,
            ),
            reply: None,
        });
        self.dispatch.notify_one();
    }

    /// A stage result for a pipeline task arrived on stream `sid` (its lease already taken
    /// out of the registry).
    pub async fn stage_result(&self, f: Inflight, msg: pb::StageComplete, sid: StreamId) {
        let Some(p) = f.pipeline else { return };
        // A rollup's result ends its claim's pipeline: from the claim (made when the
        // descendants settled) to here is the rollup's latency, short of the express drain.
        if f.stage == pb::Stage::Rollup as i32 && msg.error_message.is_empty() {
            metrics()
                .rollup_latency
                .get_or_create(&KindLabel {
                    kind: p.kind().to_owned(),
                })
                .observe(p.since_claim().as_secs_f64());
        }
        // A compose result is checked against the kinds it names (their schemas, the exec
        // flag), read before the pipeline decides on it.
        let kinds = match &msg.compose {
            Some(c) if f.stage == pb::Stage::Compose as i32 && msg.error_message.is_empty() => {
                self.manifests.resolve(c).await
            }
            _ => Ok(Default::default()),
        };
        let step = match kinds {
            Ok(kinds) => p.on_result(f.stage, msg, &kinds),
            Err(e) => p.on_unreadable_kinds(e.to_string()),
        };
        self.drive(step, Some(sid)).await;
    }

    /// Performs a pipeline's steps until it hands a stage to a stream or ends. `reply` is
    /// the stream whose stage result led here; it is acked once that result has been used
    /// (by the next stage's send, the composite's result, or a refusal).
    pub async fn drive(&self, mut step: Step, reply: Option<StreamId>) {
        loop {
            step = match step {
                Step::Read {
                    resource,
                    root,
                    of,
                    pipeline,
                } => {
                    let (id, root) = (resource.0, root.map(|r| r.0));
                    let rows = match of {
                        ReadOf::Summary => db::descendants::summary(&self.pool, id, root)
                            .await
                            .map(Rows::Summary),
                        ReadOf::Children | ReadOf::Subtree => {
                            let subtree = of == ReadOf::Subtree;
                            db::compose::related(&self.pool, id, root, subtree)
                                .await
                                .map(Rows::Related)
                        }
                    };
                    pipeline.on_read(rows)
                }
                Step::Gate {
                    resource,
                    root,
                    pipeline,
                } => {
                    let root = root.map(|r| r.0);
                    let pending = db::compose::rollup_pending(&self.pool, resource.0, root).await;
                    pipeline.on_gate(pending)
                }
                Step::Apply {
                    key,
                    generation,
                    mut payload,
                    status,
                    edges,
                    configs,
                    pipeline,
                } => {
                    if configs
                        && let Some(kept) = crate::compose::keep_stored_envelopes(
                            &self.pool,
                            key.resource_id.0,
                            &payload.configs,
                            pipeline.keys(),
                        )
                        .await
                    {
                        payload.configs = kept;
                    }
                    let r = db::compose::compose_apply(
                        &self.pool,
                        &key,
                        generation,
                        &payload,
                        status.as_ref(),
                        edges,
                        configs,
                    )
                    .await;
                    if let Ok(ComposeApplied::Applied) = r {
                        // The new children are claimable work.
                        self.dispatch.notify_one();
                    }
                    pipeline.on_applied(r)
                }
                Step::Send(s) => return self.send(s, reply).await,
                Step::Complete(completion) => {
                    return self.completions.submit(Job::Known { completion, reply });
                }
                Step::Refuse(key) => {
                    if let Some(s) = reply {
                        self.registry
                            .ack(s, key.lease_token, key.claim_epoch, false);
                    }
                    return;
                }
            }
        }
    }

    async fn send(&self, s: Box<StageSend>, reply: Option<StreamId>) {
        let StageSend {
            key,
            pair,
            stage,
            msg,
            deadline,
            pipeline,
        } = *s;
        // Ack the previous stage's result before sending the next stage: both share the
        // lease, and a worker still holding an unacked result for it would resend it.
        if let Some(sid) = reply {
            self.registry
                .ack(sid, key.lease_token, key.claim_epoch, true);
        }
        let out = Outgoing {
            key,
            pair,
            stage: stage as i32,
            msg,
            deadline,
            pipeline: Some(pipeline),
        };
        // No ready worker right now: back to the queue (the compose is kept; the next claim
        // skips it).
        if let Err(e) = self.place(vec![out]).await {
            tracing::warn!(error = %e, "could not release a pipeline lease; the reaper will");
        }
    }
}
