//! Compiling and composing kro-style graphs: flows, references, cycles, when, forEach.

use converge_cel::{
    CompileError, CompileErrorKind, ComposeOutput, Error, Graph, LimitKind, Limits,
};
use serde_json::{Value, json};

fn vpc_subnet() -> Value {
    json!({"resources": [
        {"id": "vpc", "template": {"kind": "vpc", "kind_version": 1, "name": "${root.name}-vpc",
            "spec": {"cidr": "${spec.cidr}", "region": "${spec.region}"}},
         "when": "${spec.enabled}"},
        {"id": "subnet", "template": {"kind": "subnet", "name": "${root.name}-subnet",
            "spec": {"vpc_id": "${vpc.status.vpc_id}", "region": "${vpc.spec.region}"}}}
    ]})
}

fn compile(config: Value) -> Graph {
    Graph::compile(&config, Limits::default()).unwrap_or_else(|e| panic!("{e:#?}"))
}

fn compile_errors(config: Value) -> Vec<CompileError> {
    Graph::compile(&config, Limits::default()).expect_err("must not compile")
}

#[test]
fn vpc_and_subnet_compose_to_two_children_one_edge_and_a_flow() {
    let out = compile(vpc_subnet())
        .compose(
            "prod",
            &json!({"cidr": "10.0.0.0/16", "region": "eu", "enabled": true}),
        )
        .unwrap();
    let expected: ComposeOutput = serde_json::from_value(json!({
        "children": [
            {"kind": "vpc", "kind_version": 1, "name": "prod-vpc",
             "spec": {"cidr": "10.0.0.0/16", "region": "eu"}, "labels": {}},
            {"kind": "subnet", "kind_version": 1, "name": "prod-subnet",
             "spec": {"vpc_id": null, "region": "eu"}, "labels": {}},
        ],
        "edges": [{"from": {"kind": "subnet", "name": "prod-subnet"}, "to": {"kind": "vpc", "name": "prod-vpc"},
                   "values": [{"dependent_field": "/vpc_id", "source_field": "/vpc_id"}]}],
        "configs": [],
    }))
    .unwrap();
    assert_eq!(out, expected);
}

#[test]
fn when_false_skips_the_resource_and_its_dependents() {
    let out = compile(vpc_subnet())
        .compose(
            "prod",
            &json!({"cidr": "c", "region": "eu", "enabled": false}),
        )
        .unwrap();
    assert!(out.children.is_empty() && out.edges.is_empty(), "{out:?}");

    let g = compile(json!({"resources": [
        {"id": "a", "template": {"kind": "k", "name": "a"}, "when": ["${spec.x > 1}", "${spec.y}"]},
        {"id": "b", "template": {"kind": "k", "name": "b"}},
    ]}));
    let names = |spec: Value| -> Vec<String> {
        g.compose("r", &spec)
            .unwrap()
            .children
            .into_iter()
            .map(|c| c.name)
            .collect()
    };
    assert_eq!(names(json!({"x": 2, "y": true})), ["a", "b"]);
    assert_eq!(names(json!({"x": 2, "y": false})), ["b"]);
    assert_eq!(names(json!({"x": 1, "y": true})), ["b"]);

    let err = g.compose("r", &json!({"x": 2, "y": "yes"})).unwrap_err();
    assert!(
        matches!(&err, Error::Eval { resource, .. } if resource == "a"),
        "{err:?}"
    );
}

#[test]
fn sibling_spec_references_resolve_in_dependency_order() {
    // Declared dependent-first: compose still renders vpc before subnet.
    let g = compile(json!({"resources": [
        {"id": "subnet", "template": {"kind": "subnet", "name": "${vpc.name}-sub",
            "spec": {"region": "${vpc.spec.region}", "zones": "${vpc.spec.zones}"}}},
        {"id": "vpc", "template": {"kind": "vpc", "name": "${root.name}",
            "spec": {"region": "${spec.region}", "zones": ["a", "b"]}}},
    ]}));
    let out = g.compose("net", &json!({"region": "us"})).unwrap();
    assert_eq!(out.children[0].name, "net-sub");
    assert_eq!(
        out.children[0].spec,
        json!({"region": "us", "zones": ["a", "b"]})
    );
    assert!(out.edges.is_empty(), "spec references need no runtime edge");
}

#[test]
fn depends_on_adds_a_plain_edge() {
    let g = compile(json!({"resources": [
        {"id": "db", "template": {"kind": "db", "name": "db"}},
        {"id": "app", "dependsOn": ["db"], "template": {"kind": "app", "name": "app"}},
    ]}));
    let out = g.compose("r", &json!({})).unwrap();
    assert_eq!(out.edges.len(), 1);
    assert_eq!(out.edges[0].from.name, "app");
    assert_eq!(out.edges[0].to.name, "db");
    assert!(out.edges[0].values.is_empty());
}

#[test]
fn whole_expressions_keep_their_type_and_embedded_ones_interpolate() {
    let g = compile(
        json!({"resources": [{"id": "a", "template": {"kind": "k", "name": "n-${spec.n}",
        "labels": {"team": "${spec.team}"},
        "spec": {"n": "${spec.n}", "next": "${spec.n + 1}", "is3": "${spec.n == 3}", "f": "${spec.f}",
                 "list": "${spec.list}", "text": "n=${spec.n} f=${spec.f} ok=${spec.ok}",
                 "literal": "$${not.an.expr}", "nested": [{"x": "${spec.list[1]}"}]}}}]}),
    );
    let out = g
        .compose(
            "r",
            &json!({"n": 3, "f": 1.5, "list": [1, 2], "ok": true, "team": "net"}),
        )
        .unwrap();
    let c = &out.children[0];
    assert_eq!(c.name, "n-3");
    assert_eq!(c.labels["team"], "net");
    assert_eq!(
        c.spec,
        json!({"n": 3, "next": 4, "is3": true, "f": 1.5, "list": [1, 2],
               "text": "n=3 f=1.5 ok=true", "literal": "${not.an.expr}", "nested": [{"x": 2}]})
    );
    assert!(c.spec["n"].is_i64(), "{{\"n\": 3}} must arrive as an int");
}

#[test]
fn for_each_expands_one_child_per_item() {
    let g = compile(json!({"resources": [
        {"id": "vpc", "template": {"kind": "vpc", "name": "${root.name}"}},
        {"id": "subnet", "forEach": {"s": "${spec.subnets}"},
         "template": {"kind": "subnet", "name": "${root.name}-${s.name}",
                      "spec": {"cidr": "${s.cidr}", "vpc_id": "${vpc.status.id}"}}},
    ]}));
    let spec = json!({"subnets": [{"name": "a", "cidr": "10.0.1.0/24"}, {"name": "b", "cidr": "10.0.2.0/24"}]});
    let out = g.compose("net", &spec).unwrap();
    let names: Vec<_> = out.children.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["net", "net-a", "net-b"]);
    assert_eq!(
        out.children[2].spec,
        json!({"cidr": "10.0.2.0/24", "vpc_id": null})
    );
    assert_eq!(out.edges.len(), 2);
    assert!(
        out.edges
            .iter()
            .all(|e| e.to.name == "net" && e.values[0].source_field == "/id")
    );

    let empty = g.compose("net", &json!({"subnets": []})).unwrap();
    assert_eq!(empty.children.len(), 1);
}

#[test]
fn for_each_variables_multiply_and_respect_the_cap() {
    let config = json!({"resources": [{"id": "x", "forEach": {"a": "${spec.as}", "b": "${spec.bs}"},
        "template": {"kind": "k", "name": "${a}-${b}"}}]});
    let g = compile(config.clone());
    let out = g
        .compose("r", &json!({"as": [1, 2], "bs": ["x", "y", "z"]}))
        .unwrap();
    assert_eq!(out.children.len(), 6);

    let tight = Graph::compile(
        &config,
        Limits {
            max_for_each: 5,
            ..Limits::default()
        },
    )
    .unwrap();
    let err = tight
        .compose("r", &json!({"as": [1, 2], "bs": ["x", "y", "z"]}))
        .unwrap_err();
    assert_eq!(err, Error::Limit(LimitKind::ForEach));

    let err = g.compose("r", &json!({"as": 1, "bs": []})).unwrap_err();
    assert!(matches!(err, Error::Eval { .. }), "{err:?}");
}

#[test]
fn for_each_names_must_use_the_item() {
    let errs = compile_errors(
        json!({"resources": [{"id": "x", "forEach": {"item": "${spec.items}"},
        "template": {"kind": "k", "name": "${root.name}"}}]}),
    );
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].resource.as_deref(), Some("x"));
    assert_eq!(errs[0].path, "/resources/0/template/name");
}

#[test]
fn unknown_references_are_compile_errors_naming_resource_and_path() {
    let errs = compile_errors(json!({"resources": [
        {"id": "vpc", "template": {"kind": "vpc", "name": "v"}},
        {"id": "subnet", "template": {"kind": "subnet", "name": "s", "spec": {"vpc_id": "${vcp.status.vpc_id}"}}},
    ]}));
    assert_eq!(errs.len(), 1, "{errs:?}");
    let e = &errs[0];
    assert_eq!(e.kind, CompileErrorKind::UnknownReference);
    assert_eq!(e.resource.as_deref(), Some("subnet"));
    assert_eq!(e.path, "/resources/1/template/spec/vpc_id");
    assert!(e.message.contains("vcp"), "{}", e.message);

    for bad in [
        "${root.kind}",
        "${vpc.uid}",
        "${vpc}",
        "${status.x}",
        "${item}",
    ] {
        let errs = compile_errors(json!({"resources": [
            {"id": "vpc", "template": {"kind": "vpc", "name": "v"}},
            {"id": "s", "template": {"kind": "k", "name": "s", "spec": {"x": bad}}},
        ]}));
        assert_eq!(
            errs[0].kind,
            CompileErrorKind::UnknownReference,
            "{bad}: {errs:?}"
        );
    }
}

#[test]
fn all_errors_are_reported_at_once() {
    let errs = compile_errors(json!({"resources": [
        {"id": "a", "template": {"kind": "k", "name": "${nope}", "spec": {"x": "${spec.}"}}},
        {"id": "b", "template": {"kind": "k", "name": "b", "spec": {"y": "${also_nope}"}}},
    ]}));
    assert_eq!(errs.len(), 3, "{errs:#?}");
}

#[test]
fn parse_errors_carry_a_position() {
    let errs = compile_errors(
        json!({"resources": [{"id": "a", "template": {"kind": "k", "name": "a",
        "spec": {"x": "${spec.a +}"}}}]}),
    );
    assert_eq!(errs[0].kind, CompileErrorKind::Parse);
    assert_eq!(errs[0].path, "/resources/0/template/spec/x");
    assert!(errs[0].message.contains("1:"), "{}", errs[0].message);
}

#[test]
fn a_status_cycle_is_rejected() {
    let errs = compile_errors(json!({"resources": [
        {"id": "a", "template": {"kind": "k", "name": "a", "spec": {"x": "${b.status.x}"}}},
        {"id": "b", "template": {"kind": "k", "name": "b", "spec": {"y": "${a.status.y}"}}},
    ]}));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].kind, CompileErrorKind::Cycle);
    assert!(
        errs[0].message.contains("a -> b -> a"),
        "{}",
        errs[0].message
    );

    let errs = compile_errors(json!({"resources": [
        {"id": "a", "template": {"kind": "k", "name": "${c.name}"}},
        {"id": "b", "template": {"kind": "k", "name": "${a.name}"}},
        {"id": "c", "template": {"kind": "k", "name": "c", "spec": {"z": "${b.status.z}"}}},
    ]}));
    assert_eq!(errs[0].kind, CompileErrorKind::Cycle, "{errs:?}");

    let errs = compile_errors(json!({"resources": [
        {"id": "a", "template": {"kind": "k", "name": "a", "spec": {"x": "${a.status.x}"}}},
    ]}));
    assert_eq!(errs[0].kind, CompileErrorKind::Cycle, "{errs:?}");
}

#[test]
fn computing_with_a_sibling_status_is_a_compile_error() {
    let cases = [
        json!({"kind": "k", "name": "s", "spec": {"x": "${vpc.status.id + '-x'}"}}),
        json!({"kind": "k", "name": "s", "spec": {"x": "id-${vpc.status.id}"}}),
        json!({"kind": "k", "name": "s", "spec": {"x": "${has(vpc.status.id)}"}}),
        json!({"kind": "k", "name": "s", "spec": {"x": "${vpc.status}"}}),
        json!({"kind": "k", "name": "${vpc.status.id}"}),
        json!({"kind": "k", "name": "s", "labels": {"l": "${vpc.status.id}"}}),
    ];
    for template in cases {
        let errs = compile_errors(json!({"resources": [
            {"id": "vpc", "template": {"kind": "vpc", "name": "v"}},
            {"id": "s", "template": template},
        ]}));
        assert_eq!(errs[0].kind, CompileErrorKind::StatusComputed, "{errs:?}");
        assert!(
            errs[0].message.contains("value flow"),
            "{}",
            errs[0].message
        );
    }
    let errs = compile_errors(json!({"resources": [
        {"id": "vpc", "template": {"kind": "vpc", "name": "v"}},
        {"id": "s", "when": "${vpc.status.ready}", "template": {"kind": "k", "name": "s"}},
    ]}));
    assert_eq!(errs[0].kind, CompileErrorKind::StatusComputed, "{errs:?}");
    assert_eq!(errs[0].path, "/resources/1/when");
}

#[test]
fn reading_a_sibling_field_filled_by_a_flow_is_rejected() {
    let errs = compile_errors(json!({"resources": [
        {"id": "vpc", "template": {"kind": "vpc", "name": "v"}},
        {"id": "subnet", "template": {"kind": "subnet", "name": "s", "spec": {"vpc_id": "${vpc.status.id}"}}},
        {"id": "nic", "template": {"kind": "nic", "name": "n", "spec": {"vpc": "${subnet.spec.vpc_id}"}}},
    ]}));
    assert_eq!(errs[0].kind, CompileErrorKind::StatusComputed, "{errs:?}");
    assert_eq!(errs[0].resource.as_deref(), Some("nic"));
}

#[test]
fn shape_errors() {
    for config in [
        json!([]),
        json!({"resources": {}}),
        json!({"resources": [], "extra": 1}),
        json!({"resources": [{"template": {"kind": "k", "name": "n"}}]}),
        json!({"resources": [{"id": "spec", "template": {"kind": "k", "name": "n"}}]}),
        json!({"resources": [{"id": "a", "template": {"kind": "k"}}]}),
        json!({"resources": [{"id": "a", "template": {"kind": "k", "name": "n", "status": {}}}]}),
        json!({"resources": [{"id": "a", "template": {"kind": "k", "name": "n"}}, {"id": "a", "template": {"kind": "k", "name": "m"}}]}),
        json!({"resources": [{"id": "a", "when": "spec.x", "template": {"kind": "k", "name": "n"}}]}),
    ] {
        let errs = Graph::compile(&config, Limits::default()).expect_err(&config.to_string());
        assert!(
            errs.iter().all(|e| e.kind == CompileErrorKind::Shape),
            "{config}: {errs:?}"
        );
    }
}

#[test]
fn limits_apply() {
    let long = format!("${{spec.a{}}}", " + 1".repeat(2000));
    let errs = compile_errors(
        json!({"resources": [{"id": "a", "template": {"kind": "k", "name": "a", "spec": {"x": long}}}]}),
    );
    assert_eq!(errs[0].kind, CompileErrorKind::Limit);

    let config = json!({"resources": [{"id": "a", "forEach": {"i": "${spec.items}"},
        "template": {"kind": "k", "name": "a-${i}", "spec": {"v": "${i}"}}}]});
    let g = Graph::compile(
        &config,
        Limits {
            max_evaluations: 10,
            ..Limits::default()
        },
    )
    .unwrap();
    let err = g
        .compose("r", &json!({"items": [1, 2, 3, 4, 5, 6]}))
        .unwrap_err();
    assert_eq!(err, Error::Limit(LimitKind::Evaluations));

    let g = Graph::compile(
        &config,
        Limits {
            max_children: 3,
            ..Limits::default()
        },
    )
    .unwrap();
    let err = g.compose("r", &json!({"items": [1, 2, 3, 4]})).unwrap_err();
    assert_eq!(err, Error::Limit(LimitKind::Children));

    let g = compile(config);
    let err = g.compose("r", &json!({"items": [1, 1]})).unwrap_err();
    assert!(
        matches!(err, Error::InvalidOutput(_)),
        "duplicate names: {err:?}"
    );
    assert!(matches!(
        g.compose("r", &json!([])),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn missing_fields_fail_the_compose_instead_of_emptying_it() {
    let err = compile(vpc_subnet())
        .compose("prod", &json!({"enabled": true}))
        .unwrap_err();
    assert!(
        matches!(&err, Error::Eval { resource, path, .. }
        if resource == "vpc" && path == "/resources/0/template/spec/cidr"),
        "{err:?}"
    );
}

#[test]
fn composes_are_deterministic_and_graphs_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Graph>();
    let g = compile(vpc_subnet());
    let spec = json!({"cidr": "c", "region": "eu", "enabled": true});
    let first = serde_json::to_string(&g.compose("p", &spec).unwrap()).unwrap();
    for _ in 0..100 {
        assert_eq!(
            serde_json::to_string(&g.compose("p", &spec).unwrap()).unwrap(),
            first
        );
    }
}

/// Plain paths (`${spec.v}`) are resolved on the JSON without the interpreter; `dyn(...)`
/// forces the same read through CEL. Both must give the same values and the same errors.
#[test]
fn plain_paths_agree_with_the_interpreter() {
    let g = compile(json!({"resources": [
        {"id": "sib", "template": {"kind": "k", "name": "${root.name}-sib",
            "spec": {"v": "${spec.v}"}}},
        {"id": "fast", "template": {"kind": "k", "name": "${root.name}-fast",
            "spec": {"whole": "${spec.v}", "text": "<${spec.s}>", "sib": "${sib.spec.v}",
                     "first": "${spec.list[0]}"}}},
        {"id": "slow", "template": {"kind": "k", "name": "${root.name}-slow",
            "spec": {"whole": "${dyn(spec.v)}", "text": "<${dyn(spec.s)}>",
                     "sib": "${dyn(sib.spec.v)}", "first": "${dyn(spec.list)[0]}"}}},
        {"id": "each", "forEach": {"i": "${spec.list}"},
         "template": {"kind": "e", "name": "fast-${i.n}", "spec": {"i": "${i}", "x": "${i.x}"}}},
        {"id": "each2", "forEach": {"i": "${dyn(spec.list)}"},
         "template": {"kind": "e", "name": "slow-${i.n}", "spec": {"i": "${i}", "x": "${i.x}"}}},
    ]}));
    let values = [
        json!(3),
        json!(-0),
        json!(1e2),
        json!(2.5),
        json!(u64::MAX),
        json!("str"),
        json!(true),
        json!(null),
        json!({"a": [1, 2.0, {"b": -4}], "c": {}}),
        json!([]),
    ];
    let scalars = [
        json!("x"),
        json!(7),
        json!(u64::MAX),
        json!(1.5),
        json!(false),
    ];
    for (v, s) in values.iter().zip(scalars.iter().cycle()) {
        let spec = json!({"v": v, "s": s, "list": [
            {"n": 1, "x": v}, {"n": 2, "x": [v, s]}
        ]});
        let out = g.compose("r", &spec).unwrap();
        let by_name = |name: &str| {
            &out.children
                .iter()
                .find(|c| c.name == name)
                .unwrap_or_else(|| panic!("no child {name}"))
                .spec
        };
        assert_eq!(
            by_name("r-fast"),
            by_name("r-slow"),
            "value {v}, scalar {s}"
        );
        assert_eq!(by_name("fast-1"), by_name("slow-1"), "value {v}");
        assert_eq!(by_name("fast-2"), by_name("slow-2"), "value {v}");
    }

    // A missing key and a field step into a list fail the same way on both paths.
    let single = |expr: &str| {
        compile(
            json!({"resources": [{"id": "a", "template": {"kind": "k", "name": "n",
            "spec": {"v": format!("${{{expr}}}")}}}]}),
        )
        .compose("r", &json!({"v": [1], "m": {}}))
        .expect_err("must fail")
    };
    let message = |e: Error| match e {
        Error::Eval { message, .. } => message,
        other => panic!("not an eval error: {other:?}"),
    };
    assert_eq!(
        message(single("spec.m.nope")),
        message(single("dyn(spec.m).nope"))
    );
    assert_eq!(
        message(single("spec.v[3]")),
        message(single("dyn(spec.v)[3]"))
    );
}

#[test]
fn the_lists_extension_expands_a_nested_list_with_its_index() {
    // Every team of every domain, in order, with its index across the whole list: what the
    // standard library alone cannot express (no fold, no index), and examples/datadriven uses.
    let out = compile(json!({"resources": [
        {"id": "team",
         "forEach": {"i": "${lists.range(size(spec.domains.map(d, d.teams).flatten()))}"},
         "template": {"kind": "team",
            "name": "${spec.domains.map(d, d.teams.map(t, d.name + '-' + t)).flatten()[i]}",
            "spec": {"index": "${i}", "sorted": "${spec.domains.map(d, d.name).sort()}"}}}
    ]}))
    .compose(
        "bom",
        &json!({"domains": [{"name": "pay", "teams": ["a", "b"]}, {"name": "lend", "teams": ["c"]}]}),
    )
    .unwrap();
    let got: Vec<(String, Value)> = out
        .children
        .iter()
        .map(|c| (c.name.clone(), c.spec.clone()))
        .collect();
    let sorted = json!(["lend", "pay"]);
    assert_eq!(
        got,
        [
            ("pay-a".to_owned(), json!({"index": 0, "sorted": sorted})),
            ("pay-b".to_owned(), json!({"index": 1, "sorted": sorted})),
            ("lend-c".to_owned(), json!({"index": 2, "sorted": sorted})),
        ]
    );
    // `lists` names the extension's functions: no resource or forEach variable may take it.
    let errors = compile_errors(json!({"resources": [
        {"id": "lists", "template": {"kind": "k", "name": "x"}}
    ]}));
    assert!(
        errors.iter().any(|e| e.kind == CompileErrorKind::Shape),
        "{errors:#?}"
    );
}
