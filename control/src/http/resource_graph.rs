//! Dependency views of one resource: its upstreams and dependents with their value flows, and
//! the dependency graph of the composite it heads (its subtree and the edges inside it).

use axum::{
    Json,
    extract::{RawQuery, State},
};

use super::openapi::{NotFound, Unprocessable};
use super::wire::{
    Dependencies, Downstream, Graph, GraphEdge, GraphNode, GraphQuery, ResourcePath, ResourceRef,
    Upstream,
};
use super::{AppState, input::ApiPath, problem::ApiError, query_pairs};
use crate::db::{self, resource_deps::GraphNode as NodeRow};

use crate::app::reads::ReadFrom;

/// Nodes (and edges) a graph returns when no `limit` is given.
const DEFAULT_GRAPH_LIMIT: i64 = 500;
/// The largest `limit` a graph request may ask for.
const MAX_GRAPH_LIMIT: i64 = 1000;

fn not_found(kind: &str, name: &str) -> ApiError {
    ApiError::NotFound(format!("resource {kind}/{name} not found"))
}

async fn node(s: &AppState, kind: &str, name: &str) -> Result<NodeRow, ApiError> {
    db::resource_deps::resource_graph_node(&s.pool, kind, name)
        .await
        .map_err(ApiError::db("look up a resource"))?
        .ok_or_else(|| not_found(kind, name))
}

/// Read a resource's dependency edges.
///
/// `GET /api/v1/resources/{kind}/{name}/dependencies`: `{dependencies, dependents}`. The
/// dependencies are the resources this one waits for (with their phase, readiness, health and
/// last change, and the values each flows into this spec); the dependents are the resources
/// waiting for this one. Both ordered by kind and name; 404 for an unknown resource.
#[utoipa::path(
    get, operation_id = "resource_graph_dependencies", path = "/resources/{kind}/{name}/dependencies", tag = "views",
    params(ResourcePath),
    responses((status = 200, description = "Its edges both ways.", body = Dependencies), (status = 404, response = NotFound)),
)]
#[tracing::instrument(skip(s))]
pub async fn dependencies(
    State(s): State<AppState>,
    ApiPath((kind, name)): ApiPath<(String, String)>,
) -> Result<Json<Dependencies>, ApiError> {
    let s = s.reading(ReadFrom::Replica);
    let me = node(&s, &kind, &name).await?;
    let (up, down) = tokio::try_join!(
        db::resource_deps::resource_deps_upstream(&s.pool, me.uid),
        db::resource_deps::resource_deps_downstream(&s.pool, me.uid),
    )
    .map_err(ApiError::db("read dependency edges"))?;
    Ok(Json(Dependencies {
        dependencies: up.into_iter().map(Upstream::from).collect(),
        dependents: down.into_iter().map(Downstream::from).collect(),
    }))
}

/// Parses the graph's `limit` (1..=1000, default 500); other parameters are ignored.
fn parse_graph_limit(q: Option<&str>) -> Result<i64, ApiError> {
    let mut limit = DEFAULT_GRAPH_LIMIT;
    for (k, v) in query_pairs(q) {
        if k == "limit" {
            limit = v
                .parse::<i64>()
                .ok()
                .filter(|n| (1..=MAX_GRAPH_LIMIT).contains(n))
                .ok_or_else(|| {
                    ApiError::invalid("limit", format!("limit must be 1..={MAX_GRAPH_LIMIT}"))
                })?;
        }
    }
    Ok(limit)
}

/// Read a composition's graph.
///
/// `GET /api/v1/resources/{kind}/{name}/graph?limit=N`: `{owner, nodes, edges, total_nodes,
/// truncated}`. The nodes are the resource itself (depth 0, always first) and its descendants
/// ordered by kind and name, `limit` in all (default 500, max 1000); the edges (`from`
/// depends on `to`, with value mappings) are those with both ends among the returned nodes,
/// at most `limit` of them. `total_nodes` counts the whole subtree including the resource;
/// `truncated` says the limit cut nodes or edges. 404 for an unknown resource.
#[utoipa::path(
    get, operation_id = "resource_graph_graph", path = "/resources/{kind}/{name}/graph", tag = "views",
    params(ResourcePath, GraphQuery),
    responses((status = 200, description = "The graph.", body = Graph), (status = 404, response = NotFound), (status = 422, response = Unprocessable)),
)]
#[tracing::instrument(skip(s))]
pub async fn graph(
    State(s): State<AppState>,
    ApiPath((kind, name)): ApiPath<(String, String)>,
    RawQuery(q): RawQuery,
) -> Result<Json<Graph>, ApiError> {
    let s = s.reading(ReadFrom::Replica);
    let limit = parse_graph_limit(q.as_deref())?;
    let owner = node(&s, &kind, &name).await?;
    let (descendants, total_descendants) =
        db::resource_deps::resource_graph_descendants(&s.pool, owner.uid, limit - 1)
            .await
            .map_err(ApiError::db("read a dependency graph"))?;
    let mut nodes = Vec::with_capacity(descendants.len() + 1);
    nodes.push(owner);
    nodes.extend(descendants);
    let ids: Vec<_> = nodes.iter().map(|n| n.uid).collect();
    let mut edges: Vec<db::resource_deps::GraphEdge> =
        db::resource_deps::resource_graph_edges(&s.pool, &ids, limit + 1)
            .await
            .map_err(ApiError::db("read a dependency graph"))?;
    let total_nodes = total_descendants + 1;
    let edges_cut = edges.len() as i64 > limit;
    edges.truncate(usize::try_from(limit).unwrap_or(0));
    let truncated = total_nodes > nodes.len() as i64 || edges_cut;
    Ok(Json(Graph {
        owner: ResourceRef { kind, name },
        nodes: nodes.into_iter().map(GraphNode::from).collect(),
        edges: edges.into_iter().map(GraphEdge::from).collect(),
        total_nodes,
        truncated,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_limit_defaults_and_bounds() {
        assert_eq!(parse_graph_limit(None).unwrap(), 500);
        assert_eq!(parse_graph_limit(Some("other=1")).unwrap(), 500);
        assert_eq!(parse_graph_limit(Some("limit=1")).unwrap(), 1);
        assert_eq!(parse_graph_limit(Some("limit=1000")).unwrap(), 1000);
        for bad in ["limit=0", "limit=1001", "limit=-3", "limit=x", "limit="] {
            assert!(parse_graph_limit(Some(bad)).is_err(), "{bad}");
        }
    }
}
