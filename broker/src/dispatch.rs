//! The dispatcher: one loop per broker that claims tasks for every (kind, version) with a
//! ready subscriber and free slots, and hands them to streams. Woken by `work_ready`, by
//! in-process hints (a slot freed, a stream subscribed) and by a failsafe poll.

use std::{sync::Arc, time::Duration};

use tokio_util::sync::CancellationToken;

use converge_proto::pb;

use crate::{
    Broker,
    caches::KindInfo,
    complete::Job,
    convert,
    db::{self, queue::ClaimedTask},
    error::{Error, Result},
    ids::{KindPair, LeaseToken},
    pipeline::{self, Pipeline},
    registry::Outgoing,
    wake::WakeLoop,
};

/// Runs until `stop` or until the broker starts draining.
pub(crate) async fn run(b: Broker, stop: CancellationToken) {
    let mut wake = WakeLoop::new(b.inner.dispatch_wake.clone(), b.inner.cfg.failsafe_poll);
    loop {
        if b.inner.draining.is_cancelled() {
            break;
        }
        let more = match pass(&b).await {
            Ok(more) => more,
            Err(e) => {
                tracing::warn!(error = %e, cause = ?std::error::Error::source(&e), "claim pass failed");
                tokio::time::sleep(Duration::from_millis(500)).await;
                false
            }
        };
        if more {
            tokio::task::yield_now().await;
            continue;
        }
        if !wake.wait(&stop).await {
            break;
        }
    }
}

/// One claim pass over every pair with capacity. Returns true when a claim came back full
/// (more work is likely waiting).
async fn pass(b: &Broker) -> Result<bool> {
    let inner = &b.inner;
    let mut more = false;
    for (pair, _) in inner.registry.capacity() {
        if inner.draining.is_cancelled() {
            break;
        }
        // Re-read: an earlier pair in this pass may have used slots of a shared stream.
        let free = inner.registry.free_for(&pair);
        if free == 0 {
            continue;
        }
        let Some(info) = inner.manifests.get(&pair) else {
            continue;
        };
        let n = free.min(inner.cfg.claim_batch);
        if let Some(reaction) = info.reactor_reaction.as_deref() {
            more |= dispatch_deliveries(b, &pair, &info, reaction, n).await?;
            continue;
        }
        let rows = db::queue::lease_claim(
            &inner.pool,
            inner.cfg.shards,
            &pair,
            i32::try_from(n).unwrap_or(i32::MAX),
            &inner.cfg.broker_id,
        )
        .await
        .map_err(Error::db("claim work"))?;
        if rows.is_empty() {
            continue;
        }
        more |= rows.len() == n;
        let mut out = Vec::with_capacity(rows.len());
        let mut deadlines = Vec::new();
        for t in rows {
            let secs = u64::try_from(t.task_deadline_secs).unwrap_or(0);
            match t.task_type.as_str() {
                "delete" => match info.delete_reaction.as_deref() {
                    Some(reaction) => {
                        if secs > 0 {
                            deadlines.push((LeaseToken(t.lease_token), secs));
                        }
                        let request =
                            convert::stage_request(&t, &pair, pb::Stage::Delete, None, Vec::new());
                        out.push(single_stage(
                            &t,
                            &pair,
                            &info,
                            pb::Stage::Delete,
                            reaction,
                            request,
                        ));
                    }
                    // A finalizer with no teardown reaction: nothing to run, strip it.
                    None => b.submit(Job::Known {
                        completion: convert::success(t.key(), None, Vec::new(), true),
                        reply: None,
                    }),
                },
                "operate" => {
                    let (b2, pair, info) = (b.clone(), pair.clone(), info.clone());
                    tokio::spawn(async move { b2.operate(t, pair, info).await });
                }
                _ => {
                    let mut stages = pipeline::plan(&t, &info);
                    match (stages.len(), stages.front()) {
                        // The hot path: a plain leaf runs one WORK stage, no pipeline state.
                        (1, Some(pb::Stage::Work)) => {
                            if secs > 0 {
                                deadlines.push((LeaseToken(t.lease_token), secs));
                            }
                            let request = convert::stage_request(
                                &t,
                                &pair,
                                pb::Stage::Work,
                                None,
                                Vec::new(),
                            );
                            let reaction = info.work_reaction.as_deref().unwrap_or_default();
                            out.push(single_stage(
                                &t,
                                &pair,
                                &info,
                                pb::Stage::Work,
                                reaction,
                                request,
                            ));
                        }
                        // Nothing declared for this trigger: done at once.
                        (0, _) => b.submit(Job::Known {
                            completion: convert::success(t.key(), None, Vec::new(), true),
                            reply: None,
                        }),
                        _ => {
                            stages.make_contiguous();
                            let key = t.key();
                            let p = Pipeline {
                                task: t,
                                pair: pair.clone(),
                                info: info.clone(),
                                stages,
                                index: 0,
                                status: None,
                                conditions: Vec::new(),
                            };
                            let b2 = b.clone();
                            tokio::spawn(async move { b2.pipeline_advance(key, p, None).await });
                        }
                    }
                }
            }
        }
        let (unplaced, placed) = inner.registry.assign(out);
        if !unplaced.is_empty() {
            // A stream went away or turned unready between the capacity check and now: the
            // task goes back to the queue, never fails.
            db::queue::lease_release(&inner.pool, &unplaced)
                .await
                .map_err(Error::db("release unplaced leases"))?;
        }
        for (token, secs) in deadlines {
            if placed.contains(&token) {
                b.arm_deadline(token, Duration::from_secs(secs));
            }
        }
    }
    Ok(more)
}

/// Claims up to `n` lifecycle deliveries for reactor `pair` and hands them to its streams as
/// STAGE_REACT tasks. Returns true when the claim came back full.
async fn dispatch_deliveries(
    b: &Broker,
    pair: &KindPair,
    info: &KindInfo,
    reaction: &str,
    n: usize,
) -> Result<bool> {
    let inner = &b.inner;
    let rows = db::queue::lifecycle_claim(
        &inner.pool,
        inner.cfg.shards,
        &pair.kind,
        i32::try_from(n).unwrap_or(i32::MAX),
        &inner.cfg.broker_id,
    )
    .await
    .map_err(Error::db("claim reactor deliveries"))?;
    let full = rows.len() == n;
    let out: Vec<Outgoing> = rows
        .iter()
        .map(|d| Outgoing {
            key: d.key(),
            pair: pair.clone(),
            stage: pb::Stage::React as i32,
            msg: convert::react_task(d, pair, reaction, info.manifest_version),
            pipeline: None,
        })
        .collect();
    let (unplaced, _) = inner.registry.assign(out);
    if !unplaced.is_empty() {
        db::queue::lease_release(&inner.pool, &unplaced)
            .await
            .map_err(Error::db("release unplaced leases"))?;
    }
    Ok(full)
}

/// A task that is one stage with no pipeline state (a plain leaf's WORK, a teardown, an
/// operation).
fn single_stage(
    t: &ClaimedTask,
    pair: &KindPair,
    info: &KindInfo,
    stage: pb::Stage,
    reaction: &str,
    request: pb::stage_task::Request,
) -> Outgoing {
    let secs = u64::try_from(t.task_deadline_secs).unwrap_or(0);
    let deadline_ms = i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    Outgoing {
        key: t.key(),
        pair: pair.clone(),
        stage: stage as i32,
        msg: convert::stage_task(
            t,
            pair,
            stage,
            reaction,
            info.manifest_version,
            deadline_ms,
            request,
        ),
        pipeline: None,
    }
}

impl Broker {
    /// Runs an operate claim: picks the resource's oldest open operation and sends it to the
    /// verb's reaction. No open operation left: the claim completes (and the queue row goes).
    async fn operate(&self, t: ClaimedTask, pair: KindPair, info: Arc<KindInfo>) {
        let pool = &self.inner.pool;
        let op = match db::queue::operation_start(pool, t.resource_id).await {
            Ok(op) => op,
            Err(e) => {
                tracing::warn!(error = %e, "could not start an operation; releasing the claim");
                if let Err(e) = db::queue::lease_release(pool, &[t.key()]).await {
                    tracing::warn!(error = %e, "could not release an operate lease; the reaper will");
                }
                return;
            }
        };
        let Some(op) = op else {
            return self.submit(Job::Known {
                completion: convert::success(t.key(), None, Vec::new(), true),
                reply: None,
            });
        };
        let Some(reaction) = info.verbs.get(&op.verb) else {
            return self.submit(Job::Known {
                completion: convert::failure(
                    t.key(),
                    format!(
                        "kind {pair} declares no operation reaction for verb {:?}",
                        op.verb
                    ),
                    true,
                ),
                reply: None,
            });
        };
        let request = convert::operate_request(&t, &pair, &op);
        let out = single_stage(&t, &pair, &info, pb::Stage::Operate, reaction, request);
        let secs = u64::try_from(t.task_deadline_secs).unwrap_or(0);
        let token = LeaseToken(t.lease_token);
        let (unplaced, placed) = self.inner.registry.assign(vec![out]);
        if !unplaced.is_empty() {
            if let Err(e) = db::queue::lease_release(pool, &unplaced).await {
                tracing::warn!(error = %e, "could not release an operate lease; the reaper will");
            }
        } else if secs > 0 && placed.contains(&token) {
            self.arm_deadline(token, Duration::from_secs(secs));
        }
    }
}

/// Rule 6: the broker's timer is authoritative. Past the deadline the task is recorded as a
/// transient failure and the worker is told to cancel it; its late result is refused.
impl Broker {
    /// Arms the broker-side deadline of a lease just handed out.
    pub(crate) fn arm_deadline(&self, token: LeaseToken, after: Duration) {
        let b2 = self.clone();
        let h = tokio::spawn(async move {
            tokio::time::sleep(after).await;
            b2.expire(token, after);
        });
        self.inner.registry.set_timer(token, h.abort_handle());
    }

    fn expire(&self, token: LeaseToken, after: Duration) {
        let Some(f) = self.inner.registry.take_token(token) else {
            return;
        };
        tracing::info!(lease = %token, resource = %f.key.resource_id, "task deadline exceeded; cancelling");
        self.inner.registry.push(
            f.stream,
            pb::work_stream_server_msg::Body::Cancel(pb::CancelTask {
                lease_token: token.to_string(),
                claim_epoch: f.key.claim_epoch.0,
                reason: "deadline".into(),
            }),
        );
        self.submit(Job::Known {
            completion: convert::failure(
                f.key,
                format!(
                    "task deadline exceeded: no result within {}s",
                    after.as_secs()
                ),
                false,
            ),
            reply: None,
        });
        self.wake();
    }
}
