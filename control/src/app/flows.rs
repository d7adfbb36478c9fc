//! The value flows of a provider config, in the kind catalog's terms
//! ([`converge_kinds::flows::Flow`]): a CEL resource graph's, and a Starlark bundle's sample
//! compose's. Whether they type-check is the catalog's rule (`KindCatalog::check_flows`); this
//! module only reads them out of the composers' own shapes.

use std::collections::HashMap;

use converge_kinds::flows::Flow;

/// The value flows of a compiled CEL resource graph, located in the graph config.
pub fn cel_flows(graph: &converge_cel::Graph) -> Vec<Flow> {
    graph
        .flows()
        .into_iter()
        .map(|f| Flow {
            dependent: f.dependent,
            dependent_kind: f.dependent_kind,
            dependent_field: f.dependent_field,
            upstream: f.upstream,
            upstream_kind: f.upstream_kind,
            source_field: f.source_field,
            path: f.path,
        })
        .collect()
}

/// The value flows of a compose's result (its edges' `values`), each child's kind read from
/// the children; all located at `""` (they are computed, not written in a document).
pub fn compose_flows(out: &converge_cel::ComposeOutput) -> Vec<Flow> {
    let version: HashMap<(&str, &str), i32> = out
        .children
        .iter()
        .map(|c| ((c.kind.as_str(), c.name.as_str()), c.kind_version))
        .collect();
    let kind_of = |r: &converge_cel::ResourceRef| {
        version
            .get(&(r.kind.as_str(), r.name.as_str()))
            .map(|v| (r.kind.clone(), *v))
    };
    out.edges
        .iter()
        .flat_map(|e| {
            e.values.iter().map(|v| Flow {
                dependent: e.from.name.clone(),
                dependent_kind: kind_of(&e.from),
                dependent_field: v.dependent_field.clone(),
                upstream: e.to.name.clone(),
                upstream_kind: kind_of(&e.to),
                source_field: v.source_field.clone(),
                path: String::new(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn compose_results_give_their_flows() {
        let out: converge_cel::ComposeOutput = serde_json::from_value(json!({
            "children": [{"kind": "vpc", "name": "v"}, {"kind": "subnet", "name": "s", "kind_version": 2}],
            "edges": [{"from": {"kind": "subnet", "name": "s"}, "to": {"kind": "vpc", "name": "v"},
                       "values": [{"dependent_field": "/vpc_id", "source_field": "/id"}]}]
        }))
        .unwrap();
        let f = &compose_flows(&out)[0];
        assert_eq!(f.dependent_kind, Some(("subnet".into(), 2)));
        assert_eq!(f.upstream_kind, Some(("vpc".into(), 1)));
        assert_eq!(
            (f.source_field.as_str(), f.dependent_field.as_str()),
            ("/id", "/vpc_id")
        );
    }
}
