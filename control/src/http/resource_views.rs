//! Read views over the resource tree: the roots list (with subtree sizes), one owner's direct
//! children, and phase/kind summaries of a set of owners or of all roots.

use std::collections::BTreeMap;

use axum::{
    Json,
    extract::{RawQuery, State},
    response::IntoResponse,
};

use super::openapi::{NotFound, Unprocessable};
use super::wire::{
    ChildList, KindCounts, OwnerSummary, PhaseCounts, ResourceItem, ResourceKey, ResourcePath,
    RootItem, RootList, Summary, SummaryQuery, TreeListQuery,
};
use super::{
    AppState,
    input::ApiPath,
    problem::ApiError,
    query_pairs,
    resources::{page, parse_list_query, parse_ref, resolve_owners},
};
use crate::db::{self, resources::PhaseCount};

use crate::app::reads::ReadFrom;

/// List the composition roots.
///
/// `GET /api/v1/resources/roots`: one keyset page of roots (resources without an owner), each
/// with `resource_count` (its descendants). Filters `kind`, `phase` (repeatable unions), `name`
/// (substring), `label` (AND), `limit` (default 50, max 500), `cursor`; `X-Next-Cursor`.
#[utoipa::path(
    get, operation_id = "resource_views_roots", path = "/resources/roots", tag = "views",
    params(TreeListQuery),
    responses(
        (status = 200, description = "One page of roots, oldest first (problems first with `sort=problems`).", body = RootList, headers(("x-next-cursor" = String, description = "The next page's cursor; empty on the last page."))),
        (status = 422, response = Unprocessable),
    ),
)]
pub async fn roots(
    State(s): State<AppState>,
    RawQuery(q): RawQuery,
) -> Result<impl IntoResponse, ApiError> {
    let s = s.reading(ReadFrom::Replica);
    let lq = parse_list_query(q.as_deref(), 50, false)?;
    let mut rows = if lq.contradictory {
        Vec::new()
    } else {
        db::resources::resource_roots(&s.pool, &lq.filter)
            .await
            .map_err(ApiError::db("list roots"))?
    };
    let h = page(&mut rows, &lq.filter, |r| &r.item);
    let roots = rows.into_iter().map(RootItem::from).collect();
    Ok((h, Json(RootList { roots })))
}

async fn one_owner(
    s: &AppState,
    kind: &str,
    name: &str,
) -> Result<db::resources::ResourceKey, ApiError> {
    db::resources::resource_keys(&s.pool, &[(kind.to_string(), name.to_string())])
        .await
        .map_err(ApiError::db("look up a resource"))?
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::NotFound(format!("resource {kind}/{name} not found")))
}

/// List a resource's children.
///
/// `GET /api/v1/resources/{kind}/{name}/children`: the direct children of one resource, with
/// the list's filters and keyset cursor (default limit 100).
#[utoipa::path(
    get, operation_id = "resource_views_children", path = "/resources/{kind}/{name}/children", tag = "views",
    params(ResourcePath, TreeListQuery),
    responses(
        (status = 200, description = "One page of direct children, oldest first (problems first with `sort=problems`).", body = ChildList, headers(("x-next-cursor" = String, description = "The next page's cursor; empty on the last page."))),
        (status = 404, response = NotFound),
        (status = 422, response = Unprocessable),
    ),
)]
pub async fn children(
    State(s): State<AppState>,
    ApiPath((kind, name)): ApiPath<(String, String)>,
    RawQuery(q): RawQuery,
) -> Result<impl IntoResponse, ApiError> {
    let s = s.reading(ReadFrom::Replica);
    let mut lq = parse_list_query(q.as_deref(), 100, false)?;
    let owner = one_owner(&s, &kind, &name).await?;
    lq.filter.owners = vec![owner.uid];
    let mut rows = if lq.contradictory {
        Vec::new()
    } else {
        db::resources::resource_list(&s.pool, &lq.filter)
            .await
            .map_err(ApiError::db("list children"))?
    };
    let h = page(&mut rows, &lq.filter, |r| r);
    Ok((
        h,
        Json(ChildList {
            owner: owner.into(),
            resources: rows.into_iter().map(ResourceItem::from).collect(),
        }),
    ))
}

/// `(totals, total, by_kind)`: every phase present (zeros included), in totals and per kind.
fn summarise(counts: &[PhaseCount]) -> (PhaseCounts, i64, Vec<KindCounts>) {
    let mut totals = PhaseCounts::default();
    let mut by_kind: BTreeMap<&str, (i64, PhaseCounts)> = BTreeMap::new();
    let mut total = 0;
    for c in counts {
        totals.add(c.phase, c.count);
        total += c.count;
        let e = by_kind.entry(c.kind.as_str()).or_default();
        e.0 += c.count;
        e.1.add(c.phase, c.count);
    }
    let by_kind = by_kind
        .into_iter()
        .map(|(kind, (total, phases))| KindCounts {
            kind: kind.to_owned(),
            total,
            phases,
        })
        .collect();
    (totals, total, by_kind)
}

/// Count resources by phase and kind.
///
/// `GET /api/v1/resources/summary[?owner=kind/name...]`: counts per phase (all seven keys)
/// and per kind of the given owners' descendants (each counted once), or of all roots when
/// no owner is given.
#[utoipa::path(
    get, operation_id = "resource_views_summary", path = "/resources/summary", tag = "views",
    params(SummaryQuery),
    responses((status = 200, description = "Counts.", body = Summary), (status = 404, response = NotFound), (status = 422, response = Unprocessable)),
)]
pub async fn summary(
    State(s): State<AppState>,
    RawQuery(q): RawQuery,
) -> Result<Json<Summary>, ApiError> {
    let s = s.reading(ReadFrom::Replica);
    let mut refs = Vec::new();
    for (k, v) in query_pairs(q.as_deref()) {
        if k == "owner" {
            refs.push(parse_ref("owner", &v)?);
        }
    }
    let owners = resolve_owners(&s, &refs).await?;
    let ids: Vec<_> = owners.iter().map(|o| o.uid).collect();
    let counts = db::resources::resource_summary(&s.pool, &ids)
        .await
        .map_err(ApiError::db("summarise resources"))?;
    let (totals, total, by_kind) = summarise(&counts);
    Ok(Json(Summary {
        owners: owners.into_iter().map(ResourceKey::from).collect(),
        totals,
        total,
        by_kind,
    }))
}

/// Summarise a composite's subtree.
///
/// `GET /api/v1/resources/{kind}/{name}/summary`: that resource's descendants by phase and
/// kind.
#[utoipa::path(
    get, operation_id = "resource_views_owner_summary", path = "/resources/{kind}/{name}/summary", tag = "views",
    params(ResourcePath),
    responses((status = 200, description = "Counts of its subtree.", body = OwnerSummary), (status = 404, response = NotFound)),
)]
pub async fn owner_summary(
    State(s): State<AppState>,
    ApiPath((kind, name)): ApiPath<(String, String)>,
) -> Result<Json<OwnerSummary>, ApiError> {
    let s = s.reading(ReadFrom::Replica);
    let owner = one_owner(&s, &kind, &name).await?;
    let counts = db::resources::resource_summary(&s.pool, &[owner.uid])
        .await
        .map_err(ApiError::db("summarise resources"))?;
    let (totals, total, by_kind) = summarise(&counts);
    Ok(Json(OwnerSummary {
        owner: owner.into(),
        totals,
        total,
        by_kind,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_list_every_phase_and_add_up_per_kind() {
        let c = |kind: &str, phase: &str, count| PhaseCount {
            kind: kind.into(),
            phase: phase.parse().unwrap(),
            count,
        };
        let (totals, total, by_kind) =
            summarise(&[c("a", "Ready", 2), c("a", "Failed", 1), c("b", "Ready", 4)]);
        assert_eq!(total, 7);
        let totals = serde_json::to_value(&totals).unwrap();
        assert_eq!(totals.as_object().unwrap().len(), 7);
        assert_eq!(totals["Ready"], 6);
        assert_eq!(totals["Deleting"], 0);
        let by_kind = serde_json::to_value(&by_kind).unwrap();
        assert_eq!(by_kind[0]["kind"], "a");
        assert_eq!(by_kind[0]["total"], 3);
        assert_eq!(by_kind[0]["phases"]["Failed"], 1);
        assert_eq!(by_kind[1]["phases"]["Ready"], 4);
        let (totals, total, by_kind) = summarise(&[]);
        assert_eq!((total, by_kind.len()), (0, 0));
        assert_eq!(totals, PhaseCounts::default());
    }
}
