//! The compiled form of a graph: programs, template trees and the evaluation order.

use std::{collections::BTreeSet, fmt, sync::Arc};

use cel::{Env, Program};
use serde_json::Value as Json;

use crate::{Limits, path::PathExpr};

/// A compiled resource graph, ready to compose any number of times (`Send + Sync`).
///
/// Built by [`Graph::compile`](crate::Graph::compile); see the crate docs for the config
/// shape.
pub struct Graph {
    pub(crate) env: Arc<Env>,
    pub(crate) exprs: Vec<CompiledExpr>,
    pub(crate) resources: Vec<Resource>,
    /// Resource indexes, each after every resource it depends on.
    pub(crate) order: Vec<usize>,
    /// Per resource: whether a sibling's expressions read its rendered value.
    pub(crate) read: Vec<bool>,
    pub(crate) limits: Limits,
}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field(
                "resources",
                &self.resources.iter().map(|r| &r.id).collect::<Vec<_>>(),
            )
            .field("order", &self.order)
            .field("expressions", &self.exprs.len())
            .finish()
    }
}

/// One compiled `${...}` expression and where it was written.
#[derive(Debug)]
pub(crate) struct CompiledExpr {
    pub program: Program,
    /// JSON pointer into the graph config, for error messages.
    pub path: String,
    /// Set when the expression is a plain path, which compose resolves without CEL.
    pub select: Option<PathExpr>,
}

/// A template value with its expressions compiled.
#[derive(Debug)]
pub(crate) enum Node {
    /// A value with no expressions.
    Literal(Json),
    /// `"${expr}"`: the expression's value, type kept.
    Whole(usize),
    /// Text and expressions interpolated into a string.
    Mixed(Vec<Piece>),
    /// `"${sib.status.path}"` in the spec: rendered as `null`, filled later by a value flow.
    Flow {
        sibling: usize,
        /// Pointer into the dependent's spec.
        dependent_field: String,
        /// Pointer into the sibling's status.
        source_field: String,
    },
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

/// A piece of an interpolated string.
#[derive(Debug)]
pub(crate) enum Piece {
    Text(String),
    Expr(usize),
}

/// One compiled resource.
#[derive(Debug)]
pub(crate) struct Resource {
    pub id: String,
    pub template: Node,
    /// Predicates that must all be true for the resource to exist.
    pub when: Vec<usize>,
    /// `forEach` variables and the expression giving each one's list.
    pub for_each: Vec<(String, usize)>,
    /// Siblings whose rendered value (kind, name, spec, labels) expressions read.
    pub reads: BTreeSet<usize>,
    /// Siblings named in `dependsOn` (an edge with no value flows).
    pub depends_on: BTreeSet<usize>,
    /// Every sibling this resource depends on, for ordering and skip propagation.
    pub deps: BTreeSet<usize>,
}
