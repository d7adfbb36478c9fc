//! resources and resource_conditions SQL: apply, read, keyset-paged lists with filters,
//! summaries, and the operator actions (reconcile now, quarantine, delete).

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{FromRow, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use crate::words::{ApplyResult, Phase, TaskTrigger, TaskType};

/// The outcome of an apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The resource id.
    pub id: Uuid,
    /// What it did.
    pub result: ApplyResult,
    /// Generation after the apply.
    pub generation: i64,
}

/// Creates or updates a resource by (kind, name) and schedules it, in one round trip (three
/// with an `actor`, whose name its events record).
#[expect(
    clippy::too_many_arguments,
    reason = "one column per argument of resource_apply"
)]
pub async fn resource_apply(
    pool: &PgPool,
    actor: Option<&str>,
    kind: &str,
    kind_version: i32,
    name: &str,
    spec: &serde_json::Value,
    labels: &serde_json::Value,
    provider_config_ref: Option<&str>,
) -> Result<Applied, sqlx::Error> {
    let (id, result, generation): (Uuid, ApplyResult, i64) =
        super::acting(pool, actor, async |c| {
            sqlx::query_as("SELECT * FROM resource_apply($1, $2, $3, $4, $5, $6)")
                .bind(kind)
                .bind(kind_version)
                .bind(name)
                .bind(spec)
                .bind(labels)
                .bind(provider_config_ref)
                .fetch_one(c)
                .await
        })
        .await?;
    Ok(Applied {
        id,
        result,
        generation,
    })
}

/// One item of a batch apply: what [`resource_apply`] takes, validated by the caller.
#[derive(Debug, Clone)]
pub struct ApplyItem {
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Name; (kind, name) pairs must be distinct within one batch.
    pub name: String,
    /// Spec (a JSON object).
    pub spec: serde_json::Value,
    /// Labels (a JSON object of strings).
    pub labels: serde_json::Value,
    /// Attached provider config.
    pub provider_config_ref: Option<String>,
}

/// Creates or updates every item by (kind, name) as [`resource_apply`] does each, and
/// schedules the changed ones, in one transaction and two statements (SQL
/// `resource_apply_batch`). Returns one [`Applied`] per item, in item order.
pub async fn resource_apply_batch(
    pool: &PgPool,
    actor: Option<&str>,
    items: &[ApplyItem],
) -> Result<Vec<Applied>, sqlx::Error> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let kinds: Vec<&str> = items.iter().map(|i| i.kind.as_str()).collect();
    let versions: Vec<i32> = items.iter().map(|i| i.kind_version).collect();
    let names: Vec<&str> = items.iter().map(|i| i.name.as_str()).collect();
    let specs: Vec<&serde_json::Value> = items.iter().map(|i| &i.spec).collect();
    let labels: Vec<&serde_json::Value> = items.iter().map(|i| &i.labels).collect();
    let refs: Vec<Option<&str>> = items
        .iter()
        .map(|i| i.provider_config_ref.as_deref())
        .collect();
    let rows: Vec<(i64, Uuid, ApplyResult, i64)> = super::acting(pool, actor, async |c| {
        sqlx::query_as(
            "SELECT ord, id, result, generation
             FROM resource_apply_batch($1::text[], $2::int[], $3::text[], $4::jsonb[],
                                       $5::jsonb[], $6::text[])",
        )
        .bind(&kinds)
        .bind(&versions)
        .bind(&names)
        .bind(&specs)
        .bind(&labels)
        .bind(&refs)
        .fetch_all(c)
        .await
    })
    .await?;
    Ok(rows
        .into_iter()
        .map(|(_, id, result, generation)| Applied {
            id,
            result,
            generation,
        })
        .collect())
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
    pub phase: Phase,
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
    /// What the task does (never [`TaskType::React`]: a queue row).
    pub task_type: TaskType,
    /// Whether a broker holds it now.
    pub claimed: bool,
    /// Attempt number at this generation.
    pub attempt: i32,
    /// Generation the task reconciles.
    pub generation: i64,
    /// What fired it.
    pub trigger: TaskTrigger,
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
                CASE WHEN not_before > enqueued_at THEN not_before END AS not_before,
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
    pub phase: Phase,
    /// Spec generation.
    pub generation: i64,
    /// Reconciled generation.
    pub synced_gen: i64,
    /// Synced, healthy, not deleting.
    pub is_ready: bool,
    /// Whether the standing failure stopped its retries (until the spec changes); false
    /// while a transient failure is being retried.
    pub failure_terminal: bool,
    /// Consecutive failures at the failing generation.
    pub failure_attempts: i32,
    /// The failure of the live spec (its first 512 characters), null when it is not
    /// failing: enough for a list to say why, the detail read has the whole text.
    pub failure_message: Option<String>,
    /// Labels.
    pub labels: serde_json::Value,
    /// The direct owner's kind, null for a root.
    pub owner_kind: Option<String>,
    /// The direct owner's name, null for a root.
    pub owner_name: Option<String>,
    /// Created at (the keyset's first column).
    pub created_at: DateTime<Utc>,
    /// Updated at.
    pub updated_at: DateTime<Utc>,
    /// Its problem rank in a [`ListSort::Problems`] page (`resource_problem_rank`), null
    /// for a resource that is not a problem and in a [`ListSort::Created`] page: the
    /// keyset's first column there.
    #[sqlx(default)]
    #[serde(skip)]
    pub sort_rank: Option<i16>,
}

impl ListItem {
    /// Where this row sits in a page's order, for the next page's cursor.
    pub fn keyset(&self) -> Keyset {
        Keyset {
            rank: self.sort_rank,
            created_at: self.created_at,
            id: self.uid,
        }
    }
}

/// One row of the roots list: a list row plus the size of its composed subtree.
#[derive(Debug, Clone, Serialize, FromRow)]
pub struct RootItem {
    /// The root itself.
    #[serde(flatten)]
    #[sqlx(flatten)]
    pub item: ListItem,
    /// How many resources carry this root's id (its descendants, not itself).
    pub resource_count: i64,
}

/// The order of a list page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListSort {
    /// Oldest first: (created_at, id).
    #[default]
    Created,
    /// The problems first, by rank (Failed, Quarantined, Degraded, Orphaned:
    /// `resource_problem_rank`), each rank oldest first; then every other resource, oldest
    /// first. The problems come from the `resource_problems` side table (migration 0008),
    /// so neither part of the walk scans more than a page.
    Problems,
}

/// A position in a list's order: a page holds the rows strictly after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keyset {
    /// The problem rank under [`ListSort::Problems`]; `None` is past every problem (and is
    /// ignored under [`ListSort::Created`]).
    pub rank: Option<i16>,
    /// The resource's creation time.
    pub created_at: DateTime<Utc>,
    /// The resource's id (the tie-break).
    pub id: Uuid,
}

/// List filters; empty vectors and `None` mean "any". Every filter narrows the result (AND);
/// the values inside one vector are alternatives (OR).
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Kinds (union).
    pub kinds: Vec<String>,
    /// Phases (union).
    pub phases: Vec<Phase>,
    /// Page size.
    pub limit: i64,
    /// The order of the page.
    pub sort: ListSort,
    /// Keyset position: rows strictly after this one in `sort`'s order.
    pub after: Option<Keyset>,
    /// Direct children of any of these owners (union).
    pub owners: Vec<Uuid>,
    /// Case-insensitive substring of the name.
    pub name: Option<String>,
    /// A JSON object the labels must contain (every key:value pair, AND).
    pub labels: Option<serde_json::Value>,
}

const LIST_COLUMNS: &str = "SELECT r.id AS uid, r.kind, r.kind_version, r.name, r.phase, \
     r.generation, r.synced_gen, r.is_ready, r.failure_terminal, r.failure_attempts, \
     CASE WHEN r.failure_gen = r.generation THEN left(r.failure_message, 512) END AS failure_message, \
     r.labels, \
     o.kind AS owner_kind, o.name AS owner_name, \
     r.created_at, r.updated_at";

/// Appends the WHERE clause of a list page's filters. Only the predicates a
/// filter uses are emitted, so each combination gets a plan that can use its index (the GIN
/// index for labels, the (owner_id, created_at, id) index for children) instead of one
/// generic plan full of `$n IS NULL OR ...`.
fn push_filters(q: &mut QueryBuilder<Postgres>, f: &ListFilter, roots_only: bool) {
    q.push(" WHERE true");
    if roots_only {
        q.push(" AND r.owner_id IS NULL");
    }
    match f.owners.as_slice() {
        [] => {}
        [one] => {
            q.push(" AND r.owner_id = ").push_bind(*one);
        }
        many => {
            q.push(" AND r.owner_id = ANY(")
                .push_bind(many.to_vec())
                .push(")");
        }
    }
    if !f.kinds.is_empty() {
        q.push(" AND r.kind = ANY(")
            .push_bind(f.kinds.clone())
            .push(")");
    }
    if !f.phases.is_empty() {
        let phases: Vec<&str> = f.phases.iter().map(|p| p.as_str()).collect();
        q.push(" AND r.phase = ANY(").push_bind(phases).push(")");
    }
    if let Some(name) = &f.name {
        // strpos rather than ILIKE: no escaping of % and _ in user input.
        q.push(" AND strpos(lower(r.name), lower(")
            .push_bind(name.clone())
            .push(")) > 0");
    }
    if let Some(labels) = &f.labels {
        q.push(" AND r.labels @> ")
            .push_bind(labels.clone())
            .push("::jsonb");
        // The GIN index covers labelled rows only (0012); a non-empty containment test implies
        // it, and saying so lets the planner use that index.
        if labels.as_object().is_some_and(|m| !m.is_empty()) {
            q.push(" AND r.labels <> '{}'::jsonb");
        }
    }
}

/// The FROM clause of a list branch (`r` the listed rows, `o` their owners).
const LIST_FROM: &str = " FROM resources r LEFT JOIN resources o ON o.id = r.owner_id";

/// Pushes one list page: `LIST_COLUMNS`, then `extra_columns` (computed per row, from `r`),
/// then the filters, order and `limit + 1`.
///
/// Under [`ListSort::Problems`] the page is two keyset walks glued together: the problem
/// rows through the `resource_problems` side table (by rank, created_at, id), then every row
/// that is not a problem through idx_resources_created, each cut at `limit + 1` rows, sorted
/// once more as a whole (at most twice the page). A cursor already past the problems skips
/// the first walk.
fn push_list(
    q: &mut QueryBuilder<Postgres>,
    f: &ListFilter,
    roots_only: bool,
    extra_columns: &str,
) {
    let rest_after = |q: &mut QueryBuilder<Postgres>, after: Option<&Keyset>| {
        if let Some(k) = after {
            q.push(" AND (r.created_at, r.id) > (")
                .push_bind(k.created_at)
                .push(", ")
                .push_bind(k.id)
                .push(")");
        }
        q.push(" ORDER BY r.created_at, r.id LIMIT ")
            .push_bind(f.limit + 1);
    };
    match f.sort {
        ListSort::Created => {
            q.push(LIST_COLUMNS).push(extra_columns).push(LIST_FROM);
            push_filters(q, f, roots_only);
            rest_after(q, f.after.as_ref());
        }
        ListSort::Problems => {
            let past_problems = f.after.as_ref().filter(|k| k.rank.is_none());
            q.push("SELECT * FROM (");
            if past_problems.is_none() {
                q.push("(").push(LIST_COLUMNS).push(extra_columns).push(
                    ", p.rank AS sort_rank FROM resource_problems p \
                         JOIN resources r ON r.id = p.id \
                         LEFT JOIN resources o ON o.id = r.owner_id",
                );
                push_filters(q, f, roots_only);
                if let Some(k) = &f.after {
                    q.push(" AND (p.rank, p.created_at, p.id) > (")
                        .push_bind(k.rank)
                        .push(", ")
                        .push_bind(k.created_at)
                        .push(", ")
                        .push_bind(k.id)
                        .push(")");
                }
                q.push(" ORDER BY p.rank, p.created_at, p.id LIMIT ")
                    .push_bind(f.limit + 1)
                    .push(") UNION ALL ");
            }
            q.push("(")
                .push(LIST_COLUMNS)
                .push(extra_columns)
                .push(", NULL::smallint AS sort_rank")
                .push(LIST_FROM);
            push_filters(q, f, roots_only);
            q.push(" AND resource_problem_rank(r.phase) IS NULL");
            rest_after(q, past_problems);
            q.push(")) page ORDER BY sort_rank NULLS LAST, created_at, uid LIMIT ")
                .push_bind(f.limit + 1);
        }
    }
}

/// One keyset page in `f.sort`'s order. No COUNT: the page is exact, totals are not
/// computed. Returns `limit + 1` rows at most so the caller can tell whether more exist.
pub async fn resource_list(pool: &PgPool, f: &ListFilter) -> Result<Vec<ListItem>, sqlx::Error> {
    let mut q = QueryBuilder::<Postgres>::new("");
    push_list(&mut q, f, false, "");
    q.build_query_as::<ListItem>().fetch_all(pool).await
}

/// One keyset page of roots (resources without an owner), each with its descendant count;
/// `f.owners` is ignored. Returns `limit + 1` rows at most, like [`resource_list`].
pub async fn resource_roots(pool: &PgPool, f: &ListFilter) -> Result<Vec<RootItem>, sqlx::Error> {
    let mut q = QueryBuilder::<Postgres>::new("");
    let f = ListFilter {
        owners: Vec::new(),
        ..f.clone()
    };
    push_list(
        &mut q,
        &f,
        true,
        ", (SELECT count(*) FROM resources d WHERE d.root_id = r.id AND d.id <> r.id) \
         AS resource_count",
    );
    q.build_query_as::<RootItem>().fetch_all(pool).await
}

/// A resource's identity: id plus its public (kind, name) address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, FromRow)]
pub struct ResourceKey {
    /// The resource id.
    pub uid: Uuid,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
}

/// Resolves (kind, name) addresses to ids; addresses that name no resource are left out.
pub async fn resource_keys(
    pool: &PgPool,
    refs: &[(String, String)],
) -> Result<Vec<ResourceKey>, sqlx::Error> {
    let (kinds, names): (Vec<String>, Vec<String>) = refs.iter().cloned().unzip();
    sqlx::query_as::<_, ResourceKey>(
        "SELECT r.id AS uid, r.kind, r.name
         FROM resources r
         JOIN unnest($1::text[], $2::text[]) AS x(kind, name)
           ON r.kind = x.kind AND r.name = x.name
         ORDER BY r.kind, r.name",
    )
    .bind(kinds)
    .bind(names)
    .fetch_all(pool)
    .await
}

/// How many resources of one kind are in one phase.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct PhaseCount {
    /// Kind.
    pub kind: String,
    /// Phase.
    pub phase: Phase,
    /// Number of resources.
    pub count: i64,
}

/// Counts by (kind, phase): of the descendants of `owners` (their union, each row once), or
/// of the roots themselves when `owners` is empty.
pub async fn resource_summary(
    pool: &PgPool,
    owners: &[Uuid],
) -> Result<Vec<PhaseCount>, sqlx::Error> {
    if owners.is_empty() {
        return sqlx::query_as::<_, PhaseCount>(
            "SELECT kind, phase, count(*) AS count FROM resources
             WHERE owner_id IS NULL GROUP BY kind, phase ORDER BY kind, phase",
        )
        .fetch_all(pool)
        .await;
    }
    sqlx::query_as::<_, PhaseCount>(
        "SELECT r.kind, r.phase, count(*) AS count FROM resources r
         WHERE r.id IN (SELECT d.id FROM unnest($1::uuid[]) AS o(id),
                                         LATERAL resource_descendant_ids(o.id) AS d)
         GROUP BY r.kind, r.phase ORDER BY r.kind, r.phase",
    )
    .bind(owners)
    .fetch_all(pool)
    .await
}

/// What a "reconcile now" request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileNow {
    /// A reconcile task was queued (or a queued one made due now).
    Queued,
    /// A reconcile task was already queued or running.
    AlreadyQueued,
    /// The resource is being deleted.
    Deleting,
    /// The resource is orphaned or quarantined.
    Frozen,
}

/// Queues a reconcile of the live generation even if the resource is synced (trigger
/// `manual`). `None` when no such resource exists.
pub async fn resource_reconcile_now(
    pool: &PgPool,
    actor: Option<&str>,
    kind: &str,
    name: &str,
) -> Result<Option<ReconcileNow>, sqlx::Error> {
    let r: Option<Option<String>> = super::acting(pool, actor, async |c| {
        sqlx::query_scalar(
            "SELECT resource_reconcile_now(id) FROM resources WHERE kind = $1 AND name = $2",
        )
        .bind(kind)
        .bind(name)
        .fetch_optional(c)
        .await
    })
    .await?;
    Ok(match r.flatten().as_deref() {
        Some("queued") => Some(ReconcileNow::Queued),
        Some("already_queued") => Some(ReconcileNow::AlreadyQueued),
        Some("deleting") => Some(ReconcileNow::Deleting),
        Some("frozen") => Some(ReconcileNow::Frozen),
        _ => None,
    })
}

/// Quarantines (`true`) or releases (`false`) a resource; see `resource_quarantine` and
/// `resource_unquarantine` in `migrations/0003_api.sql`. Returns false when no such resource
/// exists.
pub async fn resource_set_quarantine(
    pool: &PgPool,
    actor: Option<&str>,
    kind: &str,
    name: &str,
    quarantined: bool,
) -> Result<bool, sqlx::Error> {
    let sql = if quarantined {
        "SELECT resource_quarantine(id) FROM resources WHERE kind = $1 AND name = $2"
    } else {
        "SELECT resource_unquarantine(id) FROM resources WHERE kind = $1 AND name = $2"
    };
    let found: Option<bool> = super::acting(pool, actor, async |c| {
        sqlx::query_scalar(sql)
            .bind(kind)
            .bind(name)
            .fetch_optional(c)
            .await
    })
    .await?;
    Ok(found.unwrap_or(false))
}

/// Requests deletion of a resource: marks its teardown tree (everything it owns and
/// everything downstream of it) Deleting and advances it at once. Returns how many rows were
/// newly marked (0 when it was already being deleted), `None` when no such resource exists.
pub async fn resource_request_deletion(
    pool: &PgPool,
    actor: Option<&str>,
    kind: &str,
    name: &str,
) -> Result<Option<i32>, sqlx::Error> {
    super::retry_conflicts(|| async {
        let marked: Option<Option<i32>> = super::acting(pool, actor, async |c| {
            sqlx::query_scalar(
                "SELECT resource_request_deletion(id) FROM resources WHERE kind = $1 AND name = $2",
            )
            .bind(kind)
            .bind(name)
            .fetch_optional(c)
            .await
        })
        .await?;
        Ok(marked.flatten())
    })
    .await
}
