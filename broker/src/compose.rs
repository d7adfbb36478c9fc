//! Validation of a composer's result before it touches the database: well-formed children,
//! edges between known children, no dependency cycle (named when found), well-formed configs.
//! The output is the JSON the `apply_compose_result` SQL function takes.

use std::collections::{BTreeMap, HashMap, HashSet};

use converge_proto::{
    manifest::{is_valid_kind_name, is_valid_resource_name},
    pb,
};
use serde::Serialize;
use serde_json::value::RawValue;

pub use converge_engine::db::compose::ComposePayload;

/// Most children one compose may emit.
pub const MAX_CHILDREN: usize = 200_000;

/// A spec's JSON, checked (an object, no NUL) but not parsed into a tree: it is copied into
/// the payload text as it came.
fn spec_json<'a>(what: &str, b: &'a [u8]) -> Result<&'a RawValue, String> {
    if b.is_empty() {
        return Ok(serde_json::from_str("{}").expect("valid JSON"));
    }
    let v: &RawValue =
        serde_json::from_slice(b).map_err(|e| format!("{what}: spec is not valid JSON: {e}"))?;
    if !v.get().trim_start().starts_with('{') {
        return Err(format!("{what}: spec must be a JSON object"));
    }
    if v.get().contains("\\u0000") {
        return Err(format!("{what}: spec contains a NUL character"));
    }
    Ok(v)
}

/// One child as `apply_compose_result` reads it.
#[derive(Serialize)]
struct ChildOut<'a> {
    kind: &'a str,
    kind_version: i32,
    name: &'a str,
    spec: &'a RawValue,
    labels: BTreeMap<&'a String, &'a String>,
}

/// One end of an edge.
#[derive(Serialize)]
struct RefOut<'a> {
    kind: &'a str,
    name: &'a str,
}

/// One value flow of an edge.
#[derive(Serialize)]
struct FlowOut<'a> {
    dependent_field: &'a str,
    source_field: &'a str,
}

/// One edge.
#[derive(Serialize)]
struct EdgeOut<'a> {
    from: RefOut<'a>,
    to: RefOut<'a>,
    values: Vec<FlowOut<'a>>,
}

/// One provider config.
#[derive(Serialize)]
struct ConfigOut<'a> {
    name: &'a str,
    kind: &'a str,
    kind_version: i32,
    is_default: bool,
    spec: &'a RawValue,
}

/// The JSON text of `items` (an array).
fn array_text<T: Serialize>(items: &[T]) -> Box<RawValue> {
    let text = serde_json::to_string(items).expect("borrowed strings and checked JSON serialise");
    RawValue::from_string(text).expect("serde_json wrote valid JSON")
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
        children.push(ChildOut {
            kind: &c.kind,
            kind_version: c.kind_version,
            name: &c.name,
            spec: spec_json(&what, &c.spec)?,
            labels: c.labels.iter().collect(),
        });
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
            values.push(FlowOut {
                dependent_field: &v.dependent_field,
                source_field: &v.source_field,
            });
        }
        graph
            .entry((&from.kind, &from.name))
            .or_default()
            .push((&to.kind, &to.name));
        edges.push(EdgeOut {
            from: RefOut {
                kind: &from.kind,
                name: &from.name,
            },
            to: RefOut {
                kind: &to.kind,
                name: &to.name,
            },
            values,
        });
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
        configs.push(ConfigOut {
            name: &c.name,
            kind: &c.kind,
            kind_version: c.kind_version,
            is_default: c.is_default,
            spec: spec_json(&what, &c.spec)?,
        });
    }
    Ok(ComposePayload {
        children: array_text(&children),
        edges: array_text(&edges),
        configs: array_text(&configs),
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
        let len = |t: &RawValue| {
            serde_json::from_str::<Vec<serde_json::Value>>(t.get())
                .unwrap()
                .len()
        };
        assert_eq!(len(&p.children), 3);
        assert_eq!(len(&p.edges), 3);
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

    #[test]
    fn writes_the_payload_as_json_with_specs_as_they_came() {
        let mut a = child("leaf", "a");
        a.spec = br#" {"big": 12345678901234567890, "s": "x\"y"}"#.to_vec();
        a.labels.insert("team".into(), "blue".into());
        let mut b = child("leaf", "b");
        b.spec = Vec::new();
        let mut e = edge("b", "a");
        e.values.push(pb::ValueFlow {
            dependent_field: "/in".into(),
            source_field: "/out".into(),
        });
        let r = pb::ComposeResult {
            desired: vec![a, b],
            edges: vec![e],
            configs: vec![pb::ProviderConfigSpec {
                name: "cfg".into(),
                kind: "leaf".into(),
                kind_version: 1,
                is_default: true,
                spec: br#"{"k": 1}"#.to_vec(),
            }],
            ..Default::default()
        };
        let p = validate(&r).unwrap();
        // A number past f64's precision survives: the spec is never parsed into a tree.
        assert!(
            p.children.get().contains("12345678901234567890"),
            "{}",
            p.children
        );
        let v = |t: &RawValue| serde_json::from_str::<serde_json::Value>(t.get()).unwrap();
        assert_eq!(
            v(&p.children),
            serde_json::json!([
                {"kind": "leaf", "kind_version": 1, "name": "a",
                 "spec": {"big": 12345678901234567890u64, "s": "x\"y"}, "labels": {"team": "blue"}},
                {"kind": "leaf", "kind_version": 1, "name": "b", "spec": {}, "labels": {}}
            ])
        );
        assert_eq!(
            v(&p.edges),
            serde_json::json!([{"from": {"kind": "leaf", "name": "b"}, "to": {"kind": "leaf", "name": "a"},
                                "values": [{"dependent_field": "/in", "source_field": "/out"}]}])
        );
        assert_eq!(
            v(&p.configs),
            serde_json::json!([{"name": "cfg", "kind": "leaf", "kind_version": 1, "is_default": true,
                                "spec": {"k": 1}}])
        );
        // Escaped NULs are still refused.
        let mut nul = child("leaf", "n");
        nul.spec = br#"{"s": "a\u0000b"}"#.to_vec();
        let err = validate(&pb::ComposeResult {
            desired: vec![nul],
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.contains("NUL"), "{err}");
    }
}
