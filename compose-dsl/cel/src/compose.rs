//! Renders a compiled graph for one root: `when`, `forEach`, templates, value flows.

use std::{cell::OnceCell, collections::BTreeMap, io, sync::Arc};

use cel::{Context, Env, Value};
use serde_json::Value as Json;

use crate::{
    ChildSpec, ComposeOutput, DepEdge, Error, Graph, LimitKind, ResourceRef, ValueFlow,
    graph::{Node, Piece},
    path::normalize,
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

/// A `forEach` variable's value: JSON when its list came from a plain path, else the CEL
/// value the list expression produced.
#[derive(Clone)]
enum Bound<'c> {
    Json(&'c Json),
    Cel(Value),
}

impl Bound<'_> {
    fn to_cel(&self) -> Value {
        match self {
            Bound::Json(j) => json_to_cel(j),
            Bound::Cel(v) => v.clone(),
        }
    }
}

/// The variables one expression sees, held as JSON for plain paths. The matching CEL
/// contexts (root spec and name; sibling reads; `forEach` bindings, innermost last) are
/// built on first need only, because converting the root spec into CEL's values costs
/// more than rendering most graphs.
struct Scope<'c, 'r, 'q> {
    env: &'c Arc<Env>,
    spec: &'c Json,
    root: &'c Json,
    reads: &'c [(&'c str, &'c Json)],
    binding: &'c [(&'c str, Bound<'c>)],
    base: &'r OnceCell<Context<'static, 'static>>,
    resource: &'q OnceCell<Context<'r, 'static>>,
    bound: Option<&'q OnceCell<Context<'q, 'static>>>,
}

impl<'c, 'r, 'q> Scope<'c, 'r, 'q> {
    /// The scope of one `forEach` binding inside this resource's scope.
    fn bind<'c2, 'q2>(
        &self,
        binding: &'c2 [(&'c2 str, Bound<'c2>)],
        bound: &'q2 OnceCell<Context<'q2, 'static>>,
    ) -> Scope<'c2, 'r, 'q2>
    where
        'c: 'c2,
        'q: 'q2,
    {
        Scope {
            env: self.env,
            spec: self.spec,
            root: self.root,
            reads: self.reads,
            binding,
            base: self.base,
            resource: self.resource,
            bound: Some(bound),
        }
    }

    /// The JSON a plain-path variable names, `None` for a variable only CEL holds.
    fn variable(&self, name: &str) -> Option<&'c Json> {
        if let Some((_, b)) = self.binding.iter().find(|(n, _)| *n == name) {
            return match b {
                Bound::Json(j) => Some(j),
                Bound::Cel(_) => None,
            };
        }
        if let Some((_, j)) = self.reads.iter().find(|(n, _)| *n == name) {
            return Some(j);
        }
        match name {
            "spec" => Some(self.spec),
            "root" => Some(self.root),
            _ => None,
        }
    }

    /// The CEL context for this site, building the missing levels.
    fn context(&self) -> &'q Context<'q, 'static> {
        let base = self.base.get_or_init(|| {
            let mut ctx = Context::with_env(self.env.clone());
            ctx.add_variable_from_value("spec", json_to_cel(self.spec));
            ctx.add_variable_from_value("root", json_to_cel(self.root));
            ctx
        });
        let resource = self.resource.get_or_init(|| {
            let mut ctx = base.new_inner_scope();
            for (name, value) in self.reads {
                ctx.add_variable_from_value(*name, json_to_cel(value));
            }
            ctx
        });
        let Some(bound) = self.bound else {
            return resource;
        };
        bound.get_or_init(|| {
            let mut ctx = resource.new_inner_scope();
            for (name, value) in self.binding {
                ctx.add_variable_from_value(*name, value.to_cel());
            }
            ctx
        })
    }
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
        if json_len(spec) > self.limits.max_input_bytes {
            return Err(Error::Limit(LimitKind::InputSize));
        }
        let root = serde_json::json!({ "name": root_name });
        let n = self.resources.len();
        let mut skipped = vec![false; n];
        // A rendered single resource, as siblings' expressions see it.
        let values: Vec<OnceCell<Json>> = (0..n).map(|_| OnceCell::new()).collect();
        let mut rendered: Vec<Vec<Rendered>> = (0..n).map(|_| Vec::new()).collect();
        let mut total = 0usize;
        let mut run = Run {
            graph: self,
            evaluations: 0,
            resource: 0,
        };
        let base = OnceCell::new();

        for &i in &self.order {
            let r = &self.resources[i];
            run.resource = i;
            if r.deps.iter().any(|&d| skipped[d]) {
                skipped[i] = true;
                continue;
            }
            let reads: Vec<(&str, &Json)> = r
                .reads
                .iter()
                .map(|&s| {
                    let v = values[s].get().expect("read siblings render first");
                    (self.resources[s].id.as_str(), v)
                })
                .collect();
            let resource_ctx = OnceCell::new();
            let scope = Scope {
                env: &self.env,
                spec,
                root: &root,
                reads: &reads,
                binding: &[],
                base: &base,
                resource: &resource_ctx,
                bound: None,
            };
            let mut include = true;
            for &w in &r.when {
                if let Some(Json::Bool(b)) = run.select(w, &scope)? {
                    include &= b;
                    continue;
                }
                match run.execute(w, &scope)? {
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
            let bindings = run.bindings(&r.for_each, &scope)?;
            for binding in bindings {
                total += 1;
                if total > self.limits.max_children {
                    return Err(Error::Limit(LimitKind::Children));
                }
                let bound_ctx = OnceCell::new();
                let scope = scope.bind(&binding, &bound_ctx);
                let mut flows = Vec::new();
                let child = run.child(&r.template, &scope, &mut flows)?;
                if r.for_each.is_empty() && self.read[i] {
                    let value = serde_json::to_value(&child).expect("a child serializes");
                    values[i].set(value).expect("a resource renders once");
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
        // Rendering cannot guarantee that names are non-empty and distinct (a `forEach`
        // whose names do not differ per item collides here); edges it builds by construction.
        out.validate_children()?;
        debug_assert!(
            out.edges
                .iter()
                .all(|e| e.values.iter().all(ValueFlow::fields_are_pointers))
        );
        if json_len(&out) > self.limits.max_output_bytes {
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

    /// Counts one evaluation against the limit.
    fn count(&mut self) -> Result<(), Error> {
        self.evaluations += 1;
        if self.evaluations > self.graph.limits.max_evaluations {
            return Err(Error::Limit(LimitKind::Evaluations));
        }
        Ok(())
    }

    /// Evaluates a plain-path expression on JSON. `Ok(None)` when `expr` is no plain path
    /// or CEL must decide; the caller then runs [`Run::execute`].
    fn select<'c>(
        &mut self,
        expr: usize,
        scope: &Scope<'c, '_, '_>,
    ) -> Result<Option<&'c Json>, Error> {
        let Some(path) = &self.graph.exprs[expr].select else {
            return Ok(None);
        };
        let found = scope.variable(&path.root).and_then(|v| path.select(v));
        if found.is_some() {
            self.count()?;
        }
        Ok(found)
    }

    /// Runs `expr`'s CEL program.
    fn execute(&mut self, expr: usize, scope: &Scope<'_, '_, '_>) -> Result<Value, Error> {
        self.count()?;
        self.graph.exprs[expr]
            .program
            .execute(scope.context())
            .map_err(|e| self.fail(expr, e.to_string()))
    }

    /// The `forEach` bindings: one empty binding without `forEach`, else the cartesian
    /// product of the variables' lists, capped.
    fn bindings<'c>(
        &mut self,
        for_each: &'c [(String, usize)],
        scope: &Scope<'c, '_, '_>,
    ) -> Result<Vec<Vec<(&'c str, Bound<'c>)>>, Error> {
        let mut out: Vec<Vec<(&'c str, Bound<'c>)>> = vec![Vec::new()];
        for (var, expr) in for_each {
            let items: Vec<Bound<'c>> = match self.select(*expr, scope)? {
                Some(Json::Array(items)) => items.iter().map(Bound::Json).collect(),
                _ => match self.execute(*expr, scope)? {
                    Value::List(items) => items.iter().cloned().map(Bound::Cel).collect(),
                    other => {
                        return Err(self.fail(
                            *expr,
                            format!("forEach {var} must be a list, got {:?}", other.type_of()),
                        ));
                    }
                },
            };
            if out.len().saturating_mul(items.len()) > self.graph.limits.max_for_each {
                return Err(Error::Limit(LimitKind::ForEach));
            }
            out = out
                .into_iter()
                .flat_map(|b| {
                    items.iter().map(move |item| {
                        let mut b: Vec<(&'c str, Bound<'c>)> =
                            b.iter().map(|(n, v)| (*n, v.clone())).collect();
                        b.push((var.as_str(), item.clone()));
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
        scope: &Scope<'_, '_, '_>,
        flows: &mut Vec<(usize, ValueFlow)>,
    ) -> Result<Json, Error> {
        Ok(match node {
            Node::Literal(v) => v.clone(),
            Node::Whole(e) => {
                if let Some(v) = self.select(*e, scope)?.and_then(normalize) {
                    return Ok(v);
                }
                let v = self.execute(*e, scope)?;
                cel_to_json(&v).map_err(|m| self.fail(*e, m))?
            }
            Node::Mixed(pieces) => {
                let mut s = String::new();
                for p in pieces {
                    match p {
                        Piece::Text(t) => s.push_str(t),
                        Piece::Expr(e) => match self.select(*e, scope)? {
                            Some(Json::String(v)) => s.push_str(v),
                            Some(v @ (Json::Number(_) | Json::Bool(_))) => {
                                s.push_str(&self.interpolate(*e, &json_to_cel(v))?);
                            }
                            _ => {
                                let v = self.execute(*e, scope)?;
                                s.push_str(&self.interpolate(*e, &v)?);
                            }
                        },
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
                    .map(|n| self.render(n, scope, flows))
                    .collect::<Result<_, _>>()?,
            ),
            Node::Object(fields) => {
                let mut m = serde_json::Map::new();
                for (k, n) in fields {
                    m.insert(k.clone(), self.render(n, scope, flows)?);
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

    /// Renders the template's top-level fields straight into a child, checking their types
    /// (the keys were checked at compile time).
    fn child(
        &mut self,
        template: &Node,
        scope: &Scope<'_, '_, '_>,
        flows: &mut Vec<(usize, ValueFlow)>,
    ) -> Result<ChildSpec, Error> {
        let Node::Object(fields) = template else {
            unreachable!("templates are objects")
        };
        let mut rendered = Vec::with_capacity(fields.len());
        for (k, n) in fields {
            rendered.push((k.as_str(), Some(self.render(n, scope, flows)?)));
        }
        let mut t = Fields(rendered);
        let id = &self.graph.resources[self.resource].id;
        let bad = |field: &str, want: &str| Error::Eval {
            resource: id.clone(),
            path: format!("/resources/{}/template/{field}", self.resource),
            message: format!("{field} must render to {want}"),
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

/// A template's rendered top-level fields, each taken once.
struct Fields<'t>(Vec<(&'t str, Option<Json>)>);

impl Fields<'_> {
    fn remove(&mut self, key: &str) -> Option<Json> {
        self.0
            .iter_mut()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.take())
    }
}

/// The length of `value` serialised as JSON, without building the bytes.
fn json_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}
