//! Composition SQL for the broker's pipeline: apply a compose result (fenced on the lease),
//! check a composite's rollup gate, and read the children / descendants a stage request
//! carries.

use sqlx::{FromRow, PgPool, Row, postgres::PgRow};
use uuid::Uuid;

use serde_json::value::RawValue;
use sqlx::Result;

use crate::db::queue::LeaseKey;

/// A validated compose result, as the JSON array texts the `apply_compose_result` SQL
/// function takes (the broker's `compose::validate` builds them). Text, not `Value` trees:
/// 20 composes of 5,000 children held as maps were 90 MB of the broker's peak heap.
#[derive(Debug, Clone)]
pub struct ComposePayload {
    /// `[{kind, kind_version, name, spec, labels}]`.
    pub children: Box<RawValue>,
    /// `[{from: {kind, name}, to: {kind, name}, values: [{dependent_field, source_field}]}]`.
    pub edges: Box<RawValue>,
    /// `[{name, kind, kind_version, is_default, spec}]`.
    pub configs: Box<RawValue>,
}

/// How applying a compose result went.
#[derive(Debug)]
pub enum ComposeApplied {
    /// Applied in one transaction; composed_gen stamped.
    Applied,
    /// The lease is gone (released, reaped, re-pointed): nothing was written.
    Stale,
    /// The database refused the result (unknown child kind, a name owned by another
    /// resource, ...): a terminal failure of the composer.
    Refused(String),
}

/// A compose payload past this many bytes is written on a connection that is closed
/// afterwards: sqlx keeps a connection's write buffer at its largest message, so every pooled
/// connection that once sent a 20,000-child compose held megabytes for the rest of its life
/// (39 of converge's 50 MB peak heap at the 100k BOM). Reopening costs a few ms, once per
/// large compose.
const LARGE_PAYLOAD: usize = 256 << 10;

/// Applies `payload` for the composite behind `key` at `generation`, storing the composer's
/// `status` with it when there is one (a later claim of the same generation is not composed
/// again and reads it from the row).
pub async fn compose_apply(
    pool: &PgPool,
    key: &LeaseKey,
    generation: i64,
    payload: &ComposePayload,
    status: Option<&serde_json::Value>,
    apply_edges: bool,
    apply_configs: bool,
) -> Result<ComposeApplied> {
    let mut conn = pool.acquire().await?;
    let size = payload.children.get().len() + payload.edges.get().len();
    if size > LARGE_PAYLOAD {
        conn.close_on_drop();
    }
    let r: Result<String, sqlx::Error> =
        sqlx::query_scalar("SELECT apply_compose_result($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)")
            .bind(key.resource_id.0)
            .bind(key.lease_token.0)
            .bind(key.claim_epoch.0)
            .bind(generation)
            .bind(sqlx::types::Json(&payload.children))
            .bind(sqlx::types::Json(&payload.edges))
            .bind(sqlx::types::Json(&payload.configs))
            .bind(apply_edges)
            .bind(apply_configs)
            .bind(status.map(sqlx::types::Json))
            .fetch_one(&mut *conn)
            .await;
    match r {
        Ok(s) if s == "ok" => Ok(ComposeApplied::Applied),
        Ok(_) => Ok(ComposeApplied::Stale),
        Err(sqlx::Error::Database(d)) if d.code().as_deref() == Some("P0001") => {
            Ok(ComposeApplied::Refused(d.message().to_string()))
        }
        Err(e) => Err(e),
    }
}

/// Whether the composite still has descendants in progress (its rollup must wait).
pub async fn rollup_pending(pool: &PgPool, id: Uuid, root_id: Option<Uuid>) -> Result<bool> {
    sqlx::query_scalar("SELECT has_unsettled_descendants($1, $2)")
        .bind(id)
        .bind(root_id)
        .fetch_one(pool)
        .await
}

/// A related resource carried in a compose or rollup request.
#[derive(Debug, Clone)]
pub struct RelatedRow {
    /// Id.
    pub id: Uuid,
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Name.
    pub name: String,
    /// Owner.
    pub owner_id: Option<Uuid>,
    /// Root.
    pub root_id: Option<Uuid>,
    /// Spec, as the JSON text PostgreSQL prints (passed to the wire as is: no parse and
    /// re-serialise per row, and numbers keep their full precision).
    pub spec: String,
    /// Status, likewise.
    pub status: Option<String>,
    /// Generation.
    pub generation: i64,
    /// Synced generation.
    pub synced_gen: i64,
    /// Ready.
    pub is_ready: bool,
    /// Labels.
    pub labels: serde_json::Value,
    /// Phase.
    pub phase: crate::words::Phase,
    /// The last failure's message (for ChildrenNotReady).
    pub failure_message: Option<String>,
}

/// The columns a [`RelatedRow`] is read from, in the order its decoder takes them.
pub(crate) const RELATED_COLUMNS: &str = "id, kind, kind_version, name, owner_id, root_id, \
     spec::text AS spec, status::text AS status, generation, synced_gen, is_ready, labels, \
     phase, failure_message";

/// Decoded by position: a rollup decodes a row per descendant, and looking each column up
/// by name took a quarter of the decode (10,000 rows: 12-16 ms by name, 8.5-12.6 by
/// position, unloaded, release).
impl<'r> FromRow<'r, PgRow> for RelatedRow {
    fn from_row(row: &'r PgRow) -> Result<Self, sqlx::Error> {
        Ok(Self {
            id: row.try_get(0)?,
            kind: row.try_get(1)?,
            kind_version: row.try_get(2)?,
            name: row.try_get(3)?,
            owner_id: row.try_get(4)?,
            root_id: row.try_get(5)?,
            spec: row.try_get(6)?,
            status: row.try_get(7)?,
            generation: row.try_get(8)?,
            synced_gen: row.try_get(9)?,
            is_ready: row.try_get(10)?,
            labels: row.try_get(11)?,
            phase: row.try_get(12)?,
            failure_message: row.try_get(13)?,
        })
    }
}

/// Most related resources one request carries (bounds the frame size).
pub const MAX_RELATED: i64 = 10_000;

/// The composite's direct children (compose's `observed`), or its whole live subtree
/// (rollup's `descendants`: by root_id for a top-level root, direct children otherwise),
/// in (kind, name) byte order; past [`MAX_RELATED`], the first that many in that order.
///
/// The rows are sorted here, not by PostgreSQL: sorting the projected rows (their spec and
/// status printed as text) cost more than reading them (a 5,000-descendant rollup read took
/// 11-15 ms with `ORDER BY`, 7 ms without), and every rollup of a large composite runs at
/// the moment its last child settles, while the database is busiest.
///
/// A subtree read also retires the composite's rollup rechecks that its snapshot can see
/// (migration 0016): the changes that armed them are in what it reads, so they need no
/// second run. Same statement, same snapshot (see `RETIRE_RECHECKS`).
pub async fn related(
    pool: &PgPool,
    id: Uuid,
    root_id: Option<Uuid>,
    subtree: bool,
) -> Result<Vec<RelatedRow>> {
    let filter = if subtree {
        subtree_filter(root_id)
    } else {
        "WHERE owner_id = $1"
    };
    let retire = if subtree { RETIRE_RECHECKS } else { "" };
    let read = |order: &'static str, limit: i64| {
        sqlx::query_as::<_, RelatedRow>(sqlx::AssertSqlSafe(const_format(retire, filter, order)))
            .bind(id)
            .bind(limit)
            .fetch_all(pool)
    };
    let mut rows = read("", MAX_RELATED + 1).await?;
    if i64::try_from(rows.len()).unwrap_or(i64::MAX) > MAX_RELATED {
        // Too many to carry: which ones is decided by the order, so the database sorts.
        rows = read(
            "ORDER BY kind COLLATE \"C\", name COLLATE \"C\"",
            MAX_RELATED,
        )
        .await?;
    }
    rows.sort_unstable_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    Ok(rows)
}

/// The live subtree of composite `$1` whose root is `root_id`: every live resource carrying
/// its id as root_id when it is a top-level root, its direct children otherwise. Two static
/// shapes so each uses its index (root_id / owner_id).
pub(crate) fn subtree_filter(root_id: Option<Uuid>) -> &'static str {
    if root_id.is_none() {
        "WHERE root_id = $1 AND frozen_until IS NULL AND deletion_requested_at IS NULL"
    } else {
        "WHERE owner_id = $1 AND frozen_until IS NULL AND deletion_requested_at IS NULL"
    }
}

/// Deletes the rechecks of composite `$1` that the statement's snapshot sees.
///
/// A recheck a drainer pass holds is waited for, not skipped: that pass keeps a recheck whose
/// composite is in flight (this very run), so a skipped one outlived the read and re-ran the
/// whole rollup once the run ended (1 to 6 of 20 roots in a 20,000-child run). A pass holds
/// its rows for milliseconds and never waits for this statement (it skips locked rows).
/// Rows are locked in id order, so two reads of one composite (a lapsed lease's run and its
/// successor) cannot deadlock.
pub(crate) const RETIRE_RECHECKS: &str = "WITH retired AS (DELETE FROM rollup_recheck WHERE id IN \
     (SELECT id FROM rollup_recheck WHERE root_id = $1 ORDER BY id FOR UPDATE)) ";

/// The related-resources query with `prefix`, `filter` and `order` (constants): built from
/// constants only.
fn const_format(prefix: &'static str, filter: &'static str, order: &'static str) -> String {
    format!("{prefix}SELECT {RELATED_COLUMNS} FROM resources {filter} {order} LIMIT $2")
}
