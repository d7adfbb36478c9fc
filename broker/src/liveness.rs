//! Broker liveness: each broker stamps its `broker_liveness` row every [`BEAT_EVERY`] and,
//! on the same tick, releases the leases of any other broker whose row is older than
//! [`DEAD_AFTER`] (a SIGKILLed pod, a partitioned node). Those tasks are claimable again within
//! `DEAD_AFTER + BEAT_EVERY` (about 7 s) instead of the 30 s lease staleness, which stays as
//! the backstop for a lone broker that died with nobody left to notice. Both the stamp and
//! the check use the database's clock, so skew between pods does not matter.
//!
//! A broker paused longer than `DEAD_AFTER` (a frozen VM) finds its row gone on its next beat:
//! its leases were released and re-claimed meanwhile, and the epoch fence refuses whatever it
//! still delivers for them, so nothing runs twice to completion unnoticed.
//!
//! Given only the pool, this broker's id and the dispatcher's wake-up (released leases are
//! claimable work).

use std::{sync::Arc, time::Duration};

use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use converge_engine::db;

/// How often a broker stamps its row.
pub const BEAT_EVERY: Duration = Duration::from_secs(1);
/// How long a broker's row may go unstamped before its peers presume it dead: six missed
/// stamps, so a slow statement or a busy runtime is not mistaken for a death, and still
/// inside issue 24's 10 s.
pub const DEAD_AFTER: Duration = Duration::from_secs(6);

/// The liveness loop of one broker.
pub(crate) struct Liveness {
    pool: PgPool,
    broker_id: String,
    /// The dispatcher's wake-up.
    dispatch: Arc<Notify>,
}

impl Liveness {
    /// The loop for broker `broker_id`.
    pub(crate) fn new(pool: PgPool, broker_id: String, dispatch: Arc<Notify>) -> Self {
        Liveness {
            pool,
            broker_id,
            dispatch,
        }
    }

    /// Stamps this broker's row and reaps dead peers until `stop` (the broker removes the
    /// row with [`leave`] after its drain).
    pub(crate) async fn run(self, stop: CancellationToken) {
        let (pool, me) = (&self.pool, &self.broker_id);
        let mut first = true;
        let mut tick = tokio::time::interval(BEAT_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            match db::liveness::beat(pool, me).await {
                Ok(true) if !first => tracing::warn!(
                    broker = %me,
                    "this broker was presumed dead (no liveness stamp for {DEAD_AFTER:?}); its leases were released"
                ),
                Ok(_) => first = false,
                Err(e) => tracing::warn!(error = %e, "could not stamp broker liveness"),
            }
            match db::liveness::release_dead(pool, me, DEAD_AFTER).await {
                Ok((dead, freed)) if !dead.is_empty() => {
                    tracing::warn!(brokers = ?dead, released = freed, "released the leases of brokers that stopped stamping liveness");
                    self.dispatch.notify_one();
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "could not check peer brokers' liveness"),
            }
        }
    }
}

/// Removes broker `broker_id`'s row after a clean drain (its leases are already released).
pub(crate) async fn leave(pool: &PgPool, broker_id: &str) {
    if let Err(e) = db::liveness::leave(pool, broker_id).await {
        tracing::warn!(error = %e, "could not remove this broker's liveness row");
    }
}
