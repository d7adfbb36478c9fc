//! The value flows a compiled graph declares, read statically (no compose): which sibling's
//! status pointer fills which spec pointer of which child kind. The control plane checks
//! them against the kinds' schemas when the graph is applied (issue 29: a flow that cannot
//! type-check is refused at apply, not discovered at run time).

use serde_json::Value as Json;

use crate::graph::{Graph, Node};

/// A child kind as its template names it, when the template names it literally
/// (`"kind": "vpc"`, `"kind_version": 2` or absent for 1). `None` when either is an
/// expression: the kind is only known at compose time.
pub type StaticKind = Option<(String, i32)>;

/// One value flow of the graph: `upstream`'s status at `source_field` fills `dependent`'s
/// spec at `dependent_field`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// The dependent resource's id.
    pub dependent: String,
    /// Its child kind, when static.
    pub dependent_kind: StaticKind,
    /// Pointer into the dependent's spec.
    pub dependent_field: String,
    /// The upstream resource's id.
    pub upstream: String,
    /// Its child kind, when static.
    pub upstream_kind: StaticKind,
    /// Pointer into the upstream's status.
    pub source_field: String,
    /// Where the flow is written: a JSON pointer into the graph config
    /// (`/resources/1/template/spec/vpc_id`).
    pub path: String,
}

impl Graph {
    /// Every value flow of the graph, in resource order, then in template order.
    pub fn flows(&self) -> Vec<Flow> {
        let mut out = Vec::new();
        for (i, r) in self.resources.iter().enumerate() {
            let mut found = Vec::new();
            collect(&r.template, &mut found);
            for (sibling, dependent_field, source_field) in found {
                let up = &self.resources[sibling];
                out.push(Flow {
                    dependent: r.id.clone(),
                    dependent_kind: static_kind(&r.template),
                    path: format!("/resources/{i}/template/spec{dependent_field}"),
                    dependent_field,
                    upstream: up.id.clone(),
                    upstream_kind: static_kind(&up.template),
                    source_field,
                });
            }
        }
        out
    }
}

fn collect(node: &Node, out: &mut Vec<(usize, String, String)>) {
    match node {
        Node::Flow {
            sibling,
            dependent_field,
            source_field,
        } => out.push((*sibling, dependent_field.clone(), source_field.clone())),
        Node::Array(items) => items.iter().for_each(|n| collect(n, out)),
        Node::Object(fields) => fields.iter().for_each(|(_, n)| collect(n, out)),
        Node::Literal(_) | Node::Whole(_) | Node::Mixed(_) => {}
    }
}

/// The template's kind and version when both are literal.
fn static_kind(template: &Node) -> StaticKind {
    let Node::Object(fields) = template else {
        return None;
    };
    let field = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, n)| n);
    let kind = match field("kind") {
        Some(Node::Literal(Json::String(k))) if !k.is_empty() => k.clone(),
        _ => return None,
    };
    let version = match field("kind_version") {
        None => 1,
        Some(Node::Literal(v)) => i32::try_from(v.as_i64()?).ok().filter(|v| *v >= 1)?,
        Some(_) => return None,
    };
    Some((kind, version))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::{Graph, Limits};

    #[test]
    fn a_status_reference_is_a_flow_with_both_kinds_and_its_config_pointer() {
        let g = Graph::compile(
            &json!({"resources": [
                {"id": "vpc", "template": {"kind": "vpc", "kind_version": 2, "name": "v",
                                           "spec": {"cidr": "${spec.cidr}"}}},
                {"id": "subnet", "template": {"kind": "subnet", "name": "s",
                    "spec": {"net": {"vpc_id": "${vpc.status.ids.vpc}"}, "n": "${vpc.spec.cidr}"}}},
                {"id": "computed", "template": {"kind": "${spec.k}", "name": "d",
                    "spec": {"x": "${vpc.status.x}"}}}
            ]}),
            Limits::default(),
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        let flows = g.flows();
        assert_eq!(flows.len(), 2, "{flows:?}");
        let f = &flows[0];
        assert_eq!(
            (f.dependent.as_str(), f.upstream.as_str()),
            ("subnet", "vpc")
        );
        assert_eq!(f.dependent_kind, Some(("subnet".into(), 1)));
        assert_eq!(f.upstream_kind, Some(("vpc".into(), 2)));
        assert_eq!(f.dependent_field, "/net/vpc_id");
        assert_eq!(f.source_field, "/ids/vpc");
        assert_eq!(f.path, "/resources/1/template/spec/net/vpc_id");
        assert_eq!(
            flows[1].dependent_kind, None,
            "a computed kind is not static"
        );
    }
}
