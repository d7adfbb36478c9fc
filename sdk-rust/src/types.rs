//! The value types a provider sees and returns: requests, resources, outcomes, conditions.
//!
//! They mirror the wire messages of `converge.worker.v1` with JSON decoded (a resource's
//! spec and status when first read: see [`Json`]), so a handler never touches protobuf. The
//! same vocabulary exists in the Python and Go SDKs.

use std::{
    collections::BTreeMap,
    fmt,
    sync::{Arc, OnceLock},
};

use bytes::Bytes;

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{
    descendants::{RollupSummary, Subtree},
    error::HandlerError,
    json::Json,
    merge,
};

pub use converge_proto::pb::{Stage, Transition};

/// The wire spellings of `StageTask.trigger`: what fired a task.
pub mod trigger {
    /// The generation bumped (a spec edit or the first apply).
    pub const SPEC_CHANGE: &str = "specChange";
    /// A composite's whole live subtree settled.
    pub const CHILDREN_SETTLED: &str = "childrenSettled";
    /// A finalizer-bearing resource is being torn down.
    pub const DELETE_REQUESTED: &str = "deleteRequested";
    /// An operation was requested.
    pub const OPERATION: &str = "operation";
    /// A reactor binding matched a lifecycle transition.
    pub const REACTOR: &str = "reactor";
    /// A drift tick re-observes the resource without a generation bump.
    pub const RESYNC: &str = "resync";
}

/// Condition type that feeds a resource's health.
pub const CONDITION_READY: &str = "Ready";
/// Condition type derived by the core from synced_gen vs generation.
pub const CONDITION_SYNCED: &str = "Synced";

/// One (kind, kind_version) pair a provider serves.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KindVersion {
    /// The kind's name, e.g. `hello`.
    pub kind: String,
    /// The kind version; at least 1.
    pub version: i32,
}

impl KindVersion {
    /// Names a (kind, version) pair.
    pub fn new(kind: impl Into<String>, version: i32) -> Self {
        Self {
            kind: kind.into(),
            version,
        }
    }
}

impl fmt::Display for KindVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@v{}", self.kind, self.version)
    }
}

/// A kind's default provider config, as pushed by the broker.
///
/// Both parts empty means the kind has no default config (or it was deleted).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderConfig {
    /// The config spec JSON; `None` when absent.
    pub spec: Option<Value>,
    /// The config's opaque bundle (e.g. a WASM component); empty when absent. Shared, not
    /// copied: every task's request carries the kind's default config, and a bundle can be
    /// megabytes.
    pub bundle: Bytes,
}

impl ProviderConfig {
    /// Whether neither a spec nor a bundle is present (no config, or a deleted one).
    pub fn is_empty(&self) -> bool {
        self.spec.is_none() && self.bundle.is_empty()
    }
}

/// A read-only view of one resource row.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// The resource id (nil when the broker sent none).
    pub id: Uuid,
    /// The resource kind.
    pub kind: String,
    /// The resource's kind version.
    pub kind_version: i32,
    /// The resource name, unique within its kind (may be empty on some paths).
    pub name: String,
    /// The composing parent, if any.
    pub owner_id: Option<Uuid>,
    /// The composition root, if any.
    pub root_id: Option<Uuid>,
    /// The spec JSON (`{}` when the broker sent none), decoded when first read.
    pub spec: Json,
    /// The last applied status JSON, if any, decoded when first read.
    pub status: Option<Json>,
    /// The spec generation.
    pub generation: i64,
    /// The last generation reconciled successfully.
    pub synced_gen: i64,
    /// Synced, healthy and not being deleted.
    pub is_ready: bool,
    /// The derived phase (Ready, Reconciling, Degraded, Failed, Deleting, ...).
    pub phase: String,
    /// Opaque labels.
    pub labels: BTreeMap<String, String>,
    /// Finalizers still guarding deletion.
    pub finalizers: Vec<String>,
}

impl Default for Resource {
    fn default() -> Self {
        Self {
            id: Uuid::nil(),
            kind: String::new(),
            kind_version: 1,
            name: String::new(),
            owner_id: None,
            root_id: None,
            spec: Json::from(Value::Object(serde_json::Map::new())),
            status: None,
            generation: 0,
            synced_gen: 0,
            is_ready: false,
            phase: String::new(),
            labels: BTreeMap::new(),
            finalizers: Vec::new(),
        }
    }
}

/// An imperative verb requested against a resource (STAGE_OPERATE).
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    /// The target resource's id, if sent.
    pub resource_id: Option<Uuid>,
    /// The verb, as declared by the kind's manifest.
    pub verb: String,
    /// The verb's input JSON, if any.
    pub input: Option<Value>,
    /// How many times the operation has been attempted.
    pub attempts: i32,
    /// Who requested it.
    pub requested_by: String,
}

/// Why a task was cancelled: set just before its [`ReactionRequest::cancel`] token fires, and
/// shared by every clone of the request.
///
/// The words are the broker's `CancelTask` reasons — `deleted` (the resource was deleted),
/// `quarantined` (it was quarantined), `superseded` (its spec moved to a newer generation;
/// the new one runs as its own task), `deadline` (the broker's deadline passed) — plus
/// `deadline` when the worker's own copy of the deadline fires first and `shutdown` when the
/// worker stops before the handler returned. A cancelled task's result is never sent.
#[derive(Debug, Clone, Default)]
pub struct CancelReason(Arc<OnceLock<String>>);

impl CancelReason {
    /// Cancelled because of the broker's CancelTask with this reason.
    pub const DELETED: &'static str = "deleted";
    /// See [`CancelReason::DELETED`].
    pub const QUARANTINED: &'static str = "quarantined";
    /// See [`CancelReason::DELETED`].
    pub const SUPERSEDED: &'static str = "superseded";
    /// The task's deadline passed (the broker's or the worker's timer).
    pub const DEADLINE: &'static str = "deadline";
    /// The worker stopped before the handler returned.
    pub const SHUTDOWN: &'static str = "shutdown";

    /// The reason, once the task was cancelled; `None` while it runs.
    pub fn get(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }

    /// Records the reason (the first one wins). The runtime calls it before cancelling the
    /// token; a test may too, to drive a handler's cancellation path.
    pub fn set(&self, reason: impl Into<String>) {
        let _ = self.0.set(reason.into());
    }
}

/// Everything a handler gets for one task.
#[derive(Debug, Clone)]
pub struct ReactionRequest {
    /// The manifest reaction being run; a provider handles all its kind's reactions.
    pub reaction: String,
    /// The pipeline stage.
    pub stage: Stage,
    /// What fired the task (see [`trigger`]).
    pub trigger: String,
    /// The resource's kind.
    pub kind: String,
    /// The resource's kind version.
    pub kind_version: i32,
    /// The resource (the root for COMPOSE and ROLLUP).
    pub resource: Resource,
    /// Status accumulated so far in this reconcile (WORK, ROLLUP), if any.
    pub status: Option<Value>,
    /// The spec generation this task reconciles.
    pub generation: i64,
    /// 1 for the first attempt at this generation, counting up with each retry.
    pub attempt: i32,
    /// When the broker stops waiting for this task; `None` = no deadline.
    pub deadline: Option<tokio::time::Instant>,
    /// Cancelled when the deadline passes, the broker cancels the task, or the worker stops.
    pub cancel: CancellationToken,
    /// Why `cancel` fired, once it has (see [`CancelReason`]).
    pub cancel_reason: CancelReason,
    /// The kind's cached default provider config.
    pub config: ProviderConfig,
    /// The per-resource config override, if any.
    pub config_override: Option<Value>,
    /// The per-resource bundle override; empty = use the default bundle.
    pub bundle_override: Vec<u8>,
    /// The children the root currently owns (COMPOSE).
    pub observed: Vec<Resource>,
    /// The root's live subtree (ROLLUP), only when the kind's rollup reaction declares
    /// `"descendants": "full"` (then `descendants_included`); otherwise empty: read the
    /// [`ReactionRequest::summary`], or page with [`ReactionRequest::descendant_pages`].
    pub descendants: Vec<Resource>,
    /// Whether `descendants` holds the whole live subtree (the full form).
    pub descendants_included: bool,
    /// The subtree's counts and the refs that need attention (ROLLUP).
    pub summary: Option<RollupSummary>,
    /// Where [`ReactionRequest::descendant_pages`] reads from: the broker for a ROLLUP task,
    /// nothing otherwise; a test sets [`Subtree::fixed`].
    pub subtree: Subtree,
    /// The operation to run (OPERATE).
    pub operation: Option<Operation>,
    /// The lifecycle transition that fired (REACT).
    pub transition: Option<Transition>,
    /// Stable key for idempotent side effects (REACT); empty otherwise.
    pub dedup_token: String,
    /// A plan's dry run (COMPOSE only): compose as usual and return the outcome, which is
    /// compared with the stored children and never stored. A composer is meant to be pure;
    /// one that is not (it calls out, it counts) must skip its side effects when this is set.
    /// See [`ReactionRequest::dry_run`].
    pub dry_run: bool,
}

impl ReactionRequest {
    /// Whether this compose is a plan's dry run (`POST /api/v1/resources:plan`): the spec is
    /// the one an apply would store, and whatever the handler returns is only shown, never
    /// stored. Handlers run exactly as for a real compose; this says only that side effects
    /// must not happen.
    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// Decodes the resource's spec into `T`; a spec that does not fit is a terminal error
    /// (retrying cannot fix it, a spec change can). Keys `T` has no field for are ignored
    /// (serde's default, and the rule every converge SDK follows), so a kind can add an
    /// optional spec field without breaking the workers already deployed; do not put
    /// `#[serde(deny_unknown_fields)]` on a spec type.
    pub fn spec<T: DeserializeOwned>(&self) -> Result<T, HandlerError> {
        self.resource
            .spec
            .deserialize()
            .map_err(|e| HandlerError::terminal(format!("invalid spec: {e}")))
    }

    /// The default config deep-merged with the per-resource override (override wins per
    /// key); `Null` when neither exists. See [`crate::effective_config`].
    pub fn effective_config(&self) -> Value {
        merge::effective_config(self.config.spec.as_ref(), self.config_override.as_ref())
    }

    /// The per-resource bundle override if non-empty, otherwise the default bundle.
    pub fn effective_bundle(&self) -> &[u8] {
        merge::effective_bundle(&self.config.bundle, &self.bundle_override)
    }
}

/// A Kubernetes-style condition reported by a handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `Ready`, `Synced` or a custom type; only `Ready` feeds health.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A short CamelCase reason.
    pub reason: String,
    /// A human-readable message.
    pub message: String,
}

impl Condition {
    /// Builds a condition of any type.
    pub fn new(
        type_: impl Into<String>,
        status: impl Into<String>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// A `Ready` condition, `True` or `False`.
    pub fn ready(ready: bool, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(
            CONDITION_READY,
            if ready { "True" } else { "False" },
            reason,
            message,
        )
    }
}

/// Names a resource by kind and name (an edge endpoint).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceRef {
    /// The kind.
    pub kind: String,
    /// The name.
    pub name: String,
}

impl ResourceRef {
    /// Names a resource.
    pub fn new(kind: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            name: name.into(),
        }
    }
}

/// Copies one upstream status field into one dependent spec field (JSON pointers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueFlow {
    /// JSON pointer into the dependent's spec.
    pub dependent_field: String,
    /// JSON pointer into the upstream's status.
    pub source_field: String,
}

impl ValueFlow {
    /// A flow from `source_field` (upstream status) into `dependent_field` (dependent spec).
    pub fn new(dependent_field: impl Into<String>, source_field: impl Into<String>) -> Self {
        Self {
            dependent_field: dependent_field.into(),
            source_field: source_field.into(),
        }
    }
}

/// One desired child of a composite.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildSpec {
    /// The child's kind.
    pub kind: String,
    /// The child's kind version; must be at least 1.
    pub kind_version: i32,
    /// The child's name.
    pub name: String,
    /// The child's spec JSON.
    pub spec: Value,
    /// The child's labels.
    pub labels: BTreeMap<String, String>,
}

impl ChildSpec {
    /// A child with no labels.
    pub fn new(
        kind: impl Into<String>,
        kind_version: i32,
        name: impl Into<String>,
        spec: Value,
    ) -> Self {
        Self {
            kind: kind.into(),
            kind_version,
            name: name.into(),
            spec,
            labels: BTreeMap::new(),
        }
    }

    /// Adds a label.
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
}

/// Orders two children (`from` depends on `to`) and optionally carries value flows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepEdge {
    /// The dependent.
    pub from: ResourceRef,
    /// The dependency (upstream).
    pub to: ResourceRef,
    /// Fields copied from the upstream's status into the dependent's spec.
    pub values: Vec<ValueFlow>,
}

impl DepEdge {
    /// `from` waits for `to`, with no value flows.
    pub fn new(from: ResourceRef, to: ResourceRef) -> Self {
        Self {
            from,
            to,
            values: Vec::new(),
        }
    }

    /// Adds a value flow.
    pub fn with_value(mut self, flow: ValueFlow) -> Self {
        self.values.push(flow);
        self
    }
}

/// A provider config emitted by a composer.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfigSpec {
    /// The config's global name.
    pub name: String,
    /// The kind it configures.
    pub kind: String,
    /// The kind version it configures; must be at least 1.
    pub kind_version: i32,
    /// Whether it is the kind's default config.
    pub is_default: bool,
    /// The config spec JSON.
    pub spec: Value,
}

/// What a handler returns; the core applies only the parts the reaction's `emits` allows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// The observed status JSON (last writer wins).
    pub status: Option<Value>,
    /// Reported conditions.
    pub conditions: Vec<Condition>,
    /// Desired children (COMPOSE). An empty successful list prunes every child: a composer
    /// that cannot compute its children must return an error instead.
    pub children: Vec<ChildSpec>,
    /// Dependency edges between children (COMPOSE).
    pub edges: Vec<DepEdge>,
    /// Provider configs owned by the root (COMPOSE).
    pub configs: Vec<ProviderConfigSpec>,
    /// The operation's output JSON (OPERATE).
    pub operation_output: Option<Value>,
}

impl Outcome {
    /// An outcome carrying only a status.
    pub fn status(status: Value) -> Self {
        Self {
            status: Some(status),
            ..Self::default()
        }
    }

    /// An outcome carrying only an operation output.
    pub fn output(output: Value) -> Self {
        Self {
            operation_output: Some(output),
            ..Self::default()
        }
    }

    /// Sets the status.
    pub fn with_status(mut self, status: Value) -> Self {
        self.status = Some(status);
        self
    }

    /// Adds a condition.
    pub fn with_condition(mut self, condition: Condition) -> Self {
        self.conditions.push(condition);
        self
    }

    /// Adds a desired child.
    pub fn with_child(mut self, child: ChildSpec) -> Self {
        self.children.push(child);
        self
    }

    /// Adds a dependency edge.
    pub fn with_edge(mut self, edge: DepEdge) -> Self {
        self.edges.push(edge);
        self
    }

    /// Adds a provider config.
    pub fn with_config(mut self, config: ProviderConfigSpec) -> Self {
        self.configs.push(config);
        self
    }
}
