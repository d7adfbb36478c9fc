//! Revocations: the engine took a running task's lease away (its resource was deleted or
//! quarantined, or its spec generation moved past the task's), and the worker running it is
//! told to stop with `CancelTask` and the reason (DESIGN §4, rule 6's reasons other than
//! `deadline`, which `handout` sends).
//!
//! The signal is the engine's `lease_revoked` NOTIFY (`notify_lease_revoked`, queue.sql):
//! `<reason> <token> ...`, sent in the transaction that dropped or re-pointed the queue rows,
//! so it arrives only once that is committed. Every broker hears every notice and cancels the
//! leases it holds; the rest are another broker's. The NOTIFY comes over the LISTEN connection
//! of `caches`, which hands each payload here. A notice lost while that connection was down
//! is made up for by [`Revocations::sweep`] after each (re)connect: the leases in flight are
//! checked against the database (`lease_revocations`).
//!
//! Nothing is written: the row is gone or carries a newer epoch, so the worker's late result
//! is refused by the same fence as any stale one (`Job::Unknown` in `complete`), and a
//! superseded resource's new generation is already claimable.
//!
//! Given the pool, the registry and the dispatcher's wake-up (a slot freed).

use std::sync::Arc;

use sqlx::PgPool;
use tokio::sync::Notify;

use converge_engine::{
    db::{self, queue::Revoked},
    ids::LeaseToken,
    metrics::{TaskResult, metrics},
};

use crate::{convert, registry::Registry};

/// The revocation handler; cheap to share (`Arc`).
pub(crate) struct Revocations {
    pool: PgPool,
    registry: Arc<Registry>,
    /// The dispatcher's wake-up: a cancelled task frees its slot.
    dispatch: Arc<Notify>,
}

impl Revocations {
    /// Cancels leases of `registry`'s streams; wakes `dispatch` when slots free up.
    pub fn new(pool: PgPool, registry: Arc<Registry>, dispatch: Arc<Notify>) -> Self {
        Revocations {
            pool,
            registry,
            dispatch,
        }
    }

    /// One `lease_revoked` payload. An empty one is the LISTEN connection's (re)connect: the
    /// notices sent while it was down are gone, so the in-flight leases are swept instead.
    pub fn on_notice(self: &Arc<Self>, payload: &str) {
        if payload.is_empty() {
            let this = Arc::clone(self);
            tokio::spawn(async move { this.sweep().await });
            return;
        }
        match Revoked::parse_notice(payload) {
            Some((reason, tokens)) => self.cancel(&tokens, reason),
            None => tracing::warn!(
                payload = %payload.chars().take(64).collect::<String>(),
                "lease_revoked notice not understood; ignored"
            ),
        }
    }

    /// Cancels the leases among `tokens` this broker holds.
    pub fn cancel(&self, tokens: &[LeaseToken], reason: Revoked) {
        let taken = self.registry.revoke(tokens, reason.as_str());
        if taken.is_empty() {
            return;
        }
        for f in &taken {
            tracing::info!(lease = %f.key.lease_token, resource = %f.key.resource_id, reason = reason.as_str(), "task lease revoked by the engine; cancelling");
            metrics().task_ended(
                &f.pair.kind,
                convert::stage_word(f.stage),
                TaskResult::Cancelled,
                None,
            );
        }
        self.dispatch.notify_one();
    }

    /// The failsafe: finds the in-flight leases the engine took away (and why) and cancels
    /// them. Runs after each LISTEN (re)connect; a failure is logged and left to the next
    /// reconnect (a worker then finishes its task and has its result refused).
    pub async fn sweep(&self) {
        let leases = self.registry.revocable();
        if leases.is_empty() {
            return;
        }
        match db::queue::lease_revocations(&self.pool, &leases).await {
            Ok(found) => {
                for reason in [Revoked::Deleted, Revoked::Quarantined, Revoked::Superseded] {
                    let tokens: Vec<LeaseToken> = found
                        .iter()
                        .filter(|(_, r)| *r == reason)
                        .map(|(t, _)| *t)
                        .collect();
                    if !tokens.is_empty() {
                        self.cancel(&tokens, reason);
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not re-check in-flight leases"),
        }
    }
}
