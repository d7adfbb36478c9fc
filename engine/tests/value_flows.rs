//! `converge_engine::value_flows` (the Rust twin `conctl render` uses) against the engine's
//! own `apply_value_flows` in PostgreSQL: the same spec, flows and status give the same spec,
//! or both fail, for every case below — the everyday ones and the edges (missing
//! intermediates, scalars on the way, array indices from the end and past it, escapes, a bare
//! field name, the empty pointer, a non-integer index into an array).

use converge_engine::{
    testing::TestDb,
    value_flows::{Flow, apply_value_flows},
};
use serde_json::{Value, json};

/// One case: a spec, its flows as (dep_field, src_field) pairs, the upstream's status.
type Case = (Value, Vec<(&'static str, &'static str)>, Value);

fn cases() -> Vec<Case> {
    let status = json!({
        "vpc": {"id": "vpc-1", "cidrs": ["10.0.0.0/16", "10.1.0.0/16"]},
        "n": 3, "a/b": "slash", "t~": "tilde", "": "empty-key", "nested": [{"x": 1}, {"x": 2}],
    });
    let spec = json!({
        "net": {"cidr": "10.0.0.0/16", "subnets": [{"id": null}, {"id": null}]},
        "count": 1, "tags": [], "scalar": 5,
    });
    vec![
        (
            spec.clone(),
            vec![("/net/vpc_id", "/vpc/id")],
            status.clone(),
        ),
        (spec.clone(), vec![("vpc_id", "vpc/id")], status.clone()),
        (
            spec.clone(),
            vec![("/count", "/n"), ("/count2", "/missing")],
            status.clone(),
        ),
        (
            spec.clone(),
            vec![("/missing/deep", "/vpc/id")],
            status.clone(),
        ),
        (
            spec.clone(),
            vec![("/scalar/deep", "/vpc/id")],
            status.clone(),
        ),
        (
            spec.clone(),
            vec![("/net/subnets/0/id", "/vpc/cidrs/1")],
            status.clone(),
        ),
        (
            spec.clone(),
            vec![("/net/subnets/-1/id", "/vpc/cidrs/-1")],
            status.clone(),
        ),
        (
            spec.clone(),
            vec![("/net/subnets/7", "/nested/0")],
            status.clone(),
        ),
        (
            spec.clone(),
            vec![("/net/subnets/-9", "/nested/1/x")],
            status.clone(),
        ),
        (
            spec.clone(),
            vec![("/net/subnets/5/id", "/n")],
            status.clone(),
        ),
        (spec.clone(), vec![("/tags/0", "/vpc")], status.clone()),
        (
            spec.clone(),
            vec![("/a~1b", "/a~1b"), ("/t~0", "/t~0")],
            status.clone(),
        ),
        (spec.clone(), vec![("", "/n")], status.clone()),
        (spec.clone(), vec![("/", "/n"), ("/k", "/")], status.clone()),
        (spec.clone(), vec![("/whole", "")], status.clone()),
        (spec.clone(), vec![("/x", "/vpc/cidrs/x")], status.clone()),
        (spec.clone(), vec![("/net/subnets/x", "/n")], status.clone()),
        (
            spec.clone(),
            vec![("/net/subnets/ 1 /id", "/n")],
            status.clone(),
        ),
        (
            spec.clone(),
            vec![("/net/subnets/+1/id", "/vpc/cidrs/+0")],
            status.clone(),
        ),
        (spec.clone(), vec![("/x", "/vpc/cidrs/ 0")], status.clone()),
        (spec.clone(), vec![("/x", "/vpc/cidrs/0 ")], status.clone()),
        (
            spec.clone(),
            vec![("/net/subnets/ 1/id", "/vpc/cidrs/ -1")],
            status.clone(),
        ),
        (spec.clone(), vec![("/x", "/n")], Value::Null),
        (json!(7), vec![("/x", "/n")], status.clone()),
        (
            json!([1, 2]),
            vec![("/0", "/n"), ("/5", "/vpc/id")],
            status.clone(),
        ),
        (
            spec,
            vec![
                ("/count", "/n"),
                ("/count", "/vpc/id"),
                ("/net/cidr", "/vpc/cidrs/0"),
            ],
            status,
        ),
    ]
}

#[tokio::test]
async fn the_rust_twin_agrees_with_apply_value_flows() {
    let db = TestDb::new().await;
    for (i, (spec, flows, status)) in cases().into_iter().enumerate() {
        let flows: Vec<Flow> = flows
            .into_iter()
            .map(|(d, s)| Flow {
                dep_field: d.into(),
                src_field: s.into(),
            })
            .collect();
        let sql_flows = Value::Array(
            flows
                .iter()
                .map(|f| json!({"dep_field": f.dep_field, "src_field": f.src_field}))
                .collect(),
        );
        let status_arg = (!status.is_null()).then_some(&status);
        let sql: Result<Value, _> = sqlx::query_scalar("SELECT apply_value_flows($1, $2, $3)")
            .bind(&spec)
            .bind(&sql_flows)
            .bind(status_arg)
            .fetch_one(&db.pool)
            .await;
        let rust = apply_value_flows(&spec, &flows, &status);
        match (sql, rust) {
            (Ok(s), Ok(r)) => assert_eq!(r, s, "case {i}: {flows:?}"),
            (Err(s), Err(r)) => {
                let s = s.to_string();
                assert!(
                    s.contains(&r.to_string()),
                    "case {i}: PostgreSQL said {s}, the twin {r}"
                );
            }
            (s, r) => panic!("case {i} ({flows:?}): PostgreSQL {s:?}, the twin {r:?}"),
        }
    }
}
