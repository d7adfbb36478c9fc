//! Validation of a composer's result before it touches the database: well-formed children,
//! edges between known children, no dependency cycle (named when found), well-formed configs.
//! The output is the JSON the `apply_compose_result` SQL function takes.

use std::collections::{BTreeMap, HashMap, HashSet};

use converge_proto::{
    manifest::{is_valid_kind_name, is_valid_resource_name},
    pb,
};
use serde_json::{Value, json};

pub use converge_engine::db::compose::ComposePayload;

/// Most children one compose may emit.
pub const MAX_CHILDREN: usize = 200_000;

fn spec_json(what: &str, b: &[u8]) -> Result<Value, String> {
    if b.is_empty() {
        return Ok(json!({}));
    }
    let v: Value =
        serde_json::from_slice(b).map_err(|e| format!("{what}: spec is not valid JSON: {e}"))?;
    if !v.is_object() {
        return Err(format!("{what}: spec must be a JSON object"));
    }
    if std::str::from_utf8(b).is_ok_and(|s| s.contains("\\u0000")) {
        return Err(format!("{what}: spec contains a NUL character"));
    }
    Ok(v)
}

fn pointer_ok(p: &str) -> bool {
    !p.is_empty() && p != "/"
}

/// Checks `r` and converts it; `Err` is a terminal failure message.
pub fn validate(r: &pb::ComposeResult) -> Result<ComposePayload, String> {
    if r.desired.len() > MAX_CHILDREN {
        return Err(format!(
            "{} children exceed the limit of {MAX_CHILDREN}",
            r.desired.len()
        ));
    }
    let mut children = Vec::with_capacity(r.desired.len());
    let mut names: HashSet<(&str, &str)> = HashSet::with_capacity(r.desired.len());
    for c in &r.desired {
        let what = format!("child {}/{}", c.kind, c.name);
        if !is_valid_kind_name(&c.kind) {
            return Err(format!("{what}: invalid kind name"));
        }
        if !is_valid_resource_name(&c.name) {
            return Err(format!("{what}: invalid resource name"));
        }
        if c.kind_version < 1 {
            return Err(format!("{what}: kind_version must be at least 1"));
        }
        if !names.insert((&c.kind, &c.name)) {
            return Err(format!("{what}: emitted twice"));
        }
        let labels: BTreeMap<&String, &String> = c.labels.iter().collect();
        children.push(json!({
            "kind": c.kind, "kind_version": c.kind_version, "name": c.name,
            "spec": spec_json(&what, &c.spec)?, "labels": labels,
        }));
    }
    let mut edges = Vec::with_capacity(r.edges.len());
    let mut graph: HashMap<(&str, &str), Vec<(&str, &str)>> = HashMap::new();
    for e in &r.edges {
        let (Some(from), Some(to)) = (&e.from, &e.to) else {
            return Err("an edge is missing its from or to".into());
        };
        let what = format!(
            "edge {}/{} -> {}/{}",
            from.kind, from.name, to.kind, to.name
        );
        for end in [from, to] {
            if !names.contains(&(end.kind.as_str(), end.name.as_str())) {
                return Err(format!(
                    "{what}: {}/{} is not a child of this compose",
                    end.kind, end.name
                ));
            }
        }
        if from.kind == to.kind && from.name == to.name {
            return Err(format!("{what}: a resource cannot depend on itself"));
        }
        let mut values = Vec::with_capacity(e.values.len());
        for v in &e.values {
            if !pointer_ok(&v.dependent_field) || !pointer_ok(&v.source_field) {
                return Err(format!(
                    "{what}: value flows need non-empty dependent_field and source_field"
                ));
            }
            values.push(
                json!({"dependent_field": v.dependent_field, "source_field": v.source_field}),
            );
        }
        graph
            .entry((&from.kind, &from.name))
            .or_default()
            .push((&to.kind, &to.name));
        edges.push(json!({
            "from": {"kind": from.kind, "name": from.name},
            "to": {"kind": to.kind, "name": to.name},
            "values": values,
        }));
    }
    if let Some(cycle) = find_cycle(&graph) {
        let path: Vec<String> = cycle.iter().map(|(k, n)| format!("{k}/{n}")).collect();
        return Err(format!("dependency cycle: {}", path.join(" -> ")));
    }
    let mut configs = Vec::with_capacity(r.configs.len());
    let mut config_names = HashSet::new();
    for c in &r.configs {
        let what = format!("provider config {:?}", c.name);
        if c.name.is_empty() || c.name.len() > 253 || !config_names.insert(&c.name) {
            return Err(format!("{what}: names must be 1-253 characters and unique"));
        }
        if !is_valid_kind_name(&c.kind) || c.kind_version < 1 {
            return Err(format!("{what}: needs a valid kind and kind_version >= 1"));
        }
        configs.push(json!({
            "name": c.name, "kind": c.kind, "kind_version": c.kind_version,
            "is_default": c.is_default, "spec": spec_json(&what, &c.spec)?,
        }));
    }
    Ok(ComposePayload {
        children: Value::Array(children),
        edges: Value::Array(edges),
        configs: Value::Array(configs),
    })
}

type Node<'a> = (&'a str, &'a str);

/// A cycle in the dependent -> dependency graph, as a closed path, if any (iterative DFS).
fn find_cycle<'a>(graph: &HashMap<Node<'a>, Vec<Node<'a>>>) -> Option<Vec<Node<'a>>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Active,
        Done,
    }
    let mut marks: HashMap<Node<'a>, Mark> = HashMap::new();
    let mut starts: Vec<&Node<'a>> = graph.keys().collect();
    starts.sort();
    for &start in starts {
        if marks.contains_key(&start) {
            continue;
        }
        let mut stack: Vec<(Node<'a>, usize)> = vec![(start, 0)];
        marks.insert(start, Mark::Active);
        while let Some((node, i)) = stack.pop() {
            let next = graph.get(&node).and_then(|v| v.get(i)).copied();
            match next {
                None => {
                    marks.insert(node, Mark::Done);
                }
                Some(n) => {
                    stack.push((node, i + 1));
                    match marks.get(&n) {
                        Some(Mark::Active) => {
                            let pos = stack.iter().position(|(x, _)| *x == n).unwrap_or(0);
                            let mut path: Vec<Node<'a>> =
                                stack[pos..].iter().map(|(x, _)| *x).collect();
                            path.push(n);
                            return Some(path);
                        }
                        Some(Mark::Done) => {}
                        None => {
                            marks.insert(n, Mark::Active);
                            stack.push((n, 0));
                        }
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(kind: &str, name: &str) -> pb::ChildSpec {
        pb::ChildSpec {
            kind: kind.into(),
            name: name.into(),
            kind_version: 1,
            spec: b"{}".to_vec(),
            ..Default::default()
        }
    }

    fn edge(from: &str, to: &str) -> pb::DepEdge {
        pb::DepEdge {
            from: Some(pb::ResourceRef {
                kind: "leaf".into(),
                name: from.into(),
            }),
            to: Some(pb::ResourceRef {
                kind: "leaf".into(),
                name: to.into(),
            }),
            values: vec![],
        }
    }

    #[test]
    fn accepts_a_dag() {
        let r = pb::ComposeResult {
            desired: vec![child("leaf", "a"), child("leaf", "b"), child("leaf", "c")],
            edges: vec![edge("b", "a"), edge("c", "b"), edge("c", "a")],
            ..Default::default()
        };
        let p = validate(&r).unwrap();
        assert_eq!(p.children.as_array().unwrap().len(), 3);
        assert_eq!(p.edges.as_array().unwrap().len(), 3);
    }

    #[test]
    fn names_the_cycle() {
        let r = pb::ComposeResult {
            desired: vec![child("leaf", "a"), child("leaf", "b"), child("leaf", "c")],
            edges: vec![edge("a", "b"), edge("b", "c"), edge("c", "a")],
            ..Default::default()
        };
        let e = validate(&r).unwrap_err();
        assert!(e.starts_with("dependency cycle: "), "{e}");
        for n in ["leaf/a", "leaf/b", "leaf/c"] {
            assert!(e.contains(n), "{e}");
        }
    }

    #[test]
    fn refuses_bad_children_and_edges() {
        let dup = pb::ComposeResult {
            desired: vec![child("leaf", "a"), child("leaf", "a")],
            ..Default::default()
        };
        assert!(validate(&dup).unwrap_err().contains("twice"));
        let mut v0 = child("leaf", "a");
        v0.kind_version = 0;
        assert!(
            validate(&pb::ComposeResult {
                desired: vec![v0],
                ..Default::default()
            })
            .is_err()
        );
        let dangling = pb::ComposeResult {
            desired: vec![child("leaf", "a")],
            edges: vec![edge("a", "zz")],
            ..Default::default()
        };
        assert!(validate(&dangling).unwrap_err().contains("not a child"));
        let mut bad = child("leaf", "a");
        bad.spec = b"[1]".to_vec();
        assert!(
            validate(&pb::ComposeResult {
                desired: vec![bad],
                ..Default::default()
            })
            .is_err()
        );
    }
}
