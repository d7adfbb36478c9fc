//! The dispatcher: one loop per broker that claims tasks for every (kind, version) with a
//! ready subscriber and free slots, and hands them to streams. Woken by `work_ready`, by
//! in-process hints (a slot freed, a stream subscribed) and by a failsafe poll.
//!
//! Shape (as the drainer): [`DispatchOptions`] → [`Dispatcher::new`] → [`Dispatcher::run`],
//! with [`DispatchHandle`] the only way in (a wake-up). It is given the pool, the registry
//! (capacity), the manifest cache, the completion writer's handle and the handout; what a
//! claim needs next (a stage task, a pipeline, an operation) is decided here and performed
//! by the handout.

use std::{sync::Arc, time::Duration};

use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use converge_engine::{
    db::{
        self,
        queue::{ClaimedTask, Completion},
    },
    ids::{KindPair, ShardRange},
    topology::Topology,
    wake::WakeLoop,
    words::TaskType,
};
use converge_kinds::Kind;
use converge_proto::pb;

use crate::{
    ahead::{self, Pace},
    complete::{CompletionHandle, Job},
    configs::Configs,
    convert,
    error::{Error, Result},
    handout::Handout,
    manifests::Manifests,
    pipeline::{self, Pipeline},
    registry::{Outgoing, Registry},
};

/// Dispatcher settings (from `BrokerConfig`).
#[derive(Debug, Clone)]
pub(crate) struct DispatchOptions {
    /// This broker's identity (advisory, stamped on claims).
    pub broker_id: String,
    /// The shard range this broker claims from when `topology` is not set.
    pub shards: ShardRange,
    /// Dynamic sharding: each pair's claim range (see [`DispatchOptions::shards_for`]).
    pub topology: Option<Arc<Topology>>,
    /// Most rows one claim statement takes.
    pub claim_batch: usize,
    /// Failsafe poll behind the `work_ready` LISTEN.
    pub failsafe_poll: Duration,
}

impl DispatchOptions {
    /// The shards this broker claims `pair`'s tasks in: its tile of the brokers that have a
    /// ready worker for the pair (dynamic sharding), or the fixed range.
    fn shards_for(&self, pair: &KindPair) -> ShardRange {
        self.topology
            .as_ref()
            .map_or(self.shards, |t| t.claim(pair))
    }
}

/// Claims up to `n` rows in this broker's own range of a pair (`n - free` of them ahead of
/// free slots, see [`crate::ahead`]), then, when that came back short of the `free` slots and
/// the range is not every shard, the rest of the free slots' worth from any shard. The own
/// range keeps a busy cluster's claims on one or two partitions each and apart from the other
/// brokers'; the second claim keeps the cluster work-conserving: a broker whose workers have
/// free slots takes what waits in another broker's range (its workers busy, or it has not
/// re-tiled yet) instead of idling beside it, but never more than it can start at once. Both
/// claims lock with `SKIP LOCKED`, so the second never takes a row another broker holds.
/// `claim(shards, rows, ahead)` runs one claim statement.
async fn own_range_first<T, F, Fut>(
    own: ShardRange,
    n: usize,
    free: usize,
    claim: F,
) -> sqlx::Result<Vec<T>>
where
    F: Fn(ShardRange, usize, usize) -> Fut,
    Fut: std::future::Future<Output = sqlx::Result<Vec<T>>>,
{
    let mut rows = claim(own, n, n.saturating_sub(free)).await?;
    if own != ShardRange::ALL && rows.len() < free {
        rows.extend(claim(ShardRange::ALL, free - rows.len(), 0).await?);
    }
    Ok(rows)
}

/// The only way in to the dispatcher: wake it.
#[derive(Clone)]
pub(crate) struct DispatchHandle {
    notify: Arc<Notify>,
}

impl DispatchHandle {
    /// Asks for a claim pass soon (a slot freed, a stream subscribed, work was scheduled).
    pub fn wake(&self) {
        self.notify.notify_one();
    }

    /// The underlying notify (for in-process wakers such as the drainers).
    pub fn notify(&self) -> Arc<Notify> {
        self.notify.clone()
    }
}

/// The parts a dispatcher claims for and hands out through.
pub(crate) struct Parts {
    /// Streams and their free slots.
    pub registry: Arc<Registry>,
    /// Which reactions each kind declares.
    pub manifests: Arc<Manifests>,
    /// Where results the dispatcher decides itself go.
    pub completions: CompletionHandle,
    /// Placement, deadlines and pipelines.
    pub handout: Handout,
    /// The default configs pushed to streams: a claim's tasks go out after the default it
    /// saw.
    pub configs: Arc<Configs>,
}

/// The claim loop.
pub(crate) struct Dispatcher {
    opts: DispatchOptions,
    pool: PgPool,
    parts: Parts,
    notify: Arc<Notify>,
    /// Cancelled once the broker drains: no more claims.
    draining: CancellationToken,
    /// Tasks handed out per pair lately: how much a claim takes ahead.
    pace: Pace,
}

impl Dispatcher {
    /// Builds the dispatcher and its handle. `notify` is its wake-up, shared with the lower
    /// parts that wake it (handout, cache refresh; the process's membership loop
    /// when it released a dead broker's leases), which cannot name this one.
    pub fn new(
        opts: DispatchOptions,
        pool: PgPool,
        parts: Parts,
        notify: Arc<Notify>,
        draining: CancellationToken,
    ) -> (Dispatcher, DispatchHandle) {
        let handle = DispatchHandle {
            notify: notify.clone(),
        };
        let d = Dispatcher {
            opts,
            pool,
            parts,
            notify,
            draining,
            pace: Pace::default(),
        };
        (d, handle)
    }

    /// Runs until `stop` or until the broker starts draining.
    pub async fn run(self, stop: CancellationToken) {
        let mut wake = WakeLoop::new(self.notify.clone(), self.opts.failsafe_poll);
        loop {
            if self.draining.is_cancelled() {
                break;
            }
            let more = match self.pass().await {
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

    /// One claim pass over every pair with capacity. Returns true when a claim came back
    /// full (more work is likely waiting).
    async fn pass(&self) -> Result<bool> {
        let Parts {
            registry,
            manifests,
            completions,
            handout,
            configs,
        } = &self.parts;
        let mut more = false;
        // Tasks that waited ahead of a slot too long (or lost their streams) go back.
        let stale = registry.expire_ahead(ahead::MAX_WAIT);
        if !stale.is_empty() {
            db::queue::lease_release(&self.pool, &stale)
                .await
                .map_err(Error::db("release tasks claimed ahead"))?;
        }
        for (pair, _) in registry.capacity() {
            if self.draining.is_cancelled() {
                break;
            }
            // Re-read: an earlier pair in this pass may have used slots of a shared stream.
            let free = registry.free_for(&pair);
            if free == 0 {
                continue;
            }
            // Tasks claimed ahead take the free slots first.
            let waiting = registry.take_ahead(&pair, free);
            if !waiting.is_empty() {
                self.pace.record(&pair, waiting.len());
                handout
                    .place(waiting)
                    .await
                    .map_err(Error::db("release unplaced leases"))?;
            }
            let free = registry.free_for(&pair);
            let Some(info) = manifests.get(&pair) else {
                continue;
            };
            if let Some(reaction) = info.reactor_reaction.as_deref() {
                if free > 0 {
                    let n = free.min(self.opts.claim_batch);
                    more |= self.dispatch_deliveries(&pair, &info, reaction, n).await?;
                }
                continue;
            }
            let n = if info.is_plain_leaf() {
                ahead::claim_size(
                    free,
                    registry.ahead_len(&pair),
                    self.pace.recent(&pair),
                    self.opts.claim_batch,
                )
            } else {
                free.min(self.opts.claim_batch)
            };
            if n == 0 {
                continue;
            }
            let rows = own_range_first(self.opts.shards_for(&pair), n, free, |shards, n, ahead| {
                db::queue::lease_claim(
                    &self.pool,
                    shards,
                    &pair,
                    i32::try_from(n).unwrap_or(i32::MAX),
                    i32::try_from(ahead).unwrap_or(i32::MAX),
                    &self.opts.broker_id,
                )
            })
            .await
            .map_err(Error::db("claim work"))?;
            if rows.is_empty() {
                continue;
            }
            more |= rows.len() == n;
            // Rule 2 for a default written just before this work: push it first. On a
            // database error the tasks still go out (the NOTIFY-driven refresh pushes the
            // default soon after), as they did before this check.
            if let Err(e) = configs
                .ensure_pushed(&pair, rows[0].default_config_rev)
                .await
            {
                tracing::warn!(%pair, error = %e, "could not re-read the default provider config before a claim's tasks");
            }
            let mut out = Vec::with_capacity(rows.len());
            for mut t in rows {
                // The resource's override config goes to a worker of the kind: opened.
                if let Some(c) = t.provider_config.as_mut() {
                    configs.open(&pair, c);
                }
                match t.task_type {
                    TaskType::Delete => match info.delete_reaction.as_deref() {
                        Some(reaction) => {
                            let request = convert::stage_request(
                                &t,
                                &pair,
                                pb::Stage::Delete,
                                None,
                                Vec::new(),
                                None,
                            );
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
                        None => completions.submit(Job::Known {
                            completion: convert::success(t.key(), None, Vec::new(), true),
                            reply: None,
                        }),
                    },
                    TaskType::Operate => {
                        let (pool, c, h) =
                            (self.pool.clone(), completions.clone(), handout.clone());
                        let (pair, info) = (pair.clone(), info.clone());
                        tokio::spawn(async move { operate(&pool, &c, &h, t, pair, info).await });
                    }
                    // A queue row is never a reactor delivery (`work_queue`'s CHECK).
                    TaskType::Reconcile | TaskType::React => {
                        if let Some(refused) = spec_refused(&t, &pair, &info) {
                            completions.submit(Job::Known {
                                completion: refused,
                                reply: None,
                            });
                            continue;
                        }
                        let stages = pipeline::plan(&t, &info);
                        match (stages.len(), stages.front()) {
                            // The hot path: a plain leaf runs one WORK stage, no pipeline
                            // state.
                            (1, Some(pb::Stage::Work)) => {
                                let request = convert::stage_request(
                                    &t,
                                    &pair,
                                    pb::Stage::Work,
                                    None,
                                    Vec::new(),
                                    None,
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
                            (0, _) => completions.submit(Job::Known {
                                completion: convert::success(t.key(), None, Vec::new(), true),
                                reply: None,
                            }),
                            _ => {
                                let p = Pipeline::new(
                                    t,
                                    pair.clone(),
                                    info.clone(),
                                    stages,
                                    configs.keys().clone(),
                                );
                                let h = handout.clone();
                                tokio::spawn(async move { h.drive(p.start(), None).await });
                            }
                        }
                    }
                }
            }
            self.pace.record(&pair, out.len().min(free));
            handout
                .place_or_hold(out)
                .await
                .map_err(Error::db("release unplaced leases"))?;
        }
        Ok(more)
    }

    /// Claims up to `n` lifecycle deliveries for reactor `pair` and hands them to its streams
    /// as STAGE_REACT tasks. Returns true when the claim came back full.
    async fn dispatch_deliveries(
        &self,
        pair: &KindPair,
        info: &Kind,
        reaction: &str,
        n: usize,
    ) -> Result<bool> {
        // Deliveries are never claimed ahead: `n` is the free slots' worth.
        let rows = own_range_first(self.opts.shards_for(pair), n, n, |shards, n, _| {
            db::queue::lifecycle_claim(
                &self.pool,
                shards,
                pair,
                i32::try_from(n).unwrap_or(i32::MAX),
                &self.opts.broker_id,
            )
        })
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
                // The reactor kind's deadline, as for any task: past it the delivery fails
                // transiently (re-armed with backoff, same dedup token) and is cancelled.
                deadline: convert::kind_deadline(d.task_deadline_secs),
                pipeline: None,
            })
            .collect();
        self.parts
            .handout
            .place(out)
            .await
            .map_err(Error::db("release unplaced leases"))?;
        Ok(full)
    }
}

/// The terminal failure a reconcile claim of a composed child records instead of running,
/// when its spec breaks its kind's `spec_schema`. Its compose was checked, but the engine
/// flows its dependencies' status into it afterwards (`apply_compose_result`, the drain's
/// cascade: SQL, which cannot check a JSON Schema), so the spec is checked again here, before
/// any stage is sent: a bad flowed value fails the child, naming the pointer, and no worker
/// sees it. A root's spec was checked by the API that wrote it.
fn spec_refused(t: &ClaimedTask, pair: &KindPair, info: &Kind) -> Option<Completion> {
    t.owner_id?;
    let why = info.spec_violation(&t.spec)?;
    Some(convert::failure(
        t.key(),
        format!(
            "spec breaks the spec_schema of {} v{} {why} (a composed child's spec is checked \
             at each claim, with the values flowed into it from its dependencies' status by \
             its value flows)",
            pair.kind, pair.version
        ),
        true,
    ))
}

/// A task that is one stage with no pipeline state (a plain leaf's WORK, a teardown, an
/// operation).
fn single_stage(
    t: &ClaimedTask,
    pair: &KindPair,
    info: &Kind,
    stage: pb::Stage,
    reaction: &str,
    request: pb::stage_task::Request,
) -> Outgoing {
    let deadline = convert::kind_deadline(t.task_deadline_secs);
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
            convert::deadline_ms(deadline),
            request,
        ),
        deadline,
        pipeline: None,
    }
}

/// Runs an operate claim: picks the resource's oldest open operation and sends it to the
/// verb's reaction. No open operation left: the claim completes (and the queue row goes).
async fn operate(
    pool: &PgPool,
    completions: &CompletionHandle,
    handout: &Handout,
    t: ClaimedTask,
    pair: KindPair,
    info: Arc<Kind>,
) {
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
        return completions.submit(Job::Known {
            completion: convert::success(t.key(), None, Vec::new(), true),
            reply: None,
        });
    };
    let Some(reaction) = info.verbs.get(&op.verb) else {
        return completions.submit(Job::Known {
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
    // Claimed with the same claim's plain tasks, which may have taken the free slots: it waits
    // for one with those claimed ahead, instead of going back to a queue it would be claimed
    // from again at once.
    if let Err(e) = handout.place_or_hold(vec![out]).await {
        tracing::warn!(error = %e, "could not release an operate lease; the reaper will");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A claim of `n` rows for `free` slots that hands out `have` rows from each range it is
    /// asked for, recording the calls as (range, rows, ahead).
    async fn run(
        own: ShardRange,
        n: usize,
        free: usize,
        have: usize,
    ) -> (usize, Vec<(ShardRange, usize, usize)>) {
        let calls = Mutex::new(Vec::new());
        let rows = own_range_first(own, n, free, |shards, n, ahead| {
            calls.lock().unwrap().push((shards, n, ahead));
            let got = n.min(have);
            async move { Ok(vec![(); got]) }
        })
        .await
        .unwrap();
        (rows.len(), calls.into_inner().unwrap())
    }

    #[tokio::test]
    async fn a_short_own_range_claim_takes_the_rest_from_any_shard() {
        let own = ShardRange { lo: 0, hi: 84 };
        // The own range fills the slots: one claim, on it alone.
        assert_eq!(run(own, 8, 8, 8).await, (8, vec![(own, 8, 0)]));
        // It comes back short: the rest from every shard.
        assert_eq!(
            run(own, 8, 8, 3).await,
            (6, vec![(own, 8, 0), (ShardRange::ALL, 5, 0)])
        );
        // Owning every shard already: nothing to add.
        assert_eq!(
            run(ShardRange::ALL, 8, 8, 3).await,
            (3, vec![(ShardRange::ALL, 8, 0)])
        );
    }

    #[tokio::test]
    async fn claims_ahead_come_from_the_own_range_only() {
        let own = ShardRange { lo: 0, hi: 84 };
        // 8 slots and 24 ahead: all of it asked of the own range, 24 marked ahead.
        assert_eq!(run(own, 32, 8, 32).await, (32, vec![(own, 32, 24)]));
        // The own range covers the slots but not all ahead: no claim elsewhere.
        assert_eq!(run(own, 32, 8, 10).await, (10, vec![(own, 32, 24)]));
        // Short of the slots: every shard gives the slots' worth only, nothing ahead.
        assert_eq!(
            run(own, 32, 8, 5).await,
            (8, vec![(own, 32, 24), (ShardRange::ALL, 3, 0)])
        );
    }
}
