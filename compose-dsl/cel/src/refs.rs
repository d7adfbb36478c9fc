//! Finds the names an expression reads: each reference is a root identifier followed by
//! the literal field and index steps that select from it (`vpc.status.ids[0]`).

use std::collections::BTreeSet;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators};

/// One step of a reference path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// `.field` or `["field"]`.
    Field(String),
    /// `[3]`.
    Index(i64),
}

/// One reference found in an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reference {
    /// The root identifier (`spec`, `root`, a sibling id, a `forEach` variable).
    pub root: String,
    /// The literal steps after it, as far as they go.
    pub steps: Vec<Step>,
    /// The reference is the entire expression (nothing is computed with it).
    pub whole: bool,
    /// The reference is tested for presence (`has(a.b)`) rather than read.
    pub test: bool,
}

/// Identifiers that name CEL types, not variables.
const TYPE_IDENTS: &[&str] = &[
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
];

/// Namespaces of the functions the environment adds (`lists.range`): a call on one is a
/// function, not a read of a variable of that name.
const FUNCTION_NAMESPACES: &[&str] = &["lists"];

/// All references in `expr` whose root is not a comprehension variable or a type name.
pub(crate) fn references(expr: &IdedExpr) -> Vec<Reference> {
    let mut out = Vec::new();
    walk(expr, &BTreeSet::new(), true, &mut out);
    out
}

fn walk(expr: &IdedExpr, locals: &BTreeSet<String>, is_root: bool, out: &mut Vec<Reference>) {
    if let Some((root, steps, test)) = chain(expr) {
        if !locals.contains(root) && !TYPE_IDENTS.contains(&root) {
            out.push(Reference {
                root: root.to_owned(),
                steps,
                whole: is_root,
                test,
            });
        }
        return;
    }
    match &expr.expr {
        Expr::Call(call) => {
            let namespaced = matches!(&call.target, Some(t) if matches!(&t.expr,
                Expr::Ident(ns) if FUNCTION_NAMESPACES.contains(&ns.as_str()) && !locals.contains(ns)));
            if let Some(t) = call.target.as_ref().filter(|_| !namespaced) {
                walk(t, locals, false, out);
            }
            for a in &call.args {
                walk(a, locals, false, out);
            }
        }
        Expr::Select(sel) => walk(&sel.operand, locals, false, out),
        Expr::Comprehension(c) => {
            walk(&c.iter_range, locals, false, out);
            walk(&c.accu_init, locals, false, out);
            let mut inner = locals.clone();
            inner.insert(c.iter_var.clone());
            if let Some(v) = &c.iter_var2 {
                inner.insert(v.clone());
            }
            inner.insert(c.accu_var.clone());
            for e in [&c.loop_cond, &c.loop_step, &c.result] {
                walk(e, &inner, false, out);
            }
        }
        Expr::List(list) => {
            for e in &list.elements {
                walk(e, locals, false, out);
            }
        }
        Expr::Map(map) => entries(&map.entries, locals, out),
        Expr::Struct(st) => entries(&st.entries, locals, out),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entries(
    entries: &[cel::common::ast::IdedEntryExpr],
    locals: &BTreeSet<String>,
    out: &mut Vec<Reference>,
) {
    for e in entries {
        match &e.expr {
            EntryExpr::StructField(f) => walk(&f.value, locals, false, out),
            EntryExpr::MapEntry(m) => {
                walk(&m.key, locals, false, out);
                walk(&m.value, locals, false, out);
            }
        }
    }
}

/// `a.b["c"][0]` as `("a", [b, c, 0], test)`; `None` when `expr` is not such a chain.
fn chain(expr: &IdedExpr) -> Option<(&str, Vec<Step>, bool)> {
    match &expr.expr {
        Expr::Ident(name) => Some((name, Vec::new(), false)),
        Expr::Select(sel) => {
            let (root, mut steps, inner_test) = chain(&sel.operand)?;
            if inner_test {
                return None;
            }
            steps.push(Step::Field(sel.field.clone()));
            Some((root, steps, sel.test))
        }
        Expr::Call(call) if call.func_name == operators::INDEX && call.target.is_none() => {
            let [base, index] = call.args.as_slice() else {
                return None;
            };
            let step = match &index.expr {
                Expr::Literal(LiteralValue::String(s)) => Step::Field(s.inner().to_owned()),
                Expr::Literal(LiteralValue::Int(i)) => Step::Index(*i.inner()),
                _ => return None,
            };
            let (root, mut steps, inner_test) = chain(base)?;
            if inner_test {
                return None;
            }
            steps.push(step);
            Some((root, steps, false))
        }
        _ => None,
    }
}

/// The JSON pointer spelled by `steps` (`/ids/0`), escaping `~` and `/`.
pub(crate) fn pointer(steps: &[Step]) -> String {
    let mut p = String::new();
    for s in steps {
        p.push('/');
        match s {
            Step::Field(f) => p.push_str(&escape(f)),
            Step::Index(i) => p.push_str(&i.to_string()),
        }
    }
    p
}

/// Escapes one JSON-pointer token.
pub(crate) fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(src: &str) -> Vec<Reference> {
        let p = crate::compile::env().compile(src).unwrap();
        references(p.expression())
    }

    #[test]
    fn finds_chains() {
        let r = refs("vpc.status.ids[0]");
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].root, "vpc");
        assert!(r[0].whole);
        assert_eq!(pointer(&r[0].steps[1..]), "/ids/0");

        let r = refs("spec.a + vpc.status['x/y']");
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|r| !r.whole));
        assert_eq!(pointer(&r[1].steps), "/status/x~1y");
    }

    #[test]
    fn comprehension_variables_are_local() {
        let r = refs("spec.items.map(i, i.name + root.name)");
        let roots: Vec<_> = r.iter().map(|r| r.root.as_str()).collect();
        assert_eq!(roots, ["spec", "root"]);
    }

    #[test]
    fn a_namespaced_function_is_not_a_reference() {
        let r = refs("lists.range(size(spec.teams)).map(i, spec.teams[i])");
        let roots: Vec<_> = r.iter().map(|r| r.root.as_str()).collect();
        assert_eq!(roots, ["spec", "spec"]);
    }

    #[test]
    fn has_is_a_test() {
        let r = refs("has(vpc.status.id)");
        assert_eq!(r.len(), 1);
        assert!(r[0].test);
    }
}
