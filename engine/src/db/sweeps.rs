//! The sweepers' SQL: drain the outbox and run the reaper family, each scoped to a shard
//! range so pods with disjoint ranges never contend.

use std::time::Duration;

use super::interval;
use crate::ids::ShardRange;
use sqlx::PgPool;

/// Applies up to `max` outbox rows (with `express`, only rows marked express); returns how
/// many were popped. The resources the batch brought to synced are observed in
/// `converge_reconcile_duration_seconds` here, the one place they are known.
pub async fn outbox_drain(
    pool: &PgPool,
    shards: ShardRange,
    max: i32,
    express: bool,
) -> Result<i32, sqlx::Error> {
    let (popped, kinds, secs): (i32, Option<Vec<String>>, Option<Vec<f64>>) =
        sqlx::query_as("SELECT * FROM drain_outbox_batch($1, $2, $3, $4)")
            .bind(max)
            .bind(shards.lo)
            .bind(shards.hi)
            .bind(express)
            .fetch_one(pool)
            .await?;
    if let (Some(kinds), Some(secs)) = (kinds, secs) {
        crate::metrics::metrics().synced(&kinds, &secs);
    }
    Ok(popped)
}

/// Frees leases whose heartbeat is older than `stale_after`.
pub async fn lease_reap_stale(
    pool: &PgPool,
    shards: ShardRange,
    stale_after: Duration,
) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("SELECT reap_stale_work($1, $2, $3)")
        .bind(shards.lo)
        .bind(shards.hi)
        .bind(interval(stale_after))
        .fetch_one(pool)
        .await
}

/// Re-enqueues resources behind their spec that have no task and no undrained result.
pub async fn resource_requeue_lagging(
    pool: &PgPool,
    shards: ShardRange,
    quiet_for: Duration,
    limit: i32,
) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("SELECT requeue_failed_and_pending($1, $2, $3, $4)")
        .bind(shards.lo)
        .bind(shards.hi)
        .bind(interval(quiet_for))
        .bind(limit)
        .fetch_one(pool)
        .await
}

/// Drops queue rows nobody claimed for `older_than`.
pub async fn work_delete_unclaimed(
    pool: &PgPool,
    shards: ShardRange,
    older_than: Duration,
) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("SELECT delete_unclaimed_work($1, $2, $3)")
        .bind(shards.lo)
        .bind(shards.hi)
        .bind(interval(older_than))
        .fetch_one(pool)
        .await
}

/// When the PostgreSQL server started (a change means a restart: UNLOGGED tables are empty).
pub async fn server_started_at(
    pool: &PgPool,
) -> Result<chrono::DateTime<chrono::Utc>, sqlx::Error> {
    sqlx::query_scalar("SELECT pg_postmaster_start_time()")
        .fetch_one(pool)
        .await
}

/// Armed roots taken per recheck: each batch of results arms at most one row per composite
/// it touched, so this covers many batches' worth in one statement.
const RECHECK_MAX: i32 = 10_000;

/// Re-evaluates composites armed by concurrent result batches (the straddle case) in a
/// fresh snapshot, at most [`RECHECK_MAX`] of them; returns how many were re-pended. Run by
/// a drainer and by a completion writer after their own commits.
pub async fn rollup_recheck_drain(pool: &PgPool, shards: ShardRange) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("SELECT drain_rollup_rechecks($1, $2, $3)")
        .bind(RECHECK_MAX)
        .bind(shards.lo)
        .bind(shards.hi)
        .fetch_one(pool)
        .await
}

/// Removes composer-dropped children whose orphan grace expired.
pub async fn orphan_sweep_expired(
    pool: &PgPool,
    shards: ShardRange,
    limit: i32,
) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("SELECT sweep_expired_orphans($1, $2, $3)")
        .bind(shards.lo)
        .bind(shards.hi)
        .bind(limit)
        .fetch_one(pool)
        .await
}

/// Advances marked teardown trees in `shards`: queues the delete tasks of unblocked rows with
/// a finalizer and removes unblocked rows without one. Returns how many rows progressed.
pub async fn teardown_sweep(
    pool: &PgPool,
    shards: ShardRange,
    limit: i32,
) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("SELECT sweep_deletable($1, $2, $3)")
        .bind(shards.lo)
        .bind(shards.hi)
        .bind(limit)
        .fetch_one(pool)
        .await
}

/// Re-arms reactor deliveries whose claim stopped heartbeating for `stale_after`.
pub async fn lifecycle_reap_stale(
    pool: &PgPool,
    shards: ShardRange,
    stale_after: Duration,
) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("SELECT reap_stale_lifecycle($1, $2, $3)")
        .bind(shards.lo)
        .bind(shards.hi)
        .bind(interval(stale_after))
        .fetch_one(pool)
        .await
}

/// The kinds that opted into periodic resync: (kind, version, interval, recompose).
pub async fn resync_kinds(pool: &PgPool) -> Result<Vec<(String, i32, i32, bool)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT kind, kind_version, resync_interval_secs, resync_recomposes
         FROM kind_config WHERE resync_interval_secs > 0 AND NOT retired",
    )
    .fetch_all(pool)
    .await
}

/// Re-pends up to `limit` settled resources of (kind, version) not observed for `every`.
pub async fn resync_kind(
    pool: &PgPool,
    kind: &str,
    version: i32,
    every: Duration,
    recompose: bool,
    limit: i32,
) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("SELECT requeue_for_resync($1, $2, $3, $4, $5)")
        .bind(kind)
        .bind(version)
        .bind(interval(every))
        .bind(recompose)
        .bind(limit)
        .fetch_one(pool)
        .await
}

/// Deletes up to `limit` events older than `older_than`.
pub async fn events_gc(
    pool: &PgPool,
    older_than: Duration,
    limit: i32,
) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("SELECT gc_resource_events($1, $2)")
        .bind(interval(older_than))
        .bind(limit)
        .fetch_one(pool)
        .await
}
