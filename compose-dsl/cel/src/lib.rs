//! CEL composer: a kro-style resource graph, held in a provider config's spec, whose
//! `${...}` expressions compute a composite resource's children.
//!
//! # Config
//! ```json
//! {"resources": [
//!   {"id": "vpc",
//!    "when": "${spec.enabled}",
//!    "template": {"kind": "vpc", "kind_version": 1, "name": "${root.name}-vpc",
//!                 "labels": {"tier": "net"},
//!                 "spec": {"cidr": "${spec.cidr}", "region": "${spec.region}"}}},
//!   {"id": "subnet",
//!    "forEach": {"s": "${spec.subnets}"},
//!    "dependsOn": [],
//!    "template": {"kind": "subnet", "name": "${root.name}-${s.name}",
//!                 "spec": {"cidr": "${s.cidr}", "vpc_id": "${vpc.status.vpc_id}"}}}
//! ]}
//! ```
//! - Expressions see `spec` (the root's spec), `root.name`, sibling ids (`vpc.spec.x`,
//!   `vpc.name`, `vpc.kind`, `vpc.kind_version`, `vpc.labels`, `vpc.status.x`) and, in the
//!   template only, the resource's `forEach` variables.
//! - `"${expr}"` as a whole string keeps the value's type; `${}` inside longer text is
//!   interpolated as a string (scalars only); `$${` writes a literal `${`.
//! - `when`: one predicate or a list, all must be true, else the resource is skipped; a
//!   resource that depends on a skipped sibling is skipped too.
//! - `forEach`: variables bound to lists, expanded as their cartesian product (capped); the
//!   `name` must use every variable. A `forEach` resource cannot be referenced by siblings.
//! - A sibling's **spec** (and name, kind, labels) is resolved at compose time, in
//!   dependency order. A sibling's **status** is unknown at compose time: `${vpc.status.x}`
//!   must be the whole value of a spec field; it renders as `null` and yields an edge
//!   `{from: this child, to: vpc's child, values: [{dependent_field: "/vpc_id",
//!   source_field: "/x"}]}` (pointers relative to spec and status). Computing, testing,
//!   interpolating or deciding with a status value is a compile error.
//! - `dependsOn: ["id"]` adds an edge with no value flows.
//!
//! # Checking
//! [`Graph::compile`] parses every expression and checks every reference; unknown names,
//! bad uses of status, cycles (through spec reads, status flows or `dependsOn`) and shape
//! problems all come back together as [`CompileError`]s naming the resource and the JSON
//! pointer of the offending value.
//!
//! # Errors
//! Every compose [`Error`] is **terminal**, and an error must never be treated as an empty
//! compose: an empty *successful* compose prunes all children, an error prunes nothing.
//!
//! # Values
//! JSON reaches CEL through our own converter ([`json_to_cel`]), never `cel`'s serde path:
//! with `serde_json/arbitrary_precision` on (the `starlark` crate turns it on), the serde
//! path turns `{"n": 3}` into a map instead of `Int(3)`.

mod compile;
mod compose;
mod error;
mod flows;
mod graph;
mod limits;
mod path;
mod refs;
mod template;
mod value;

pub use converge_compose_output::{
    ChildSpec, ComposeOutput, DepEdge, ProviderConfigSpec, ResourceRef, ValueFlow,
};
pub use error::{CompileError, CompileErrorKind, Error, LimitKind};
pub use flows::{Flow, StaticKind};
pub use graph::Graph;
pub use limits::Limits;
pub use value::{cel_to_json, json_to_cel};

/// Compiles `config` (a CEL graph) with the default limits and composes it once for the root
/// named `root_name` with `spec`: what `conctl render` and the plan's compose child do with
/// a graph and no cache. The error lists every compile problem, or names the compose's.
pub fn render(
    config: &serde_json::Value,
    root_name: &str,
    spec: &serde_json::Value,
) -> Result<ComposeOutput, String> {
    let graph = Graph::compile(config, Limits::default()).map_err(|errors| {
        format!(
            "the CEL graph does not compile: {}",
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        )
    })?;
    graph
        .compose(root_name, spec)
        .map_err(|e| format!("the CEL graph's compose fails: {e}"))
}
