//! Checks on what crosses the sandbox boundary: the request's size before a call, and every
//! outcome after it (caps, JSON validity, unique children, edges between emitted children,
//! no cycles). An outcome that fails any check is never applied.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::Limits;
use crate::wit::{Label, Operation, Outcome, Request, ResourceRow};

/// The size of a request as the host counts it: the sum of its strings' lengths.
pub fn request_bytes(req: &Request) -> u64 {
    fn row(r: &ResourceRow) -> usize {
        r.id.len()
            + r.kind.len()
            + r.name.len()
            + opt(&r.owner_id)
            + opt(&r.root_id)
            + r.spec.len()
            + opt(&r.status)
            + r.phase.len()
            + labels(&r.labels)
            + r.finalizers.iter().map(String::len).sum::<usize>()
    }
    fn op(o: &Operation) -> usize {
        opt(&o.resource_id) + o.verb.len() + opt(&o.input) + o.requested_by.len()
    }
    let n = req.reaction.len()
        + req.trigger.len()
        + req.kind.len()
        + row(&req.target)
        + opt(&req.status)
        + opt(&req.config)
        + req.observed.iter().map(row).sum::<usize>()
        + req.descendants.iter().map(row).sum::<usize>()
        + req.operation.as_ref().map(op).unwrap_or(0)
        + req.dedup_token.len();
    n as u64
}

/// The size of an outcome as the host counts it: the sum of its strings' lengths.
pub fn outcome_bytes(o: &Outcome) -> u64 {
    let conditions: usize = o
        .conditions
        .iter()
        .map(|c| c.condition_type.len() + c.reason.len() + c.message.len())
        .sum();
    let children: usize = o
        .children
        .iter()
        .map(|c| c.kind.len() + c.name.len() + c.spec.len() + labels(&c.labels))
        .sum();
    let edges: usize = o
        .edges
        .iter()
        .map(|e| {
            e.dependent.kind.len()
                + e.dependent.name.len()
                + e.dependency.kind.len()
                + e.dependency.name.len()
                + e.values
                    .iter()
                    .map(|v| v.dependent_field.len() + v.source_field.len())
                    .sum::<usize>()
        })
        .sum();
    let configs: usize = o
        .configs
        .iter()
        .map(|c| c.name.len() + c.kind.len() + c.spec.len())
        .sum();
    (opt(&o.status) + conditions + children + edges + configs + opt(&o.operation_output)) as u64
}

fn opt(s: &Option<String>) -> usize {
    s.as_ref().map(String::len).unwrap_or(0)
}

fn labels(l: &[Label]) -> usize {
    l.iter().map(|l| l.key.len() + l.value.len()).sum()
}

fn check_json(what: &str, s: &str) -> Result<(), String> {
    serde_json::from_str::<serde::de::IgnoredAny>(s)
        .map(|_| ())
        .map_err(|e| format!("{what} is not valid JSON: {e}"))
}

fn check_pointer(what: &str, p: &str) -> Result<(), String> {
    if p.is_empty() || p.starts_with('/') {
        Ok(())
    } else {
        Err(format!("{what} {p:?} is not a JSON pointer"))
    }
}

/// Validates an outcome against `limits`; the error is the first problem found.
pub fn validate_outcome(o: &Outcome, limits: &Limits) -> Result<(), String> {
    let caps = [
        ("children", o.children.len(), limits.max_children),
        ("edges", o.edges.len(), limits.max_edges),
        ("conditions", o.conditions.len(), limits.max_conditions),
        ("configs", o.configs.len(), limits.max_configs),
    ];
    for (what, n, cap) in caps {
        if n > cap as usize {
            return Err(format!("{n} {what}, over the cap of {cap}"));
        }
    }
    let size = outcome_bytes(o);
    if size > limits.output_bytes {
        return Err(format!(
            "outcome is {size} bytes, over the cap of {} bytes",
            limits.output_bytes
        ));
    }
    if let Some(s) = &o.status {
        check_json("status", s)?;
    }
    if let Some(s) = &o.operation_output {
        check_json("operation output", s)?;
    }

    let mut types = HashSet::new();
    for c in &o.conditions {
        if c.condition_type.is_empty() {
            return Err("a condition has an empty type".into());
        }
        if !types.insert(c.condition_type.as_str()) {
            return Err(format!("duplicate condition type {:?}", c.condition_type));
        }
    }

    // Children: unique by (kind, name); index them for the edge checks.
    let mut index: HashMap<(&str, &str), usize> = HashMap::with_capacity(o.children.len());
    for (i, c) in o.children.iter().enumerate() {
        if c.kind.is_empty() || c.name.is_empty() {
            return Err(format!("child #{i} has an empty kind or name"));
        }
        if c.kind_version < 1 {
            return Err(format!(
                "child {}/{} has kind version {} (must be at least 1)",
                c.kind, c.name, c.kind_version
            ));
        }
        if index.insert((&c.kind, &c.name), i).is_some() {
            return Err(format!("duplicate child {}/{}", c.kind, c.name));
        }
        check_json(&format!("the spec of child {}/{}", c.kind, c.name), &c.spec)?;
    }

    let mut config_names = HashSet::new();
    for c in &o.configs {
        if c.name.is_empty() || c.kind.is_empty() {
            return Err("a provider config has an empty name or kind".into());
        }
        if c.kind_version < 1 {
            return Err(format!(
                "provider config {} has kind version {} (must be at least 1)",
                c.name, c.kind_version
            ));
        }
        if !config_names.insert(c.name.as_str()) {
            return Err(format!("duplicate provider config {:?}", c.name));
        }
        check_json(&format!("the spec of provider config {}", c.name), &c.spec)?;
    }

    // Edges: both ends are emitted children, no self-edges, and the graph is acyclic.
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); o.children.len()];
    let mut indegree = vec![0usize; o.children.len()];
    for e in &o.edges {
        let find =
            |r: &crate::wit::ResourceRef| index.get(&(r.kind.as_str(), r.name.as_str())).copied();
        let (Some(from), Some(to)) = (find(&e.dependent), find(&e.dependency)) else {
            return Err(format!(
                "edge {}/{} -> {}/{} refers to a child the outcome does not emit",
                e.dependent.kind, e.dependent.name, e.dependency.kind, e.dependency.name
            ));
        };
        if from == to {
            return Err(format!(
                "edge {}/{} depends on itself",
                e.dependent.kind, e.dependent.name
            ));
        }
        for v in &e.values {
            check_pointer("value flow dependent field", &v.dependent_field)?;
            check_pointer("value flow source field", &v.source_field)?;
        }
        // dependency -> dependent: the dependency must be settled first.
        out[to].push(from);
        indegree[from] += 1;
    }
    let mut ready: VecDeque<usize> = (0..indegree.len()).filter(|&i| indegree[i] == 0).collect();
    let mut visited = 0;
    while let Some(n) = ready.pop_front() {
        visited += 1;
        for &m in &out[n] {
            indegree[m] -= 1;
            if indegree[m] == 0 {
                ready.push_back(m);
            }
        }
    }
    if visited != o.children.len() {
        let on_cycle = indegree
            .iter()
            .position(|&d| d > 0)
            .map(|i| format!("{}/{}", o.children[i].kind, o.children[i].name))
            .unwrap_or_default();
        return Err(format!("the edges form a cycle (through {on_cycle})"));
    }
    Ok(())
}
