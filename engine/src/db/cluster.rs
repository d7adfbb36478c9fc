//! SQL of `cluster_members` (migrations 0003, 0004): each process's row and heartbeat, a
//! broker's connected workers, the release of what a silent member held, the removal of rows
//! silent past the TTL, the shard tiling (`cluster_tiling`, engine/sql/cluster.sql), and the
//! reads behind `GET /api/v1/cluster`, the worker counts of `GET /api/v1/kinds` and a
//! resource's `waiting_for`. Routing reads count only members stamped within the dead-after
//! (liveness) window they are given, so a crashed process stops counting at once, while the
//! cluster view lists its row, NotReady, until the TTL.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::{FromRow, PgPool, Result, types::Json};

use super::interval;

/// What a process says about itself when it joins (and reads back in [`MemberRow`]).
#[derive(Debug, Clone, FromRow)]
pub struct Member {
    /// Unique per process start; a broker's id is also the `broker_id` on its claims.
    #[sqlx(rename = "member_id")]
    pub id: String,
    /// What it runs.
    pub role: crate::words::MemberRole,
    /// The build's version.
    pub version: String,
    /// The host (pod) name.
    pub host: String,
    /// The process id.
    pub pid: i32,
    /// The listeners' addresses by name (`http`, `grpc`, `health`).
    pub addresses: Value,
    /// When the process started.
    pub started_at: DateTime<Utc>,
}

/// One (kind, version) a worker subscribed for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedKind {
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Whether the worker takes tasks of it right now (its readiness).
    pub ready: bool,
}

/// One worker stream connected to a broker, as the broker publishes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// The stream's number within its broker.
    pub stream: u64,
    /// The worker's advisory name (`Subscribe.worker_name`).
    pub name: String,
    /// The SDK that built it (`Subscribe.sdk`).
    pub sdk: String,
    /// The authenticated principal, when authentication is on.
    pub principal: Option<String>,
    /// The worker's address as the broker sees it.
    pub peer: Option<String>,
    /// What it serves.
    pub kinds: Vec<ServedKind>,
    /// Most tasks it takes at once.
    pub max_inflight: u32,
    /// Tasks it holds now.
    pub inflight: u32,
    /// When it subscribed.
    pub connected_at: DateTime<Utc>,
    /// Whether the broker told it to drain (no more tasks).
    pub draining: bool,
    /// Whether it answers dry-run compose tasks (`Subscribe.dry_runs`); absent in the rows
    /// of older brokers.
    #[serde(default)]
    pub dry_runs: bool,
}

/// One member's row.
#[derive(Debug, Clone, FromRow)]
pub struct MemberRow {
    /// What it said about itself.
    #[sqlx(flatten)]
    pub member: Member,
    /// Its last stamp.
    pub heartbeat_at: DateTime<Utc>,
    /// Its connected workers (brokers; empty otherwise).
    pub workers: Json<Vec<WorkerInfo>>,
    /// When `workers` was written.
    pub workers_at: Option<DateTime<Utc>>,
    /// Stamped within the liveness window the read was given (Ready); false: NotReady (its
    /// leases are released, routing ignores it).
    pub live: bool,
}

/// Stamps `m`'s row, creating it if missing, and replaces its worker list when `workers` is
/// given; true if the row had to be created or had been released (the first beat, or a peer
/// presumed this member dead and released what it held meanwhile). A stamp clears
/// `released_at`: the member is live again.
pub async fn beat(pool: &PgPool, m: &Member, workers: Option<&[WorkerInfo]>) -> Result<bool> {
    sqlx::query_scalar(
        // `prior` reads the row as it was before this statement (one snapshot).
        "WITH prior AS (SELECT released_at FROM cluster_members WHERE member_id = $1)
         INSERT INTO cluster_members AS c
             (member_id, role, version, host, pid, addresses, started_at, workers, workers_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE($8, '[]'::jsonb),
                 CASE WHEN $8 IS NULL THEN NULL ELSE now() END)
         ON CONFLICT (member_id) DO UPDATE SET
             heartbeat_at = now(),
             workers = COALESCE($8, c.workers),
             workers_at = CASE WHEN $8 IS NULL THEN c.workers_at ELSE now() END,
             released_at = NULL
         RETURNING (xmax = 0) OR EXISTS (SELECT 1 FROM prior WHERE released_at IS NOT NULL)",
    )
    .bind(&m.id)
    .bind(m.role)
    .bind(&m.version)
    .bind(&m.host)
    .bind(m.pid)
    .bind(&m.addresses)
    .bind(m.started_at)
    .bind(workers.map(Json))
    .fetch_one(pool)
    .await
}

/// Stamps `released_at` on the rows of members other than `me` silent for `dead_after` (once:
/// the row stays, NotReady, until [`gc`] removes it) and, in the same transaction, releases
/// every lease and reactor delivery they held (epochs bumped, so a late result from them is
/// refused). Returns the members released now and the number of leases and deliveries freed.
/// A member never judges itself: a failed stamp of its own must not release its live leases.
pub async fn release_dead(
    pool: &PgPool,
    me: &str,
    dead_after: Duration,
) -> Result<(Vec<String>, u64)> {
    let mut tx = pool.begin().await?;
    let dead: Vec<String> = sqlx::query_scalar(
        "UPDATE cluster_members SET released_at = now()
         WHERE heartbeat_at < now() - $1 AND member_id <> $2 AND released_at IS NULL
         RETURNING member_id",
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

/// Deletes the rows of members released and silent for `ttl` (crashed members, listed
/// NotReady until now; a member's own row goes when it stops, [`leave`]). Returns the members
/// removed.
pub async fn gc(pool: &PgPool, ttl: Duration) -> Result<Vec<String>> {
    sqlx::query_scalar(
        "DELETE FROM cluster_members
         WHERE released_at IS NOT NULL AND heartbeat_at < now() - $1
         RETURNING member_id",
    )
    .bind(interval(ttl))
    .fetch_all(pool)
    .await
}

/// Deletes member `id`'s row (clean shutdown; a broker's leases are released by then).
pub async fn leave(pool: &PgPool, id: &str) -> Result<()> {
    sqlx::query("DELETE FROM cluster_members WHERE member_id = $1")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Every member's row, oldest first; those stamped within `liveness` are marked live (the
/// rest crashed or paused: NotReady until [`gc`] removes them).
pub async fn members(pool: &PgPool, liveness: Duration) -> Result<Vec<MemberRow>> {
    sqlx::query_as(
        "SELECT member_id, role, version, host, pid, addresses, started_at, heartbeat_at,
                workers, workers_at, heartbeat_at >= now() - $1 AS live
         FROM cluster_members
         ORDER BY started_at, member_id",
    )
    .bind(interval(liveness))
    .fetch_all(pool)
    .await
}

/// How many connected workers serve one (kind, version), over every live broker.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct Coverage {
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Worker streams subscribed for it.
    pub workers: i64,
    /// Those of them ready to take its tasks now.
    pub ready: i64,
}

/// Worker counts per (kind, version) over the brokers stamped within `dead_after`.
pub async fn coverage(pool: &PgPool, dead_after: Duration) -> Result<Vec<Coverage>> {
    sqlx::query_as(
        "SELECT k->>'kind' AS kind, (k->>'kind_version')::int AS kind_version,
                count(*) AS workers,
                count(*) FILTER (WHERE (k->>'ready')::boolean) AS ready
         FROM cluster_members m,
              jsonb_array_elements(m.workers) w,
              jsonb_array_elements(w->'kinds') k
         WHERE m.heartbeat_at >= now() - $1
         GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .bind(interval(dead_after))
    .fetch_all(pool)
    .await
}

/// Whether any worker of a broker stamped within `dead_after` serves (kind, version).
pub async fn served(pool: &PgPool, kind: &str, version: i32, dead_after: Duration) -> Result<bool> {
    sqlx::query_scalar(
        "SELECT EXISTS (
             SELECT 1 FROM cluster_members m,
                  jsonb_array_elements(m.workers) w,
                  jsonb_array_elements(w->'kinds') k
             WHERE m.heartbeat_at >= now() - $3
               AND k->>'kind' = $1 AND (k->>'kind_version')::int = $2)",
    )
    .bind(kind)
    .bind(version)
    .bind(interval(dead_after))
    .fetch_one(pool)
    .await
}

/// Whether a worker of a broker stamped within `dead_after` that answers dry runs
/// (`Subscribe.dry_runs`) serves (kind, version) and is ready for it: whether a plan's dry
/// run of that kind can be answered.
pub async fn dry_run_served(
    pool: &PgPool,
    kind: &str,
    version: i32,
    dead_after: Duration,
) -> Result<bool> {
    sqlx::query_scalar(
        "SELECT EXISTS (
             SELECT 1 FROM cluster_members m,
                  jsonb_array_elements(m.workers) w,
                  jsonb_array_elements(w->'kinds') k
             WHERE m.heartbeat_at >= now() - $3 AND m.released_at IS NULL
               AND coalesce((w->>'dry_runs')::boolean, false)
               AND NOT coalesce((w->>'draining')::boolean, false)
               AND k->>'kind' = $1 AND (k->>'kind_version')::int = $2
               AND (k->>'ready')::boolean)",
    )
    .bind(kind)
    .bind(version)
    .bind(interval(dead_after))
    .fetch_one(pool)
    .await
}

/// One member's share of the shards for one duty (`cluster_tiling`, engine/sql/cluster.sql).
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct Tile {
    /// The member.
    pub member_id: String,
    /// `control` (drainers and reaper), `broker` (its share, shown in the cluster view) or
    /// `claim` (the shards of one pair it claims tasks in).
    pub duty: String,
    /// With duty `claim`: the kind.
    pub kind: Option<String>,
    /// With duty `claim`: the kind version.
    pub kind_version: Option<i32>,
    /// Lowest shard.
    pub lo: i16,
    /// Highest shard (inclusive).
    pub hi: i16,
}

/// The shard tiling of the members stamped within `liveness` and not released.
pub async fn tiling(pool: &PgPool, liveness: Duration) -> Result<Vec<Tile>> {
    sqlx::query_as("SELECT * FROM cluster_tiling($1)")
        .bind(interval(liveness))
        .fetch_all(pool)
        .await
}
