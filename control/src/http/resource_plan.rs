//! `POST /api/v1/resources:plan`: what an apply of the same body would do, with nothing
//! written. The body is anything the apply takes: one document (a JSON object), or the
//! batch's forms (a JSON array, or one object per line as `application/x-ndjson`), at most
//! [`MAX_BATCH_ITEMS`](super::resource_batch::MAX_BATCH_ITEMS) documents. Each document is checked exactly as the apply checks it
//! (`check_item`, the same problem details), then compared with the stored resource:
//! `create`, `update` (with a diff from the document's top: `/spec/...`, `/labels/...`,
//! `/kind_version`, `/provider_config_ref`; writeOnly values `"***"`) or `unchanged`.
//!
//! For a composite whose spec would change, the plan composes the new spec and compares the
//! children and dependency edges with those the composite owns now (add, change, remove).
//! A Starlark bundle and a CEL graph run where the API can kill them, in the
//! `converge-starlark-compose` child (`app::starlark_sample`), under the effective provider
//! config a worker would get (the resource's override merged over the kind's default, its
//! sealed writeOnly values opened with the process's keys, or not composed with a warning
//! when one does not open), and
//! the value flows from upstreams that report a status are substituted as the engine's
//! compose does. A composer served by a worker (an SDK, WASM, stdworker) runs there, as a
//! dry run: the plan writes a request to `plan_requests` (`converge_engine::db::plans`), a
//! broker with a connected worker that declared dry-run support sends it a compose task with
//! `dry_run` set and writes the checked answer back, and the plan compares that answer
//! exactly as it compares a sandboxed one. It waits for every dry run of one request at most
//! `PLAN_DRY_RUN_TIMEOUT` (LISTEN `plan_answered`, with a re-read of its row as failsafe);
//! no such worker, or no answer in time, is a warning on the item. At most
//! [`MAX_PLAN_COMPOSES`] composites are composed per request.
//!
//! Nothing is stored: every database call here is a read (the resource, its children and
//! edges, provider configs, kinds), and the composers write nothing; a dry run's only rows
//! are its own `plan_requests` row, deleted once read (or when the plan gives up on it). The
//! caller needs the apply's role (operator): a plan shows what the caller could apply.

use std::{
    collections::{HashMap, HashSet},
    time::Duration,
};

use axum::{
    Json,
    body::Bytes,
    extract::{State, rejection::BytesRejection},
    http::{HeaderMap, StatusCode},
};
use converge_cel::ComposeOutput;
use converge_engine::{
    db::{
        compose::MAX_RELATED,
        plans::{self, PlanAnswer, PlanRequest},
    },
    ids::KindPair,
    words::Phase,
};
use converge_kinds::Kind;
use serde::Deserialize;
use serde_json::{Value, json};

use super::resource_batch::{Format, check_item, duplicate, format_of, items_of, kind_of};
use super::wire::{PlanAction, PlanItem, PlanResult};
use super::{
    AppState,
    input::body_rejection,
    problem::{ApiError, ITEM_PROBLEM_LIMITS},
    resources::ApplyLookups,
};
use crate::app::{
    plan::{
        Diff, MAX_DIFF_ENTRIES, StoredChild, compare_children, compare_edges, effective_config,
        json_eq, substitute_flows,
    },
    starlark_sample::{BundleSource, Runner, Sample},
};
use crate::db::{self, resources::ApplyItem};

/// The most composites one plan request composes (each a child process, up to its timeout,
/// and an answer of up to 4 MiB); the rest are planned without their children, and say so.
pub const MAX_PLAN_COMPOSES: usize = 8;

/// The most compose errors described in one item's `compose_error`.
const MAX_COMPOSE_ERRORS: usize = 5;

/// Plan an apply.
///
/// `POST /api/v1/resources:plan`: what applying the body would do, with nothing written. The
/// body is what the apply or the batch apply takes (one document, a JSON array, or NDJSON);
/// each document is checked as the apply checks it, compared with the stored resource
/// (create, update with its diff, or unchanged), and for a composite whose spec changes, its
/// composer is run on the new spec to show the children and edges it would add, change and
/// remove: Starlark and CEL in the API's sandbox, any other as a dry run on a connected
/// worker that supports them (nothing is stored; no such worker, or no answer within
/// PLAN_DRY_RUN_TIMEOUT, is a warning on the item).
#[utoipa::path(
    post, operation_id = "resource_plan_plan", path = "/resources:plan", tag = "resources",
    request_body(
        description = "One apply body, or at most 10,000 of them: a JSON object, a JSON array, \
            or one JSON object per line.",
        content((Vec<super::resources::ApplyBody> = "application/json"), (String = "application/x-ndjson")),
    ),
    responses((status = 200, description = "One plan per document, in document order, and \
        their counts; nothing was written.", body = PlanResult)),
)]
pub async fn plan(
    State(s): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<PlanResult>, ApiError> {
    let format = format_of(&headers)?;
    let body = body.map_err(body_rejection)?;
    let items: Vec<&[u8]> = match format {
        // One document: the single apply's body.
        Format::Array if body.trim_ascii_start().first() == Some(&b'{') => vec![&body[..]],
        f => items_of(f, &body)?,
    };
    let mut lookups = ApplyLookups::default();
    let named: Vec<(String, i32)> = items.iter().filter_map(|raw| kind_of(raw)).collect();
    lookups.read_kinds(&s, named).await?;

    let mut planner = Planner {
        s: &s,
        lookups,
        composes_left: MAX_PLAN_COMPOSES,
        seen: HashMap::new(),
        dry_runs: None,
    };
    let mut results = Vec::with_capacity(items.len());
    for (index, raw) in items.into_iter().enumerate() {
        results.push(planner.one(index, raw).await?);
    }
    let count = |a: PlanAction| {
        results
            .iter()
            .filter(|r| r.error.is_none() && r.action == Some(a))
            .count() as u64
    };
    Ok(Json(PlanResult {
        items: results.len() as u64,
        create: count(PlanAction::Create),
        update: count(PlanAction::Update),
        unchanged: count(PlanAction::Unchanged),
        failed: results
            .iter()
            .filter(|r| r.error.is_some() || r.compose_error.is_some())
            .count() as u64,
        changed: results.iter().filter(|r| changes(r)).count() as u64,
        results,
    }))
}

/// Whether applying the item would change anything: the resource, or what its compose
/// stores.
fn changes(r: &PlanItem) -> bool {
    if r.error.is_some() {
        return false;
    }
    let children = r
        .children
        .as_ref()
        .is_some_and(|c| !(c.add.is_empty() && c.change.is_empty() && c.remove.is_empty()));
    let edges = r
        .edges
        .as_ref()
        .is_some_and(|e| !(e.add.is_empty() && e.change.is_empty() && e.remove.is_empty()));
    matches!(r.action, Some(PlanAction::Create | PlanAction::Update)) || children || edges
}

/// The kind and name a document names, read leniently (for an item the apply refuses).
fn names_of(raw: &[u8]) -> (String, String) {
    #[derive(Deserialize)]
    struct Names {
        #[serde(default)]
        kind: Option<Value>,
        #[serde(default)]
        name: Option<Value>,
    }
    let text = |v: Option<Value>| {
        v.and_then(|v| v.as_str().map(|s| super::problem::clipped(253, s)))
            .unwrap_or_default()
    };
    match serde_json::from_slice::<Names>(raw) {
        Ok(n) => (text(n.kind), text(n.name)),
        Err(_) => (String::new(), String::new()),
    }
}

/// Why a compose did not give children.
enum NoCompose {
    /// The compose of the new spec would fail (the item's `compose_error`).
    Fails(String),
    /// It could not be run here (a warning).
    NotRun(String),
    /// A worker composer's dry run gave nothing (the whole warning).
    NoDryRun(String),
}

/// One request's dry runs: when they stop being waited for, and the LISTEN connection their
/// answers are heard on (opened by the first).
struct DryRunWait {
    deadline: tokio::time::Instant,
    listener: Option<sqlx::postgres::PgListener>,
}

/// One request's plan: the lookups it shares between documents.
struct Planner<'a> {
    s: &'a AppState,
    lookups: ApplyLookups,
    composes_left: usize,
    /// (kind, name) → the first document naming it.
    seen: HashMap<(String, String), usize>,
    /// The dry runs of worker composers, once one was asked for.
    dry_runs: Option<DryRunWait>,
}

impl Planner<'_> {
    /// The plan of document `index`. A refused document is an item with its problem; only
    /// a database failure fails the request.
    async fn one(&mut self, index: usize, raw: &[u8]) -> Result<PlanItem, ApiError> {
        let (kind, name) = names_of(raw);
        let mut out = PlanItem {
            index: index as u64,
            kind,
            name,
            action: None,
            status: StatusCode::OK.as_u16(),
            error: None,
            diff: Vec::new(),
            diff_omitted: 0,
            composer: None,
            children: None,
            edges: None,
            compose_error: None,
            warnings: Vec::new(),
        };
        let checked = match check_item(self.s, raw, &mut self.lookups).await {
            Ok(item) => match self.seen.get(&(item.kind.clone(), item.name.clone())) {
                Some(first) => Err(duplicate(&item, *first)),
                None => {
                    self.seen
                        .insert((item.kind.clone(), item.name.clone()), index);
                    Ok(item)
                }
            },
            Err(e) => Err(e),
        };
        let item = match checked {
            Ok(item) => item,
            // The batch answers a failed write per item; a plan's reads failing fail it all.
            Err(e @ ApiError::Internal { .. }) => return Err(e),
            Err(e) => {
                let (status, problem) = e.into_problem_within(&ITEM_PROBLEM_LIMITS);
                out.status = status.as_u16();
                out.error = Some(problem);
                return Ok(out);
            }
        };
        let Some(schema) = self.s.catalog.get(&item.kind, item.kind_version) else {
            // Checked a moment ago; a manifest deleted since is what the apply would meet.
            return Err(ApiError::NotFound(format!(
                "kind {} version {} is not registered (apply its manifest first)",
                item.kind, item.kind_version
            )));
        };
        let stored = db::resources::resource_get(&self.s.pool, &item.kind, &item.name)
            .await
            .map_err(ApiError::db("read a resource"))?
            .map(|(row, _, _)| row);
        let action = match &stored {
            None => PlanAction::Create,
            Some(row) => {
                let mut diff = Diff::with_limit(MAX_DIFF_ENTRIES);
                if row.kind_version != item.kind_version {
                    diff.compare(
                        "/kind_version",
                        Some(&json!(row.kind_version)),
                        Some(&json!(item.kind_version)),
                        Some(&json!(row.kind_version)),
                        Some(&json!(item.kind_version)),
                    );
                }
                let refs = (
                    json!(row.provider_config_ref),
                    json!(item.provider_config_ref),
                );
                diff.compare(
                    "/provider_config_ref",
                    Some(&refs.0),
                    Some(&refs.1),
                    Some(&refs.0),
                    Some(&refs.1),
                );
                diff.compare(
                    "/labels",
                    Some(&row.labels),
                    Some(&item.labels),
                    Some(&row.labels),
                    Some(&item.labels),
                );
                let mut shown_old = row.spec.clone();
                match self.s.kind(&row.kind, row.kind_version).await? {
                    Some(k) => {
                        k.mask_spec(&mut shown_old);
                    }
                    None => shown_old = json!("***"),
                }
                let mut shown_new = item.spec.clone();
                schema.mask_spec(&mut shown_new);
                diff.compare(
                    "/spec",
                    Some(&row.spec),
                    Some(&item.spec),
                    Some(&shown_old),
                    Some(&shown_new),
                );
                let same = json_eq(&row.spec, &item.spec)
                    && json_eq(&row.labels, &item.labels)
                    && row.kind_version == item.kind_version
                    && row.provider_config_ref == item.provider_config_ref;
                out.diff = diff.entries;
                out.diff_omitted = diff.omitted;
                if same {
                    PlanAction::Unchanged
                } else {
                    PlanAction::Update
                }
            }
        };
        out.action = Some(action);
        if action == PlanAction::Create {
            out.status = StatusCode::CREATED.as_u16();
        }
        if schema.compose_reaction.is_some() {
            let provider = schema.manifest.provider.clone().unwrap_or_default();
            out.composer = Some(provider.clone());
            // An apply that writes nothing composes nothing: the children stay as they are.
            if action != PlanAction::Unchanged {
                self.composite(&schema, &item, stored.as_ref().map(|r| r.uid), &mut out)
                    .await?;
            }
        }
        Ok(out)
    }

    /// Composes `item` and compares the children and edges with those `owner` (the stored
    /// composite, if any) owns now.
    async fn composite(
        &mut self,
        schema: &Kind,
        item: &ApplyItem,
        owner: Option<uuid::Uuid>,
        out: &mut PlanItem,
    ) -> Result<(), ApiError> {
        let provider = schema.manifest.provider.as_deref().unwrap_or_default();
        if self.composes_left == 0 {
            out.warnings.push(format!(
                "not composed: a plan composes at most {MAX_PLAN_COMPOSES} composites per \
                 request (plan fewer documents at once)"
            ));
            return Ok(());
        }
        self.composes_left -= 1;
        let composed = if matches!(provider, "starlark" | "cel") {
            self.compose(provider, item).await?
        } else {
            self.dry_run(item, owner).await?
        };
        let mut output = match composed {
            Ok(o) => o,
            Err(NoCompose::Fails(why)) => {
                out.compose_error = Some(why);
                return Ok(());
            }
            Err(NoCompose::NotRun(why)) => {
                out.warnings
                    .push(format!("not composed: the composer cannot run here: {why}"));
                return Ok(());
            }
            Err(NoCompose::NoDryRun(warning)) => {
                out.warnings.push(warning);
                return Ok(());
            }
        };
        let refused = self.refused_children(&output).await?;
        if !refused.is_empty() {
            out.compose_error = Some(refused);
            return Ok(());
        }
        let (stored, statuses) = match owner {
            None => (Vec::new(), HashMap::new()),
            Some(id) => self.owned_children(id).await?,
        };
        if schema.compose_edges
            && let Err(why) = substitute_flows(&mut output, |k, n| {
                statuses.get(&(k.to_owned(), n.to_owned()))
            })
        {
            out.compose_error = Some(why);
            return Ok(());
        }
        let catalog = &self.s.catalog;
        out.children = Some(compare_children(
            &output.children,
            &stored,
            |kind, version, spec| {
                if let Some(k) = catalog.get(kind, version) {
                    k.mask_spec(spec);
                }
            },
        ));
        if schema.compose_edges {
            let now = match owner {
                None => Vec::new(),
                Some(id) => db::resource_deps::owned_edges(&self.s.pool, id, MAX_RELATED * 4)
                    .await
                    .map_err(ApiError::db("read a composite's edges"))?,
            };
            out.edges = Some(compare_edges(&output.edges, &now));
        }
        Ok(())
    }

    /// Runs the composer of `item` (`starlark` or `cel`) on its new spec under the config a
    /// worker would get.
    async fn compose(
        &self,
        provider: &str,
        item: &ApplyItem,
    ) -> Result<Result<ComposeOutput, NoCompose>, ApiError> {
        let pair = KindPair::new(item.kind.clone(), item.kind_version);
        let default = db::kinds::providerconfig_defaults(&self.s.pool, &[pair])
            .await
            .map_err(ApiError::db("read the default provider config"))?
            .into_iter()
            .next()
            .map(|(_, c)| c)
            .unwrap_or_default();
        let default_spec: Option<Value> = if default.spec.is_empty() {
            None
        } else {
            serde_json::from_slice(&default.spec).ok()
        };
        let (over_spec, over_bundle) = match &item.provider_config_ref {
            None => (None, Vec::new()),
            Some(name) => match db::providerconfigs::providerconfig_get(&self.s.pool, name)
                .await
                .map_err(ApiError::db("read a provider config"))?
            {
                Some((row, data)) => (Some(row.spec), data.unwrap_or_default()),
                None => (None, Vec::new()),
            },
        };
        let mut config = effective_config(default_spec.as_ref(), over_spec.as_ref());
        // A config's writeOnly values are stored sealed; the composer gets them open, as a
        // worker does. One that does not open here (this process lacks the key that sealed
        // it) would compose with an envelope in its place: not composed, and said why.
        if let Some(e) = self.s.secrets.open_config(&item.kind, &mut config).first() {
            return Ok(Err(NoCompose::NotRun(format!(
                "{e} in this process: its provider config holds a sealed secret, and this \
                 process lacks the key that sealed it (SECRETS_KEY_FILE, \
                 SECRETS_OLD_KEY_FILES)"
            ))));
        }
        let runner = match Runner::find() {
            Ok(r) => r,
            Err(why) => return Ok(Err(NoCompose::NotRun(why))),
        };
        let sample = if provider == "cel" {
            if !config.get("resources").is_some_and(Value::is_array) {
                return Ok(Err(NoCompose::Fails(format!(
                    "no cel graph configured for {}@v{}: put {{\"resources\": [...]}} in its \
                     providerconfig's spec",
                    item.kind, item.kind_version
                ))));
            }
            runner.compose_cel(&config, &item.spec, &item.name).await
        } else {
            let bundle = if over_bundle.is_empty() {
                &default.bundle
            } else {
                &over_bundle
            };
            if bundle.is_empty() {
                return Ok(Err(NoCompose::Fails(format!(
                    "no starlark bundle configured for {}@v{}: put a zip with compose.star in \
                     its providerconfig's data",
                    item.kind, item.kind_version
                ))));
            }
            let root = json!({
                "name": item.name,
                "kind": item.kind,
                "kind_version": item.kind_version,
                "labels": item.labels,
            });
            runner
                .compose(BundleSource::Zip(bundle), &item.spec, &config, &root)
                .await
        };
        Ok(match sample {
            Sample::Composed(o) => Ok(o),
            Sample::Failed(why) => Err(NoCompose::Fails(why)),
            Sample::NotRun(why) => Err(NoCompose::NotRun(why)),
        })
    }

    /// Asks a worker serving `item`'s composer for a dry run of the new spec (through
    /// `plan_requests`, so the broker may be another process) and waits for its answer, at
    /// most until the request's dry-run deadline. `owner` is the stored composite, whose
    /// children the composer sees as observed.
    async fn dry_run(
        &mut self,
        item: &ApplyItem,
        owner: Option<uuid::Uuid>,
    ) -> Result<Result<ComposeOutput, NoCompose>, ApiError> {
        let pool = &self.s.pool;
        let pair = format!("kind {} version {}", item.kind, item.kind_version);
        let served = db::cluster::dry_run_served(
            pool,
            &item.kind,
            item.kind_version,
            self.s.runtime.member_liveness,
        )
        .await
        .map_err(ApiError::db("read the connected workers"))?;
        if !served {
            return Ok(Err(NoCompose::NoDryRun(format!(
                "not composed: the composer of {pair} runs on a worker, and no worker that \
                 supports dry runs is connected for it (a worker built with an SDK older \
                 than dry runs is never sent one)"
            ))));
        }
        let timeout = self.s.runtime.plan_dry_run_timeout;
        if self.dry_runs.is_none() {
            // Once per request: the rows of plans that died waiting.
            plans::sweep(pool)
                .await
                .map_err(ApiError::db("sweep abandoned plan requests"))?;
        }
        let wait = self.dry_runs.get_or_insert_with(|| DryRunWait {
            deadline: tokio::time::Instant::now() + timeout,
            listener: None,
        });
        let left = wait
            .deadline
            .saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Ok(Err(NoCompose::NoDryRun(format!(
                "not composed: this plan's dry runs took their whole {timeout:?} \
                 (PLAN_DRY_RUN_TIMEOUT); plan fewer composites at once"
            ))));
        }
        // LISTEN before the request is written, so its answer's NOTIFY cannot come first.
        // Without a listener the row is re-read on the failsafe tick alone.
        if wait.listener.is_none() {
            match sqlx::postgres::PgListener::connect_with(pool).await {
                Ok(mut l) => match l.listen(plans::ANSWERED).await {
                    Ok(()) => wait.listener = Some(l),
                    Err(e) => tracing::warn!(error = %e, "could not LISTEN for plan answers"),
                },
                Err(e) => tracing::warn!(error = %e, "could not LISTEN for plan answers"),
            }
        }
        let id = uuid::Uuid::new_v4();
        plans::request(
            pool,
            &PlanRequest {
                id,
                kind: &item.kind,
                kind_version: item.kind_version,
                name: &item.name,
                resource_id: owner,
                spec: &item.spec,
                labels: &item.labels,
                provider_config_ref: item.provider_config_ref.as_deref(),
                wait: left,
            },
        )
        .await
        .map_err(ApiError::db("request a dry run"))?;
        let answer = loop {
            if let Some(a) = plans::take(pool, id)
                .await
                .map_err(ApiError::db("read a dry run's answer"))?
            {
                break a;
            }
            let now = tokio::time::Instant::now();
            if now >= wait.deadline {
                let claimed = plans::claimed(pool, id)
                    .await
                    .map_err(ApiError::db("read a dry run's request"))?;
                plans::forget(pool, id)
                    .await
                    .map_err(ApiError::db("withdraw a dry run's request"))?;
                let who = if claimed {
                    "the worker did not answer"
                } else {
                    "no broker took it to a worker"
                };
                return Ok(Err(NoCompose::NoDryRun(format!(
                    "not composed: the dry run of the composer of {pair} timed out after \
                     {timeout:?} (PLAN_DRY_RUN_TIMEOUT): {who}"
                ))));
            }
            // Any answer wakes the wait; the row says whose. The failsafe re-read covers a
            // lost connection.
            let tick = (wait.deadline - now).min(Duration::from_millis(500));
            match wait.listener.as_mut() {
                Some(l) => {
                    if let Ok(Err(e)) = tokio::time::timeout(tick, l.recv()).await {
                        tracing::warn!(error = %e, "LISTEN for plan answers failed");
                        wait.listener = None;
                    }
                }
                None => tokio::time::sleep(tick).await,
            }
        };
        Ok(match answer {
            PlanAnswer::Composed(v) => match serde_json::from_value::<ComposeOutput>(v) {
                Ok(o) => Ok(o),
                Err(e) => Err(NoCompose::Fails(format!(
                    "the dry run's answer is not a compose output: {e}"
                ))),
            },
            PlanAnswer::Failed(why) => Err(NoCompose::Fails(why)),
            PlanAnswer::NotRun(why) => Err(NoCompose::NoDryRun(format!(
                "not composed: the dry run of the composer of {pair} did not run: {why}"
            ))),
        })
    }

    /// What the engine would refuse of a compose's children (an unregistered kind version,
    /// a spec its kind's schema refuses), as one message naming the first few; empty when
    /// nothing.
    async fn refused_children(&mut self, output: &ComposeOutput) -> Result<String, ApiError> {
        let mut found = Vec::new();
        let mut missing: HashSet<(String, i32)> = HashSet::new();
        for c in &output.children {
            if found.len() == MAX_COMPOSE_ERRORS {
                break;
            }
            let pair = (c.kind.clone(), c.kind_version);
            let k = if missing.contains(&pair) {
                None
            } else {
                self.s.kind(&c.kind, c.kind_version).await?
            };
            match k {
                None => {
                    missing.insert(pair);
                    found.push(format!(
                        "child {}/{} has unregistered kind {} version {}",
                        c.kind, c.name, c.kind, c.kind_version
                    ));
                }
                Some(k) => {
                    if let Some(v) = k.spec_violation(&c.spec) {
                        found.push(format!(
                            "child {}/{}: its spec does not satisfy kind {} version {}: {}",
                            c.kind, c.name, c.kind, c.kind_version, v
                        ));
                    }
                }
            }
        }
        Ok(found.join("; "))
    }

    /// The children `owner` owns now, and the status each reports (for value flows).
    async fn owned_children(
        &self,
        owner: uuid::Uuid,
    ) -> Result<(Vec<StoredChild>, HashMap<(String, String), Value>), ApiError> {
        // Direct children only (owner_id), a read: the subtree form is the rollup's.
        let rows = db::compose::related(&self.s.pool, owner, Some(owner), false)
            .await
            .map_err(ApiError::db("read a composite's children"))?;
        let mut statuses = HashMap::new();
        let mut stored = Vec::with_capacity(rows.len());
        for r in rows {
            if let Some(status) = r
                .status
                .as_deref()
                .and_then(|t| serde_json::from_str(t).ok())
            {
                statuses.insert((r.kind.clone(), r.name.clone()), status);
            }
            stored.push(StoredChild {
                spec: serde_json::from_str(&r.spec).unwrap_or(Value::Null),
                frozen_or_going: matches!(
                    r.phase,
                    Phase::Orphaned | Phase::Deleting | Phase::Quarantined
                ),
                orphaned: r.phase == Phase::Orphaned,
                kind: r.kind,
                kind_version: r.kind_version,
                name: r.name,
                labels: r.labels,
            });
        }
        Ok((stored, statuses))
    }
}
