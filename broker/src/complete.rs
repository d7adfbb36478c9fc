//! The completion writer: batches task results from every stream into one fenced
//! `work_complete` statement (which applies plain results where it fences them), then
//! answers each worker with a `CompleteAck`.
//!
//! Batching is natural: while one statement runs, results queue up and the next statement
//! takes them all (up to [`MAX_BATCH`]), so throughput grows with load and an idle system
//! pays one round trip per result. [`WRITERS`] writers run at once, each over its share of
//! the shards, and one more takes composites' results.
//!
//! Shape: [`Completer::new`] returns the writer and its [`CompletionHandle`], the only way in
//! (sessions, the dispatcher and pipelines submit through it); [`Completer::run`] owns the
//! loop. It is given the pool, the registry (to ack on streams) and the manifest cache (to
//! judge a resent result), and names no part above it.

use std::{
    collections::HashSet,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use sqlx::PgPool;
use tokio::sync::{Notify, mpsc};
use uuid::Uuid;

use converge_auth::Principal;
use converge_engine::{
    db::{
        self,
        queue::{Completion, LeaseKey, Recorded},
    },
    ids::{ClaimEpoch, KindPair, LeaseToken, ShardRange},
    metrics::{LeaseUse, Refused, metrics},
};
use converge_proto::pb;

use crate::{
    authz, convert,
    manifests::Manifests,
    registry::{Registry, StreamId},
};

/// Most results written by one statement.
pub(crate) const MAX_BATCH: usize = 1024;

/// Writers of plain results running at once, each with its own connection and its own share
/// of the shards. A plain result is applied where it is fenced, so a writer's statement does
/// the drain's row work too and keeps one backend busy under load; two let the database use
/// both cores of a small machine, and more mostly add lock crossings between their cascades.
/// Composites' results have a writer of their own besides these (see [`CompletionHandle`]).
pub(crate) const WRITERS: usize = 2;

/// One result to record.
pub(crate) enum Job {
    /// A result for a lease this broker holds (or a failure the broker decided itself).
    Known {
        /// What to record.
        completion: Completion,
        /// The stream to ack once written (`None`: the broker decided it, nobody waits).
        reply: Option<StreamId>,
    },
    /// A result for a lease this broker did not hand out (resent after a reconnect).
    Unknown {
        /// The lease the worker named.
        token: LeaseToken,
        /// Its epoch.
        epoch: ClaimEpoch,
        /// The result as sent.
        msg: pb::StageComplete,
        /// The stream to ack.
        reply: StreamId,
        /// The sending stream's principal (`None`: authentication is off): the lease's kind
        /// must be one it may serve.
        principal: Option<Arc<Principal>>,
    },
}

/// Who is woken after results land (an in-process drainer with ROLE=all). Set once, after
/// the broker was built, by whoever runs the drainers.
#[derive(Default)]
struct Hooks {
    /// Something for the drainers: results in the outbox, or a stripped finalizer.
    outbox: OnceLock<Arc<Notify>>,
    /// A composite's result written (the express drainer).
    express: OnceLock<Arc<Notify>>,
}

/// The way in to the completion writers; cheap to clone.
#[derive(Clone)]
pub(crate) struct CompletionHandle {
    /// One per writer: [`WRITERS`] for plain results, by shard, then one for composites'
    /// results, so a root's rollup never waits behind a batch of its children's (their
    /// statements apply results, it only moves one to the express lane). A resource's results
    /// always go to the same writer, so they are written in the order they came.
    txs: Vec<mpsc::UnboundedSender<Job>>,
    /// Results queued but not yet written (the drain waits for it to reach zero).
    pending: Arc<AtomicUsize>,
    hooks: Arc<Hooks>,
}

impl CompletionHandle {
    /// Queues a result for the writer.
    pub fn submit(&self, job: Job) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        // A resent result names no resource until its lease is looked up: the first writer.
        let writer = match &job {
            Job::Known { completion, .. } if completion.composite => WRITERS,
            Job::Known { completion, .. } => {
                usize::from(completion.key.shard_id.0.unsigned_abs()) % WRITERS
            }
            Job::Unknown { .. } => 0,
        };
        if self.txs[writer].send(job).is_err() {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            // Only after shutdown: the lease lapses and the task re-runs elsewhere.
            tracing::info!("broker stopped; late result dropped (the task will be retried)");
        }
    }

    /// Results queued but not yet written.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Wakes `notify` whenever results leave work for the drainers. Only the first call
    /// counts.
    pub fn set_outbox_hook(&self, notify: Arc<Notify>) {
        let _ = self.hooks.outbox.set(notify);
    }

    /// Wakes `notify` whenever a composite's result lands in the outbox. Only the first call
    /// counts.
    pub fn set_express_hook(&self, notify: Arc<Notify>) {
        let _ = self.hooks.express.set(notify);
    }
}

/// The completion writers' loops and what they share.
pub(crate) struct Completer {
    pool: PgPool,
    registry: Arc<Registry>,
    manifests: Arc<Manifests>,
    rxs: Vec<mpsc::UnboundedReceiver<Job>>,
    pending: Arc<AtomicUsize>,
    hooks: Arc<Hooks>,
    /// The dispatcher's wake-up: a plain result applied here may have made work claimable.
    dispatch: Arc<Notify>,
}

impl Completer {
    /// Builds the writer and its handle. Nothing is written until [`Completer::run`].
    pub fn new(
        pool: PgPool,
        registry: Arc<Registry>,
        manifests: Arc<Manifests>,
        dispatch: Arc<Notify>,
    ) -> (Completer, CompletionHandle) {
        let (txs, rxs) = (0..=WRITERS).map(|_| mpsc::unbounded_channel()).unzip();
        let pending = Arc::new(AtomicUsize::new(0));
        let hooks = Arc::new(Hooks::default());
        let handle = CompletionHandle {
            txs,
            pending: pending.clone(),
            hooks: hooks.clone(),
        };
        let completer = Completer {
            pool,
            registry,
            manifests,
            rxs,
            pending,
            hooks,
            dispatch,
        };
        (completer, handle)
    }

    /// Runs every writer until every handle is gone (in practice: until the broker aborts
    /// it after the drain).
    pub async fn run(mut self) {
        let rxs = std::mem::take(&mut self.rxs);
        let this = Arc::new(self);
        futures::future::join_all(rxs.into_iter().map(|rx| this.clone().write(rx))).await;
    }

    /// One writer: whatever queued while its last statement ran is the next batch.
    async fn write(self: Arc<Self>, mut rx: mpsc::UnboundedReceiver<Job>) {
        while let Some(first) = rx.recv().await {
            let mut jobs = vec![first];
            while jobs.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(j) => jobs.push(j),
                    Err(_) => break,
                }
            }
            let n = jobs.len();
            self.process(jobs).await;
            self.pending.fetch_sub(n, Ordering::SeqCst);
        }
    }

    async fn process(&self, jobs: Vec<Job>) {
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
                    principal,
                } => unknown.push((token, epoch, msg, reply, principal)),
            }
        }
        if !unknown.is_empty() {
            let leases: Vec<_> = unknown.iter().map(|u| (u.0, u.1)).collect();
            let found = match db::queue::lease_lookup(&self.pool, &leases).await {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(error = %e, "lease lookup failed; unacked results will be resent");
                    Vec::new()
                }
            };
            for (token, epoch, msg, reply, principal) in unknown {
                let found = found
                    .iter()
                    .find(|f| f.key.lease_token == token && f.key.claim_epoch == epoch);
                // The lease token is a secret of the stream it was sent on, but a result
                // carrying it is still checked like any request: only for a kind the sender
                // may serve.
                if let Some(f) = found
                    && !authz::may_serve(principal.as_deref(), &f.pair.kind)
                {
                    tracing::warn!(lease = %token, kind = %f.pair.kind, sender = authz::name_of(principal.as_deref()), stream = reply, "refused a resent result for a kind the sender's principal may not serve");
                    metrics().lease_refused(LeaseUse::Complete, Refused::Kind, 1);
                    self.registry.ack(reply, token, epoch, false);
                    continue;
                }
                match found {
                    // Only a single-stage result is final on its own (a plain leaf's WORK, a
                    // teardown, an operation); a composite's stage result cannot be adopted
                    // without its pipeline (compose not applied, rollup not run), so it is
                    // refused and the task re-runs.
                    Some(f) if self.is_single_stage_result(&f.key, &f.pair, msg.stage) => {
                        let c = convert::completion(f.key.clone(), 0, &msg);
                        let c = self.manifests.enforce(&f.pair, f.verb.as_deref(), c).await;
                        items.push((c, Some(reply)));
                    }
                    _ => self.registry.ack(reply, token, epoch, false),
                }
            }
        }
        if items.is_empty() {
            return;
        }
        let completions: Vec<Completion> = items.iter().map(|(c, _)| c.clone()).collect();
        let recorded = self.record_with_fallback(&completions).await;
        let Some(recorded) = recorded else {
            // The database is unreachable: no ack, so workers keep their results; the leases
            // lapse and the reaper re-runs the tasks (at-least-once, epoch-fenced).
            return;
        };
        let set: HashSet<Uuid> = recorded.accepted.iter().map(|k| k.lease_token.0).collect();
        if items
            .iter()
            .any(|(c, _)| c.composite && set.contains(&c.key.lease_token.0))
            && let Some(n) = self.hooks.express.get()
        {
            n.notify_one();
        }
        for (c, reply) in items {
            if let Some(s) = reply {
                self.registry.ack(
                    s,
                    c.key.lease_token,
                    c.key.claim_epoch,
                    set.contains(&c.key.lease_token.0),
                );
            }
        }
        if recorded.to_drain
            && let Some(n) = self.hooks.outbox.get()
        {
            n.notify_one();
        }
        if recorded.armed {
            self.close_straddles().await;
        }
        if recorded.applied {
            self.dispatch.notify_one();
        }
    }

    /// The straddle close-out after a commit that armed composites (a plain result with an
    /// owner), as a drainer runs it after its own: re-evaluates the armed roots in a fresh
    /// snapshot that sees every sibling settled, whichever writer or process applied them.
    /// Over every shard: the roots a batch armed lie anywhere, and a recheck another process
    /// takes meanwhile is skipped (SKIP LOCKED). A failure is only logged: the drainers'
    /// failsafe pass runs the rechecks too.
    async fn close_straddles(&self) {
        if let Err(e) = db::sweeps::rollup_recheck_drain(&self.pool, ShardRange::ALL).await {
            tracing::warn!(error = %e, "rollup recheck after a result batch failed");
        }
    }

    /// Writes the batch; if one row poisons it (a data error), writes rows one by one and
    /// turns each unstorable result into a terminal failure of its task. A deadlock or
    /// serialization failure is no data error: the whole batch is written again at once (a
    /// task must never fail terminally because another transaction crossed it). Returns what
    /// was recorded, or `None` when the database could not be reached after retries.
    async fn record_with_fallback(&self, batch: &[Completion]) -> Option<Recorded> {
        let pool = &self.pool;
        let mut delay = Duration::from_millis(100);
        for attempt in 0..6 {
            match db::queue::record_results(pool, batch).await {
                Ok(r) => return Some(r),
                Err(e) if db::is_conflict(&e) => {
                    tracing::warn!(error = %e, attempt, "result batch crossed another transaction; writing it again");
                }
                Err(sqlx::Error::Database(e)) => {
                    tracing::warn!(error = %e, "result batch refused; writing results one by one");
                    let mut all = Recorded::default();
                    for c in batch {
                        match db::queue::record_results(pool, std::slice::from_ref(c)).await {
                            Ok(r) => all.merge(r),
                            // Not this result's fault: left unacked, so the worker resends it
                            // (or the lease lapses and the task re-runs).
                            Err(e) if db::is_conflict(&e) => {}
                            Err(e) => {
                                let f = convert::failure(
                                    c.key.clone(),
                                    format!("the task's result could not be stored: {e}"),
                                    true,
                                );
                                if let Ok(r) = db::queue::record_results(pool, &[f]).await {
                                    all.merge(r);
                                }
                            }
                        }
                    }
                    return Some(all);
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
    fn is_single_stage_result(&self, key: &LeaseKey, pair: &KindPair, stage: i32) -> bool {
        self.manifests
            .final_stage(key.task_type, pair)
            .is_some_and(|s| s as i32 == stage)
    }
}
