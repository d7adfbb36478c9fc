//! resource_deps SQL for the read views: one resource's upstreams and downstreams with their
//! value flows, and a composite's dependency graph (its subtree and the edges inside it).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{FromRow, PgPool};
use uuid::Uuid;

use crate::words::Phase;

/// One value flow of an edge: the upstream's `status` field copied into the dependent's
/// `spec` field (stored as `{dep_field, src_field}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueMapping {
    /// JSON pointer into the dependent's spec.
    pub dependent_field: String,
    /// JSON pointer into the upstream's status.
    pub source_field: String,
}

/// The stored shape of one value flow.
#[derive(Deserialize)]
struct StoredFlow {
    dep_field: Option<String>,
    src_field: Option<String>,
}

/// Decodes a stored `value_flows` array. Entries missing either field are skipped, exactly as
/// `apply_value_flows` skips them, so the view shows only flows that take effect.
fn value_mappings(flows: &serde_json::Value) -> Vec<ValueMapping> {
    let Some(items) = flows.as_array() else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|f| serde_json::from_value::<StoredFlow>(f.clone()).ok())
        .filter_map(|f| {
            Some(ValueMapping {
                dependent_field: f.dep_field?,
                source_field: f.src_field?,
            })
        })
        .collect()
}

/// A resource this one depends on, with the state the upstream gate and value flows read.
#[derive(Debug, Clone, Serialize)]
pub struct Upstream {
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
    /// The upstream's derived phase.
    pub upstream_phase: Phase,
    /// Synced, healthy, not deleting.
    pub upstream_ready: bool,
    /// The upstream's health axis.
    pub upstream_health_ok: bool,
    /// When the upstream row last changed.
    pub upstream_updated_at: DateTime<Utc>,
    /// The values it flows into this resource's spec.
    pub value_mappings: Vec<ValueMapping>,
}

#[derive(FromRow)]
struct UpstreamRow {
    kind: String,
    name: String,
    phase: Phase,
    is_ready: bool,
    health_ok: bool,
    updated_at: DateTime<Utc>,
    value_flows: serde_json::Value,
}

/// A resource that depends on this one.
#[derive(Debug, Clone, Serialize)]
pub struct Downstream {
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
    /// The dependent's derived phase.
    pub phase: Phase,
    /// The values this resource flows into the dependent's spec.
    pub value_mappings: Vec<ValueMapping>,
}

#[derive(FromRow)]
struct DownstreamRow {
    kind: String,
    name: String,
    phase: Phase,
    value_flows: serde_json::Value,
}

/// The upstreams of `id` (edges where it is the dependent; the primary key's prefix), ordered
/// by kind and name.
pub async fn resource_deps_upstream(pool: &PgPool, id: Uuid) -> Result<Vec<Upstream>, sqlx::Error> {
    let rows = sqlx::query_as::<_, UpstreamRow>(
        "SELECT u.kind, u.name, u.phase, u.is_ready, u.health_ok, u.updated_at, d.value_flows
         FROM resource_deps d JOIN resources u ON u.id = d.dependency_id
         WHERE d.dependent_id = $1
         ORDER BY u.kind, u.name",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Upstream {
            value_mappings: value_mappings(&r.value_flows),
            kind: r.kind,
            name: r.name,
            upstream_phase: r.phase,
            upstream_ready: r.is_ready,
            upstream_health_ok: r.health_ok,
            upstream_updated_at: r.updated_at,
        })
        .collect())
}

/// The dependents of `id` (edges where it is the dependency; `idx_resource_deps_dependency`),
/// ordered by kind and name.
pub async fn resource_deps_downstream(
    pool: &PgPool,
    id: Uuid,
) -> Result<Vec<Downstream>, sqlx::Error> {
    let rows = sqlx::query_as::<_, DownstreamRow>(
        "SELECT r.kind, r.name, r.phase, d.value_flows
         FROM resource_deps d JOIN resources r ON r.id = d.dependent_id
         WHERE d.dependency_id = $1
         ORDER BY r.kind, r.name",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Downstream {
            value_mappings: value_mappings(&r.value_flows),
            kind: r.kind,
            name: r.name,
            phase: r.phase,
        })
        .collect())
}

/// One node of a dependency graph.
#[derive(Debug, Clone, Serialize, FromRow)]
pub struct GraphNode {
    /// The resource id (not serialised; edges and lookups use it).
    #[serde(skip)]
    pub uid: Uuid,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Derived phase.
    pub phase: Phase,
    /// Synced, healthy, not deleting.
    pub is_ready: bool,
    /// Levels below the graph's owner (0 for the owner itself).
    pub depth: i32,
}

/// One resource as a depth-0 graph node (the owner of its own graph), or `None` when no such
/// resource exists.
pub async fn resource_graph_node(
    pool: &PgPool,
    kind: &str,
    name: &str,
) -> Result<Option<GraphNode>, sqlx::Error> {
    sqlx::query_as::<_, GraphNode>(
        "SELECT id AS uid, kind, name, phase, is_ready, 0 AS depth
         FROM resources WHERE kind = $1 AND name = $2",
    )
    .bind(kind)
    .bind(name)
    .fetch_optional(pool)
    .await
}

#[derive(FromRow)]
struct DescendantRow {
    #[sqlx(flatten)]
    node: GraphNode,
    total: i64,
}

/// The first `limit` descendants of `owner` by (kind, name), each with its depth below it, and
/// how many descendants there are in all.
///
/// Membership comes from `resource_descendant_ids` (one `root_id` index scan for a top-level
/// root, an owner-chain walk for a nested composite); the total is a window count over that
/// one scan, taken before the limit. Depth walks each returned node's owner chain up to
/// `owner` (a handful of primary-key lookups per node; bounded so a corrupt cycle cannot
/// loop).
pub async fn resource_graph_descendants(
    pool: &PgPool,
    owner: Uuid,
    limit: i64,
) -> Result<(Vec<GraphNode>, i64), sqlx::Error> {
    if limit < 1 {
        // No row would carry the window count: count on its own.
        let total: i64 = sqlx::query_scalar("SELECT count(*) FROM resource_descendant_ids($1)")
            .bind(owner)
            .fetch_one(pool)
            .await?;
        return Ok((Vec::new(), total));
    }
    let rows = sqlx::query_as::<_, DescendantRow>(
        "WITH RECURSIVE sel AS (
             SELECT r.id, r.kind, r.name, r.phase, r.is_ready, r.owner_id,
                    count(*) OVER () AS total
             FROM resources r
             WHERE r.id IN (SELECT d.id FROM resource_descendant_ids($1) d)
             ORDER BY r.kind, r.name
             LIMIT $2
         ), chain AS (
             SELECT s.id, s.owner_id AS above, 1 AS depth FROM sel s
             UNION ALL
             SELECT c.id, o.owner_id, c.depth + 1
             FROM chain c JOIN resources o ON o.id = c.above
             WHERE c.above <> $1 AND c.depth < 256
         )
         SELECT s.id AS uid, s.kind, s.name, s.phase, s.is_ready,
                coalesce(c.depth, 1) AS depth, s.total
         FROM sel s LEFT JOIN chain c ON c.id = s.id AND c.above = $1
         ORDER BY s.kind, s.name",
    )
    .bind(owner)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    let total = rows.first().map_or(0, |r| r.total);
    Ok((rows.into_iter().map(|r| r.node).collect(), total))
}

/// One edge of a dependency graph: `from` depends on `to`.
#[derive(Debug, Clone, Serialize)]
pub struct GraphEdge {
    /// The dependent, as `kind/name`.
    pub from: String,
    /// The upstream, as `kind/name`.
    pub to: String,
    /// The values `to` flows into `from`'s spec.
    pub value_mappings: Vec<ValueMapping>,
}

#[derive(FromRow)]
struct EdgeRow {
    from_kind: String,
    from_name: String,
    to_kind: String,
    to_name: String,
    value_flows: serde_json::Value,
}

/// The edges with both ends in `ids`, ordered by (from, to), at most `limit` of them. Both
/// ends are filtered on the given ids, so the edges never point outside the caller's node set
/// even if the tree changed since the nodes were read.
pub async fn resource_graph_edges(
    pool: &PgPool,
    ids: &[Uuid],
    limit: i64,
) -> Result<Vec<GraphEdge>, sqlx::Error> {
    let rows = sqlx::query_as::<_, EdgeRow>(
        "SELECT f.kind AS from_kind, f.name AS from_name, t.kind AS to_kind, t.name AS to_name,
                d.value_flows
         FROM resource_deps d
         JOIN resources f ON f.id = d.dependent_id
         JOIN resources t ON t.id = d.dependency_id
         WHERE d.dependent_id = ANY($1) AND d.dependency_id = ANY($1)
         ORDER BY f.kind, f.name, t.kind, t.name
         LIMIT $2",
    )
    .bind(ids)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| GraphEdge {
            from: format!("{}/{}", r.from_kind, r.from_name),
            to: format!("{}/{}", r.to_kind, r.to_name),
            value_mappings: value_mappings(&r.value_flows),
        })
        .collect())
}

/// One edge a composite's compose stored (a `resource_deps` row it owns): `from` depends on
/// `to`, both named by kind and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedEdge {
    /// The dependent's kind.
    pub from_kind: String,
    /// The dependent's name.
    pub from_name: String,
    /// The upstream's kind.
    pub to_kind: String,
    /// The upstream's name.
    pub to_name: String,
    /// The values `to` flows into `from`'s spec.
    pub value_mappings: Vec<ValueMapping>,
}

/// The edges composite `owner_id` owns (those its last compose stored), ordered by (from,
/// to), at most `limit`: what a plan compares a new compose's edges with. A read only.
pub async fn owned_edges(
    pool: &PgPool,
    owner_id: Uuid,
    limit: i64,
) -> Result<Vec<OwnedEdge>, sqlx::Error> {
    let rows = sqlx::query_as::<_, EdgeRow>(
        "SELECT f.kind AS from_kind, f.name AS from_name, t.kind AS to_kind, t.name AS to_name,
                d.value_flows
         FROM resource_deps d
         JOIN resources f ON f.id = d.dependent_id
         JOIN resources t ON t.id = d.dependency_id
         WHERE d.owner_id = $1
         ORDER BY f.kind, f.name, t.kind, t.name
         LIMIT $2",
    )
    .bind(owner_id)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| OwnedEdge {
            value_mappings: value_mappings(&r.value_flows),
            from_kind: r.from_kind,
            from_name: r.from_name,
            to_kind: r.to_kind,
            to_name: r.to_name,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn stored_flows_decode_to_mappings_and_skip_incomplete_ones() {
        let m = value_mappings(&json!([
            {"dep_field": "/vpc_id", "src_field": "/id"},
            {"dep_field": "/only_dep"},
            {"src_field": 3},
            "garbage",
            {"dep_field": "cidr", "src_field": "/net/cidr", "extra": true},
        ]));
        assert_eq!(
            m,
            [
                ValueMapping {
                    dependent_field: "/vpc_id".into(),
                    source_field: "/id".into()
                },
                ValueMapping {
                    dependent_field: "cidr".into(),
                    source_field: "/net/cidr".into()
                },
            ]
        );
        assert!(value_mappings(&json!({})).is_empty());
        assert!(value_mappings(&json!(null)).is_empty());
    }
}
