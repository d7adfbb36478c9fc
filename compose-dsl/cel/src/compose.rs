//! Renders a compiled graph for one root: `when`, `forEach`, templates, value flows.

use std::collections::BTreeMap;

use cel::{Context, Value};
use serde_json::Value as Json;

use crate::{
    ChildSpec, ComposeOutput, DepEdge, Error, Graph, LimitKind, ResourceRef, ValueFlow,
    graph::{Node, Piece},
    value::{cel_to_json, json_to_cel},
};

/// One rendered child and the value flows it needs: (sibling index, flow).
struct Rendered {
    child: ChildSpec,
    flows: Vec<(usize, ValueFlow)>,
}

/// Per-compose evaluation state.
struct Run<'g> {
    graph: &'g Graph,
    evaluations: usize,
    /// The resource being rendered, for error messages.
    resource: usize,
}

impl Graph {
    /// Renders the graph for the root named `root_name` with spec `spec`.
    ///
    /// Resources render in dependency order. A resource is skipped when one of its `when`
    /// predicates is false, or when a sibling it depends on was skipped. A `forEach`
    /// resource renders once per item (the cartesian product of its variables). A
    /// reference to a sibling's status renders as `null` plus an edge with a value flow.
    /// Every error is terminal and must never be treated as an empty compose.
    pub fn compose(&self, root_name: &str, spec: &Json) -> Result<ComposeOutput, Error> {
        if !spec.is_object() {
            return Err(Error::InvalidInput(
                "the root spec must be a JSON object".into(),
            ));
        }
        if serde_json::to_vec(spec).map_or(usize::MAX, |v| v.len()) > self.limits.max_input_bytes {
            return Err(Error::Limit(LimitKind::InputSize));
        }
        let spec_value = json_to_cel(spec);
        let root_value = json_to_cel(&serde_json::json!({ "name": root_name }));
        let n = self.resources.len();
        let mut skipped = vec![false; n];
        let mut values: Vec<Option<Value>> = vec![None; n];
        let mut rendered: Vec<Vec<Rendered>> = (0..n).map(|_| Vec::new()).collect();
        let mut total = 0usize;
        let mut run = Run {
            graph: self,
            evaluations: 0,
            resource: 0,
        };

        for &i in &self.order {
            let r = &self.resources[i];
            run.resource = i;
            if r.deps.iter().any(|&d| skipped[d]) {
                skipped[i] = true;
                continue;
            }
            let mut ctx = Context::with_env(self.env.clone());
            ctx.add_variable_from_value("spec", spec_value.clone());
            ctx.add_variable_from_value("root", root_value.clone());
            for &s in &r.reads {
                let v = values[s].clone().expect("read siblings render first");
                ctx.add_variable_from_value(self.resources[s].id.clone(), v);
            }
            let mut include = true;
            for &w in &r.when {
                match run.eval(w, &ctx)? {
                    Value::Bool(b) => include &= b,
                    other => {
                        return Err(
                            run.fail(w, format!("when must be a bool, got {:?}", other.type_of()))
                        );
                    }
                }
            }
            if !include {
                skipped[i] = true;
                continue;
            }
            let bindings = run.bindings(&r.for_each, &ctx)?;
            for binding in bindings {
                total += 1;
                if total > self.limits.max_children {
                    return Err(Error::Limit(LimitKind::Children));
                }
                let mut scope = ctx.new_inner_scope();
                for (var, v) in binding {
                    scope.add_variable_from_value(var.clone(), v);
                }
                let mut flows = Vec::new();
                let json = run.render(&r.template, &scope, &mut flows)?;
                let child = run.child(json)?;
                if r.for_each.is_empty() {
                    values[i] = Some(json_to_cel(
                        &serde_json::to_value(&child).expect("a child serializes"),
                    ));
                }
                rendered[i].push(Rendered { child, flows });
            }
        }
        self.assemble(rendered)
    }

    /// Children in declaration order, then one edge per (dependent, upstream) pair.
    fn assemble(&self, rendered: Vec<Vec<Rendered>>) -> Result<ComposeOutput, Error> {
        let refs: Vec<Option<ResourceRef>> = rendered
            .iter()
            .map(|v| match v.as_slice() {
                [one] => Some(ResourceRef {
                    kind: one.child.kind.clone(),
                    name: one.child.name.clone(),
                }),
                _ => None,
            })
            .collect();
        let mut out = ComposeOutput::default();
        for (i, group) in rendered.into_iter().enumerate() {
            for Rendered { child, flows } in group {
                let from = ResourceRef {
                    kind: child.kind.clone(),
                    name: child.name.clone(),
                };
                let mut by_upstream: BTreeMap<usize, Vec<ValueFlow>> = BTreeMap::new();
                for &d in &self.resources[i].depends_on {
                    by_upstream.entry(d).or_default();
                }
                for (s, flow) in flows {
                    by_upstream.entry(s).or_default().push(flow);
                }
                for (s, values) in by_upstream {
                    let to = refs[s].clone().expect("upstream rendered exactly once");
                    out.edges.push(DepEdge {
                        from: from.clone(),
                        to,
                        values,
                    });
                }
                out.children.push(child);
            }
        }
        out.validate()?;
        if serde_json::to_vec(&out).map_or(usize::MAX, |v| v.len()) > self.limits.max_output_bytes {
            return Err(Error::Limit(LimitKind::OutputSize));
        }
        Ok(out)
    }
}

impl Run<'_> {
    fn fail(&self, expr: usize, message: String) -> Error {
        Error::Eval {
            resource: self.graph.resources[self.resource].id.clone(),
            path: self.graph.exprs[expr].path.clone(),
            message,
        }
    }

    fn eval(&mut self, expr: usize, ctx: &Context<'_, '_>) -> Result<Value, Error> {
        self.evaluations += 1;
        if self.evaluations > self.graph.limits.max_evaluations {
            return Err(Error::Limit(LimitKind::Evaluations));
        }
        self.graph.exprs[expr]
            .program
            .execute(ctx)
            .map_err(|e| self.fail(expr, e.to_string()))
    }

    /// The `forEach` bindings: one empty binding without `forEach`, else the cartesian
    /// product of the variables' lists, capped.
    fn bindings(
        &mut self,
        for_each: &[(String, usize)],
        ctx: &Context<'_, '_>,
    ) -> Result<Vec<Vec<(String, Value)>>, Error> {
        let mut out: Vec<Vec<(String, Value)>> = vec![Vec::new()];
        for (var, expr) in for_each {
            let items = match self.eval(*expr, ctx)? {
                Value::List(items) => items,
                other => {
                    return Err(self.fail(
                        *expr,
                        format!("forEach {var} must be a list, got {:?}", other.type_of()),
                    ));
                }
            };
            if out.len().saturating_mul(items.len()) > self.graph.limits.max_for_each {
                return Err(Error::Limit(LimitKind::ForEach));
            }
            out = out
                .into_iter()
                .flat_map(|b| {
                    items.iter().map(move |item| {
                        let mut b = b.clone();
                        b.push((var.clone(), item.clone()));
                        b
                    })
                })
                .collect();
        }
        Ok(out)
    }

    fn render(
        &mut self,
        node: &Node,
        ctx: &Context<'_, '_>,
        flows: &mut Vec<(usize, ValueFlow)>,
    ) -> Result<Json, Error> {
        Ok(match node {
            Node::Literal(v) => v.clone(),
            Node::Whole(e) => {
                let v = self.eval(*e, ctx)?;
                cel_to_json(&v).map_err(|m| self.fail(*e, m))?
            }
            Node::Mixed(pieces) => {
                let mut s = String::new();
                for p in pieces {
                    match p {
                        Piece::Text(t) => s.push_str(t),
                        Piece::Expr(e) => {
                            let v = self.eval(*e, ctx)?;
                            s.push_str(&self.interpolate(*e, &v)?);
                        }
                    }
                }
                Json::String(s)
            }
            Node::Flow {
                sibling,
                dependent_field,
                source_field,
            } => {
                flows.push((
                    *sibling,
                    ValueFlow {
                        dependent_field: dependent_field.clone(),
                        source_field: source_field.clone(),
                    },
                ));
                Json::Null
            }
            Node::Array(items) => Json::Array(
                items
                    .iter()
                    .map(|n| self.render(n, ctx, flows))
                    .collect::<Result<_, _>>()?,
            ),
            Node::Object(fields) => {
                let mut m = serde_json::Map::new();
                for (k, n) in fields {
                    m.insert(k.clone(), self.render(n, ctx, flows)?);
                }
                Json::Object(m)
            }
        })
    }

    fn interpolate(&self, expr: usize, v: &Value) -> Result<String, Error> {
        Ok(match v {
            Value::String(s) => s.to_string(),
            Value::Int(i) => i.to_string(),
            Value::UInt(u) => u.to_string(),
            Value::Float(f) => f.to_string(),
            Value::Bool(b) => b.to_string(),
            other => {
                return Err(self.fail(expr, format!(
                    "cannot interpolate a {:?} into a string; make the whole value \"${{...}}\" instead",
                    other.type_of()
                )));
            }
        })
    }

    /// Reads the rendered template into a child, checking field types.
    fn child(&self, json: Json) -> Result<ChildSpec, Error> {
        let id = &self.graph.resources[self.resource].id;
        let bad = |field: &str, want: &str| Error::Eval {
            resource: id.clone(),
            path: format!("/resources/{}/template/{field}", self.resource),
            message: format!("{field} must render to {want}"),
        };
        let Json::Object(mut t) = json else {
            unreachable!("templates are objects")
        };
        let kind = match t.remove("kind") {
            Some(Json::String(s)) if !s.is_empty() => s,
            _ => return Err(bad("kind", "a non-empty string")),
        };
        let name = match t.remove("name") {
            Some(Json::String(s)) if !s.is_empty() => s,
            _ => return Err(bad("name", "a non-empty string")),
        };
        let kind_version = match t.remove("kind_version") {
            None => 1,
            Some(v) => v
                .as_i64()
                .and_then(|v| i32::try_from(v).ok())
                .filter(|v| *v >= 1)
                .ok_or_else(|| bad("kind_version", "an integer >= 1"))?,
        };
        let spec = match t.remove("spec") {
            None => Json::Object(serde_json::Map::new()),
            Some(v @ Json::Object(_)) => v,
            Some(_) => return Err(bad("spec", "an object")),
        };
        let labels = match t.remove("labels") {
            None => BTreeMap::new(),
            Some(Json::Object(m)) => m
                .into_iter()
                .map(|(k, v)| match v {
                    Json::String(s) => Ok((k, s)),
                    _ => Err(bad("labels", "an object of strings")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(bad("labels", "an object of strings")),
        };
        Ok(ChildSpec {
            kind,
            kind_version,
            name,
            spec,
            labels,
        })
    }
}
