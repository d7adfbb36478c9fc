//! Kind manifests built from the handler's own types: [`schema_of`] is the JSON Schema
//! (2020-12) of a type deriving [`schemars::JsonSchema`], and [`Manifest`] builds the whole
//! manifest document that `PUT /api/v1/kinds/{kind}/manifest` (or `conctl apply -f`) takes, its
//! spec, status and config schemas generated from the types the handler decodes with
//! (`req.spec::<NoteSpec>()`). One source for both, so the schema converge checks every spec
//! against cannot drift from the type the worker reads. The fields are described in
//! `docs/manifest.md`.
//!
//! ```
//! use converge_sdk::KindVersion;
//! use converge_sdk::manifest::{Manifest, reaction};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[schemars(deny_unknown_fields)] // converge refuses a misspelt key; serde still ignores it
//! struct NoteSpec {
//!     #[schemars(length(max = 200))]
//!     text: String,
//!     #[serde(default)]
//!     copies: Option<u32>,
//! }
//!
//! #[derive(Serialize, JsonSchema)]
//! struct NoteStatus {
//!     path: String,
//! }
//!
//! let manifest = Manifest::new(KindVersion::new("note", 1))
//!     .description("A note written to a file.")
//!     .spec::<NoteSpec>()
//!     .status::<NoteStatus>()
//!     .reaction(reaction::work())
//!     .task_deadline_secs(30)
//!     .build()
//!     .expect("a legal manifest");
//! println!("{}", serde_json::to_string_pretty(&manifest).unwrap());
//! ```
//!
//! The derive needs `schemars` (1.x) in the program's own `Cargo.toml`.

use schemars::{JsonSchema, generate::SchemaSettings};
use serde_json::Value;

pub use converge_proto::manifest::{
    Descendants, EdgeDecl, EdgeEnd, EdgeValue, Emit, KindManifest, ReactionDecl, Trigger,
};

use crate::KindVersion;

/// The JSON Schema (draft 2020-12) of `T`, for a manifest's `spec_schema`, `status_schema`
/// or `config_schema`.
///
/// Fields follow serde's attributes (`rename`, `default`, `skip`, ...): an `Option` or a
/// `#[serde(default)]` field is optional. A struct leaves unknown keys open unless it says
/// `#[schemars(deny_unknown_fields)]` (schema only; serde's own `deny_unknown_fields` would
/// also make decoding strict, against the rule that a worker ignores keys it does not know).
/// Constraints come from `#[schemars(length(..), range(..), regex(pattern = ..))]`, secrets
/// from `#[schemars(extend("writeOnly" = true))]`; nested types land in `$defs`.
pub fn schema_of<T: JsonSchema>() -> Value {
    SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value()
}

/// The reactions most kinds declare, each with the `emits` it needs.
pub mod reaction {
    use super::{Descendants, Emit, ReactionDecl, Trigger};
    use serde_json::Value;

    fn decl(name: &str, trigger: Trigger, emits: &[Emit]) -> ReactionDecl {
        ReactionDecl {
            name: name.to_owned(),
            trigger,
            emits: emits.to_vec(),
            verb: None,
            finalizer: None,
            descendants: None,
            output_schema: None,
        }
    }

    /// The kind's worker (`work`): runs on every spec change, reports status and conditions.
    pub fn work() -> ReactionDecl {
        decl(
            "work",
            Trigger::SpecChange,
            &[Emit::Status, Emit::Conditions],
        )
    }

    /// A composite's composer (`compose`): children, edges, status and conditions.
    pub fn compose() -> ReactionDecl {
        decl(
            "compose",
            Trigger::SpecChange,
            &[Emit::Children, Emit::Edges, Emit::Status, Emit::Conditions],
        )
    }

    /// A composite's rollup (`rollup`), once its subtree has settled.
    pub fn rollup(descendants: Option<Descendants>) -> ReactionDecl {
        ReactionDecl {
            descendants,
            ..decl(
                "rollup",
                Trigger::ChildrenSettled,
                &[Emit::Status, Emit::Conditions],
            )
        }
    }

    /// The teardown (`teardown`) a deletion waits for (set [`super::Manifest::finalizer`]).
    pub fn teardown() -> ReactionDecl {
        decl("teardown", Trigger::DeleteRequested, &[Emit::Finalizer])
    }

    /// An operation (`POST .../ops {"verb": verb}`); `output` (e.g.
    /// [`schema_of::<Out>()`](super::schema_of)) checks every output.
    pub fn operation(verb: &str, output: Option<Value>) -> ReactionDecl {
        ReactionDecl {
            verb: Some(verb.to_owned()),
            output_schema: output,
            ..decl(verb, Trigger::Operation, &[Emit::OperationOutput])
        }
    }

    /// A reactor kind's one reaction (`react`).
    pub fn reactor() -> ReactionDecl {
        decl("react", Trigger::Reactor, &[Emit::SideEffect])
    }
}

/// Builds a [`KindManifest`] whose schemas come from types; [`Manifest::build`] checks it
/// against the same rules converge applies.
#[derive(Debug, Clone)]
pub struct Manifest(KindManifest);

impl Manifest {
    /// A manifest of `kind` served by an SDK worker (`"provider": "sdk"`), untyped, with no
    /// reactions yet.
    pub fn new(kind: KindVersion) -> Self {
        Self(KindManifest {
            kind: kind.kind,
            kind_version: kind.version,
            description: String::new(),
            spec_schema: None,
            status_schema: None,
            config_schema: None,
            provider: Some("sdk".to_owned()),
            reactions: Vec::new(),
            finalizer_name: None,
            max_inflight: 0,
            task_deadline_secs: 0,
            resync_interval_secs: 0,
            resync_recomposes: false,
            orphan_grace_secs: 0,
            max_transient_attempts: 0,
            edges: Vec::new(),
        })
    }

    /// What the kind is for, for people.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.0.description = text.into();
        self
    }

    /// The spec's schema, from `T`.
    pub fn spec<T: JsonSchema>(mut self) -> Self {
        self.0.spec_schema = Some(schema_of::<T>());
        self
    }

    /// The status's schema, from `T`.
    pub fn status<T: JsonSchema>(mut self) -> Self {
        self.0.status_schema = Some(schema_of::<T>());
        self
    }

    /// The provider config's schema, from `T`.
    pub fn config<T: JsonSchema>(mut self) -> Self {
        self.0.config_schema = Some(schema_of::<T>());
        self
    }

    /// Adds a reaction (see [`reaction`]).
    pub fn reaction(mut self, r: ReactionDecl) -> Self {
        self.0.reactions.push(r);
        self
    }

    /// Makes deletion two-phase, guarded by `name` (add [`reaction::teardown`]).
    pub fn finalizer(mut self, name: impl Into<String>) -> Self {
        self.0.finalizer_name = Some(name.into());
        self
    }

    /// Per-task deadline in seconds (0 = none).
    pub fn task_deadline_secs(mut self, secs: i32) -> Self {
        self.0.task_deadline_secs = secs;
        self
    }

    /// Any other field of the manifest (policy, edges, `provider`), set on the document.
    pub fn with(mut self, edit: impl FnOnce(&mut KindManifest)) -> Self {
        edit(&mut self.0);
        self
    }

    /// The manifest, checked against every rule converge applies besides its JSON Schemas
    /// compiling (the reaction lattice, finalizers, verbs, names); `Err` lists every problem,
    /// each as `"{pointer}: {message}"`.
    pub fn build(self) -> Result<KindManifest, Vec<String>> {
        self.0.validate()?;
        Ok(self.0)
    }
}
