//! The wire shapes of `/api/v1`: the bodies the handlers send, each one type that both
//! serialises the answer and states its OpenAPI schema (so the document cannot drift from
//! the bytes), built from the engine's rows by a `From` or a constructor here; and the
//! parameters the handlers parse by hand.
//!
//! The engine's row types stay free of any OpenAPI dependency; its database words
//! (`converge_engine::words`) carry their schema behind the engine's `openapi` feature and
//! are used as they are. Two checks keep the rest honest: `control/tests/openapi_answers.rs`
//! validates real answers against the document, and the schemathesis step of
//! `scripts/test.sh` checks every route's answers against it. An `Option` field that is always written (`null` when empty) is marked
//! required, so a client sees `T | null`, not an optional field.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::problem::Problem;
use crate::db;

/// The database's words this API sends, each an enum with one spelling per variant and its
/// schema (a string enum) from the same list (`converge_engine::words`).
pub use converge_engine::words::{
    ApplyResult, OperationState, Phase, TaskTrigger, TaskType, Transition,
};

/// `{"status": "ok"}`.
#[derive(Serialize, ToSchema)]
pub struct StatusOk {
    /// Always `ok`.
    pub status: String,
}

impl StatusOk {
    /// The one answer.
    pub fn ok() -> StatusOk {
        StatusOk {
            status: "ok".to_owned(),
        }
    }
}

/// The build and the API versions it serves.
#[derive(Serialize, ToSchema)]
pub struct VersionInfo {
    /// The build's version string.
    pub version: String,
    /// The API version of this path (`v1`).
    pub api_version: String,
    /// Every API version this build serves.
    pub api_versions: Vec<String>,
}

/// A resource's public address.
#[derive(Serialize, ToSchema, Clone, Debug, PartialEq, Eq)]
pub struct ResourceRef {
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
}

impl ResourceRef {
    /// The address of an owner read as two nullable columns (a left join): `None` for a
    /// root.
    pub fn of(kind: Option<String>, name: Option<String>) -> Option<ResourceRef> {
        Some(ResourceRef {
            kind: kind?,
            name: name?,
        })
    }
}

/// A resource's id and address.
#[derive(Serialize, ToSchema)]
pub struct ResourceKey {
    /// The resource id.
    pub uid: Uuid,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
}

impl From<db::resources::ResourceKey> for ResourceKey {
    fn from(k: db::resources::ResourceKey) -> Self {
        ResourceKey {
            uid: k.uid,
            kind: k.kind,
            name: k.name,
        }
    }
}

/// One row of a resource list.
#[derive(Serialize, ToSchema)]
pub struct ResourceItem {
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
    /// while a transient failure is being retried (phase `Failed`, not terminal).
    pub failure_terminal: bool,
    /// Consecutive failures at the failing generation.
    pub failure_attempts: i32,
    /// The failure of the live spec (its first 512 characters), null when it is not
    /// failing; the resource's own read has the whole text and the next retry.
    #[schema(required = true)]
    pub failure_message: Option<String>,
    /// Labels.
    #[schema(value_type = BTreeMap<String, String>)]
    pub labels: Value,
    /// The direct owner, null for a root.
    #[schema(required = true)]
    pub owner: Option<ResourceRef>,
    /// Created at.
    pub created_at: DateTime<Utc>,
    /// Updated at.
    pub updated_at: DateTime<Utc>,
}

impl From<db::resources::ListItem> for ResourceItem {
    fn from(r: db::resources::ListItem) -> Self {
        ResourceItem {
            uid: r.uid,
            kind: r.kind,
            kind_version: r.kind_version,
            name: r.name,
            phase: r.phase,
            generation: r.generation,
            synced_gen: r.synced_gen,
            is_ready: r.is_ready,
            failure_terminal: r.failure_terminal,
            failure_attempts: r.failure_attempts,
            failure_message: r.failure_message,
            labels: r.labels,
            owner: ResourceRef::of(r.owner_kind, r.owner_name),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

impl From<db::resources::RootItem> for RootItem {
    fn from(r: db::resources::RootItem) -> Self {
        RootItem {
            item: r.item.into(),
            resource_count: r.resource_count,
        }
    }
}

/// One row of the roots list: a list row plus the size of its composed subtree.
#[derive(Serialize, ToSchema)]
pub struct RootItem {
    /// The root itself.
    #[serde(flatten)]
    pub item: ResourceItem,
    /// How many resources carry this root's id (its descendants, not itself).
    pub resource_count: i64,
}

/// A page of `GET /resources`.
#[derive(Serialize, ToSchema)]
pub struct ResourceList {
    /// The `owner` filters, resolved.
    pub owners: Vec<ResourceKey>,
    /// The rows.
    pub resources: Vec<ResourceItem>,
}

/// A page of `GET /resources/roots`.
#[derive(Serialize, ToSchema)]
pub struct RootList {
    /// The rows.
    pub roots: Vec<RootItem>,
}

/// A page of one owner's direct children.
#[derive(Serialize, ToSchema)]
pub struct ChildList {
    /// The owner.
    pub owner: ResourceKey,
    /// Its children.
    pub resources: Vec<ResourceItem>,
}

/// The answer to one applied resource.
#[derive(Serialize, ToSchema)]
pub struct Applied {
    /// The resource id.
    pub uid: Uuid,
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Name.
    pub name: String,
    /// Generation after the apply.
    pub generation: i64,
    /// What the apply did.
    pub result: ApplyResult,
    /// Only when there are some: the value flows of the manifest's `edges` left unchecked
    /// because a kind they join is not registered yet.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(required = false)]
    pub warnings: Vec<String>,
}

impl Applied {
    /// The answer to `item`, applied as `applied` says (the single apply's body, a batch
    /// result's fields); no warnings.
    pub fn new(item: &db::resources::ApplyItem, applied: &db::resources::Applied) -> Applied {
        Applied {
            uid: applied.id,
            kind: item.kind.clone(),
            kind_version: item.kind_version,
            name: item.name.clone(),
            generation: applied.generation,
            result: applied.result,
            warnings: Vec::new(),
        }
    }
}

/// One applied item of a batch.
#[derive(Serialize, ToSchema)]
pub struct BatchApplied {
    /// The item's position in the request.
    pub index: u64,
    /// 201 (created) or 200.
    pub status: u16,
    /// The single apply's answer.
    #[serde(flatten)]
    pub applied: Applied,
}

/// One failed item of a batch.
#[derive(Serialize, ToSchema)]
pub struct BatchFailed {
    /// The item's position in the request.
    pub index: u64,
    /// The status the single apply would have answered.
    pub status: u16,
    /// The problem the single apply would have answered, bounded to 2 KiB serialised: its
    /// `detail` and messages clipped, its located errors listed while they fit (the rest
    /// counted in `errors_omitted`).
    pub error: Problem,
}

/// One item's result in a batch.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum BatchItem {
    /// Applied.
    Applied(BatchApplied),
    /// Refused (nothing of it was written).
    Failed(BatchFailed),
}

/// The answer to `POST /resources:batch`: the counts of every item, and one result per
/// item in item order while the reply stays within 4 MiB.
#[derive(Serialize, ToSchema)]
pub struct BatchResult {
    /// How many items the request held.
    pub items: u64,
    /// Items created.
    pub created: u64,
    /// Items changed.
    pub configured: u64,
    /// Items unchanged.
    pub unchanged: u64,
    /// Items refused.
    pub failed: u64,
    /// One per item, in item order, from the first: `results[i]` is item `i`'s. Listed while
    /// the reply stays within 4 MiB; the items after are counted in `results_omitted`.
    pub results: Vec<BatchItem>,
    /// How many items' results were left off the end of `results` to keep the reply within
    /// 4 MiB (the counts above include them).
    pub results_omitted: u64,
}

/// What applying one document would do to its resource (`POST /resources:plan`).
#[derive(Serialize, ToSchema, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
pub enum PlanAction {
    /// No resource of that kind and name exists: the apply creates it.
    Create,
    /// The resource exists and its spec, labels, kind version or provider config differ.
    Update,
    /// The resource exists exactly as the document says.
    Unchanged,
}

/// How one value differs.
#[derive(Serialize, ToSchema, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
pub enum DiffOp {
    /// Only the new document has it.
    Add,
    /// Only the stored one has it.
    Remove,
    /// Both have it, with different values.
    Replace,
}

/// One difference between the stored and the new document. A value a writeOnly subschema
/// covers reads `"***"` on both sides.
#[derive(Serialize, ToSchema, Clone, PartialEq, Debug)]
pub struct DiffEntry {
    /// add, remove or replace.
    pub op: DiffOp,
    /// JSON pointer from the document's top (`/spec/size`, `/labels/team`, `/kind_version`).
    pub path: String,
    /// The stored value (absent for `add`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    /// The new value (absent for `remove`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
}

/// A child a compose would add.
#[derive(Serialize, ToSchema, Clone, Debug)]
pub struct PlanChild {
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Name.
    pub name: String,
    /// Its spec as it would be stored (value flows from upstreams that report a status
    /// substituted; writeOnly values `"***"`).
    #[schema(value_type = Object)]
    pub spec: Value,
    /// Its labels.
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    pub labels: Value,
}

/// A child a compose would change.
#[derive(Serialize, ToSchema, Clone, Debug)]
pub struct PlanChildChange {
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
    /// What changes (paths from the child's top: `/spec/...`, `/labels/...`,
    /// `/kind_version`; an orphaned child taken back shows `/orphaned`).
    pub diff: Vec<DiffEntry>,
    /// Differences past the first 64, not listed.
    pub diff_omitted: u64,
}

/// The children a composite's compose would add, change and remove, against those it owns
/// now.
#[derive(Serialize, ToSchema, Clone, Debug, Default)]
pub struct PlanChildren {
    /// New children.
    pub add: Vec<PlanChild>,
    /// Children whose spec, labels or kind version change.
    pub change: Vec<PlanChildChange>,
    /// Children no longer composed: orphaned for their kind's grace window, or torn down.
    pub remove: Vec<ResourceRef>,
    /// How many composed children stay as they are.
    pub unchanged: u64,
}

/// One dependency edge a compose would store: `from` depends on `to`.
#[derive(Serialize, ToSchema, Clone, Debug, PartialEq)]
pub struct PlanEdge {
    /// The dependent.
    pub from: ResourceRef,
    /// The dependency (upstream).
    pub to: ResourceRef,
    /// The values `to`'s status flows into `from`'s spec.
    pub value_mappings: Vec<ValueMapping>,
}

/// An edge whose value flows change.
#[derive(Serialize, ToSchema, Clone, Debug)]
pub struct PlanEdgeChange {
    /// The dependent.
    pub from: ResourceRef,
    /// The dependency (upstream).
    pub to: ResourceRef,
    /// The value flows stored now.
    pub old_value_mappings: Vec<ValueMapping>,
    /// The value flows the compose gives.
    pub value_mappings: Vec<ValueMapping>,
}

/// The edges a composite's compose would add, change and remove.
#[derive(Serialize, ToSchema, Clone, Debug, Default)]
pub struct PlanEdges {
    /// New edges.
    pub add: Vec<PlanEdge>,
    /// Edges whose value flows change.
    pub change: Vec<PlanEdgeChange>,
    /// Edges no longer composed.
    pub remove: Vec<PlanEdge>,
    /// How many edges stay as they are.
    pub unchanged: u64,
}

/// What applying one document would do, found without writing anything.
#[derive(Serialize, ToSchema, Clone, Debug)]
pub struct PlanItem {
    /// The document's position in the request.
    pub index: u64,
    /// The kind the document names (empty when it names none).
    pub kind: String,
    /// The name the document names (empty when it names none).
    pub name: String,
    /// What the apply does to the resource; `null` when the apply would refuse the
    /// document (see `error`).
    #[schema(required = true)]
    pub action: Option<PlanAction>,
    /// The status the apply would answer: 200 or 201, or the error's.
    pub status: u16,
    /// The problem the apply would answer (the document is refused, nothing would change);
    /// `null` when it would be applied.
    #[schema(required = true)]
    pub error: Option<Problem>,
    /// The stored resource against the document (`/spec/...`, `/labels/...`,
    /// `/kind_version`, `/provider_config_ref`); empty for a create or when unchanged.
    pub diff: Vec<DiffEntry>,
    /// Differences past the first 256, not listed.
    pub diff_omitted: u64,
    /// The composite's provider (`starlark`, `cel`, `sdk`, `wasm`, or the empty string for
    /// an undeclared one); `null` for a kind without a composer.
    #[schema(required = true)]
    pub composer: Option<String>,
    /// The children its compose of the new spec would add, change and remove; `null` when
    /// not a composite, refused, unchanged (an apply that writes nothing composes nothing),
    /// or not composed here (see `warnings`).
    #[schema(required = true)]
    pub children: Option<PlanChildren>,
    /// The dependency edges likewise; `null` likewise, or when the composer's manifest does
    /// not emit edges.
    #[schema(required = true)]
    pub edges: Option<PlanEdges>,
    /// Why the compose of the new spec would fail (the composer's error, or a child it
    /// emits that the engine would refuse): the apply is accepted but its reconcile fails
    /// terminally. `null` when it would succeed or was not run.
    #[schema(required = true)]
    pub compose_error: Option<String>,
    /// What the plan could not find out (a composer it cannot run), for a person.
    pub warnings: Vec<String>,
}

/// The answer to `POST /resources:plan`: one plan per document, in document order, and
/// their counts. Nothing was written.
#[derive(Serialize, ToSchema, Clone, Debug)]
pub struct PlanResult {
    /// How many documents the request held.
    pub items: u64,
    /// Documents whose resource would be created.
    pub create: u64,
    /// Documents whose resource would be updated.
    pub update: u64,
    /// Documents whose resource would stay as it is (its composition may still change: see
    /// `changed`).
    pub unchanged: u64,
    /// Documents the apply would refuse, or whose compose would fail.
    pub failed: u64,
    /// Documents whose apply would change anything: the resource, or the children and edges
    /// its compose stores.
    pub changed: u64,
    /// One per document, in document order.
    pub results: Vec<PlanItem>,
}

/// A stored condition.
#[derive(Serialize, ToSchema, Clone)]
pub struct Condition {
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

/// The live claim on a resource.
#[derive(Serialize, ToSchema, Clone)]
pub struct LiveWork {
    /// reconcile | delete | operate.
    #[schema(value_type = String)]
    pub task_type: TaskType,
    /// Whether a broker holds it now.
    pub claimed: bool,
    /// Attempt number at this generation.
    pub attempt: i32,
    /// Generation the task reconciles.
    pub generation: i64,
    /// What fired it.
    #[schema(value_type = String)]
    pub trigger: TaskTrigger,
    /// When it was claimed.
    #[schema(required = true)]
    pub claimed_at: Option<DateTime<Utc>>,
    /// Last attested heartbeat.
    #[schema(required = true)]
    pub heartbeat_at: Option<DateTime<Utc>>,
    /// Not before (retry backoff).
    #[schema(required = true)]
    pub not_before: Option<DateTime<Utc>>,
    /// Claiming broker.
    #[schema(required = true)]
    pub broker_id: Option<String>,
}

/// One entry of a resource's event log.
#[derive(Serialize, ToSchema, Clone)]
pub struct ResourceEvent {
    /// Position in the log (the cursor).
    pub id: i64,
    /// The resource (a deleted one keeps its id here).
    pub resource_id: Uuid,
    /// The resource's kind.
    pub kind: String,
    /// The resource's name.
    pub name: String,
    /// When.
    pub at: DateTime<Utc>,
    /// created | phase | deleted | operation | delivery (a reactor binding's delivery for
    /// this resource failed: the message names the binding, the attempt, the next retry and
    /// the error; written when the error changes, not at every retry).
    #[serde(rename = "type")]
    pub type_: String,
    /// Phase before.
    #[schema(required = true, value_type = Option<String>)]
    pub from_phase: Option<Phase>,
    /// Phase after.
    #[schema(required = true, value_type = Option<String>)]
    pub to_phase: Option<Phase>,
    /// The generation at the time.
    #[schema(required = true)]
    pub generation: Option<i64>,
    /// A failure message, an operation's verb and state.
    #[schema(required = true)]
    pub message: Option<String>,
    /// The principal whose API call wrote it; null for the engine's own work.
    #[schema(required = true)]
    pub actor: Option<String>,
}

impl From<db::events::Event> for ResourceEvent {
    fn from(e: db::events::Event) -> Self {
        ResourceEvent {
            id: e.id,
            resource_id: e.resource_id,
            kind: e.kind,
            name: e.name,
            at: e.at,
            type_: e.type_,
            from_phase: e.from_phase,
            to_phase: e.to_phase,
            generation: e.generation,
            message: e.message,
            actor: e.actor,
        }
    }
}

/// A page of events.
#[derive(Serialize, ToSchema)]
pub struct EventPage {
    /// Events in log order.
    pub items: Vec<ResourceEvent>,
    /// Pass as `cursor` for the next page; null on the last one.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// The `data` of one message of a resource's watch (`GET /resources/{kind}/{name}?watch=true`,
/// `text/event-stream`). The message's SSE `id` is a position in the event log: send the last
/// one received as `Last-Event-ID` to resume with no gap and no duplicate.
#[derive(Serialize, ToSchema)]
pub struct ResourceWatchEvent {
    /// The log entry this message reports, in log order; null only in the first message of
    /// a watch opened without `Last-Event-ID`, which reports the resource as it is.
    #[schema(required = true)]
    pub event: Option<ResourceEvent>,
    /// The resource as read when the message was sent (at or after `event`: its phase,
    /// generation and conditions may already be newer); null while it does not exist.
    #[schema(required = true)]
    pub resource: Option<ResourceDetail>,
}

/// One Server-Sent Event (`text/event-stream`) as OpenAPI 3.1 describes an event stream: an
/// object of the event's fields, `data` a string of JSON whose schema `contentSchema` names.
/// Implemented by hand: utoipa has no `contentSchema`, so it travels in the schema's
/// extensions map, which is written out as it is.
fn sse_event(data: &str, about: &str) -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
    use utoipa::openapi::{ObjectBuilder, Type, extensions::Extensions, schema::SchemaType};
    let string = |description: &str| {
        ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::String))
            .description(Some(description))
    };
    let mut data_field = string(&format!("A `{data}` as JSON."))
        .content_media_type("application/json")
        .build();
    let mut content = Extensions::default();
    content.insert(
        "contentSchema".into(),
        serde_json::json!({"$ref": format!("#/components/schemas/{data}")}),
    );
    data_field.extensions = Some(content);
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::Object))
        .description(Some(about))
        .property(
            "id",
            string("A position in the event log: send the last one received as `Last-Event-ID` to resume after it."),
        )
        .property("data", data_field)
        .property("event", string("Always `message` (the default)."))
        .required("id")
        .required("data")
        .into()
}

/// Declares the schema of one watch stream's events (`text/event-stream`) whose `data` is a
/// `$data`, registering `$data` beside it (the `contentSchema` names it).
macro_rules! sse_stream {
    ($(#[$doc:meta])* $name:ident, $data:ident, $about:literal) => {
        $(#[$doc])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
                sse_event(stringify!($data), $about)
            }
        }

        impl ToSchema for $name {
            fn schemas(
                schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::Schema>)>,
            ) {
                schemas.push((
                    $data::name().into(),
                    <$data as utoipa::PartialSchema>::schema(),
                ));
                <$data as ToSchema>::schemas(schemas);
            }
        }
    };
}

sse_stream!(
    /// One event of a resource's watch; its `data` is a [`ResourceWatchEvent`].
    ResourceWatchStream,
    ResourceWatchEvent,
    "One Server-Sent Event of a resource's watch."
);

sse_stream!(
    /// One event of the event log's watch; its `data` is a [`ResourceEvent`].
    EventLogStream,
    ResourceEvent,
    "One Server-Sent Event of the event log's watch."
);

/// The full read of one resource.
#[derive(Serialize, ToSchema, Clone)]
pub struct ResourceDetail {
    /// The resource id.
    pub uid: Uuid,
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Name.
    pub name: String,
    /// Labels.
    #[schema(value_type = BTreeMap<String, String>)]
    pub labels: Value,
    /// Spec.
    pub spec: Value,
    /// Last applied status.
    #[schema(required = true)]
    pub status: Option<Value>,
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
    #[schema(required = true)]
    pub failure_message: Option<String>,
    /// Finalizers.
    pub finalizers: Vec<String>,
    /// Deletion requested at.
    #[schema(required = true)]
    pub deletion_requested_at: Option<DateTime<Utc>>,
    /// Attached provider config.
    #[schema(required = true)]
    pub provider_config_ref: Option<String>,
    /// The direct owner, null for a root.
    #[schema(required = true)]
    pub owner: Option<ResourceRef>,
    /// Created at.
    pub created_at: DateTime<Utc>,
    /// Updated at.
    pub updated_at: DateTime<Utc>,
    /// Its conditions.
    pub conditions: Vec<Condition>,
    /// The live claim, if any.
    #[schema(required = true)]
    pub work: Option<LiveWork>,
    /// Why nothing can progress it, when it has work to do and no connected worker serves
    /// its kind version: `no worker serves KIND vN`. Null otherwise.
    #[schema(required = true)]
    pub waiting_for: Option<String>,
    /// While a transient failure waits to be retried: when the next attempt may start (its
    /// backoff ends). Null when nothing waits for a retry.
    #[schema(required = true)]
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The last ten events, newest first.
    pub recent_events: Vec<ResourceEvent>,
}

impl From<db::resources::ConditionRow> for Condition {
    fn from(c: db::resources::ConditionRow) -> Self {
        Condition {
            type_: c.type_,
            status: c.status,
            reason: c.reason,
            message: c.message,
            last_transition_at: c.last_transition_at,
        }
    }
}

impl From<db::resources::WorkRow> for LiveWork {
    fn from(w: db::resources::WorkRow) -> Self {
        LiveWork {
            task_type: w.task_type,
            claimed: w.claimed,
            attempt: w.attempt,
            generation: w.generation,
            trigger: w.trigger,
            claimed_at: w.claimed_at,
            heartbeat_at: w.heartbeat_at,
            not_before: w.not_before,
            broker_id: w.broker_id,
        }
    }
}

/// What the full read of a resource adds to its row.
pub struct DetailExtras {
    /// Its conditions.
    pub conditions: Vec<db::resources::ConditionRow>,
    /// The live claim, if any.
    pub work: Option<db::resources::WorkRow>,
    /// Why nothing can progress it (see [`ResourceDetail::waiting_for`]).
    pub waiting_for: Option<String>,
    /// When a waiting retry may start.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The last events, newest first.
    pub recent_events: Vec<db::events::Event>,
}

impl ResourceDetail {
    /// The full read of `r` with what the handler read beside it.
    pub fn new(r: db::resources::ResourceRow, x: DetailExtras) -> ResourceDetail {
        ResourceDetail {
            uid: r.uid,
            kind: r.kind,
            kind_version: r.kind_version,
            name: r.name,
            labels: r.labels,
            spec: r.spec,
            status: r.status,
            phase: r.phase,
            generation: r.generation,
            synced_gen: r.synced_gen,
            health_ok: r.health_ok,
            is_ready: r.is_ready,
            failure_gen: r.failure_gen,
            failure_terminal: r.failure_terminal,
            failure_attempts: r.failure_attempts,
            failure_message: r.failure_message,
            finalizers: r.finalizers,
            deletion_requested_at: r.deletion_requested_at,
            provider_config_ref: r.provider_config_ref,
            owner: ResourceRef::of(r.owner_kind, r.owner_name),
            created_at: r.created_at,
            updated_at: r.updated_at,
            conditions: x.conditions.into_iter().map(Condition::from).collect(),
            work: x.work.map(LiveWork::from),
            waiting_for: x.waiting_for,
            next_attempt_at: x.next_attempt_at,
            recent_events: x
                .recent_events
                .into_iter()
                .map(ResourceEvent::from)
                .collect(),
        }
    }
}

/// Counts by phase: every phase, zero included.
#[derive(Serialize, ToSchema, Default, Debug, PartialEq, Eq)]
pub struct PhaseCounts {
    /// In phase Reconciling.
    #[serde(rename = "Reconciling")]
    pub reconciling: i64,
    /// In phase Ready.
    #[serde(rename = "Ready")]
    pub ready: i64,
    /// In phase Degraded.
    #[serde(rename = "Degraded")]
    pub degraded: i64,
    /// In phase Failed.
    #[serde(rename = "Failed")]
    pub failed: i64,
    /// In phase Orphaned.
    #[serde(rename = "Orphaned")]
    pub orphaned: i64,
    /// In phase Quarantined.
    #[serde(rename = "Quarantined")]
    pub quarantined: i64,
    /// In phase Deleting.
    #[serde(rename = "Deleting")]
    pub deleting: i64,
}

impl PhaseCounts {
    /// Adds `n` resources in `phase`.
    pub fn add(&mut self, phase: Phase, n: i64) {
        *match phase {
            Phase::Reconciling => &mut self.reconciling,
            Phase::Ready => &mut self.ready,
            Phase::Degraded => &mut self.degraded,
            Phase::Failed => &mut self.failed,
            Phase::Orphaned => &mut self.orphaned,
            Phase::Quarantined => &mut self.quarantined,
            Phase::Deleting => &mut self.deleting,
        } += n;
    }
}

/// One kind's counts in a summary.
#[derive(Serialize, ToSchema, Debug)]
pub struct KindCounts {
    /// Kind.
    pub kind: String,
    /// Its resources.
    pub total: i64,
    /// Its resources by phase.
    pub phases: PhaseCounts,
}

/// Counts of a set of owners' subtrees, or of everything.
#[derive(Serialize, ToSchema)]
pub struct Summary {
    /// The `owner` filters, resolved.
    pub owners: Vec<ResourceKey>,
    /// By phase.
    pub totals: PhaseCounts,
    /// All of them.
    pub total: i64,
    /// By kind, in kind order.
    pub by_kind: Vec<KindCounts>,
}

/// Counts of one owner's subtree.
#[derive(Serialize, ToSchema)]
pub struct OwnerSummary {
    /// The owner.
    pub owner: ResourceKey,
    /// By phase.
    pub totals: PhaseCounts,
    /// All of them.
    pub total: i64,
    /// By kind, in kind order.
    pub by_kind: Vec<KindCounts>,
}

/// A value flowed along a dependency edge.
#[derive(Serialize, ToSchema, Clone, Debug, PartialEq, Eq)]
pub struct ValueMapping {
    /// JSON pointer into the dependent's spec.
    pub dependent_field: String,
    /// JSON pointer into the dependency's status.
    pub source_field: String,
}

impl From<db::resource_deps::ValueMapping> for ValueMapping {
    fn from(m: db::resource_deps::ValueMapping) -> Self {
        ValueMapping {
            dependent_field: m.dependent_field,
            source_field: m.source_field,
        }
    }
}

/// The mappings of one edge, as sent.
fn mappings(ms: Vec<db::resource_deps::ValueMapping>) -> Vec<ValueMapping> {
    ms.into_iter().map(ValueMapping::from).collect()
}

/// A resource this one depends on.
#[derive(Serialize, ToSchema)]
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

impl From<db::resource_deps::Upstream> for Upstream {
    fn from(u: db::resource_deps::Upstream) -> Self {
        Upstream {
            kind: u.kind,
            name: u.name,
            upstream_phase: u.upstream_phase,
            upstream_ready: u.upstream_ready,
            upstream_health_ok: u.upstream_health_ok,
            upstream_updated_at: u.upstream_updated_at,
            value_mappings: mappings(u.value_mappings),
        }
    }
}

/// A resource that depends on this one.
#[derive(Serialize, ToSchema)]
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

impl From<db::resource_deps::Downstream> for Downstream {
    fn from(d: db::resource_deps::Downstream) -> Self {
        Downstream {
            kind: d.kind,
            name: d.name,
            phase: d.phase,
            value_mappings: mappings(d.value_mappings),
        }
    }
}

/// A resource's upstreams and dependents.
#[derive(Serialize, ToSchema)]
pub struct Dependencies {
    /// What it waits for.
    pub dependencies: Vec<Upstream>,
    /// What waits for it.
    pub dependents: Vec<Downstream>,
}

/// One node of a dependency graph.
#[derive(Serialize, ToSchema)]
pub struct GraphNode {
    /// `kind/name`.
    #[serde(rename = "ref")]
    pub ref_: String,
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

impl From<db::resource_deps::GraphNode> for GraphNode {
    fn from(n: db::resource_deps::GraphNode) -> Self {
        GraphNode {
            ref_: format!("{}/{}", n.kind, n.name),
            kind: n.kind,
            name: n.name,
            phase: n.phase,
            is_ready: n.is_ready,
            depth: n.depth,
        }
    }
}

/// One edge of a dependency graph: `from` depends on `to`.
#[derive(Serialize, ToSchema)]
pub struct GraphEdge {
    /// The dependent, `kind/name`.
    pub from: String,
    /// The upstream, `kind/name`.
    pub to: String,
    /// The values `to` flows into `from`'s spec.
    pub value_mappings: Vec<ValueMapping>,
}

impl From<db::resource_deps::GraphEdge> for GraphEdge {
    fn from(e: db::resource_deps::GraphEdge) -> Self {
        GraphEdge {
            from: e.from,
            to: e.to,
            value_mappings: mappings(e.value_mappings),
        }
    }
}

/// The dependency graph of a composite's subtree.
#[derive(Serialize, ToSchema)]
pub struct Graph {
    /// The composite.
    pub owner: ResourceRef,
    /// The owner first, then descendants.
    pub nodes: Vec<GraphNode>,
    /// Edges between the nodes.
    pub edges: Vec<GraphEdge>,
    /// Nodes in the whole subtree, owner included.
    pub total_nodes: i64,
    /// Whether `limit` cut nodes or edges.
    pub truncated: bool,
}

/// Whether a reconcile was queued.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReconcileStatus {
    /// Queued now.
    Queued,
    /// A reconcile was already waiting.
    AlreadyQueued,
}

/// The answer to a reconcile request.
#[derive(Serialize, ToSchema)]
pub struct ReconcileAccepted {
    /// What happened.
    pub status: ReconcileStatus,
}

/// The answer to a quarantine or unquarantine.
#[derive(Serialize, ToSchema)]
pub struct Quarantined {
    /// Whether the resource is quarantined now.
    pub quarantined: bool,
}

/// The answer to a delete.
#[derive(Serialize, ToSchema)]
pub struct DeleteAccepted {
    /// Always `Deleting`.
    pub phase: String,
    /// Resources marked for teardown (the resource, what it owns and what depends on it).
    pub marked: i32,
}

/// One day-2 operation.
#[derive(Serialize, ToSchema)]
pub struct Operation {
    /// Its uid.
    pub uid: Uuid,
    /// The verb.
    pub verb: String,
    /// The input JSON.
    #[schema(required = true)]
    pub input: Option<Value>,
    /// Its state.
    pub state: OperationState,
    /// The reaction's output (succeeded).
    #[schema(required = true)]
    pub output: Option<Value>,
    /// The last failure message.
    #[schema(required = true)]
    pub error: Option<String>,
    /// Attempts so far.
    pub attempts: i32,
    /// Who asked for it.
    pub requested_by: String,
    /// When it was requested.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// When it succeeded or failed for good.
    #[schema(required = true)]
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<db::operations::OperationRow> for Operation {
    fn from(o: db::operations::OperationRow) -> Self {
        Operation {
            uid: o.uid,
            verb: o.verb,
            input: o.input,
            state: o.state,
            output: o.output,
            error: o.error,
            attempts: o.attempts,
            requested_by: o.requested_by,
            created_at: o.created_at,
            updated_at: o.updated_at,
            finished_at: o.finished_at,
        }
    }
}

/// A resource's latest operations.
#[derive(Serialize, ToSchema)]
pub struct OperationList {
    /// Newest first, at most 100.
    pub items: Vec<Operation>,
}

/// One recorded spec.
#[derive(Serialize, ToSchema)]
pub struct SpecVersion {
    /// The generation it was the spec of.
    pub generation: i64,
    /// The spec.
    pub spec: Value,
    /// When it was recorded.
    pub created_at: DateTime<Utc>,
}

impl From<db::spec_history::SpecVersion> for SpecVersion {
    fn from(v: db::spec_history::SpecVersion) -> Self {
        SpecVersion {
            generation: v.generation,
            spec: v.spec,
            created_at: v.created_at,
        }
    }
}

/// A root's recorded specs.
#[derive(Serialize, ToSchema)]
pub struct SpecHistory {
    /// Newest first.
    pub items: Vec<SpecVersion>,
}

/// The answer to a rollback.
#[derive(Serialize, ToSchema)]
pub struct RolledBack {
    /// The generation now current.
    pub generation: i64,
    /// Whether the spec changed (false when it already was that spec).
    pub changed: bool,
}

/// `Reaction.trigger` as the closed set the manifest validator accepts
/// (`converge_proto::manifest::Trigger`), so clients generated from the document get an enum.
fn trigger_schema() -> utoipa::openapi::Object {
    use converge_proto::manifest::Trigger;
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(Trigger::ALL.iter().map(|t| t.as_str())))
        .description(Some(
            "What fires it: a spec change (the kind's worker, or its composer with `children` \
             in emits), its subtree settling (`childrenSettled`: a rollup), teardown \
             (`deleteRequested`), an operation's verb, a reactor binding, or a resync.",
        ))
        .build()
}

/// `Reaction.emits`: an array of the closed set `converge_proto::manifest::Emit`.
fn emits_schema() -> utoipa::openapi::schema::Array {
    use converge_proto::manifest::Emit;
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(
            utoipa::openapi::ObjectBuilder::new()
                .schema_type(utoipa::openapi::schema::Type::String)
                .enum_values(Some(Emit::ALL.iter().map(|e| e.as_str()))),
        )
        .description(Some(
            "Which parts of the handler's outcome the core applies (absent: none).",
        ))
        .build()
}

/// One reaction a kind declares.
#[derive(Serialize, ToSchema)]
pub struct Reaction {
    /// Stable handle; the worker picks its handler by (kind, name).
    pub name: String,
    /// What fires it.
    #[schema(schema_with = trigger_schema)]
    pub trigger: String,
    /// Which parts of the outcome the core applies.
    #[serde(default)]
    #[schema(schema_with = emits_schema)]
    pub emits: Vec<String>,
    /// Only for `operation`: the verb it handles.
    #[serde(default)]
    pub verb: String,
    /// Only for `deleteRequested`: the finalizer it strips.
    #[serde(default)]
    pub finalizer: String,
    /// Only for `childrenSettled`: `summary` (the default) or `full`.
    #[serde(default)]
    pub descendants: String,
    /// Only for `operation`: a JSON Schema the operation's output must satisfy.
    #[serde(default)]
    pub output_schema: Value,
}

/// A kind and version a manifest edge names.
#[derive(Serialize, ToSchema)]
pub struct ManifestEdgeEnd {
    /// The kind.
    pub kind: String,
    /// The kind version (default 1).
    #[serde(default)]
    #[schema(minimum = 1)]
    pub kind_version: i32,
}

/// One value flow of a manifest edge: the upstream's status at `source_field` fills the
/// dependent's spec at `dependent_field` (JSON pointers).
#[derive(Serialize, ToSchema)]
pub struct ManifestEdgeValue {
    /// JSON pointer into the dependent's spec.
    pub dependent_field: String,
    /// JSON pointer into the upstream's status.
    pub source_field: String,
}

/// A static edge of a manifest: kind `from` (the dependent) takes `values` from the status
/// of kind `to` (the upstream).
#[derive(Serialize, ToSchema)]
pub struct ManifestEdge {
    /// The dependent kind.
    pub from: ManifestEdgeEnd,
    /// The upstream kind.
    pub to: ManifestEdgeEnd,
    /// Value flows from `to`'s status into `from`'s spec.
    #[serde(default)]
    pub values: Vec<ManifestEdgeValue>,
}

/// Declares a manifest schema with the fields a manifest may carry besides its identity, so
/// the body written and the body read list them once.
macro_rules! manifest_schema {
    ($(#[$doc:meta])* $name:ident { $($head:tt)* }) => {
        $(#[$doc])*
        #[derive(Serialize, ToSchema)]
        pub struct $name {
            $($head)*
            /// What the kind is for.
            #[serde(default)]
            pub description: String,
            /// JSON Schema of a resource's spec.
            #[serde(default)]
            pub spec_schema: Value,
            /// JSON Schema of a resource's status.
            #[serde(default)]
            pub status_schema: Value,
            /// JSON Schema of a provider config's spec.
            #[serde(default)]
            pub config_schema: Value,
            /// Which built-in provider runs it (`exec`, `starlark`, `cel`, `wasm`, `sdk`).
            #[serde(default)]
            pub provider: String,
            /// The finalizer its resources carry.
            #[serde(default)]
            pub finalizer_name: String,
            /// Initial global concurrency cap (0 = unlimited).
            #[serde(default)]
            pub max_inflight: i32,
            /// Initial per-task deadline in seconds (0 = none).
            #[serde(default)]
            pub task_deadline_secs: i32,
            /// Initial drift re-observe interval in seconds (0 = off).
            #[serde(default)]
            pub resync_interval_secs: i32,
            /// Whether resync re-runs the composer.
            #[serde(default)]
            pub resync_recomposes: bool,
            /// Initial orphan grace in seconds.
            #[serde(default)]
            pub orphan_grace_secs: i32,
            /// Initial transient attempts before terminal (0 = unbounded).
            #[serde(default)]
            pub max_transient_attempts: i32,
            /// Static value flows, type-checked at apply against the kinds they join.
            #[serde(default)]
            pub edges: Vec<ManifestEdge>,
        }
    };
}

manifest_schema! {
    /// A kind manifest as written: its schemas, reactions and operational defaults. Its full
    /// JSON Schema is served at `GET /api/v1/schemas/manifest` (an unknown field anywhere is
    /// refused); docs/manifest.md describes every field and rule. One 422 lists every
    /// problem.
    KindManifestIn {
        /// Optional discriminator for CLI files; `manifest` when present.
        #[serde(rename = "type", default)]
        pub type_: String,
        /// The kind's name; defaults to the path's kind, must match it when given.
        #[serde(default)]
        pub kind: String,
        /// The kind version this manifest describes.
        #[schema(minimum = 1)]
        pub kind_version: i32,
        /// Reactions.
        #[serde(default)]
        pub reactions: Vec<Reaction>,
    }
}

manifest_schema! {
    /// A stored kind manifest and its content hash.
    KindManifestOut {
        /// The kind's name.
        pub kind: String,
        /// The kind version.
        pub kind_version: i32,
        /// Reactions.
        pub reactions: Vec<Reaction>,
        /// The manifest's content hash.
        pub manifest_version: i64,
    }
}

/// The answer to a manifest apply.
#[derive(Serialize, ToSchema)]
pub struct ManifestApplied {
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// The stored manifest's content hash.
    pub manifest_version: i64,
    /// What the apply did.
    pub result: ApplyResult,
    /// Only when there are some: the value flows of the manifest's `edges` left unchecked
    /// because a kind they join is not registered yet.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(required = false)]
    pub warnings: Vec<String>,
}

/// A kind's live operational config.
#[derive(Serialize, ToSchema, Clone)]
pub struct KindConfig {
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Global concurrency cap (0 = unlimited).
    pub max_inflight: i32,
    /// Per-task deadline (0 = none).
    pub task_deadline_secs: i32,
    /// Drift re-observe interval (0 = off).
    pub resync_interval_secs: i32,
    /// Whether resync re-runs the composer.
    pub resync_recomposes: bool,
    /// Orphan grace.
    pub orphan_grace_secs: i32,
    /// Transient attempts before terminal (0 = unbounded).
    pub max_transient_attempts: i32,
    /// Finalizer from the manifest.
    #[schema(required = true)]
    pub finalizer_name: Option<String>,
    /// Retired versions accept no new resources.
    pub retired: bool,
}

impl From<db::kinds::KindConfig> for KindConfig {
    fn from(c: db::kinds::KindConfig) -> Self {
        KindConfig {
            kind: c.kind,
            kind_version: c.kind_version,
            max_inflight: c.max_inflight,
            task_deadline_secs: c.task_deadline_secs,
            resync_interval_secs: c.resync_interval_secs,
            resync_recomposes: c.resync_recomposes,
            orphan_grace_secs: c.orphan_grace_secs,
            max_transient_attempts: c.max_transient_attempts,
            finalizer_name: c.finalizer_name,
            retired: c.retired,
        }
    }
}

/// The operator-editable part of a kind's config (a full replace; every number ≥ 0).
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KindConfigEdit {
    /// Global concurrency cap (0 = unlimited).
    #[schema(minimum = 0)]
    pub max_inflight: i32,
    /// Per-task deadline in seconds (0 = none).
    #[schema(minimum = 0)]
    pub task_deadline_seconds: i32,
    /// Drift re-observe interval (0 = off).
    #[schema(minimum = 0)]
    pub resync_interval_seconds: i32,
    /// Orphan grace in seconds.
    #[schema(minimum = 0)]
    pub orphan_grace_seconds: i32,
    /// Transient attempts before terminal (0 = unbounded).
    #[schema(minimum = 0)]
    pub max_transient_attempts: i32,
    /// Whether resync re-runs the composer (default false).
    #[serde(default)]
    pub resync_recomposes: bool,
    /// A retired version accepts no new resources (default false).
    #[serde(default)]
    pub retired: bool,
}

/// One kind version in the kinds list.
#[derive(Serialize, ToSchema)]
pub struct KindSummary {
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Description.
    #[schema(required = true, value_type = Option<String>)]
    pub description: Value,
    /// Reactions.
    #[schema(required = true, value_type = Option<Vec<Reaction>>)]
    pub reactions: Value,
    /// Finalizer.
    #[schema(required = true)]
    pub finalizer_name: Option<String>,
    /// The manifest's content hash.
    pub manifest_version: i64,
    /// The live operational config.
    #[schema(required = true)]
    pub operational: Option<KindConfig>,
    /// Connected worker streams that serve it, over every broker.
    pub workers: i64,
    /// Those of them taking its tasks now.
    pub ready_workers: i64,
}

impl From<db::providerconfigs::ProviderConfigRow> for ProviderConfig {
    /// A stored config as a list or a write answers it: no bundle, no warnings (the row's
    /// spec is sent as it is: mask it first).
    fn from(r: db::providerconfigs::ProviderConfigRow) -> Self {
        ProviderConfig {
            name: r.name,
            kind: r.kind,
            kind_version: r.kind_version,
            is_default: r.is_default,
            spec: r.spec,
            data_size: r.data_size,
            owner_id: r.owner_id,
            used_by: r.used_by,
            created_at: r.created_at,
            updated_at: r.updated_at,
            data: None,
            warnings: Vec::new(),
        }
    }
}

/// Every kind version.
#[derive(Serialize, ToSchema)]
pub struct KindList {
    /// By kind and version.
    pub kinds: Vec<KindSummary>,
}

/// One provider config (writeOnly values of its spec read `"***"`).
#[derive(Serialize, ToSchema)]
pub struct ProviderConfig {
    /// Global name.
    pub name: String,
    /// The kind it configures.
    pub kind: String,
    /// The kind version it configures.
    pub kind_version: i32,
    /// Whether it is the default of its kind version.
    pub is_default: bool,
    /// The config spec.
    pub spec: Value,
    /// Bundle size in bytes (0 = none).
    pub data_size: i64,
    /// The composing root that owns it, if any.
    #[schema(required = true)]
    pub owner_id: Option<Uuid>,
    /// Resources attached to it.
    pub used_by: i64,
    /// Created at.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// The bundle, base64; only on the single read (null there when the config has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub data: Option<Option<String>>,
    /// Only on a write's answer, when there are some: the value flows of a CEL resource
    /// graph or of a Starlark bundle's sample compose left unchecked (a kind they join is
    /// not registered yet, or the sample compose could not run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(required = false)]
    pub warnings: Vec<String>,
}

/// A page of provider configs.
#[derive(Serialize, ToSchema)]
pub struct ProviderConfigList {
    /// By name; without bundles.
    pub items: Vec<ProviderConfig>,
    /// Configs matching the filters.
    pub total: i64,
    /// This page's offset.
    pub offset: i64,
    /// This page's size limit.
    pub limit: i64,
}

/// One reactor binding.
#[derive(Serialize, ToSchema)]
pub struct ReactorBinding {
    /// Operator-chosen identity.
    pub name: String,
    /// The kind whose transitions fire it.
    pub watch_kind: String,
    /// created | synced | degraded | failed | deleted.
    #[schema(value_type = String)]
    pub transition: Transition,
    /// The reactor kind that runs.
    pub reactor: String,
    /// Labels the watched resource must carry.
    #[schema(value_type = BTreeMap<String, String>)]
    pub label_match: Value,
    /// A disabled binding never fires.
    pub enabled: bool,
    /// Created at.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Deliveries not yet acked.
    pub pending: i64,
    /// Of those, the ones whose last attempt failed (each retried with backoff).
    pub failing: i64,
    /// The error of the most recent failed attempt, while any delivery is failing.
    pub last_error: Option<String>,
    /// How many attempts the delivery of `last_error` has had.
    pub last_error_attempts: Option<i32>,
    /// When the next failing delivery is retried.
    pub next_retry_at: Option<DateTime<Utc>>,
}

impl From<db::reactor_bindings::Binding> for ReactorBinding {
    fn from(b: db::reactor_bindings::Binding) -> Self {
        ReactorBinding {
            name: b.name,
            watch_kind: b.watch_kind,
            transition: b.transition,
            reactor: b.reactor,
            label_match: b.label_match,
            enabled: b.enabled,
            created_at: b.created_at,
            updated_at: b.updated_at,
            pending: b.pending,
            failing: b.failing,
            last_error: b.last_error,
            last_error_attempts: b.last_error_attempts,
            next_retry_at: b.next_retry_at,
        }
    }
}

/// Reactor bindings.
#[derive(Serialize, ToSchema)]
pub struct ReactorBindingList {
    /// By name.
    pub items: Vec<ReactorBinding>,
}

// --- Parameters ------------------------------------------------------------------------------
// Documentation only: the handlers parse their path with `ApiPath` and their query by hand
// (repeatable filters, problem+json rejections), so these state what those parsers accept.

/// A kind in the path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct KindPath {
    /// The kind.
    pub kind: String,
}

/// A kind version in the path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct KindVersionPath {
    /// The kind.
    pub kind: String,
    /// The kind version.
    pub version: i32,
}

/// A name in the path (provider configs, reactor bindings).
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct NamePath {
    /// The name.
    pub name: String,
}

/// A resource's address in the path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ResourcePath {
    /// The resource's kind.
    pub kind: String,
    /// The resource's name.
    pub name: String,
}

/// One operation of a resource in the path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct OperationPath {
    /// The resource's kind.
    pub kind: String,
    /// The resource's name.
    pub name: String,
    /// The operation's uid (anything else is a 404).
    pub uid: String,
}

/// One recorded spec of a resource in the path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SpecPath {
    /// The resource's kind.
    pub kind: String,
    /// The resource's name.
    pub name: String,
    /// The generation whose spec to read.
    pub generation: i64,
}

/// The order of a list page (`sort`).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ListOrder {
    /// Oldest first (the default).
    Created,
    /// Failed, Quarantined, Degraded and Orphaned resources first, in that order, each
    /// oldest first; then every other resource, oldest first.
    Problems,
}

/// The filters and page of `GET /resources`. Unknown parameters are ignored.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ResourceListQuery {
    /// Only these kinds (repeatable: a union).
    #[param(style = Form, explode)]
    pub kind: Option<Vec<String>>,
    /// Only these phases (repeatable: a union).
    #[param(style = Form, explode)]
    pub phase: Option<Vec<Phase>>,
    /// Only the direct children of these owners, `kind/name` (repeatable: a union; 404 when
    /// one does not exist).
    #[param(style = Form, explode, pattern = "^[^/]+/[^/]+$")]
    pub owner: Option<Vec<String>>,
    /// Names containing this, case-insensitively.
    pub name: Option<String>,
    /// Only resources carrying this label, `key:value` (repeatable: all must match).
    #[param(style = Form, explode, pattern = "^[^:]+:")]
    pub label: Option<Vec<String>>,
    /// Page size (default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    /// The order (default `created`). Every page of one walk must ask for the same order.
    pub sort: Option<ListOrder>,
    /// `X-Next-Cursor` of the previous page (a malformed one, or one of another order,
    /// restarts from the first page).
    pub cursor: Option<String>,
}

/// The filters and page of the roots list and of one owner's children. Unknown parameters
/// are ignored.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TreeListQuery {
    /// Only these kinds (repeatable: a union).
    #[param(style = Form, explode)]
    pub kind: Option<Vec<String>>,
    /// Only these phases (repeatable: a union).
    #[param(style = Form, explode)]
    pub phase: Option<Vec<Phase>>,
    /// Names containing this, case-insensitively.
    pub name: Option<String>,
    /// Only resources carrying this label, `key:value` (repeatable: all must match).
    #[param(style = Form, explode, pattern = "^[^:]+:")]
    pub label: Option<Vec<String>>,
    /// Page size (default 50 for roots, 100 for children).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    /// The order (default `created`). Every page of one walk must ask for the same order.
    pub sort: Option<ListOrder>,
    /// `X-Next-Cursor` of the previous page (a malformed one, or one of another order,
    /// restarts from the first page).
    pub cursor: Option<String>,
}

/// The owners a summary counts. Unknown parameters are ignored.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SummaryQuery {
    /// Count these owners' subtrees, `kind/name` (repeatable); none: count every root's.
    #[param(style = Form, explode, pattern = "^[^/]+/[^/]+$")]
    pub owner: Option<Vec<String>>,
}

/// The size of a graph. Unknown parameters are ignored.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GraphQuery {
    /// The most nodes (and edges) to return (default 500).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// A page of events. Other parameters are refused (400).
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventQuery {
    /// `next_cursor` of the previous page (default 0: from the start).
    #[param(minimum = 0)]
    pub cursor: Option<i64>,
    /// Page size (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// `watch` on a resource's read.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WatchQuery {
    /// `true`: answer a `text/event-stream` of its changes (each message's `data` a
    /// `ResourceWatchEvent`) instead of one read.
    pub watch: Option<bool>,
}

/// The `Last-Event-ID` header a watch resumes from.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
pub struct WatchResume {
    /// The SSE `id` of the last message received: the watch sends what came after it (an
    /// `EventSource` sends it by itself when it reconnects). Only read with `watch=true`.
    #[param(rename = "Last-Event-ID", minimum = 0, nullable = false)]
    pub last_event_id: Option<i64>,
}

/// The filters, paging and watch of `GET /events`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LogQuery {
    /// Only events of this kind.
    pub kind: Option<String>,
    /// Only events of resources of this name.
    pub name: Option<String>,
    /// Events after this log position: a page's `next_cursor`, or an event's `id` (default:
    /// from the start for a page, from now for a watch).
    #[param(minimum = 0)]
    pub cursor: Option<i64>,
    /// Page size (default 100; not read by a watch).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// `true`: answer a `text/event-stream` of events (each message's `data` a
    /// `ResourceEvent`, its `id` the event's) instead of one page.
    pub watch: Option<bool>,
}

/// Which manifest version to read. Unknown parameters are ignored.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ManifestQuery {
    /// The kind version (default: the highest).
    pub kind_version: Option<i32>,
}

/// How to apply a manifest. Unknown parameters are ignored.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ManifestPutQuery {
    /// `true` (or `1`): store a manifest that breaks a version in use.
    pub force: Option<bool>,
}

/// The filters and page of the provider config list. Other parameters are refused (400).
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ProviderConfigQuery {
    /// Only configs of this kind.
    pub kind: Option<String>,
    /// Names containing this.
    pub name: Option<String>,
    /// Only defaults (`true`) or only overrides (`false`).
    pub default: Option<bool>,
    /// Rows to skip (default 0).
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// Page size (default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
}

/// The filters of the reactor binding list. Other parameters are refused (400).
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BindingQuery {
    /// Only bindings watching this kind.
    pub watch_kind: Option<String>,
    /// Only bindings running this reactor.
    pub reactor: Option<String>,
}

/// A token minted through the API, as listed: never its secret nor its hash.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiToken {
    /// The principal's name (recorded as the actor of what it does).
    pub name: String,
    /// `viewer`, `operator`, `admin` or `worker`.
    pub role: String,
    /// A worker's kind globs (empty for other roles).
    pub kinds: Vec<String>,
    /// Minted at.
    pub created_at: DateTime<Utc>,
    /// The principal that minted it.
    pub created_by: Option<String>,
    /// When it stops authenticating (`null`: never).
    pub expires_at: Option<DateTime<Utc>>,
    /// Whether it has expired (it is refused; revoke it to remove it from this list).
    pub expired: bool,
    /// The last authenticated use seen (written coalesced: up to a minute late).
    pub last_used_at: Option<DateTime<Utc>>,
}

impl From<crate::db::tokens::TokenInfo> for ApiToken {
    fn from(t: crate::db::tokens::TokenInfo) -> Self {
        ApiToken {
            expired: t.expires_at.is_some_and(|e| e <= Utc::now()),
            name: t.name,
            role: t.role,
            kinds: t.kinds,
            created_at: t.created_at,
            created_by: t.created_by,
            expires_at: t.expires_at,
            last_used_at: t.last_used_at,
        }
    }
}

/// `GET /api/v1/tokens`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiTokenList {
    /// Every minted token, by name.
    pub items: Vec<ApiToken>,
}

/// `POST /api/v1/tokens`'s answer: the only time the secret is shown.
#[derive(Debug, Serialize, ToSchema)]
pub struct MintedApiToken {
    /// The bearer token. Shown once: only its SHA-256 is stored.
    pub token: String,
    /// The token as listed.
    #[serde(flatten)]
    pub info: ApiToken,
}
