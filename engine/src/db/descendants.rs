//! A composite's live subtree without carrying it: the rollup summary (counts by phase and
//! kind, the refs that need attention) that every ROLLUP request holds, and the keyset pages
//! a handler reads through `ListDescendants` only when it asks, authorised by the lease of
//! the task it holds.
//!
//! "Live subtree" is the set [`super::compose::related`] reads for a rollup: every live
//! resource carrying the composite's id as root_id when it is a top-level root, its direct
//! children otherwise.

use std::collections::BTreeMap;

use serde_json::Value;
use sqlx::{FromRow, PgPool, Result, Row};
use uuid::Uuid;

use super::compose::{RELATED_COLUMNS, RETIRE_RECHECKS, RelatedRow, subtree_filter};
use crate::words::Phase;

/// Most refs each of the summary's `failed` and `not_ready` lists carries.
pub const SUMMARY_REFS: i64 = 100;

/// Descendants a page returns when the caller asks for none in particular.
pub const DEFAULT_PAGE: u32 = 500;

/// Most descendants one page returns (bounds the response frame: 2,000 rows of a few KB).
pub const MAX_PAGE: u32 = 2_000;

/// A descendant named in a summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRef {
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Its last failure's message (failed refs only).
    pub failure_message: Option<String>,
}

/// What a rollup request says about the subtree without shipping it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Live descendants.
    pub total: i64,
    /// Per phase.
    pub by_phase: BTreeMap<Phase, i64>,
    /// Per kind.
    pub by_kind: BTreeMap<String, i64>,
    /// Descendants still progressing (not synced at their generation and not failed): the
    /// rollup gate's first probe, from the same rows.
    pub unsettled: i64,
    /// The first [`SUMMARY_REFS`] failed descendants in (kind, name) byte order.
    pub failed: Vec<SummaryRef>,
    /// The first [`SUMMARY_REFS`] descendants that are not ready, same order.
    pub not_ready: Vec<SummaryRef>,
    /// How many are failed.
    pub failed_total: i64,
    /// How many are not ready.
    pub not_ready_total: i64,
}

/// The summary of composite `id`'s live subtree (`root_id`: its root, `None` for a root).
///
/// Like the full read, it retires the composite's rollup rechecks its snapshot can see
/// ([`RETIRE_RECHECKS`]): the changes that armed them are counted in it. One statement, one
/// snapshot; the rows are read for five narrow columns, never their spec or status.
pub async fn summary(pool: &PgPool, id: Uuid, root_id: Option<Uuid>) -> Result<Summary> {
    let sql = format!(
        "{RETIRE_RECHECKS}, sub AS MATERIALIZED ( \
           SELECT kind, name, phase, is_ready, failure_message, \
                  (synced_gen < generation AND phase <> 'Failed') AS unsettled \
           FROM resources {filter}) \
         SELECT \
           (SELECT coalesce(jsonb_agg(jsonb_build_array(kind, phase, n, u)), '[]') FROM \
              (SELECT kind, phase, count(*) AS n, count(*) FILTER (WHERE unsettled) AS u \
               FROM sub GROUP BY kind, phase) g), \
           (SELECT coalesce(jsonb_agg(jsonb_build_array(kind, name, failure_message)), '[]') FROM \
              (SELECT kind, name, failure_message FROM sub WHERE phase = 'Failed' \
               ORDER BY kind COLLATE \"C\", name COLLATE \"C\" LIMIT {SUMMARY_REFS}) f), \
           (SELECT coalesce(jsonb_agg(jsonb_build_array(kind, name)), '[]') FROM \
              (SELECT kind, name FROM sub WHERE NOT is_ready \
               ORDER BY kind COLLATE \"C\", name COLLATE \"C\" LIMIT {SUMMARY_REFS}) r), \
           (SELECT count(*) FROM sub WHERE NOT is_ready)",
        filter = subtree_filter(root_id),
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_one(pool)
        .await?;
    let groups: Value = row.try_get(0)?;
    let failed: Value = row.try_get(1)?;
    let not_ready: Value = row.try_get(2)?;
    let mut s = Summary {
        not_ready_total: row.try_get(3)?,
        failed: refs(&failed),
        not_ready: refs(&not_ready),
        ..Summary::default()
    };
    for g in groups.as_array().into_iter().flatten() {
        let kind = str_at(g, 0);
        let phase: Phase = str_at(g, 1)
            .parse()
            .map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
        let (n, u) = (int_at(g, 2), int_at(g, 3));
        s.total += n;
        s.unsettled += u;
        *s.by_kind.entry(kind.to_owned()).or_default() += n;
        *s.by_phase.entry(phase).or_default() += n;
    }
    s.failed_total = s.by_phase.get(&Phase::Failed).copied().unwrap_or(0);
    Ok(s)
}

fn str_at(v: &Value, i: usize) -> &str {
    v.get(i).and_then(Value::as_str).unwrap_or_default()
}

fn int_at(v: &Value, i: usize) -> i64 {
    v.get(i).and_then(Value::as_i64).unwrap_or(0)
}

fn refs(v: &Value) -> Vec<SummaryRef> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|r| SummaryRef {
            kind: str_at(r, 0).to_owned(),
            name: str_at(r, 1).to_owned(),
            failure_message: r.get(2).and_then(Value::as_str).map(str::to_owned),
        })
        .collect()
}

/// The composite a live lease covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leased {
    /// Its kind.
    pub kind: String,
    /// Its kind version.
    pub kind_version: i32,
    /// Its root (`None`: it is a top-level root).
    pub root_id: Option<Uuid>,
}

/// The composite behind `(resource_id, lease_token, claim_epoch)` if that is the live lease
/// of its reconcile (the one a ROLLUP task runs under), `None` when the lease is gone
/// (released, reaped, superseded).
pub async fn leased_composite(
    pool: &PgPool,
    resource_id: Uuid,
    lease_token: Uuid,
    claim_epoch: i64,
) -> Result<Option<Leased>> {
    let row: Option<(String, i32, Option<Uuid>)> = sqlx::query_as(
        "SELECT r.kind, r.kind_version, r.root_id \
         FROM work_queue w JOIN resources r ON r.id = w.resource_id \
         WHERE w.resource_id = $1 AND w.task_type = 'reconcile' \
           AND w.lease_token = $2 AND w.claim_epoch = $3",
    )
    .bind(resource_id)
    .bind(lease_token)
    .bind(claim_epoch)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|(kind, kind_version, root_id)| Leased {
        kind,
        kind_version,
        root_id,
    }))
}

/// Where a page starts: after this descendant in the subtree's page order. The order is id
/// for a top-level root (index `(root_id, id)`) and (created_at, id) for a nested composite
/// (index `(owner_id, created_at, id)`), so no page sorts the subtree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The last descendant returned.
    pub id: Uuid,
    /// Its created_at in microseconds since the Unix epoch (nested composites only; 0 else).
    pub created_us: i64,
}

impl Cursor {
    /// The opaque page token: the id's 16 bytes, then created_at's 8 (big-endian).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = self.id.as_bytes().to_vec();
        b.extend_from_slice(&self.created_us.to_be_bytes());
        b
    }

    /// Reads a token made by [`Cursor::encode`]; `None` for anything else.
    pub fn decode(b: &[u8]) -> Option<Cursor> {
        let (id, at) = (b.get(..16)?, b.get(16..24)?);
        (b.len() == 24).then(|| Cursor {
            id: Uuid::from_slice(id).expect("16 bytes"),
            created_us: i64::from_be_bytes(at.try_into().expect("8 bytes")),
        })
    }
}

/// One page of composite `id`'s live subtree after `after` (`None`: from the start), at most
/// `limit` rows, and the cursor of the next page (`None`: this was the last).
pub async fn page(
    pool: &PgPool,
    id: Uuid,
    root_id: Option<Uuid>,
    after: Option<Cursor>,
    limit: u32,
) -> Result<(Vec<RelatedRow>, Option<Cursor>)> {
    let limit = limit.clamp(1, MAX_PAGE);
    let (keyset, order) = if root_id.is_none() {
        ("id > $2", "id")
    } else {
        (
            "(created_at, id) > ('epoch'::timestamptz + $3 * interval '1 microsecond', $2)",
            "created_at, id",
        )
    };
    let after = after.unwrap_or(Cursor {
        id: Uuid::nil(),
        created_us: 0,
    });
    // One row past the page tells whether another page exists.
    let sql = format!(
        "SELECT {RELATED_COLUMNS}, \
                (extract(epoch FROM created_at) * 1e6)::bigint AS created_us \
         FROM resources {filter} AND {keyset} ORDER BY {order} LIMIT $4",
        filter = subtree_filter(root_id),
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(after.id)
        .bind(after.created_us)
        .bind(i64::from(limit) + 1)
        .fetch_all(pool)
        .await?;
    let more = rows.len() > limit as usize;
    let mut out = Vec::with_capacity(rows.len().min(limit as usize));
    let mut last = None;
    for row in rows.iter().take(limit as usize) {
        let r = RelatedRow::from_row(row)?;
        last = Some(Cursor {
            id: r.id,
            created_us: row.try_get("created_us")?,
        });
        out.push(r);
    }
    Ok((out, if more { last } else { None }))
}

impl Summary {
    /// The summary of rows already read in full (the full form), computed as [`summary`]
    /// computes it in SQL; `rows` in (kind, name) byte order, as `related` returns them.
    pub fn of(rows: &[RelatedRow]) -> Summary {
        let cap = usize::try_from(SUMMARY_REFS).unwrap_or(usize::MAX);
        let mut s = Summary::default();
        for r in rows {
            s.total += 1;
            *s.by_kind.entry(r.kind.clone()).or_default() += 1;
            *s.by_phase.entry(r.phase).or_default() += 1;
            let failed = r.phase == Phase::Failed;
            if r.synced_gen < r.generation && !failed {
                s.unsettled += 1;
            }
            if failed {
                s.failed_total += 1;
                if s.failed.len() < cap {
                    s.failed.push(SummaryRef {
                        kind: r.kind.clone(),
                        name: r.name.clone(),
                        failure_message: r.failure_message.clone(),
                    });
                }
            }
            if !r.is_ready {
                s.not_ready_total += 1;
                if s.not_ready.len() < cap {
                    s.not_ready.push(SummaryRef {
                        kind: r.kind.clone(),
                        name: r.name.clone(),
                        failure_message: None,
                    });
                }
            }
        }
        s
    }
}
