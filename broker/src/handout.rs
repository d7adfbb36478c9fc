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

/// How often the broker refreshes leases it keeps alive itself: well inside the shortest
/// `LEASE_STALE_AFTER` it accepts (11 s).
const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(3);

/// Leases the broker heartbeats itself, because their worker's heartbeats cannot reach it or
/// no worker holds them (see [`Handout::keep_stream_alive`], [`Handout::keep_alive`]). Stops
/// when dropped.
pub(crate) struct KeptAlive(tokio::task::AbortHandle);

impl Drop for KeptAlive {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Refreshes the heartbeats of the leases `keys` names, read again at each refresh, every
/// `every` (the first after one period) until the guard is dropped. A refresh that fails is
/// logged; the next one tries again.
fn keep_alive(
    pool: PgPool,
    every: Duration,
    keys: impl Fn() -> Vec<LeaseKey> + Send + 'static,
) -> KeptAlive {
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let keys = keys();
            if keys.is_empty() {
                continue;
            }
            if let Err(e) = db::queue::lease_heartbeat(&pool, &keys).await {
                tracing::warn!(error = %e, leases = keys.len(), "could not refresh leases the broker keeps alive");
            }
        }
    });
    KeptAlive(task.abort_handle())
}

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

    /// Keeps the leases in flight on stream `sid` alive while its read loop waits for a
    /// stage result's share of the budget: the worker's heartbeats for them are queued
    /// behind that message, unread. At the 1M BOM a root's compose result (4.7 MB of the
    /// 8 MB budget) waited while other roots' composes were applied, and the reaper took back
    /// leases whose heartbeats sat behind it: 19 of 25 root leases given back in a run were
    /// the reaper's, and 48 composes ran for 20 roots.
    pub fn keep_stream_alive(&self, sid: StreamId) -> KeptAlive {
        let registry = Arc::clone(&self.registry);
        keep_alive(self.pool.clone(), KEEP_ALIVE_EVERY, move || {
            registry.leases_on(sid)
        })
    }

    /// Keeps `key`'s lease alive while the broker holds its task between a pipeline's stages
    /// (from a stage result's arrival through its compose apply to its next send or its
    /// result handed to the completion writer), when no worker holds it.
    pub fn keep_alive(&self, key: LeaseKey) -> KeptAlive {
        keep_alive(self.pool.clone(), KEEP_ALIVE_EVERY, move || {
            vec![key.clone()]
        })
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use converge_engine::{
        ids::{ClaimEpoch, ResourceId, ShardId},
        testing::TestDb,
        words::TaskType,
    };
    use uuid::Uuid;

    use super::*;

    /// One claimed task of kind `held` (registered by the caller): its lease key.
    async fn claimed(pool: &PgPool, name: &str) -> LeaseKey {
        sqlx::query(
            "SELECT count(*) FROM resource_apply_batch(ARRAY['held'], ARRAY[1], ARRAY[$1],
             ARRAY['{}'::jsonb], ARRAY['{}'::jsonb], ARRAY[NULL::text])",
        )
        .bind(name)
        .execute(pool)
        .await
        .unwrap();
        let (id, shard, token, epoch): (Uuid, i16, Uuid, i64) = sqlx::query_as(
            "SELECT resource_id, shard_id, lease_token, claim_epoch
             FROM work_claim(0::smallint, 255::smallint, 'held', 1, 1, 'test')",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        LeaseKey {
            resource_id: ResourceId(id),
            shard_id: ShardId(shard),
            task_type: TaskType::Reconcile,
            lease_token: LeaseToken(token),
            claim_epoch: ClaimEpoch(epoch),
        }
    }

    async fn heartbeat_at(pool: &PgPool, key: &LeaseKey) -> f64 {
        sqlx::query_scalar(
            "SELECT extract(epoch FROM heartbeat_at)::float8 FROM work_queue WHERE resource_id = $1",
        )
        .bind(key.resource_id.0)
        .fetch_one(pool)
        .await
        .unwrap()
    }

    /// Waits (up to 20 s) until `key`'s heartbeat is later than `than`.
    async fn refreshed_after(pool: &PgPool, key: &LeaseKey, than: f64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while heartbeat_at(pool, key).await <= than {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the lease was never refreshed"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The leases kept alive are refreshed while the guard lives, read again at each refresh
    /// (a lease that joins the set is kept too), and no more once the guard is dropped (the
    /// reaper judges a lease by its heartbeat).
    #[tokio::test]
    async fn kept_leases_are_refreshed_until_the_guard_is_dropped() {
        let db = TestDb::new().await;
        db.leaf_kind("held").await;
        let first = claimed(&db.pool, "h-1").await;
        let second = claimed(&db.pool, "h-2").await;
        let (first_at, second_at) = (
            heartbeat_at(&db.pool, &first).await,
            heartbeat_at(&db.pool, &second).await,
        );
        let set = Arc::new(Mutex::new(vec![first.clone()]));
        let read = Arc::clone(&set);
        let kept = keep_alive(db.pool.clone(), Duration::from_millis(20), move || {
            read.lock().unwrap().clone()
        });
        refreshed_after(&db.pool, &first, first_at).await;
        assert_eq!(
            heartbeat_at(&db.pool, &second).await,
            second_at,
            "not in the set yet"
        );
        set.lock().unwrap().push(second.clone());
        refreshed_after(&db.pool, &second, second_at).await;

        drop(kept);
        // A refresh already sent when the guard dropped may still land: wait it out.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let after_drop = heartbeat_at(&db.pool, &first).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            heartbeat_at(&db.pool, &first).await,
            after_drop,
            "refreshed after the drop"
        );
    }
}
