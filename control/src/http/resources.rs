//! Resources: apply (create or update by kind + name), read, and the keyset-paged list with
//! its filters (shared by the roots and children views).

use axum::{
    Json,
    extract::{RawQuery, State},
    http::{HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use std::collections::{HashMap, HashSet};

use base64::Engine;
use chrono::{DateTime, Utc};
use converge_engine::words::{ApplyResult, Phase};
use converge_proto::manifest::{is_valid_kind_name, is_valid_resource_name};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::openapi::{Conflict, NotFound, Unavailable, Unprocessable};
use super::wire::{
    Applied, DetailExtras, ResourceDetail, ResourceEvent, ResourceItem, ResourceKey, ResourceList,
    ResourceListQuery, ResourcePath, ResourceWatchEvent, ResourceWatchStream, WatchQuery,
    WatchResume,
};
use super::{
    AppState, auth,
    input::{ApiJson, ApiPath},
    problem::{ApiError, FieldError, clipped, field_errors, quote},
    query_pairs,
};
use crate::db;
use crate::db::resources::{Keyset, ListFilter, ListItem, ListSort};

use crate::app::reads::ReadFrom;

/// The apply body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyBody {
    /// Optional discriminator for CLI files; must be "resource" when present.
    #[serde(rename = "type")]
    pub type_: Option<String>,
    /// Kind.
    pub kind: String,
    /// Kind version (required, 1..=32767).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 32767)]
    pub kind_version: i32,
    /// Name, unique within the kind: 1-253 printable ASCII characters, no `/` or space.
    #[schema(min_length = 1, max_length = 253, pattern = "^[!-.0-~]+$")]
    pub name: String,
    /// Labels (string values).
    #[serde(default)]
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    pub labels: serde_json::Map<String, Value>,
    /// Spec (a JSON object), checked against the kind's `spec_schema`.
    #[serde(default = "empty_object")]
    #[schema(value_type = std::collections::BTreeMap<String, serde_json::Value>)]
    pub spec: Value,
    /// Attached provider config (per-resource override).
    #[serde(default)]
    pub provider_config_ref: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

const MAX_LABELS: usize = 64;

fn check_labels(labels: &serde_json::Map<String, Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if labels.len() > MAX_LABELS {
        errs.push(FieldError::new(
            "/labels".into(),
            format!("at most {MAX_LABELS} labels"),
        ));
    }
    // Past the limit the count is the problem: the rest are not examined one by one.
    for (k, v) in labels.iter().take(MAX_LABELS) {
        let loc = format!("/labels/{}", converge_proto::json_pointer::escape(k));
        if k.is_empty() || k.len() > 253 {
            errs.push(FieldError::new(
                loc.clone(),
                "label keys must be 1-253 characters".into(),
            ));
        }
        match v.as_str() {
            Some(s) if s.len() <= 1024 => {}
            Some(_) => errs.push(FieldError::new(
                loc,
                "label values must be at most 1024 characters".into(),
            )),
            None => errs.push(FieldError::new(loc, "label values must be strings".into())),
        }
    }
    errs
}

/// What validating an apply looks up in the database, remembered for the rest of a batch
/// (one request): provider config targets by name, whether a (kind, version) is retired,
/// and which (kind, version)s were looked up in the kind cache during this request.
#[derive(Default)]
pub(crate) struct ApplyLookups {
    configs: HashMap<String, Option<(String, i32, Value)>>,
    retired: HashMap<(String, i32), bool>,
    kinds_read: HashSet<(String, i32)>,
}

impl ApplyLookups {
    /// Looks up, in one read, every (kind, version) of `pairs` the kind cache does not hold
    /// (a batch's items, before they are checked one by one), so that an unknown kind costs
    /// the request one lookup, not one per item.
    pub(crate) async fn read_kinds(
        &mut self,
        s: &AppState,
        pairs: impl IntoIterator<Item = (String, i32)>,
    ) -> Result<(), ApiError> {
        // A name that is not a legal kind name is never registered (and one holding U+0000
        // cannot even be a query parameter): it is refused per item, never looked up.
        let pairs: Vec<(String, i32)> = pairs
            .into_iter()
            .filter(|p| is_valid_kind_name(&p.0) && !self.kinds_read.contains(p))
            .collect();
        // Fresh (not the remembered unknowns): a refusal must not rest on a memory another
        // pod's apply may have outdated a moment ago.
        s.catalog
            .lookup(&s.pool, pairs.iter().cloned(), true)
            .await
            .map_err(ApiError::db("look up kind manifests"))?;
        self.kinds_read.extend(pairs);
        Ok(())
    }

    /// The kind (kind, version): from the catalog, else looked up once in this request.
    async fn kind(
        &mut self,
        s: &AppState,
        kind: &str,
        version: i32,
    ) -> Result<Option<std::sync::Arc<converge_kinds::Kind>>, ApiError> {
        if let Some(k) = s.catalog.get(kind, version) {
            return Ok(Some(k));
        }
        self.read_kinds(s, [(kind.to_string(), version)]).await?;
        Ok(s.catalog.get(kind, version))
    }
}

/// Checks one apply body as `POST /api/v1/resources` does, everything but the write: the
/// body's shape, the kind's spec schema (every failing pointer in one 422), the provider
/// config it names, and a retired version. Returns the item ready to write.
pub(crate) async fn validate_apply(
    s: &AppState,
    body: ApplyBody,
    lookups: &mut ApplyLookups,
) -> Result<db::resources::ApplyItem, ApiError> {
    if let Some(t) = body.type_.as_deref().filter(|t| *t != "resource") {
        return Err(ApiError::invalid(
            "/type",
            format!("expected \"resource\", got {}", quote(t)),
        ));
    }
    if !(1..=32767).contains(&body.kind_version) {
        return Err(ApiError::invalid(
            "/kind_version",
            "kind_version is required and must be 1..=32767",
        ));
    }
    if !is_valid_kind_name(&body.kind) {
        return Err(ApiError::invalid(
            "/kind",
            "kind must be 1-253 characters of a-z, 0-9, '-', '.', '_', starting with a letter",
        ));
    }
    let mut errors = Vec::new();
    if !is_valid_resource_name(&body.name) {
        errors.push(FieldError::new(
            "/name".into(),
            "name must be 1-253 printable ASCII characters without '/' or spaces".into(),
        ));
    }
    if !body.spec.is_object() {
        errors.push(FieldError::new(
            "/spec".into(),
            "spec must be a JSON object".into(),
        ));
    }
    errors.extend(check_labels(&body.labels));
    let Some(schemas) = lookups.kind(s, &body.kind, body.kind_version).await? else {
        return Err(ApiError::NotFound(format!(
            "kind {} version {} is not registered (apply its manifest first)",
            quote(&body.kind),
            body.kind_version
        )));
    };
    if schemas.is_reactor() {
        return Err(ApiError::invalid(
            "/kind",
            format!(
                "{} is a reactor kind; it is bound, not created",
                quote(&body.kind)
            ),
        ));
    }
    let mut omitted = 0;
    if body.spec.is_object() {
        let v = schemas.spec_violations(&body.spec, "/spec");
        errors.extend(field_errors(v.errors));
        omitted = v.omitted;
    }
    if let Some(r) = &body.provider_config_ref {
        let target = match lookups.configs.get(r) {
            Some(t) => t.clone(),
            None => {
                let t = db::providerconfigs::providerconfig_target(&s.pool, r)
                    .await
                    .map_err(ApiError::db("look up a provider config"))?;
                lookups.configs.insert(r.clone(), t.clone());
                t
            }
        };
        match target {
            None => errors.push(FieldError::new(
                "/provider_config_ref".into(),
                format!("provider config {} does not exist", quote(r)),
            )),
            Some((k, v, _)) if k != body.kind || v != body.kind_version => {
                errors.push(FieldError::new(
                    "/provider_config_ref".into(),
                    format!(
                        "provider config {} configures {k} version {v}, not {} version {}",
                        quote(r),
                        body.kind,
                        body.kind_version
                    ),
                ))
            }
            // An exec kind's override may set only settings (the config may predate the
            // manifest's `provider: exec`, or be the default named as an override).
            Some((_, _, spec)) => {
                let fields = schemas.exec_override_violations(&spec);
                if !fields.is_empty() {
                    errors.push(FieldError::new(
                        "/provider_config_ref".into(),
                        format!(
                            "provider config {} sets {}; {} is an exec kind, so a \
                             resource's override may set only settings",
                            quote(r),
                            fields
                                .iter()
                                .map(|f| format!("/spec/{f}"))
                                .collect::<Vec<_>>()
                                .join(", "),
                            body.kind
                        ),
                    ));
                }
            }
        }
    }
    ApiError::check_fields_omitted(
        &format!(
            "{} does not satisfy kind {}",
            clipped(253, &body.name),
            quote(&body.kind)
        ),
        errors,
        omitted,
    )?;
    let pair = (body.kind.clone(), body.kind_version);
    let retired = match lookups.retired.get(&pair) {
        Some(r) => *r,
        None => {
            let r = db::kinds::version_retired(&s.pool, &body.kind, body.kind_version)
                .await
                .map_err(ApiError::db("check the kind version"))?;
            lookups.retired.insert(pair, r);
            r
        }
    };
    // A retired version takes no new resources, but its existing ones may still be edited.
    if retired {
        let current = db::kinds::resource_version(&s.pool, &body.kind, &body.name)
            .await
            .map_err(ApiError::db("check the kind version"))?;
        if current != Some(body.kind_version) {
            return Err(ApiError::Conflict(format!(
                "kind {} version {} is retired: it takes no new resources (use a newer version)",
                body.kind, body.kind_version
            )));
        }
    }
    Ok(db::resources::ApplyItem {
        kind: body.kind,
        kind_version: body.kind_version,
        name: body.name,
        spec: body.spec,
        labels: Value::Object(body.labels),
        provider_config_ref: body.provider_config_ref,
    })
}

/// Maps a failed resource write for operation `op`: a kind version deleted after the request
/// was validated (SQL `kind_version_guard` refuses it) is a 404 like an unregistered one;
/// anything else a 500.
pub(super) fn apply_failed(op: &'static str) -> impl FnOnce(sqlx::Error) -> ApiError {
    move |e| match &e {
        sqlx::Error::Database(d) if d.is_foreign_key_violation() => {
            ApiError::NotFound(format!("{} (apply its manifest first)", d.message()))
        }
        _ => ApiError::db(op)(e),
    }
}

/// Apply a resource.
///
/// `POST /api/v1/resources`: validates against the kind's spec schema (422 naming every
/// failing pointer, nothing written), then creates or updates; `X-Apply-Result` says which.
#[utoipa::path(
    post, operation_id = "resources_apply", path = "/resources", tag = "resources",
    request_body = ApplyBody,
    responses(
        (status = 201, description = "Created.", body = Applied, headers(("x-apply-result" = String, description = "created"))),
        (status = 200, description = "Changed or unchanged.", body = Applied, headers(("x-apply-result" = String, description = "configured or unchanged"))),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
    ),
)]
pub async fn apply(
    State(s): State<AppState>,
    caller: Option<axum::Extension<auth::Caller>>,
    ApiJson(body): ApiJson<ApplyBody>,
) -> Result<impl IntoResponse, ApiError> {
    let item = validate_apply(&s, body, &mut ApplyLookups::default()).await?;
    // Through the coalescer: with other applies queued beside it, one statement writes all.
    let applied = s
        .applies
        .apply(auth::actor(&caller).as_deref(), item.clone())
        .await
        .map_err(apply_failed("apply a resource"))?;
    if applied.result != ApplyResult::Unchanged {
        s.work_scheduled();
    }
    let status = if applied.result == ApplyResult::Created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut h = HeaderMap::new();
    h.insert(
        "x-apply-result",
        HeaderValue::from_static(applied.result.as_str()),
    );
    Ok((status, h, Json(Applied::new(&item, &applied))))
}

/// Read a resource (or watch it).
///
/// `GET /api/v1/resources/{kind}/{name}`: the full read with conditions and the live claim;
/// with `watch=true`, a `text/event-stream` of its changes.
#[utoipa::path(
    get, operation_id = "resources_get", path = "/resources/{kind}/{name}", tag = "resources",
    params(ResourcePath, WatchQuery, WatchResume),
    responses(
        (status = 200, description = "The resource; with `watch=true`, a stream of Server-Sent \
            Events, one per entry of its event log (each `data` a `ResourceWatchEvent`, each `id` \
            a log position), first the resource as it is unless `Last-Event-ID` resumes a watch.",
            content((ResourceDetail = "application/json"), (ResourceWatchStream = "text/event-stream"))),
        (status = 404, response = NotFound),
        (status = 503, response = Unavailable),
    ),
)]
pub async fn get(
    State(s): State<AppState>,
    caller: Option<axum::Extension<auth::Caller>>,
    ApiPath((kind, name)): ApiPath<(String, String)>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let mut watch = false;
    for (k, v) in query_pairs(q.as_deref()) {
        if k == "watch" {
            watch = super::watch::parse_watch(&v)?;
        }
    }
    if watch {
        let resume = super::watch::last_event_id(&headers)?;
        return watch_one(s, caller.map(|c| c.0), kind, name, resume).await;
    }
    let detail = detail(&s, &kind, &name)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("resource {kind}/{name} not found")))?;
    Ok(Json(detail).into_response())
}

/// The full read of (kind, name) as `GET` answers it, `None` when it does not exist.
pub(crate) async fn detail(
    s: &AppState,
    kind: &str,
    name: &str,
) -> Result<Option<ResourceDetail>, ApiError> {
    let Some((row, conditions, work)) = db::resources::resource_get(&s.pool, kind, name)
        .await
        .map_err(ApiError::db("read a resource"))?
    else {
        return Ok(None);
    };
    let waiting_for = super::cluster::waiting_for(s, &row, !work.is_empty()).await?;
    // A transient failure's retry waits in the queue, unclaimed, until its backoff ends.
    let next_attempt_at = work
        .iter()
        .find(|w| !w.claimed && w.not_before.is_some())
        .filter(|_| row.failure_gen != 0 && !row.failure_terminal)
        .and_then(|w| w.not_before);
    let recent_events = db::events::events_recent(&s.pool, kind, name, 10)
        .await
        .map_err(ApiError::db("read recent events"))?;
    Ok(Some(ResourceDetail::new(
        row,
        DetailExtras {
            conditions,
            work: work.into_iter().next(),
            waiting_for,
            next_attempt_at,
            recent_events,
        },
    )))
}

/// The watch of one resource: every entry of its event log (created, phase, operation,
/// deleted) in order, each with the resource as read when it is sent. Opened without
/// `resume`, it first sends the resource as it is (`event` null; 404 if it does not exist),
/// with the watch's start as its id; a resumed watch of a deleted resource goes on, since the
/// name may be applied again.
async fn watch_one(
    s: AppState,
    caller: Option<auth::Caller>,
    kind: String,
    name: String,
    resume: Option<i64>,
) -> Result<Response, ApiError> {
    let filter = db::events::EventFilter {
        kind: Some(kind.clone()),
        name: Some(name.clone()),
    };
    let w = super::watch::open(&s, filter, resume).await?;
    let first = match resume {
        Some(_) => None,
        // Read after the watch opened: the state includes every event up to its start, and
        // an event after it is sent again even if the state already shows it.
        None => {
            let d = detail(&s, &kind, &name)
                .await?
                .ok_or_else(|| ApiError::NotFound(format!("resource {kind}/{name} not found")))?;
            Some(super::watch::message(
                w.start(),
                &ResourceWatchEvent {
                    event: None,
                    resource: Some(d),
                },
            ))
        }
    };
    let state = s.clone();
    let rest = super::watch::messages(w, move |batch| {
        let (s, kind, name) = (s.clone(), kind.clone(), name.clone());
        async move {
            // One read per batch: every message of it carries the same, latest, state.
            let d = detail(&s, &kind, &name).await?;
            Ok(batch
                .iter()
                .map(|e| {
                    let m = ResourceWatchEvent {
                        event: Some(ResourceEvent::from(e.as_ref().clone())),
                        resource: d.clone(),
                    };
                    super::watch::message(e.id, &m)
                })
                .collect())
        }
    });
    Ok(super::watch::respond(
        &state,
        caller,
        futures::StreamExt::chain(futures::stream::iter(first), rest),
    ))
}

/// A page cursor: the last row's keyset, `created_at|id` in creation order and
/// `rank|created_at|id` problems first (`-` for a rank past every problem), base64url.
pub(crate) fn encode_cursor(sort: ListSort, k: &Keyset) -> String {
    let t = k
        .created_at
        .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    let raw = match (sort, k.rank) {
        (ListSort::Created, _) => format!("{t}|{}", k.id),
        (ListSort::Problems, Some(r)) => format!("{r}|{t}|{}", k.id),
        (ListSort::Problems, None) => format!("-|{t}|{}", k.id),
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

/// The keyset of a cursor made by [`encode_cursor`] for the same `sort`; `None` for anything
/// else (the caller restarts from the first page).
pub(crate) fn decode_cursor(sort: ListSort, c: &str) -> Option<Keyset> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(c)
        .ok()?;
    let s = String::from_utf8(raw).ok()?;
    let (rest, id) = s.rsplit_once('|')?;
    let (rank, t) = match sort {
        ListSort::Created => (None, rest),
        ListSort::Problems => match rest.split_once('|')? {
            ("-", t) => (None, t),
            (r, t) => (Some(r.parse::<i16>().ok()?), t),
        },
    };
    Some(Keyset {
        rank,
        created_at: DateTime::parse_from_rfc3339(t).ok()?.with_timezone(&Utc),
        id: Uuid::parse_str(id).ok()?,
    })
}

/// Parses a `kind/name` address (names never contain '/').
pub(crate) fn parse_ref(location: &str, v: &str) -> Result<(String, String), ApiError> {
    match v.split_once('/') {
        Some((k, n)) if !k.is_empty() && !n.is_empty() && !n.contains('/') => {
            Ok((k.to_string(), n.to_string()))
        }
        _ => Err(ApiError::invalid(
            location,
            format!("{} is not a kind/name address", quote(v)),
        )),
    }
}

fn parse_phase(v: String) -> Result<Phase, ApiError> {
    Phase::parse(&v).ok_or_else(|| {
        ApiError::invalid(
            "phase",
            format!("{} is not one of {}", quote(&v), Phase::TEXTS.join(", ")),
        )
    })
}

/// The filters of a list query, parsed and checked.
pub(crate) struct ListQuery {
    /// The database filter (owners not resolved yet).
    pub filter: db::resources::ListFilter,
    /// `owner=kind/name` values, in request order.
    pub owner_refs: Vec<(String, String)>,
    /// Two `label` values gave one key different values: nothing can match.
    pub contradictory: bool,
}

/// Parses the shared list filters: `kind`, `phase` (repeatable unions), `owner=kind/name`
/// (repeatable union, only where `owners_allowed`), `name` (case-insensitive substring),
/// `label=key:value` (repeatable, AND), `limit` (1..=500), `sort` (`created`, the default, or
/// `problems`), `cursor` (a malformed one, or one of another sort, restarts from the first
/// page). Unknown parameters are ignored.
pub(crate) fn parse_list_query(
    q: Option<&str>,
    default_limit: i64,
    owners_allowed: bool,
) -> Result<ListQuery, ApiError> {
    let mut lq = ListQuery {
        filter: db::resources::ListFilter {
            limit: default_limit,
            ..Default::default()
        },
        owner_refs: Vec::new(),
        contradictory: false,
    };
    let mut labels = serde_json::Map::new();
    let mut cursor = None;
    for (k, v) in query_pairs(q) {
        match k.as_str() {
            "kind" => lq.filter.kinds.push(v),
            "phase" => lq.filter.phases.push(parse_phase(v)?),
            "owner" if owners_allowed => lq.owner_refs.push(parse_ref("owner", &v)?),
            "name" if !v.is_empty() => lq.filter.name = Some(v),
            "label" => {
                let Some((key, value)) = v.split_once(':').filter(|(k, _)| !k.is_empty()) else {
                    return Err(ApiError::invalid(
                        "label",
                        format!("{} is not a key:value label selector", quote(&v)),
                    ));
                };
                match labels.get(key) {
                    Some(Value::String(old)) if old != value => lq.contradictory = true,
                    _ => {
                        labels.insert(key.to_string(), Value::String(value.to_string()));
                    }
                }
            }
            "limit" => {
                lq.filter.limit = v
                    .parse::<i64>()
                    .ok()
                    .filter(|n| (1..=500).contains(n))
                    .ok_or_else(|| ApiError::invalid("limit", "limit must be 1..=500"))?;
            }
            "cursor" => cursor = Some(v),
            "sort" => {
                lq.filter.sort = match v.as_str() {
                    "created" => ListSort::Created,
                    "problems" => ListSort::Problems,
                    _ => {
                        return Err(ApiError::invalid(
                            "sort",
                            format!("{} is not one of created, problems", quote(&v)),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    lq.filter.after = cursor.and_then(|c| decode_cursor(lq.filter.sort, &c));
    if !labels.is_empty() {
        lq.filter.labels = Some(Value::Object(labels));
    }
    Ok(lq)
}

/// Resolves `owner` addresses; 404 naming the first that does not exist.
pub(crate) async fn resolve_owners(
    s: &AppState,
    refs: &[(String, String)],
) -> Result<Vec<db::resources::ResourceKey>, ApiError> {
    if refs.is_empty() {
        return Ok(Vec::new());
    }
    let keys = db::resources::resource_keys(&s.pool, refs)
        .await
        .map_err(ApiError::db("resolve owners"))?;
    if let Some((k, n)) = refs
        .iter()
        .find(|(k, n)| !keys.iter().any(|key| key.kind == *k && key.name == *n))
    {
        return Err(ApiError::NotFound(format!("owner {k}/{n} not found")));
    }
    Ok(keys)
}

/// Cuts a `limit + 1` page to `limit` rows and builds the `X-Next-Cursor` header (empty on
/// the last page). `item` finds a row's list item.
pub(crate) fn page<T>(
    rows: &mut Vec<T>,
    f: &ListFilter,
    item: impl Fn(&T) -> &ListItem,
) -> HeaderMap {
    let more = rows.len() as i64 > f.limit;
    rows.truncate(usize::try_from(f.limit).unwrap_or(0));
    let next = match rows.last() {
        Some(last) if more => encode_cursor(f.sort, &item(last).keyset()),
        _ => String::new(),
    };
    let mut h = HeaderMap::new();
    h.insert(
        "x-next-cursor",
        HeaderValue::from_str(&next).expect("base64 is ascii"),
    );
    h
}

/// List resources, one page at a time.
///
/// `GET /api/v1/resources`: one keyset page (no COUNT), `X-Next-Cursor` for the next one.
/// Filters: see [`parse_list_query`]; `owner` lists the direct children of those owners.
#[utoipa::path(
    get, operation_id = "resources_list", path = "/resources", tag = "resources",
    params(ResourceListQuery),
    responses(
        (status = 200, description = "One page, oldest first (problems first with `sort=problems`).", body = ResourceList, headers(("x-next-cursor" = String, description = "The next page's cursor; empty on the last page."))),
        (status = 404, response = NotFound),
        (status = 422, response = Unprocessable),
    ),
)]
pub async fn list(
    State(s): State<AppState>,
    RawQuery(q): RawQuery,
) -> Result<impl IntoResponse, ApiError> {
    let s = s.reading(ReadFrom::Replica);
    let mut lq = parse_list_query(q.as_deref(), 100, true)?;
    let owners = resolve_owners(&s, &lq.owner_refs).await?;
    lq.filter.owners = owners.iter().map(|o| o.uid).collect();
    let mut rows = if lq.contradictory {
        Vec::new()
    } else {
        db::resources::resource_list(&s.pool, &lq.filter)
            .await
            .map_err(ApiError::db("list resources"))?
    };
    let h = page(&mut rows, &lq.filter, |r| r);
    Ok((
        h,
        Json(ResourceList {
            owners: owners.into_iter().map(ResourceKey::from).collect(),
            resources: rows.into_iter().map(ResourceItem::from).collect(),
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trip() {
        let at = |rank| Keyset {
            rank,
            created_at: Utc::now(),
            id: Uuid::new_v4(),
        };
        let created = at(None);
        let c = encode_cursor(ListSort::Created, &created);
        assert_eq!(decode_cursor(ListSort::Created, &c), Some(created));
        for k in [at(Some(0)), at(Some(3)), at(None)] {
            let c = encode_cursor(ListSort::Problems, &k);
            assert_eq!(decode_cursor(ListSort::Problems, &c), Some(k));
            // A cursor of the other order restarts the walk rather than jumping into it.
            assert_eq!(decode_cursor(ListSort::Created, &c), None);
        }
        assert_eq!(decode_cursor(ListSort::Problems, &c), None);
        assert_eq!(decode_cursor(ListSort::Created, "not a cursor"), None);
        assert_eq!(decode_cursor(ListSort::Problems, "not a cursor"), None);
    }

    #[test]
    fn list_queries_parse_unions_and_label_conjunctions() {
        let lq = parse_list_query(
            Some("kind=a&kind=b&phase=Ready&owner=k/n&label=team:web&label=env:prod%3Ax&name=Ne"),
            100,
            true,
        )
        .unwrap();
        assert_eq!(lq.filter.kinds, ["a", "b"]);
        assert_eq!(lq.filter.phases, [Phase::Ready]);
        assert_eq!(lq.owner_refs, [("k".to_string(), "n".to_string())]);
        assert_eq!(
            lq.filter.labels,
            Some(json!({"team": "web", "env": "prod:x"}))
        );
        assert_eq!(lq.filter.name.as_deref(), Some("Ne"));
        assert!(!lq.contradictory);
        let lq = parse_list_query(Some("label=a:1&label=a:2"), 100, true).unwrap();
        assert!(lq.contradictory);
        let lq = parse_list_query(Some("owner=k/n"), 50, false).unwrap();
        assert!(
            lq.owner_refs.is_empty(),
            "owner is ignored where not allowed"
        );
        assert_eq!(lq.filter.limit, 50);
        for bad in [
            "label=nocolon",
            "label=:v",
            "owner=k",
            "owner=k/",
            "phase=x",
            "limit=501",
        ] {
            assert!(parse_list_query(Some(bad), 100, true).is_err(), "{bad}");
        }
    }
}
