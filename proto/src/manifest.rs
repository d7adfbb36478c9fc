//! The KindManifest model: a kind is data (schemas, reactions, policy), never compiled code.
//!
//! [`KindManifest::validate`] is the SDK half of the database's `validate_kind_manifest`
//! CHECK; both enforce the same legality lattice so a bad manifest is refused with every
//! violated rule listed, before it reaches the database.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What fires a reaction. A closed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Trigger {
    /// The generation bumped (a spec edit or the first apply).
    #[serde(rename = "specChange")]
    SpecChange,
    /// A composite's whole live subtree settled.
    #[serde(rename = "childrenSettled")]
    ChildrenSettled,
    /// A finalizer-bearing resource is being torn down.
    #[serde(rename = "deleteRequested")]
    DeleteRequested,
    /// An operation was requested for the reaction's verb.
    #[serde(rename = "operation")]
    Operation,
    /// A reactor binding matched a watched kind's transition.
    #[serde(rename = "reactor")]
    Reactor,
    /// A drift tick re-pended the resource without a generation bump.
    #[serde(rename = "resync")]
    Resync,
}

impl Trigger {
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
        Some(match s {
            "specChange" => Trigger::SpecChange,
            "childrenSettled" => Trigger::ChildrenSettled,
            "deleteRequested" => Trigger::DeleteRequested,
            "operation" => Trigger::Operation,
            "reactor" => Trigger::Reactor,
            "resync" => Trigger::Resync,
            _ => return None,
        })
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One part of an Outcome the core applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Emit {
    /// Desired children.
    Children,
    /// Dependency edges between children.
    Edges,
    /// Provider configs owned by the root.
    Configs,
    /// Status JSON.
    Status,
    /// Conditions.
    Conditions,
    /// Strip the finalizer on success.
    Finalizer,
    /// Operation output.
    OperationOutput,
    /// A reactor's side effect (nothing applied to the resource).
    SideEffect,
}

/// A (trigger, emits) pair declared by a kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReactionDecl {
    /// Stable handle; the worker picks its handler by (kind, name).
    pub name: String,
    /// What fires it.
    pub trigger: Trigger,
    /// Which parts of the Outcome the core applies.
    #[serde(default)]
    pub emits: Vec<Emit>,
    /// Only for `operation`: the verb it handles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb: Option<String>,
    /// Only for `deleteRequested`: the finalizer it strips.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizer: Option<String>,
    /// Only for `childrenSettled`: what the rollup request carries of the subtree (absent =
    /// [`Descendants::Summary`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descendants: Option<Descendants>,
}

/// What a rollup request carries of the composite's live subtree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

/// A kind's manifest (its CRD): schemas, reactions and operational policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KindManifest {
    /// The kind's name.
    pub kind: String,
    /// The kind version this manifest describes (at least 1).
    #[serde(default)]
    pub kind_version: i32,
    /// Human description.
    #[serde(default)]
    pub description: String,
    /// JSON Schema (2020-12) every spec must satisfy; `null` = untyped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_schema: Option<serde_json::Value>,
    /// Advisory JSON Schema of status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_schema: Option<serde_json::Value>,
    /// JSON Schema of the kind's provider config. A property marked `"writeOnly": true` is a
    /// secret: every API read shows it as `"***"`; only workers serving the kind receive it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_schema: Option<serde_json::Value>,
    /// Which provider serves the kind, one of [`PROVIDERS`] (absent = not declared). The API
    /// enforces what it knows of that provider: for `exec`, a resource's override (any
    /// non-default config) may set only `settings`, never `program`, `args`, `env` or
    /// `timeout_secs` ([`EXEC_OVERRIDE_FORBIDDEN`]), so data cannot choose what runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Declared reactions.
    #[serde(default)]
    pub reactions: Vec<ReactionDecl>,
    /// Set: two-phase delete guarded by this finalizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizer_name: Option<String>,
    /// Global per-kind concurrency cap (0 = unlimited); seeds kind_config.
    #[serde(default)]
    pub max_inflight: i32,
    /// Per-task deadline in seconds (0 = none); seeds kind_config.
    #[serde(default)]
    pub task_deadline_secs: i32,
    /// Periodic drift re-observe interval (0 = off); seeds kind_config.
    #[serde(default)]
    pub resync_interval_secs: i32,
    /// Whether a resync also re-runs the composer; seeds kind_config.
    #[serde(default)]
    pub resync_recomposes: bool,
    /// Grace before a dropped child is torn down (0 = at once); seeds kind_config.
    #[serde(default)]
    pub orphan_grace_secs: i32,
    /// Transient failures before escalating to terminal (0 = unbounded); seeds kind_config.
    #[serde(default)]
    pub max_transient_attempts: i32,
}

/// The providers a manifest may declare in `provider`: stdworker's four (`exec`, `starlark`,
/// `cel`, `wasm`) and `sdk` for a worker written against an SDK. A closed set, so a typo
/// (`"Exec"`) is refused instead of silently switching the exec checks off.
pub const PROVIDERS: [&str; 5] = ["exec", "starlark", "cel", "wasm", "sdk"];

/// The exec provider config fields an override may not set: what runs, with which arguments
/// and environment, for how long, is the kind default's decision (the operator's), never a
/// resource's.
pub const EXEC_OVERRIDE_FORBIDDEN: [&str; 4] = ["program", "args", "env", "timeout_secs"];

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
        match spec.as_object() {
            Some(o) if self.is_exec() => EXEC_OVERRIDE_FORBIDDEN
                .into_iter()
                .filter(|k| o.contains_key(*k))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// A kind that declares only reactor reactions.
    pub fn is_reactor(&self) -> bool {
        !self.reactions.is_empty() && self.reactions.iter().all(|r| r.trigger == Trigger::Reactor)
    }

    /// Checks the manifest against every legality rule and returns all violations.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut errs = Vec::new();
        if !is_valid_kind_name(&self.kind) {
            errs.push(format!(
                "kind {:?} must be 1-{MAX_NAME_LEN} lowercase letters, digits, '-', '.' or '_', starting with a letter",
                self.kind
            ));
        }
        if !(1..=32767).contains(&self.kind_version) {
            errs.push("kind_version must be between 1 and 32767".to_string());
        }
        for (field, v) in [
            ("max_inflight", self.max_inflight),
            ("task_deadline_secs", self.task_deadline_secs),
            ("resync_interval_secs", self.resync_interval_secs),
            ("orphan_grace_secs", self.orphan_grace_secs),
            ("max_transient_attempts", self.max_transient_attempts),
        ] {
            if v < 0 {
                errs.push(format!("{field} must not be negative"));
            }
        }
        for (field, s) in [
            ("spec_schema", &self.spec_schema),
            ("status_schema", &self.status_schema),
            ("config_schema", &self.config_schema),
        ] {
            if let Some(v) = s
                && !(v.is_object() || v.is_boolean() || v.is_null())
            {
                errs.push(format!("{field} must be a JSON Schema object"));
            }
        }
        if let Some(p) = &self.provider
            && !PROVIDERS.contains(&p.as_str())
        {
            errs.push(format!(
                "provider {p:?} is not one of {} (or leave it out)",
                PROVIDERS.join(", ")
            ));
        }
        if self.reactions.is_empty() {
            errs.push("reactions must declare at least one reaction".to_string());
        }
        let mut names = std::collections::HashSet::new();
        let (mut composers, mut rollups, mut reactors) = (0, 0, 0);
        for (i, r) in self.reactions.iter().enumerate() {
            let at = format!("reactions[{i}] ({:?})", r.name);
            if r.name.is_empty() {
                errs.push(format!("reactions[{i}]: name must not be empty"));
            } else if !names.insert(r.name.as_str()) {
                errs.push(format!("{at}: duplicate reaction name"));
            }
            let children = r.emits(Emit::Children);
            match r.trigger {
                Trigger::SpecChange => {
                    if children {
                        composers += 1;
                        if !(r.emits(Emit::Status) || r.emits(Emit::Conditions)) {
                            errs.push(format!(
                                "{at}: a specChange reaction that emits children must also emit status or conditions"
                            ));
                        }
                        if r.emits(Emit::SideEffect) {
                            errs.push(format!(
                                "{at}: a specChange reaction that emits children may not emit sideEffect"
                            ));
                        }
                    }
                }
                Trigger::ChildrenSettled => {
                    if r.emits(Emit::Status) {
                        rollups += 1;
                    }
                }
                Trigger::DeleteRequested => {
                    let has_fin = r.finalizer.as_deref().is_some_and(|f| !f.is_empty())
                        || self
                            .finalizer_name
                            .as_deref()
                            .is_some_and(|f| !f.is_empty());
                    if !has_fin {
                        errs.push(format!(
                            "{at}: a deleteRequested reaction requires a finalizer (on the reaction or finalizer_name)"
                        ));
                    }
                }
                Trigger::Operation => {
                    if r.verb.as_deref().is_none_or(str::is_empty) {
                        errs.push(format!("{at}: an operation reaction requires a verb"));
                    }
                }
                Trigger::Reactor => {
                    reactors += 1;
                    if r.emits != [Emit::SideEffect] {
                        errs.push(format!(
                            "{at}: a reactor reaction must emit sideEffect and nothing else"
                        ));
                    }
                }
                Trigger::Resync => {
                    errs.push(format!(
                        "{at}: resync is not a declarable trigger (set resync_interval_secs)"
                    ));
                }
            }
            if r.trigger != Trigger::ChildrenSettled && r.descendants.is_some() {
                errs.push(format!(
                    "{at}: descendants is only allowed on a childrenSettled reaction"
                ));
            }
            if r.trigger != Trigger::Operation && r.verb.is_some() {
                errs.push(format!(
                    "{at}: verb is only allowed on an operation reaction"
                ));
            }
        }
        if composers > 1 {
            errs.push("at most one specChange reaction may emit children (one composer)".into());
        }
        if rollups > 1 {
            errs.push("at most one childrenSettled reaction may emit status (one rollup)".into());
        }
        if reactors > 1 {
            errs.push("at most one reactor reaction per kind".into());
        }
        if errs.is_empty() { Ok(()) } else { Err(errs) }
    }
}

/// The seven derived phases of a resource, in precedence order.
pub const PHASES: [&str; 7] = [
    "Deleting",
    "Quarantined",
    "Failed",
    "Orphaned",
    "Degraded",
    "Ready",
    "Reconciling",
];

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
}
