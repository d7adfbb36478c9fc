//! The KindManifest model: a kind is data (schemas, reactions, policy), never compiled code.
//!
//! [`KindManifest::validate`] is the SDK half of the database's `validate_kind_manifest`
//! CHECK; both enforce the same legality lattice so a bad manifest is refused with every
//! violated rule listed, before it reaches the database. [`KindManifest::problems`] gives the
//! same violations located by JSON pointer.
//!
//! The manifest also has a JSON Schema of its own, derived from these types
//! ([`manifest_schema`], committed as `proto/manifest.schema.json`). The schema is strict
//! (`additionalProperties: false` at every level), and the API checks every applied manifest
//! against it, so a misspelt field is refused with its pointer. Decoding with serde stays
//! tolerant on purpose: a stored manifest written by a newer release (one more field) still
//! decodes in a process of the previous release during a rolling upgrade.

use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::json_pointer;

/// What fires a reaction. A closed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Trigger {
    /// The generation bumped (a spec edit or the first apply). With `children` in emits the
    /// reaction is the kind's composer, otherwise its worker.
    #[serde(rename = "specChange")]
    SpecChange,
    /// A composite's whole live subtree settled; with `status` in emits it is the kind's
    /// rollup.
    #[serde(rename = "childrenSettled")]
    ChildrenSettled,
    /// A finalizer-bearing resource is being torn down; success strips the finalizer.
    #[serde(rename = "deleteRequested")]
    DeleteRequested,
    /// An operation was requested for the reaction's verb.
    #[serde(rename = "operation")]
    Operation,
    /// A reactor binding matched a watched kind's transition.
    #[serde(rename = "reactor")]
    Reactor,
    /// A drift tick re-pended the resource without a generation bump. Carried in tasks only:
    /// a manifest may not declare it (set resync_interval_secs instead).
    #[serde(rename = "resync")]
    Resync,
}

impl Trigger {
    /// Every trigger, in declaration order.
    pub const ALL: [Trigger; 6] = [
        Trigger::SpecChange,
        Trigger::ChildrenSettled,
        Trigger::DeleteRequested,
        Trigger::Operation,
        Trigger::Reactor,
        Trigger::Resync,
    ];

    /// The wire spelling (`specChange`, ...), as carried in `StageTask.trigger`.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::SpecChange => "specChange",
            Trigger::ChildrenSettled => "childrenSettled",
            Trigger::DeleteRequested => "deleteRequested",
            Trigger::Operation => "operation",
            Trigger::Reactor => "reactor",
            Trigger::Resync => "resync",
        }
    }

    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Trigger::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One part of an Outcome the core applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Emit {
    /// Desired children (a composer's).
    Children,
    /// Dependency edges between children, with their value flows.
    Edges,
    /// Provider configs owned by the root.
    Configs,
    /// Status JSON.
    Status,
    /// Conditions.
    Conditions,
    /// Strip the finalizer on success (a deleteRequested reaction's).
    Finalizer,
    /// Operation output (an operation reaction's).
    OperationOutput,
    /// A reactor's side effect (nothing applied to the resource).
    SideEffect,
}

impl Emit {
    /// Every emits value, in declaration order.
    pub const ALL: [Emit; 8] = [
        Emit::Children,
        Emit::Edges,
        Emit::Configs,
        Emit::Status,
        Emit::Conditions,
        Emit::Finalizer,
        Emit::OperationOutput,
        Emit::SideEffect,
    ];

    /// The manifest spelling (`children`, `operationOutput`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Emit::Children => "children",
            Emit::Edges => "edges",
            Emit::Configs => "configs",
            Emit::Status => "status",
            Emit::Conditions => "conditions",
            Emit::Finalizer => "finalizer",
            Emit::OperationOutput => "operationOutput",
            Emit::SideEffect => "sideEffect",
        }
    }
}

impl fmt::Display for Emit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A (trigger, emits) pair declared by a kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ReactionDecl {
    /// Stable handle, unique within the kind; the worker picks its handler by (kind, name).
    #[schemars(length(min = 1))]
    pub name: String,
    /// What fires it.
    pub trigger: Trigger,
    /// Which parts of the handler's Outcome the core applies (absent = none).
    #[serde(default)]
    pub emits: Vec<Emit>,
    /// Only for `operation` (and required there): the verb it handles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb: Option<String>,
    /// Only for `deleteRequested`: the finalizer it strips (absent = the kind's
    /// finalizer_name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizer: Option<String>,
    /// Only for `childrenSettled`: what the rollup request carries of the subtree (absent =
    /// `summary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descendants: Option<Descendants>,
    /// Only for `operation`: a JSON Schema (2020-12) the operation's output must satisfy
    /// (absent = any output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "json_schema_value")]
    pub output_schema: Option<Value>,
}

/// What a rollup request carries of the composite's live subtree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Descendants {
    /// Counts by phase and kind and the failed and not-ready refs; the handler pages through
    /// the rows with `ListDescendants` only if it asks, so a rollup costs the same whatever
    /// the size of the subtree it does not read.
    Summary,
    /// The summary and every live descendant (up to 10,000) in the request itself, for a
    /// handler that always reads them all.
    Full,
}

impl ReactionDecl {
    /// Whether the reaction's emits mask contains `e`.
    pub fn emits(&self, e: Emit) -> bool {
        self.emits.contains(&e)
    }
}

/// A kind and version named by a manifest edge.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct EdgeEnd {
    /// The kind.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[a-z][a-z0-9._-]*$"))]
    pub kind: String,
    /// The kind version (default 1).
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 32767))]
    pub kind_version: i32,
}

/// One value flow of a manifest edge, named as a compose's edges name theirs: the upstream's
/// status at `source_field` fills the dependent's spec at `dependent_field`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct EdgeValue {
    /// JSON pointer into the dependent's spec, e.g. `/vpc_id`.
    #[schemars(regex(pattern = "^/"))]
    pub dependent_field: String,
    /// JSON pointer into the upstream's status, e.g. `/vpc_id`.
    #[schemars(regex(pattern = "^/"))]
    pub source_field: String,
}

/// A static edge: resources of kind `from` wait for resources of kind `to` and take
/// `values` from their status, in the vocabulary of a compose's edges (`from` is the
/// dependent, `to` the upstream), with kinds in place of names. Declared so the value flows
/// are type-checked at apply against `to`'s `status_schema` and `from`'s `spec_schema`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct EdgeDecl {
    /// The dependent kind.
    pub from: EdgeEnd,
    /// The upstream kind.
    pub to: EdgeEnd,
    /// Value flows from `to`'s status into `from`'s spec.
    #[serde(default)]
    pub values: Vec<EdgeValue>,
}

fn one() -> i32 {
    1
}

/// A kind's manifest (its CRD): schemas, reactions and operational policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields, title = "KindManifest", transform = envelope)]
pub struct KindManifest {
    /// The kind's name: 1-253 lowercase letters, digits, `-`, `.` or `_`, starting with a
    /// letter. On apply it may be left out (the URL names the kind) but must match the URL
    /// when given.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[a-z][a-z0-9._-]*$"))]
    pub kind: String,
    /// The kind version this manifest describes (1-32767). Each version of a kind has its own
    /// manifest; resources name the version they use.
    #[serde(default)]
    #[schemars(range(min = 1, max = 32767))]
    pub kind_version: i32,
    /// Human description.
    #[serde(default)]
    pub description: String,
    /// JSON Schema (2020-12) every spec must satisfy (absent or null = untyped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "json_schema_value")]
    pub spec_schema: Option<Value>,
    /// JSON Schema (2020-12) of status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "json_schema_value")]
    pub status_schema: Option<Value>,
    /// JSON Schema (2020-12) of the kind's provider config. A property marked
    /// `"writeOnly": true` is a secret: every API read shows it as `"***"`; only workers
    /// serving the kind receive it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "json_schema_value")]
    pub config_schema: Option<Value>,
    /// Which provider serves the kind: `exec`, `starlark`, `cel`, `wasm` (stdworker's) or
    /// `sdk` (absent = not declared). The API enforces what it knows of that provider: for
    /// `exec`, a resource's override config may set only `settings`, never `program`, `args`,
    /// `env` or `timeout_secs`, so data cannot choose what runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["exec", "starlark", "cel", "wasm", "sdk", null]))]
    pub provider: Option<String>,
    /// The reactions the kind declares (at least one).
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub reactions: Vec<ReactionDecl>,
    /// Set: deletion is two-phase, guarded by this finalizer (a deleteRequested reaction
    /// strips it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizer_name: Option<String>,
    /// Global per-kind concurrency cap (0 = unlimited); seeds the live kind config.
    #[serde(default)]
    #[schemars(range(min = 0, max = 2147483647))]
    pub max_inflight: i32,
    /// Per-task deadline in seconds (0 = none); seeds the live kind config.
    #[serde(default)]
    #[schemars(range(min = 0, max = 2147483647))]
    pub task_deadline_secs: i32,
    /// Periodic drift re-observe interval in seconds (0 = off); seeds the live kind config.
    #[serde(default)]
    #[schemars(range(min = 0, max = 2147483647))]
    pub resync_interval_secs: i32,
    /// Whether a resync also re-runs the composer; seeds the live kind config.
    #[serde(default)]
    pub resync_recomposes: bool,
    /// Grace in seconds before a dropped child is torn down (0 = at once); seeds the live
    /// kind config.
    #[serde(default)]
    #[schemars(range(min = 0, max = 2147483647))]
    pub orphan_grace_secs: i32,
    /// Transient failures before escalating to terminal (0 = unbounded); seeds the live kind
    /// config.
    #[serde(default)]
    #[schemars(range(min = 0, max = 2147483647))]
    pub max_transient_attempts: i32,
    /// Static value flows between this kind and the kinds it composes or feeds (absent =
    /// none), each checked at apply against the kinds' schemas.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<EdgeDecl>,
}

/// The schema of a field that holds a JSON Schema: an object or a boolean schema (or null,
/// read as absent).
fn json_schema_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": ["object", "boolean", "null"] })
}

/// The fields a manifest document may carry that are not part of the manifest itself: what
/// `conctl` and editors put there, and what a read adds. The API accepts and drops them.
pub const ENVELOPE_FIELDS: [&str; 3] = ["$schema", "type", "manifest_version"];

/// Adds the [`ENVELOPE_FIELDS`] to the manifest's schema (see there), and marks
/// `kind_version` and `reactions` required: serde defaults them only so that a missing one
/// is reported by [`KindManifest::problems`] with the rest, not as a decoding error.
fn envelope(schema: &mut Schema) {
    if let Some(req) = schema.get_mut("required").and_then(Value::as_array_mut) {
        req.extend(["kind_version", "reactions"].map(Value::from));
    }
    let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for field in ["kind_version", "reactions"] {
        if let Some(p) = props.get_mut(field).and_then(Value::as_object_mut) {
            p.remove("default");
        }
    }
    props.insert(
        "$schema".into(),
        serde_json::json!({
            "description": "The JSON Schema this document follows, for editors (ignored on apply).",
            "type": "string"
        }),
    );
    props.insert(
        "type".into(),
        serde_json::json!({
            "description": "The document type for `conctl apply` (ignored on apply).",
            "const": "manifest"
        }),
    );
    props.insert(
        "manifest_version".into(),
        serde_json::json!({
            "description": "The stored manifest's content hash, added by every read (ignored on apply).",
            "type": "integer",
            "readOnly": true
        }),
    );
}

/// The kind manifest's JSON Schema (2020-12), generated from [`KindManifest`]. It is strict:
/// an unknown field at any level fails it. Committed as `proto/manifest.schema.json` (a test
/// fails when it drifts) and served at `GET /api/v1/schemas/manifest`.
pub fn manifest_schema() -> Value {
    let schema = SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<KindManifest>();
    tidy(schema.to_value())
}

/// `v` with every object's keys in sorted order (the committed file is the same whatever
/// serde_json's map order is in a given build) and each description's doc-comment line
/// breaks joined (a blank line stays a paragraph break).
fn tidy(v: Value) -> Value {
    match v {
        Value::Object(o) => {
            let mut entries: Vec<(String, Value)> = o.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| match v {
                        Value::String(d) if k == "description" => {
                            let joined = d
                                .split("\n\n")
                                .map(|para| para.split('\n').collect::<Vec<_>>().join(" "))
                                .collect::<Vec<_>>()
                                .join("\n\n");
                            (k, Value::String(joined))
                        }
                        v => (k, tidy(v)),
                    })
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.into_iter().map(tidy).collect()),
        other => other,
    }
}

/// The providers a manifest may declare in `provider`: stdworker's four (`exec`, `starlark`,
/// `cel`, `wasm`) and `sdk` for a worker written against an SDK. A closed set, so a typo
/// (`"Exec"`) is refused instead of silently switching the exec checks off.
pub const PROVIDERS: [&str; 5] = ["exec", "starlark", "cel", "wasm", "sdk"];

/// The exec provider config fields an override may not set: what runs, with which arguments
/// and environment, for how long, is the kind default's decision (the operator's), never a
/// resource's.
pub const EXEC_OVERRIDE_FORBIDDEN: [&str; 4] = ["program", "args", "env", "timeout_secs"];

/// The [`EXEC_OVERRIDE_FORBIDDEN`] fields an exec provider config `spec` sets, in that order
/// (none for a spec that is not an object): the one statement of the exec rule, applied by
/// the API to overrides ([`KindManifest::exec_override_violations`]) and by the broker to
/// every config a composer emits for an exec kind.
pub fn exec_override_fields(spec: &serde_json::Value) -> Vec<&'static str> {
    match spec.as_object() {
        Some(o) => EXEC_OVERRIDE_FORBIDDEN
            .into_iter()
            .filter(|k| o.contains_key(*k))
            .collect(),
        None => Vec::new(),
    }
}

/// Maximum length of a kind name or a resource name.
pub const MAX_NAME_LEN: usize = 253;

/// Whether `s` is a legal kind name: lowercase letters, digits, `-`, `.`, `_`, starting with
/// a letter, at most [`MAX_NAME_LEN`] bytes.
pub fn is_valid_kind_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_LEN
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.' | '_'))
}

/// Whether `s` is a legal resource name: printable ASCII without `/`, spaces or control
/// characters, at most [`MAX_NAME_LEN`] bytes.
pub fn is_valid_resource_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_NAME_LEN && s.chars().all(|c| c.is_ascii_graphic() && c != '/')
}

impl KindManifest {
    /// The reaction that runs for a spec change and emits status only (the worker), if any.
    pub fn worker_reaction(&self) -> Option<&ReactionDecl> {
        self.reactions
            .iter()
            .find(|r| r.trigger == Trigger::SpecChange && !r.emits(Emit::Children))
    }

    /// The reaction that composes children, if any.
    pub fn composer_reaction(&self) -> Option<&ReactionDecl> {
        self.reactions
            .iter()
            .find(|r| r.trigger == Trigger::SpecChange && r.emits(Emit::Children))
    }

    /// The rollup reaction (childrenSettled emitting status), if any.
    pub fn rollup_reaction(&self) -> Option<&ReactionDecl> {
        self.reactions
            .iter()
            .find(|r| r.trigger == Trigger::ChildrenSettled && r.emits(Emit::Status))
    }

    /// The teardown reaction (deleteRequested), if any.
    pub fn delete_reaction(&self) -> Option<&ReactionDecl> {
        self.reactions
            .iter()
            .find(|r| r.trigger == Trigger::DeleteRequested)
    }

    /// The operation reaction that handles `verb`, if declared.
    pub fn operation_reaction(&self, verb: &str) -> Option<&ReactionDecl> {
        self.reactions
            .iter()
            .find(|r| r.trigger == Trigger::Operation && r.verb.as_deref() == Some(verb))
    }

    /// The verbs the kind declares, in declaration order.
    pub fn verbs(&self) -> Vec<&str> {
        self.reactions
            .iter()
            .filter(|r| r.trigger == Trigger::Operation)
            .filter_map(|r| r.verb.as_deref())
            .collect()
    }

    /// Whether the manifest declares the exec provider (`"provider": "exec"`).
    pub fn is_exec(&self) -> bool {
        self.provider.as_deref() == Some("exec")
    }

    /// The [`EXEC_OVERRIDE_FORBIDDEN`] fields `spec` (an override's config spec) sets, in
    /// that order; always empty unless the kind declares the exec provider.
    pub fn exec_override_violations(&self, spec: &serde_json::Value) -> Vec<&'static str> {
        if self.is_exec() {
            exec_override_fields(spec)
        } else {
            Vec::new()
        }
    }

    /// A kind that declares only reactor reactions.
    pub fn is_reactor(&self) -> bool {
        !self.reactions.is_empty() && self.reactions.iter().all(|r| r.trigger == Trigger::Reactor)
    }

    /// Checks the manifest against every legality rule and returns all violations, each as
    /// `"{pointer}: {message}"` (see [`KindManifest::problems`]).
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let errs: Vec<String> = self.problems().iter().map(ToString::to_string).collect();
        if errs.is_empty() { Ok(()) } else { Err(errs) }
    }

    /// Every legality violation, located by JSON pointer into the manifest document.
    pub fn problems(&self) -> Vec<Problem> {
        self.problems_at(&|i| i, true)
    }

    /// [`KindManifest::problems`], with `at(i)` the index in the document of
    /// `self.reactions[i]`; `complete` is false when some of the document's reactions could
    /// not be read (so the rules about the set of reactions as a whole are left out).
    fn problems_at(&self, at: &dyn Fn(usize) -> usize, complete: bool) -> Vec<Problem> {
        let mut errs = Vec::new();
        let mut err = |pointer: String, message: String| errs.push(Problem { pointer, message });
        if !is_valid_kind_name(&self.kind) {
            err(
                "/kind".into(),
                format!(
                    "kind {:?} must be 1-{MAX_NAME_LEN} lowercase letters, digits, '-', '.' or '_', starting with a letter",
                    self.kind
                ),
            );
        }
        if !(1..=32767).contains(&self.kind_version) {
            err(
                "/kind_version".into(),
                "kind_version must be between 1 and 32767".into(),
            );
        }
        for (field, v) in [
            ("max_inflight", self.max_inflight),
            ("task_deadline_secs", self.task_deadline_secs),
            ("resync_interval_secs", self.resync_interval_secs),
            ("orphan_grace_secs", self.orphan_grace_secs),
            ("max_transient_attempts", self.max_transient_attempts),
        ] {
            if v < 0 {
                err(format!("/{field}"), format!("{field} must not be negative"));
            }
        }
        for (field, s) in [
            ("spec_schema", &self.spec_schema),
            ("status_schema", &self.status_schema),
            ("config_schema", &self.config_schema),
        ] {
            if s.as_ref().is_some_and(|v| !is_schema_shaped(v)) {
                err(
                    format!("/{field}"),
                    format!("{field} must be a JSON Schema object"),
                );
            }
        }
        if let Some(p) = &self.provider
            && !PROVIDERS.contains(&p.as_str())
        {
            err(
                "/provider".into(),
                format!(
                    "provider {p:?} is not one of {} (or leave it out)",
                    PROVIDERS.join(", ")
                ),
            );
        }
        if complete && self.reactions.is_empty() {
            err(
                "/reactions".into(),
                "reactions must declare at least one reaction".into(),
            );
        }
        let mut names = std::collections::HashSet::new();
        let (mut composers, mut rollups, mut reactors, mut deleters) = (0, 0, 0, 0);
        let finalizer_name = self.finalizer_name.as_deref().filter(|f| !f.is_empty());
        for (i, r) in self.reactions.iter().enumerate() {
            let base = format!("/reactions/{}", at(i));
            let ptr = |field: &str| format!("{base}/{field}");
            let who = format!("reaction {:?}", r.name);
            if r.name.is_empty() {
                err(ptr("name"), "name must not be empty".into());
            } else if !names.insert(r.name.as_str()) {
                err(ptr("name"), format!("{who}: duplicate reaction name"));
            }
            let children = r.emits(Emit::Children);
            match r.trigger {
                Trigger::SpecChange => {
                    if children {
                        composers += 1;
                        if composers > 1 {
                            err(
                                ptr("emits"),
                                format!(
                                    "{who}: at most one specChange reaction may emit children (one composer)"
                                ),
                            );
                        }
                        if !(r.emits(Emit::Status) || r.emits(Emit::Conditions)) {
                            err(
                                ptr("emits"),
                                format!(
                                    "{who}: a specChange reaction that emits children must also emit status or conditions"
                                ),
                            );
                        }
                        if r.emits(Emit::SideEffect) {
                            err(
                                ptr("emits"),
                                format!(
                                    "{who}: a specChange reaction that emits children may not emit sideEffect"
                                ),
                            );
                        }
                    }
                }
                Trigger::ChildrenSettled => {
                    if r.emits(Emit::Status) {
                        rollups += 1;
                        if rollups > 1 {
                            err(
                                ptr("emits"),
                                format!(
                                    "{who}: at most one childrenSettled reaction may emit status (one rollup)"
                                ),
                            );
                        }
                    }
                }
                Trigger::DeleteRequested => {
                    deleters += 1;
                    if deleters > 1 {
                        err(
                            ptr("trigger"),
                            format!("{who}: at most one deleteRequested reaction per kind"),
                        );
                    }
                    // The kind's finalizer_name is what deletion seeds on each resource;
                    // without it this reaction would never run.
                    match (finalizer_name, r.finalizer.as_deref()) {
                        (None, _) => err(
                            "/finalizer_name".into(),
                            format!(
                                "{who}: a deleteRequested reaction requires a finalizer: set \
                                 finalizer_name (the finalizer deletion waits for)"
                            ),
                        ),
                        (Some(f), Some(mine)) if mine != f => err(
                            ptr("finalizer"),
                            format!(
                                "{who}: finalizer {mine:?} is not the kind's finalizer_name \
                                 {f:?} (leave it out, or make them the same)"
                            ),
                        ),
                        _ => {}
                    }
                }
                Trigger::Operation => {
                    if r.verb.as_deref().is_none_or(str::is_empty) {
                        err(
                            ptr("verb"),
                            format!("{who}: an operation reaction requires a verb"),
                        );
                    }
                }
                Trigger::Reactor => {
                    reactors += 1;
                    if reactors > 1 {
                        err(
                            ptr("trigger"),
                            format!("{who}: at most one reactor reaction per kind"),
                        );
                    }
                    if r.emits != [Emit::SideEffect] {
                        err(
                            ptr("emits"),
                            format!(
                                "{who}: a reactor reaction must emit sideEffect and nothing else"
                            ),
                        );
                    }
                }
                Trigger::Resync => {
                    err(
                        ptr("trigger"),
                        format!(
                            "{who}: resync is not a declarable trigger (set resync_interval_secs)"
                        ),
                    );
                }
            }
            if r.trigger != Trigger::ChildrenSettled && r.descendants.is_some() {
                err(
                    ptr("descendants"),
                    format!("{who}: descendants is only allowed on a childrenSettled reaction"),
                );
            }
            if r.trigger != Trigger::Operation && r.verb.is_some() {
                err(
                    ptr("verb"),
                    format!("{who}: verb is only allowed on an operation reaction"),
                );
            }
            if r.trigger != Trigger::DeleteRequested && r.finalizer.is_some() {
                err(
                    ptr("finalizer"),
                    format!("{who}: finalizer is only allowed on a deleteRequested reaction"),
                );
            }
            if let Some(o) = &r.output_schema {
                if r.trigger != Trigger::Operation {
                    err(
                        ptr("output_schema"),
                        format!("{who}: output_schema is only allowed on an operation reaction"),
                    );
                } else if !is_schema_shaped(o) {
                    err(
                        ptr("output_schema"),
                        "output_schema must be a JSON Schema object".into(),
                    );
                }
            }
        }
        if complete && finalizer_name.is_some() && deleters == 0 {
            err(
                "/finalizer_name".into(),
                "finalizer_name requires a deleteRequested reaction to strip it (otherwise \
                 every deletion of this kind waits forever)"
                    .into(),
            );
        }
        errs
    }

    /// Decodes what can be read of the manifest document `doc` once the values at `bad` (JSON
    /// pointers the manifest schema refused) are taken out, so one answer can list the
    /// schema's problems and the legality rules' together. A reaction that still does not
    /// decode is left out. `None`: the document does not decode even so (its schema
    /// problems are then the whole answer).
    pub fn salvage(doc: &Value, bad: &[&str]) -> Option<Salvaged> {
        let mut doc = doc.clone();
        let mut bad: Vec<Vec<String>> = bad.iter().map(|p| json_pointer::tokens(p)).collect();
        // Deepest and highest index first, so a removal never shifts a later one.
        bad.sort_by(|a, b| json_pointer::cmp_tokens(b, a));
        bad.dedup();
        for tokens in &bad {
            let Some((last, parent)) = tokens.split_last() else {
                continue;
            };
            let Some(parent_value) = value_at_mut(&mut doc, parent) else {
                continue;
            };
            match parent_value {
                Value::Object(o) => {
                    o.remove(last);
                }
                // A reaction or an edge keeps its place (its index locates its problems);
                // any other array closes up.
                Value::Array(a) => match last.parse::<usize>() {
                    Ok(i)
                        if i < a.len()
                            && parent.len() == 1
                            && (parent[0] == "reactions" || parent[0] == "edges") =>
                    {
                        a[i] = Value::Null;
                    }
                    Ok(i) if i < a.len() => {
                        a.remove(i);
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        let obj = doc.as_object_mut()?;
        let reactions = obj.insert("reactions".into(), Value::Array(Vec::new()));
        let edges = obj.insert("edges".into(), Value::Array(Vec::new()));
        let mut manifest: KindManifest = serde_json::from_value(doc).ok()?;
        // An edge that does not decode is left out (the schema reported why); the rest are
        // checked where they sit in the document.
        let mut edge_index = Vec::new();
        if let Some(Value::Array(items)) = edges {
            for (i, e) in items.into_iter().enumerate() {
                if let Ok(e) = serde_json::from_value::<EdgeDecl>(e) {
                    manifest.edges.push(e);
                    edge_index.push(i);
                }
            }
        }
        let mut index = Vec::new();
        let mut complete = true;
        match reactions {
            None => {}
            Some(Value::Array(items)) => {
                for (i, r) in items.into_iter().enumerate() {
                    match serde_json::from_value::<ReactionDecl>(r) {
                        Ok(r) => {
                            manifest.reactions.push(r);
                            index.push(i);
                        }
                        Err(_) => complete = false,
                    }
                }
            }
            Some(_) => complete = false,
        }
        Some(Salvaged {
            manifest,
            index,
            edge_index,
            complete,
        })
    }
}

/// A manifest decoded by [`KindManifest::salvage`].
#[derive(Debug, Clone)]
pub struct Salvaged {
    /// What decoded.
    pub manifest: KindManifest,
    /// The document index of each of `manifest.reactions`.
    index: Vec<usize>,
    /// The document index of each of `manifest.edges`.
    edge_index: Vec<usize>,
    /// Whether every reaction of the document decoded.
    pub complete: bool,
}

impl Salvaged {
    /// The legality violations of what decoded, located in the original document.
    pub fn problems(&self) -> Vec<Problem> {
        self.manifest
            .problems_at(&|i| self.doc_index(i), self.complete)
    }

    /// The index in the original document of `manifest.reactions[i]`.
    pub fn doc_index(&self, i: usize) -> usize {
        self.index.get(i).copied().unwrap_or(i)
    }

    /// The index in the original document of `manifest.edges[i]`.
    pub fn edge_doc_index(&self, i: usize) -> usize {
        self.edge_index.get(i).copied().unwrap_or(i)
    }
}

/// One legality violation of a manifest, located by JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where, as a JSON pointer into the manifest document (`/reactions/0/verb`).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.pointer, self.message)
    }
}

/// Whether `v` can be a JSON Schema (an object or a boolean; null reads as absent).
fn is_schema_shaped(v: &Value) -> bool {
    v.is_object() || v.is_boolean() || v.is_null()
}

fn value_at_mut<'a>(mut v: &'a mut Value, tokens: &[String]) -> Option<&'a mut Value> {
    for t in tokens {
        v = match v {
            Value::Object(o) => o.get_mut(t)?,
            Value::Array(a) => a.get_mut(t.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf() -> KindManifest {
        serde_json::from_value(serde_json::json!({
            "kind": "vpc", "kind_version": 1,
            "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]
        }))
        .unwrap()
    }

    #[test]
    fn leaf_is_valid() {
        assert_eq!(leaf().validate(), Ok(()));
        assert_eq!(leaf().worker_reaction().unwrap().name, "work");
        assert!(!leaf().is_reactor());
    }

    #[test]
    fn lists_every_violation() {
        let m: KindManifest = serde_json::from_value(serde_json::json!({
            "kind": "Bad Kind", "kind_version": 0, "max_inflight": -1,
            "reactions": [
                {"name": "c1", "trigger": "specChange", "emits": ["children"]},
                {"name": "c2", "trigger": "specChange", "emits": ["children", "status"]},
                {"name": "op", "trigger": "operation", "emits": ["operationOutput"]},
                {"name": "del", "trigger": "deleteRequested", "emits": ["finalizer"]},
                {"name": "r", "trigger": "reactor", "emits": ["sideEffect", "status"]}
            ]
        }))
        .unwrap();
        let errs = m.validate().unwrap_err();
        let all = errs.join("\n");
        for needle in [
            "kind \"Bad Kind\"",
            "kind_version",
            "max_inflight",
            "must also emit status",
            "one composer",
            "requires a verb",
            "requires a finalizer",
            "sideEffect and nothing else",
        ] {
            assert!(all.contains(needle), "missing {needle:?} in {all}");
        }
    }

    #[test]
    fn reactor_kind() {
        let m: KindManifest = serde_json::from_value(serde_json::json!({
            "kind": "sink", "kind_version": 1,
            "reactions": [{"name": "react", "trigger": "reactor", "emits": ["sideEffect"]}]
        }))
        .unwrap();
        assert_eq!(m.validate(), Ok(()));
        assert!(m.is_reactor());
    }

    #[test]
    fn provider_is_optional_and_a_closed_set() {
        assert_eq!(leaf().provider, None);
        assert!(!leaf().is_exec());
        let with = |p: &str| {
            let mut m = leaf();
            m.provider = Some(p.to_string());
            m
        };
        for p in PROVIDERS {
            assert_eq!(with(p).validate(), Ok(()), "{p}");
        }
        let errs = with("Exec").validate().unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].contains("provider \"Exec\" is not one of exec, starlark"),
            "{errs:?}"
        );
        // Round trip: the field survives serialisation (the API stores the re-serialised
        // manifest), and an undeclared provider stays absent.
        let v = serde_json::to_value(with("exec")).unwrap();
        assert_eq!(v["provider"], "exec");
        assert!(
            serde_json::to_value(leaf())
                .unwrap()
                .get("provider")
                .is_none()
        );
    }

    #[test]
    fn exec_overrides_may_set_only_settings() {
        let spec = serde_json::json!({"settings": {"a": 1}, "env": {}, "program": "/bin/sh",
                                      "ready": true, "timeout_secs": 1, "args": []});
        assert!(leaf().exec_override_violations(&spec).is_empty());
        let mut m = leaf();
        m.provider = Some("exec".into());
        assert_eq!(
            m.exec_override_violations(&spec),
            ["program", "args", "env", "timeout_secs"]
        );
        assert!(
            m.exec_override_violations(&serde_json::json!({"settings": {"program": "x"}}))
                .is_empty()
        );
        m.provider = Some("wasm".into());
        assert!(m.exec_override_violations(&spec).is_empty());
    }

    #[test]
    fn unknown_trigger_is_a_parse_error() {
        let r: Result<KindManifest, _> = serde_json::from_value(serde_json::json!({
            "kind": "x", "kind_version": 1,
            "reactions": [{"name": "w", "trigger": "whenever", "emits": []}]
        }));
        assert!(r.is_err());
    }

    fn pointers(problems: &[Problem]) -> Vec<&str> {
        problems.iter().map(|p| p.pointer.as_str()).collect()
    }

    #[test]
    fn problems_are_located() {
        let m: KindManifest = serde_json::from_value(serde_json::json!({
            "kind": "k", "kind_version": 1, "task_deadline_secs": -1,
            "reactions": [
                {"name": "w", "trigger": "specChange", "emits": ["status"], "verb": "x"},
                {"name": "w", "trigger": "operation", "emits": ["operationOutput"],
                 "output_schema": 3},
                {"name": "s", "trigger": "specChange", "emits": ["status"],
                 "output_schema": {}}
            ]
        }))
        .unwrap();
        assert_eq!(
            pointers(&m.problems()),
            [
                "/task_deadline_secs",
                "/reactions/0/verb",
                "/reactions/1/name",
                "/reactions/1/verb",
                "/reactions/1/output_schema",
                "/reactions/2/output_schema",
            ]
        );
        let errs = m.validate().unwrap_err();
        assert!(
            errs[2].starts_with("/reactions/1/name: reaction \"w\": duplicate"),
            "{errs:?}"
        );
    }

    #[test]
    fn a_finalizer_and_its_teardown_come_together() {
        let kind = |v: serde_json::Value| -> KindManifest { serde_json::from_value(v).unwrap() };
        let work = serde_json::json!({"name": "w", "trigger": "specChange", "emits": ["status"]});
        let del = |f: Option<&str>| {
            let mut r = serde_json::json!({"name": "d", "trigger": "deleteRequested",
                                           "emits": ["finalizer"]});
            if let Some(f) = f {
                r["finalizer"] = f.into();
            }
            r
        };
        let ok = kind(
            serde_json::json!({"kind": "k", "kind_version": 1, "finalizer_name": "f",
                                         "reactions": [work, del(Some("f"))]}),
        );
        assert_eq!(ok.problems(), []);
        let ok = kind(
            serde_json::json!({"kind": "k", "kind_version": 1, "finalizer_name": "f",
                                         "reactions": [work, del(None)]}),
        );
        assert_eq!(ok.problems(), []);
        // The reaction's own finalizer alone would never be seeded: deletion seeds the kind's.
        let m = kind(serde_json::json!({"kind": "k", "kind_version": 1,
                                        "reactions": [work, del(Some("f"))]}));
        assert_eq!(pointers(&m.problems()), ["/finalizer_name"]);
        let m = kind(
            serde_json::json!({"kind": "k", "kind_version": 1, "finalizer_name": "f",
                                        "reactions": [work, del(Some("g"))]}),
        );
        assert_eq!(pointers(&m.problems()), ["/reactions/1/finalizer"]);
        // A finalizer nothing strips would hold every deletion.
        let m = kind(
            serde_json::json!({"kind": "k", "kind_version": 1, "finalizer_name": "f",
                                        "reactions": [work]}),
        );
        assert_eq!(pointers(&m.problems()), ["/finalizer_name"]);
        let mut two = del(None);
        two["name"] = "d2".into();
        let m = kind(
            serde_json::json!({"kind": "k", "kind_version": 1, "finalizer_name": "f",
                                        "reactions": [work, del(None), two]}),
        );
        assert_eq!(pointers(&m.problems()), ["/reactions/2/trigger"]);
    }

    #[test]
    fn salvage_reads_around_what_the_schema_refused() {
        // Reaction 0's trigger and reaction 2's second emits value are bad (the schema says
        // so); reaction 1 breaks a rule that only decoding finds.
        let doc = serde_json::json!({
            "kind": "k", "kind_version": 1, "max_inflight": "lots", "typo": 1,
            "reactions": [
                {"name": "a", "trigger": "whenever"},
                {"name": "b", "trigger": "operation"},
                {"name": "c", "trigger": "specChange", "emits": ["children", "colour"]}
            ]
        });
        assert!(serde_json::from_value::<KindManifest>(doc.clone()).is_err());
        let bad = [
            "/max_inflight",
            "/reactions/0/trigger",
            "/reactions/2/emits/1",
            "",
        ];
        let s = KindManifest::salvage(&doc, &bad).unwrap();
        assert!(!s.complete);
        assert_eq!(
            s.manifest
                .reactions
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>(),
            ["b", "c"]
        );
        assert_eq!(s.manifest.reactions[1].emits, [Emit::Children]);
        assert_eq!(
            pointers(&s.problems()),
            ["/reactions/1/verb", "/reactions/2/emits"]
        );

        // Nothing bad: the same as decoding.
        let s = KindManifest::salvage(&serde_json::to_value(leaf()).unwrap(), &[]).unwrap();
        assert!(s.complete);
        assert_eq!(s.manifest, leaf());
        // Every reaction bad: no "at least one reaction" on top of their own problems.
        let doc = serde_json::json!({"kind": "k", "kind_version": 1,
                                      "reactions": [{"name": "a", "trigger": 5}]});
        let s = KindManifest::salvage(&doc, &["/reactions/0/trigger"]).unwrap();
        assert!(s.problems().is_empty(), "{:?}", s.problems());
        // Not an object at all.
        assert!(KindManifest::salvage(&serde_json::json!([1]), &[""]).is_none());
    }
}
