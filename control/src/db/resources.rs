//! resources and resource_conditions SQL: apply, read, keyset-paged list.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{FromRow, PgPool};
use uuid::Uuid;

/// The outcome of an apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The resource id.
    pub id: Uuid,
    /// created | configured | unchanged.
    pub result: String,
    /// Generation after the apply.
    pub generation: i64,
}

/// Creates or updates a resource by (kind, name) and schedules it, in one round trip.
pub async fn resource_apply(
    pool: &PgPool,
    kind: &str,
    kind_version: i32,
    name: &str,
    spec: &serde_json::Value,
    labels: &serde_json::Value,
    provider_config_ref: Option<&str>,
) -> Result<Applied, sqlx::Error> {
    let (id, result, generation): (Uuid, String, i64) =
        sqlx::query_as("SELECT * FROM resource_apply($1, $2, $3, $4, $5, $6)")
            .bind(kind)
            .bind(kind_version)
            .bind(name)
            .bind(spec)
            .bind(labels)
            .bind(provider_config_ref)
            .fetch_one(pool)
            .await?;
    Ok(Applied {
        id,
        result,
        generation,
    })
}

/// The full read of one resource.
#[derive(Debug, Clone, Serialize, FromRow)]
pub struct ResourceRow {
    /// The resource id.
    pub uid: Uuid,
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: serde_json::Value,
    /// Spec.
    pub spec: serde_json::Value,
    /// Last applied status.
    pub status: Option<serde_json::Value>,
    /// Derived phase.
    pub phase: String,
    /// Spec generation.
    pub generation: i64,
    /// Reconciled generation.
    pub synced_gen: i64,
    /// Health axis.
    pub health_ok: bool,
    /// Synced, healthy, not deleting.
    pub is_ready: bool,
    /// Generation of the last failure (0 = none).
    pub failure_gen: i64,
    /// Retries stopped until the spec changes.
    pub failure_terminal: bool,
    /// Consecutive failures at this generation.
    pub failure_attempts: i32,
    /// The last failure's message.
    pub failure_message: Option<String>,
    /// Finalizers.
    pub finalizers: Vec<String>,
    /// Deletion requested at.
    pub deletion_requested_at: Option<DateTime<Utc>>,
    /// Attached provider config.
    pub provider_config_ref: Option<String>,
    /// Owner (kind, name), for composed children.
    pub owner_kind: Option<String>,
    /// Owner name.
    pub owner_name: Option<String>,
    /// Created at.
    pub created_at: DateTime<Utc>,
    /// Updated at.
    pub updated_at: DateTime<Utc>,
}

/// A stored condition.
#[derive(Debug, Clone, Serialize, FromRow)]
pub struct ConditionRow {
    /// Ready, Synced or custom.
    #[serde(rename = "type")]
    pub type_: String,
    /// True | False | Unknown.
    pub status: String,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
    /// When the status last changed.
    pub last_transition_at: DateTime<Utc>,
}

/// The live claim on a resource, if any.
#[derive(Debug, Clone, Serialize, FromRow)]
pub struct WorkRow {
    /// reconcile | delete | operate.
    pub task_type: String,
    /// Whether a broker holds it now.
    pub claimed: bool,
    /// Attempt number at this generation.
    pub attempt: i32,
    /// Generation the task reconciles.
    pub generation: i64,
    /// What fired it.
    pub trigger: String,
    /// When it was claimed.
    pub claimed_at: Option<DateTime<Utc>>,
    /// Last attested heartbeat.
    pub heartbeat_at: Option<DateTime<Utc>>,
    /// Not before (retry backoff).
    pub not_before: Option<DateTime<Utc>>,
    /// Claiming broker.
    pub broker_id: Option<String>,
}

const RESOURCE_COLUMNS: &str = "r.id AS uid, r.kind, r.kind_version, r.name, r.labels, r.spec, r.status, \
     r.phase, r.generation, r.synced_gen, r.health_ok, r.is_ready, r.failure_gen, r.failure_terminal, \
     r.failure_attempts, r.failure_message, r.finalizers, r.deletion_requested_at, r.provider_config_ref, \
     o.kind AS owner_kind, o.name AS owner_name, r.created_at, r.updated_at";

/// Reads one resource with its conditions and live claim.
pub async fn resource_get(
    pool: &PgPool,
    kind: &str,
    name: &str,
) -> Result<Option<(ResourceRow, Vec<ConditionRow>, Vec<WorkRow>)>, sqlx::Error> {
    let sql = format!(
        "SELECT {RESOURCE_COLUMNS} FROM resources r LEFT JOIN resources o ON o.id = r.owner_id
         WHERE r.kind = $1 AND r.name = $2"
    );
    // Built from constants only (no input), so it is safe to assert.
    let Some(row) = sqlx::query_as::<_, ResourceRow>(sqlx::AssertSqlSafe(sql))
        .bind(kind)
        .bind(name)
        .fetch_optional(pool)
        .await?
    else {
        return Ok(None);
    };
    let conditions = sqlx::query_as::<_, ConditionRow>(
        "SELECT type AS type_, status, reason, message, last_transition_at
         FROM resource_conditions WHERE resource_id = $1 ORDER BY type",
    )
    .bind(row.uid)
    .fetch_all(pool)
    .await?;
    let work = sqlx::query_as::<_, WorkRow>(
        "SELECT task_type, lease_token IS NOT NULL AS claimed, attempt, generation, trigger,
                claimed_at, heartbeat_at,
                CASE WHEN not_before = '-infinity' THEN NULL ELSE not_before END AS not_before,
                broker_id
         FROM work_queue WHERE resource_id = $1 AND shard_id = shard_of($1)",
    )
    .bind(row.uid)
    .fetch_all(pool)
    .await?;
    Ok(Some((row, conditions, work)))
}

/// One row of the resource list.
#[derive(Debug, Clone, Serialize, FromRow)]
pub struct ListItem {
    /// The resource id.
    pub uid: Uuid,
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Name.
    pub name: String,
    /// Derived phase.
    pub phase: String,
    /// Spec generation.
    pub generation: i64,
    /// Reconciled generation.
    pub synced_gen: i64,
    /// Synced, healthy, not deleting.
    pub is_ready: bool,
    /// Labels.
    pub labels: serde_json::Value,
    /// Created at (the keyset's first column).
    pub created_at: DateTime<Utc>,
    /// Updated at.
    pub updated_at: DateTime<Utc>,
}

/// List filters; empty vectors mean "any".
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Kinds (union).
    pub kinds: Vec<String>,
    /// Phases (union).
    pub phases: Vec<String>,
    /// Page size.
    pub limit: i64,
    /// Keyset position: rows strictly after (created_at, id).
    pub after: Option<(DateTime<Utc>, Uuid)>,
}

/// One keyset page ordered by (created_at, id). No COUNT: the page is exact, totals are not
/// computed. Returns `limit + 1` rows at most so the caller can tell whether more exist.
pub async fn resource_list(pool: &PgPool, f: &ListFilter) -> Result<Vec<ListItem>, sqlx::Error> {
    let (after_ts, after_id) = match f.after {
        Some((t, id)) => (Some(t), Some(id)),
        None => (None, None),
    };
    sqlx::query_as::<_, ListItem>(
        "SELECT id AS uid, kind, kind_version, name, phase, generation, synced_gen, is_ready,
                labels, created_at, updated_at
         FROM resources
         WHERE (cardinality($1::text[]) = 0 OR kind = ANY($1))
           AND (cardinality($2::text[]) = 0 OR phase = ANY($2))
           AND ($3::timestamptz IS NULL OR (created_at, id) > ($3, $4::uuid))
         ORDER BY created_at, id
         LIMIT $5",
    )
    .bind(&f.kinds)
    .bind(&f.phases)
    .bind(after_ts)
    .bind(after_id)
    .bind(f.limit + 1)
    .fetch_all(pool)
    .await
}
