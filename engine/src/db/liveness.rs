//! SQL of broker liveness (`broker_liveness`, migration 0025): stamping this broker's row,
//! and releasing the leases of brokers whose row went stale.

use std::time::Duration;

use sqlx::PgPool;

use super::interval;
use sqlx::Result;

/// Stamps `broker_id`'s row; true if the row had to be created (first beat, or a peer
/// presumed this broker dead and released its leases meanwhile).
pub async fn beat(pool: &PgPool, broker_id: &str) -> Result<bool> {
    sqlx::query_scalar(
        "INSERT INTO broker_liveness AS b (broker_id) VALUES ($1)
         ON CONFLICT (broker_id) DO UPDATE SET heartbeat_at = now()
         RETURNING (xmax = 0)",
    )
    .bind(broker_id)
    .fetch_one(pool)
    .await
}

/// Deletes the rows of brokers other than `me` silent for `dead_after` and, in the same
/// transaction, releases every lease and reactor delivery they held (epochs bumped, so a
/// late result from them is refused). Returns the dead brokers and the number released. A broker never
/// judges itself: a failed stamp of its own must not release its live leases.
pub async fn release_dead(
    pool: &PgPool,
    me: &str,
    dead_after: Duration,
) -> Result<(Vec<String>, u64)> {
    let mut tx = pool.begin().await?;
    let dead: Vec<String> = sqlx::query_scalar(
        "DELETE FROM broker_liveness WHERE heartbeat_at < now() - $1 AND broker_id <> $2
         RETURNING broker_id",
    )
    .bind(interval(dead_after))
    .bind(me)
    .fetch_all(&mut *tx)
    .await?;
    if dead.is_empty() {
        tx.rollback().await?;
        return Ok((dead, 0));
    }
    let queue = sqlx::query(
        "UPDATE work_queue w
         SET lease_token = NULL, claim_epoch = w.claim_epoch + 1, broker_id = NULL,
             worker_id = NULL, claimed_at = NULL, heartbeat_at = NULL
         WHERE w.broker_id = ANY($1) AND w.lease_token IS NOT NULL",
    )
    .bind(&dead)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    // Its reactor deliveries too (otherwise they wait 2 x LEASE_STALE_AFTER for the reaper).
    let deliveries = sqlx::query(
        "UPDATE lifecycle_outbox l
         SET claim_token = NULL, claim_epoch = l.claim_epoch + 1, broker_id = NULL,
             claimed_at = NULL, heartbeat_at = NULL
         WHERE l.broker_id = ANY($1) AND l.claim_token IS NOT NULL",
    )
    .bind(&dead)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    for (n, channel) in [(queue, "work_ready"), (deliveries, "lifecycle_ready")] {
        if n > 0 {
            sqlx::query("SELECT pg_notify($1, '')")
                .bind(channel)
                .execute(&mut *tx)
                .await?;
        }
    }
    let freed = queue + deliveries;
    tx.commit().await?;
    Ok((dead, freed))
}

/// Deletes this broker's row (clean shutdown, after its leases were released).
pub async fn leave(pool: &PgPool, broker_id: &str) -> Result<()> {
    sqlx::query("DELETE FROM broker_liveness WHERE broker_id = $1")
        .bind(broker_id)
        .execute(pool)
        .await?;
    Ok(())
}
