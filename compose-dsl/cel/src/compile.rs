//! Compiles a graph config: shape checks, every expression parsed and its references
//! resolved, status references turned into value flows, cycles rejected.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use cel::Env;
use serde_json::Value as Json;

use crate::{
    CompileError, CompileErrorKind as Kind, Limits,
    graph::{CompiledExpr, Graph, Node, Piece, Resource},
    path::PathExpr,
    refs::{self, Reference, Step},
    template::{self, Parsed},
};

/// Names that cannot be resource ids or `forEach` variables.
const RESERVED: &[&str] = &[
    "spec",
    "root",
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "optional",
    "has",
    // The lists extension's namespace (`lists.range`), see [`env`].
    "lists",
];

/// The CEL environment graphs compile in: the standard library and macros, plus the `lists`
/// extension (cel-go's `ext.Lists()`, which kro's graphs also have): `flatten`, `slice`,
/// `distinct`, `reverse`, `sort`, `sortBy` on lists and `lists.range(n)`. It is what a
/// `forEach` needs to expand a nested list (every team of every domain, with its index), which
/// the standard library alone cannot (no fold, no index).
pub(crate) fn env() -> Env {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::lists)
        .expect("the lists extension declares nothing the standard library does");
    env
}

/// Where an expression sits, which decides what it may reference.
#[derive(Clone, Copy)]
enum Site<'a> {
    /// In the template; `pointer` is relative to the template (`/spec/vpc_id`).
    Template {
        pointer: &'a str,
        for_each: &'a [String],
    },
    /// In `when` or `forEach`: evaluated before the resource renders.
    Guard,
}

/// What one expression contributes to its resource.
#[derive(Default)]
struct Uses {
    reads: BTreeSet<usize>,
    /// Sibling spec paths read (for the flow-overlap check): (sibling, pointer in spec).
    spec_reads: Vec<(usize, String)>,
    /// Roots referenced (to check that names use every `forEach` variable).
    roots: BTreeSet<String>,
}

struct Compiler<'c> {
    env: Arc<Env>,
    limits: &'c Limits,
    ids: BTreeMap<String, usize>,
    for_each_ids: BTreeSet<usize>,
    exprs: Vec<CompiledExpr>,
    errors: Vec<CompileError>,
    /// The resource being compiled: (index, id, config pointer).
    current: (usize, String, String),
}

impl Graph {
    /// Compiles a graph config (`{"resources": [...]}`, see the crate docs).
    ///
    /// Every expression is parsed and its references checked; all problems are returned,
    /// each naming its resource and JSON path.
    pub fn compile(config: &Json, limits: Limits) -> Result<Graph, Vec<CompileError>> {
        let shape = |path: &str, msg: String| CompileError {
            resource: None,
            path: path.to_owned(),
            kind: Kind::Shape,
            message: msg,
        };
        let Some(obj) = config.as_object() else {
            return Err(vec![shape("", "the graph config must be an object".into())]);
        };
        if let Some(k) = obj.keys().find(|k| *k != "resources") {
            return Err(vec![shape(
                &format!("/{}", refs::escape(k)),
                format!("unknown key {k:?}"),
            )]);
        }
        let Some(list) = obj.get("resources").and_then(Json::as_array) else {
            return Err(vec![shape(
                "/resources",
                "resources must be an array".into(),
            )]);
        };
        if list.len() > limits.max_resources {
            return Err(vec![CompileError {
                kind: Kind::Limit,
                ..shape(
                    "/resources",
                    format!("more than {} resources", limits.max_resources),
                )
            }]);
        }

        let mut c = Compiler {
            env: Arc::new(env()),
            limits: &limits,
            ids: BTreeMap::new(),
            for_each_ids: BTreeSet::new(),
            exprs: Vec::new(),
            errors: Vec::new(),
            current: (0, String::new(), String::new()),
        };
        c.collect_ids(list);
        if !c.errors.is_empty() {
            return Err(c.errors);
        }
        let mut resources = Vec::new();
        let mut spec_reads = Vec::new();
        for (i, def) in list.iter().enumerate() {
            let (r, reads) = c.resource(i, def);
            resources.push(r);
            spec_reads.push(reads);
        }
        c.check_flow_overlap(&resources, &spec_reads);
        if !c.errors.is_empty() {
            return Err(c.errors);
        }
        let order = order(&resources)?;
        let mut read = vec![false; resources.len()];
        for r in &resources {
            for &s in &r.reads {
                read[s] = true;
            }
        }
        Ok(Graph {
            env: c.env,
            exprs: c.exprs,
            resources,
            order,
            read,
            limits,
        })
    }
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Compiler<'_> {
    fn error(&mut self, path: String, kind: Kind, message: String) {
        self.errors.push(CompileError {
            resource: (!self.current.1.is_empty()).then(|| self.current.1.clone()),
            path,
            kind,
            message,
        });
    }

    /// First pass: ids are identifiers, unique and not reserved; note `forEach` resources.
    fn collect_ids(&mut self, list: &[Json]) {
        for (i, def) in list.iter().enumerate() {
            let path = format!("/resources/{i}/id");
            match def.get("id").and_then(Json::as_str) {
                Some(id) if !is_ident(id) || RESERVED.contains(&id) => self.error(
                    path,
                    Kind::Shape,
                    format!("id {id:?} must be an identifier and not a reserved name"),
                ),
                Some(id) => {
                    if self.ids.insert(id.to_owned(), i).is_some() {
                        self.error(path, Kind::Shape, format!("duplicate id {id:?}"));
                    }
                    if def.get("forEach").is_some() {
                        self.for_each_ids.insert(i);
                    }
                }
                None => self.error(path, Kind::Shape, "every resource needs a string id".into()),
            }
        }
    }

    fn resource(&mut self, index: usize, def: &Json) -> (Resource, Vec<(usize, String)>) {
        let id = def["id"].as_str().unwrap_or_default().to_owned();
        let base = format!("/resources/{index}");
        self.current = (index, id.clone(), base.clone());
        let mut r = Resource {
            id,
            template: Node::Literal(Json::Null),
            when: Vec::new(),
            for_each: Vec::new(),
            reads: BTreeSet::new(),
            depends_on: BTreeSet::new(),
            deps: BTreeSet::new(),
        };
        let mut uses = Uses::default();
        let Some(obj) = def.as_object() else {
            self.error(base, Kind::Shape, "a resource must be an object".into());
            return (r, Vec::new());
        };
        for k in obj.keys() {
            if !matches!(
                k.as_str(),
                "id" | "template" | "when" | "forEach" | "dependsOn"
            ) {
                self.error(
                    format!("{base}/{}", refs::escape(k)),
                    Kind::Shape,
                    format!("unknown key {k:?}"),
                );
            }
        }

        // forEach: {"var": "${list expr}"}, several variables give their cartesian product.
        if let Some(fe) = obj.get("forEach") {
            match fe.as_object() {
                Some(vars) if !vars.is_empty() => {
                    for (var, src) in vars {
                        let path = format!("{base}/forEach/{}", refs::escape(var));
                        if !is_ident(var)
                            || RESERVED.contains(&var.as_str())
                            || self.ids.contains_key(var)
                        {
                            self.error(path.clone(), Kind::Shape, format!("forEach variable {var:?} must be an identifier that is not reserved or a resource id"));
                        }
                        if let Some(e) = self.guard_expr(src, &path, &mut uses) {
                            r.for_each.push((var.clone(), e));
                        }
                    }
                }
                _ => self.error(
                    format!("{base}/forEach"),
                    Kind::Shape,
                    "forEach must be a non-empty object of variable -> \"${list}\"".into(),
                ),
            }
        }

        // when: one predicate or a list of them, all must hold.
        if let Some(w) = obj.get("when") {
            let preds: Vec<(String, &Json)> = match w {
                Json::Array(items) => items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (format!("{base}/when/{i}"), v))
                    .collect(),
                other => vec![(format!("{base}/when"), other)],
            };
            for (path, src) in preds {
                if let Some(e) = self.guard_expr(src, &path, &mut uses) {
                    r.when.push(e);
                }
            }
        }

        if let Some(deps) = obj.get("dependsOn") {
            let names = deps
                .as_array()
                .map(|a| a.iter().map(Json::as_str).collect::<Option<Vec<_>>>());
            match names.flatten() {
                Some(names) => {
                    for name in names {
                        match self.ids.get(name) {
                            Some(&s) if s != index && !self.for_each_ids.contains(&s) => {
                                r.depends_on.insert(s);
                            }
                            _ => self.error(format!("{base}/dependsOn"), Kind::UnknownReference, format!("dependsOn {name:?} is not another single (non-forEach) resource")),
                        }
                    }
                }
                None => self.error(
                    format!("{base}/dependsOn"),
                    Kind::Shape,
                    "dependsOn must be a list of resource ids".into(),
                ),
            }
        }

        let vars: Vec<String> = r.for_each.iter().map(|(v, _)| v.clone()).collect();
        match obj.get("template") {
            Some(Json::Object(t)) => {
                for k in t.keys() {
                    if !matches!(
                        k.as_str(),
                        "kind" | "kind_version" | "name" | "spec" | "labels"
                    ) {
                        self.error(
                            format!("{base}/template/{}", refs::escape(k)),
                            Kind::Shape,
                            format!("unknown template key {k:?}"),
                        );
                    }
                }
                for k in ["kind", "name"] {
                    if !t.contains_key(k) {
                        self.error(
                            format!("{base}/template"),
                            Kind::Shape,
                            format!("the template needs a {k}"),
                        );
                    }
                }
                let mut fields = Vec::new();
                for (k, v) in t {
                    let mut field_uses = Uses::default();
                    let node =
                        self.node(v, &format!("/{}", refs::escape(k)), &vars, &mut field_uses);
                    if k == "name" {
                        for var in &vars {
                            if !field_uses.roots.contains(var) {
                                self.error(format!("{base}/template/name"), Kind::Shape, format!("the name must use forEach variable {var:?}, or the expanded children collide"));
                            }
                        }
                    }
                    uses.reads.extend(field_uses.reads);
                    uses.spec_reads.extend(field_uses.spec_reads);
                    fields.push((k.clone(), node));
                }
                r.template = Node::Object(fields);
            }
            _ => self.error(
                format!("{base}/template"),
                Kind::Shape,
                "template must be an object".into(),
            ),
        }
        r.reads = uses.reads;
        r.deps = r.reads.iter().chain(&r.depends_on).copied().collect();
        collect_flow_deps(&r.template, &mut r.deps);
        (r, uses.spec_reads)
    }

    /// A `when` or `forEach` expression: a whole `${...}` string, no status references.
    fn guard_expr(&mut self, src: &Json, path: &str, uses: &mut Uses) -> Option<usize> {
        let expr = match src.as_str().map(template::parse) {
            Some(Ok(Parsed::Whole(e))) => e,
            _ => {
                self.error(
                    path.to_owned(),
                    Kind::Shape,
                    "expected a single \"${...}\" expression".into(),
                );
                return None;
            }
        };
        let (idx, refs) = self.compile_expr(&expr, path)?;
        for r in refs {
            self.check_ref(&r, path, Site::Guard, uses);
        }
        Some(idx)
    }

    /// Compiles one template value at `pointer` (relative to the template).
    fn node(&mut self, v: &Json, pointer: &str, vars: &[String], uses: &mut Uses) -> Node {
        let path = format!("{}/template{pointer}", self.current.2);
        match v {
            Json::String(s) => match template::parse(s) {
                Err(e) => {
                    self.error(path, Kind::Parse, e);
                    Node::Literal(Json::Null)
                }
                Ok(Parsed::Literal(t)) => Node::Literal(Json::String(t)),
                Ok(Parsed::Whole(src)) => {
                    let Some((idx, refs)) = self.compile_expr(&src, &path) else {
                        return Node::Literal(Json::Null);
                    };
                    let site = Site::Template {
                        pointer,
                        for_each: vars,
                    };
                    let mut flow = None;
                    for r in &refs {
                        if let Some(f) = self.check_ref(r, &path, site, uses) {
                            flow = Some(f);
                        }
                    }
                    match flow {
                        Some((sibling, source_field)) => Node::Flow {
                            sibling,
                            dependent_field: pointer["/spec".len()..].to_owned(),
                            source_field,
                        },
                        None => Node::Whole(idx),
                    }
                }
                Ok(Parsed::Mixed(pieces)) => {
                    let mut out = Vec::new();
                    for p in pieces {
                        match p {
                            template::Piece::Text(t) => out.push(Piece::Text(t)),
                            template::Piece::Expr(src) => {
                                if let Some((idx, refs)) = self.compile_expr(&src, &path) {
                                    for r in refs {
                                        let r = Reference { whole: false, ..r };
                                        self.check_ref(
                                            &r,
                                            &path,
                                            Site::Template {
                                                pointer,
                                                for_each: vars,
                                            },
                                            uses,
                                        );
                                    }
                                    out.push(Piece::Expr(idx));
                                }
                            }
                        }
                    }
                    Node::Mixed(out)
                }
            },
            Json::Array(items) => Node::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.node(item, &format!("{pointer}/{i}"), vars, uses))
                    .collect(),
            ),
            Json::Object(fields) => Node::Object(
                fields
                    .iter()
                    .map(|(k, item)| {
                        let p = format!("{pointer}/{}", refs::escape(k));
                        (k.clone(), self.node(item, &p, vars, uses))
                    })
                    .collect(),
            ),
            other => Node::Literal(other.clone()),
        }
    }

    /// Parses one expression and lists its references.
    fn compile_expr(&mut self, src: &str, path: &str) -> Option<(usize, Vec<Reference>)> {
        if src.len() > self.limits.max_expression_bytes {
            self.error(
                path.to_owned(),
                Kind::Limit,
                format!(
                    "expression longer than {} bytes",
                    self.limits.max_expression_bytes
                ),
            );
            return None;
        }
        match self.env.compile(src) {
            Ok(program) => {
                let found = refs::references(program.expression());
                let select = match found.as_slice() {
                    [r] if r.whole && !r.test => Some(PathExpr {
                        root: r.root.clone(),
                        steps: r.steps.clone(),
                    }),
                    _ => None,
                };
                self.exprs.push(CompiledExpr {
                    program,
                    path: path.to_owned(),
                    select,
                });
                Some((self.exprs.len() - 1, found))
            }
            Err(errs) => {
                let msg = errs
                    .errors
                    .iter()
                    .map(|e| format!("{}:{}: {}", e.pos.0, e.pos.1, e.msg))
                    .collect::<Vec<_>>()
                    .join("; ");
                self.error(
                    path.to_owned(),
                    Kind::Parse,
                    format!("cannot parse ${{{src}}}: {msg}"),
                );
                None
            }
        }
    }

    /// Checks one reference; returns `Some((sibling, source pointer))` for a value flow.
    fn check_ref(
        &mut self,
        r: &Reference,
        path: &str,
        site: Site<'_>,
        uses: &mut Uses,
    ) -> Option<(usize, String)> {
        uses.roots.insert(r.root.clone());
        let (me, _, _) = self.current.clone();
        match r.root.as_str() {
            "spec" => return None,
            "root" => {
                if !matches!(r.steps.first(), Some(Step::Field(f)) if f == "name") {
                    self.error(
                        path.to_owned(),
                        Kind::UnknownReference,
                        "root only has a name: use root.name".into(),
                    );
                }
                return None;
            }
            _ => {}
        }
        if let Site::Template { for_each, .. } = site
            && for_each.contains(&r.root)
        {
            return None;
        }
        let Some(&sibling) = self.ids.get(&r.root) else {
            let hint = if matches!(site, Site::Guard) {
                " (forEach variables are visible only in the template)"
            } else {
                ""
            };
            self.error(path.to_owned(), Kind::UnknownReference, format!("unknown reference {:?}: expressions may use spec, root.name, sibling ids and forEach variables{hint}", r.root));
            return None;
        };
        if sibling == me {
            self.error(
                path.to_owned(),
                Kind::Cycle,
                format!("{:?} references itself", r.root),
            );
            return None;
        }
        if self.for_each_ids.contains(&sibling) {
            self.error(
                path.to_owned(),
                Kind::UnknownReference,
                format!(
                    "{:?} expands with forEach, so it cannot be referenced as one resource",
                    r.root
                ),
            );
            return None;
        }
        let field = match r.steps.first() {
            Some(Step::Field(f)) => f.as_str(),
            _ => "",
        };
        match field {
            "status" => {
                let flow_site = match site {
                    Site::Template { pointer, .. } => pointer.starts_with("/spec/"),
                    Site::Guard => false,
                };
                if !flow_site || !r.whole || r.test || r.steps.len() < 2 {
                    self.error(path.to_owned(), Kind::StatusComputed, format!(
                        "{}.status can only be used as a whole spec field value like \"${{{}.status.field}}\": a sibling's status is unknown at compose time and arrives later by value flow, so nothing can be computed, tested, interpolated or decided with it",
                        r.root, r.root
                    ));
                    return None;
                }
                Some((sibling, refs::pointer(&r.steps[1..])))
            }
            "spec" | "name" | "kind" | "kind_version" | "labels" => {
                uses.reads.insert(sibling);
                if field == "spec" {
                    uses.spec_reads
                        .push((sibling, refs::pointer(&r.steps[1..])));
                }
                None
            }
            _ => {
                self.error(path.to_owned(), Kind::UnknownReference, format!("{:?} has no field {field:?}: use {0}.spec, {0}.status, {0}.name, {0}.kind, {0}.kind_version or {0}.labels", r.root));
                None
            }
        }
    }

    /// A sibling spec field that a value flow fills is `null` at compose time: reading it
    /// would silently see `null`, so it is rejected (read the sibling's status instead).
    fn check_flow_overlap(&mut self, resources: &[Resource], spec_reads: &[Vec<(usize, String)>]) {
        for (i, reads) in spec_reads.iter().enumerate() {
            for (sibling, read) in reads {
                let mut flows = Vec::new();
                collect_flow_fields(&resources[*sibling].template, &mut flows);
                if let Some(f) = flows.iter().find(|f| overlaps(read, f)) {
                    self.current = (i, resources[i].id.clone(), String::new());
                    self.error(format!("/resources/{i}/template"), Kind::StatusComputed, format!(
                        "reads {}.spec{read}, but {}.spec{f} is filled later by a value flow; reference the upstream status directly",
                        resources[*sibling].id, resources[*sibling].id
                    ));
                }
            }
        }
    }
}

fn overlaps(a: &str, b: &str) -> bool {
    let (a, b): (Vec<_>, Vec<_>) = (a.split('/').collect(), b.split('/').collect());
    a.iter().zip(&b).all(|(x, y)| x == y)
}

fn collect_flow_deps(node: &Node, deps: &mut BTreeSet<usize>) {
    match node {
        Node::Flow { sibling, .. } => {
            deps.insert(*sibling);
        }
        Node::Array(items) => items.iter().for_each(|n| collect_flow_deps(n, deps)),
        Node::Object(fields) => fields.iter().for_each(|(_, n)| collect_flow_deps(n, deps)),
        _ => {}
    }
}

fn collect_flow_fields(node: &Node, out: &mut Vec<String>) {
    match node {
        Node::Flow {
            dependent_field, ..
        } => out.push(dependent_field.clone()),
        Node::Array(items) => items.iter().for_each(|n| collect_flow_fields(n, out)),
        Node::Object(fields) => fields.iter().for_each(|(_, n)| collect_flow_fields(n, out)),
        _ => {}
    }
}

/// Orders resources so dependencies come first (declaration order among equals); a cycle
/// is a compile error naming the resources on it.
fn order(resources: &[Resource]) -> Result<Vec<usize>, Vec<CompileError>> {
    let n = resources.len();
    let mut indegree: Vec<usize> = resources.iter().map(|r| r.deps.len()).collect();
    let mut dependents = vec![Vec::new(); n];
    for (i, r) in resources.iter().enumerate() {
        for &d in &r.deps {
            dependents[d].push(i);
        }
    }
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &j in &dependents[i] {
            indegree[j] -= 1;
            if indegree[j] == 0 {
                ready.insert(j);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Walk dependencies from a stuck resource until one repeats: that loop is a cycle.
    let stuck: BTreeSet<usize> = (0..n).filter(|i| !order.contains(i)).collect();
    let start = *stuck.first().expect("a stuck resource exists");
    let mut path = vec![start];
    let mut cur = start;
    loop {
        cur = *resources[cur]
            .deps
            .iter()
            .find(|d| stuck.contains(d))
            .expect("stuck resources depend on stuck ones");
        if let Some(pos) = path.iter().position(|&p| p == cur) {
            let cycle: Vec<&str> = path[pos..]
                .iter()
                .chain([&cur])
                .map(|&i| resources[i].id.as_str())
                .collect();
            let first = path[pos];
            return Err(vec![CompileError {
                resource: Some(resources[first].id.clone()),
                path: format!("/resources/{first}"),
                kind: Kind::Cycle,
                message: format!("dependency cycle: {}", cycle.join(" -> ")),
            }]);
        }
        path.push(cur);
    }
}
