//! The dependency views against the real `converge`: one resource's upstreams and dependents
//! with their value mappings, a composite's graph (nodes with depth, edges inside the node
//! set, the limit cap with `truncated`), and 404s.
//!
//! Roots are applied over the API; composed children and their edges are inserted directly in
//! SQL, so every phase and edge shape can be staged without workers.

mod common;

use common::Converge;
use serde_json::{Value, json};
use uuid::Uuid;

/// GETs `path` under the API; returns (status, body).
async fn get(c: &Converge, path: &str) -> (u16, Value) {
    let r = c
        .client
        .get(format!("{}/api/v1{path}", c.http))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn root(c: &Converge, name: &str) -> Uuid {
    let (status, _, body) = c
        .apply(&json!({"kind": "hello", "kind_version": 1, "name": name, "spec": {}}))
        .await;
    assert_eq!(status, 201, "{body}");
    body["uid"].as_str().unwrap().parse().unwrap()
}

/// Inserts a composed child in `phase` (Ready, Degraded or Reconciling) straight into the
/// table.
async fn child(c: &Converge, kind: &str, name: &str, owner: Uuid, root: Uuid, phase: &str) -> Uuid {
    sqlx::query_scalar(
        "INSERT INTO resources (id, kind, name, owner_id, root_id, shard_id, synced_gen, health_ok)
         SELECT g, $1, $2, $3, $4, shard_of(g),
                CASE WHEN $5 IN ('Ready', 'Degraded') THEN 1 ELSE 0 END, $5 <> 'Degraded'
         FROM (SELECT gen_random_uuid() AS g) x
         RETURNING id",
    )
    .bind(kind)
    .bind(name)
    .bind(owner)
    .bind(root)
    .bind(phase)
    .fetch_one(&c.db.pool)
    .await
    .unwrap()
}

/// Inserts the edge "`dependent` depends on `dependency`" owned by `owner`, with `flows`
/// in the stored `[{dep_field, src_field}]` shape.
async fn edge(c: &Converge, dependent: Uuid, dependency: Uuid, owner: Uuid, flows: Value) {
    sqlx::query(
        "INSERT INTO resource_deps (dependent_id, dependency_id, owner_id, value_flows)
         VALUES ($1, $2, $3, $4)",
    )
    .bind(dependent)
    .bind(dependency)
    .bind(owner)
    .bind(flows)
    .execute(&c.db.pool)
    .await
    .unwrap();
}

/// Two hello roots and a composed tree under one of them (`a -> b` = a depends on b):
///
/// ```text
/// hello/app    net/vpc-1 Degraded
///              net/subnet-1 Ready        -> net/vpc-1 {/vpc_id <- /vpc_id}
///              vm/web-1 Reconciling      -> net/subnet-1 {/subnet_id <- /id, /cidr <- /cidr}
///                                        -> net/vpc-1 (ordering only)
///                disk/web-1-disk Ready
///                disk/web-1-boot Ready   -> disk/web-1-disk {/size <- /size_gb}
/// hello/other  net/other-net Ready
/// ```
async fn fixture() -> Converge {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(30)).await;
    let app = root(&c, "app").await;
    let other = root(&c, "other").await;
    let vpc = child(&c, "net", "vpc-1", app, app, "Degraded").await;
    let subnet = child(&c, "net", "subnet-1", app, app, "Ready").await;
    let vm = child(&c, "vm", "web-1", app, app, "Reconciling").await;
    let disk = child(&c, "disk", "web-1-disk", vm, app, "Ready").await;
    let boot = child(&c, "disk", "web-1-boot", vm, app, "Ready").await;
    child(&c, "net", "other-net", other, other, "Ready").await;
    edge(
        &c,
        subnet,
        vpc,
        app,
        json!([{"dep_field": "/vpc_id", "src_field": "/vpc_id"}]),
    )
    .await;
    edge(
        &c,
        vm,
        subnet,
        app,
        json!([{"dep_field": "/subnet_id", "src_field": "/id"},
               {"dep_field": "/cidr", "src_field": "/cidr"}]),
    )
    .await;
    edge(&c, vm, vpc, app, json!([])).await;
    edge(
        &c,
        boot,
        disk,
        vm,
        json!([{"dep_field": "/size", "src_field": "/size_gb"}]),
    )
    .await;
    c
}

fn mapping(dependent: &str, source: &str) -> Value {
    json!({"dependent_field": dependent, "source_field": source})
}

/// `[(ref, depth)]` of a graph's nodes, in response order.
fn nodes(body: &Value) -> Vec<(String, i64)> {
    body["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("no nodes in {body}"))
        .iter()
        .map(|n| {
            assert_eq!(
                n["ref"],
                format!(
                    "{}/{}",
                    n["kind"].as_str().unwrap(),
                    n["name"].as_str().unwrap()
                ),
                "{n}"
            );
            (
                n["ref"].as_str().unwrap().to_string(),
                n["depth"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// `[(from, to)]` of a graph's edges, in response order.
fn edges(body: &Value) -> Vec<(String, String)> {
    body["edges"]
        .as_array()
        .unwrap_or_else(|| panic!("no edges in {body}"))
        .iter()
        .map(|e| {
            (
                e["from"].as_str().unwrap().to_string(),
                e["to"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pairs(v: &[(&str, i64)]) -> Vec<(String, i64)> {
    v.iter().map(|(r, d)| (r.to_string(), *d)).collect()
}

fn arrows(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn dependencies_list_upstreams_and_dependents_with_value_mappings() {
    let c = fixture().await;

    let (s, body) = get(&c, "/resources/net/subnet-1/dependencies").await;
    assert_eq!(s, 200, "{body}");
    let deps = body["dependencies"].as_array().unwrap();
    assert_eq!(deps.len(), 1, "{body}");
    let vpc = &deps[0];
    assert_eq!(
        (vpc["kind"].as_str(), vpc["name"].as_str()),
        (Some("net"), Some("vpc-1"))
    );
    assert_eq!(vpc["upstream_phase"], "Degraded");
    assert_eq!(vpc["upstream_ready"], false);
    assert_eq!(vpc["upstream_health_ok"], false);
    assert!(
        chrono::DateTime::parse_from_rfc3339(vpc["upstream_updated_at"].as_str().unwrap()).is_ok(),
        "{vpc}"
    );
    assert_eq!(
        vpc["value_mappings"],
        json!([mapping("/vpc_id", "/vpc_id")])
    );
    assert_eq!(
        body["dependents"],
        json!([{"kind": "vm", "name": "web-1", "phase": "Reconciling",
                "value_mappings": [mapping("/subnet_id", "/id"), mapping("/cidr", "/cidr")]}])
    );

    // The upstream side: two dependents ordered by kind and name, one without flows.
    let (s, body) = get(&c, "/resources/net/vpc-1/dependencies").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["dependencies"], json!([]));
    assert_eq!(
        body["dependents"],
        json!([
            {"kind": "net", "name": "subnet-1", "phase": "Ready",
             "value_mappings": [mapping("/vpc_id", "/vpc_id")]},
            {"kind": "vm", "name": "web-1", "phase": "Reconciling", "value_mappings": []},
        ])
    );

    // Two upstreams, ordered by kind and name; a ready one reports ready and healthy.
    let (_, body) = get(&c, "/resources/vm/web-1/dependencies").await;
    let deps = body["dependencies"].as_array().unwrap();
    let refs: Vec<_> = deps
        .iter()
        .map(|d| {
            format!(
                "{}/{}",
                d["kind"].as_str().unwrap(),
                d["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(refs, ["net/subnet-1", "net/vpc-1"]);
    assert_eq!(deps[0]["upstream_phase"], "Ready");
    assert_eq!(deps[0]["upstream_ready"], true);
    assert_eq!(deps[0]["upstream_health_ok"], true);
    assert_eq!(deps[1]["value_mappings"], json!([]));
    assert_eq!(body["dependents"], json!([]));

    // A root without edges.
    let (s, body) = get(&c, "/resources/hello/app/dependencies").await;
    assert_eq!(s, 200);
    assert_eq!(body, json!({"dependencies": [], "dependents": []}));

    for path in [
        "/resources/net/nope/dependencies",
        "/resources/nokind/vpc-1/dependencies",
    ] {
        let (s, body) = get(&c, path).await;
        assert_eq!(s, 404, "{path}: {body}");
        assert!(
            body["detail"].as_str().unwrap().contains("not found"),
            "{body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn graph_returns_the_subtree_with_depths_and_the_edges_inside_it() {
    let c = fixture().await;

    let (s, body) = get(&c, "/resources/hello/app/graph").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["owner"], json!({"kind": "hello", "name": "app"}));
    assert_eq!(
        nodes(&body),
        pairs(&[
            ("hello/app", 0),
            ("disk/web-1-boot", 2),
            ("disk/web-1-disk", 2),
            ("net/subnet-1", 1),
            ("net/vpc-1", 1),
            ("vm/web-1", 1),
        ]),
        "the owner first, then its descendants by kind and name; other roots stay out"
    );
    let vm = &body["nodes"][5];
    assert_eq!(
        (vm["phase"].as_str(), vm["is_ready"].as_bool()),
        (Some("Reconciling"), Some(false))
    );
    assert_eq!(body["nodes"][3]["is_ready"], true);
    assert_eq!(
        edges(&body),
        arrows(&[
            ("disk/web-1-boot", "disk/web-1-disk"),
            ("net/subnet-1", "net/vpc-1"),
            ("vm/web-1", "net/subnet-1"),
            ("vm/web-1", "net/vpc-1"),
        ])
    );
    assert_eq!(
        body["edges"][2]["value_mappings"],
        json!([mapping("/subnet_id", "/id"), mapping("/cidr", "/cidr")])
    );
    assert_eq!(body["edges"][3]["value_mappings"], json!([]));
    assert_eq!(body["total_nodes"], 6);
    assert_eq!(body["truncated"], false);

    // A nested composite: its own subtree (found by owner, not root), depths relative to it,
    // and no edges leaving it (vm/web-1 -> net/* point outside the node set).
    let (s, body) = get(&c, "/resources/vm/web-1/graph").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["owner"], json!({"kind": "vm", "name": "web-1"}));
    assert_eq!(
        nodes(&body),
        pairs(&[
            ("vm/web-1", 0),
            ("disk/web-1-boot", 1),
            ("disk/web-1-disk", 1)
        ])
    );
    assert_eq!(
        edges(&body),
        arrows(&[("disk/web-1-boot", "disk/web-1-disk")])
    );
    assert_eq!(
        body["edges"][0]["value_mappings"],
        json!([mapping("/size", "/size_gb")])
    );
    assert_eq!(
        (body["total_nodes"].as_i64(), body["truncated"].as_bool()),
        (Some(3), Some(false))
    );

    // A leaf: just itself.
    let (_, body) = get(&c, "/resources/net/vpc-1/graph").await;
    assert_eq!(nodes(&body), pairs(&[("net/vpc-1", 0)]));
    assert_eq!(edges(&body), arrows(&[]));
    assert_eq!(
        (body["total_nodes"].as_i64(), body["truncated"].as_bool()),
        (Some(1), Some(false))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn graph_limit_caps_nodes_and_edges_and_says_so() {
    let c = fixture().await;

    // Three nodes: the owner and the first two descendants; only the edge inside them.
    let (s, body) = get(&c, "/resources/hello/app/graph?limit=3").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        nodes(&body),
        pairs(&[
            ("hello/app", 0),
            ("disk/web-1-boot", 2),
            ("disk/web-1-disk", 2)
        ])
    );
    assert_eq!(
        edges(&body),
        arrows(&[("disk/web-1-boot", "disk/web-1-disk")])
    );
    assert_eq!(
        (body["total_nodes"].as_i64(), body["truncated"].as_bool()),
        (Some(6), Some(true))
    );

    let (_, body) = get(&c, "/resources/hello/app/graph?limit=1").await;
    assert_eq!(nodes(&body), pairs(&[("hello/app", 0)]));
    assert_eq!(edges(&body), arrows(&[]));
    assert_eq!(
        (body["total_nodes"].as_i64(), body["truncated"].as_bool()),
        (Some(6), Some(true))
    );

    let (_, body) = get(&c, "/resources/hello/app/graph?limit=6").await;
    assert_eq!(nodes(&body).len(), 6);
    assert_eq!(
        body["truncated"], false,
        "a limit equal to the size cuts nothing"
    );

    // Edges are capped too: four children depending on every earlier one is six edges
    // among five nodes.
    let dense = root(&c, "dense").await;
    let mut kids = Vec::new();
    for i in 1..=4 {
        let k = child(&c, "part", &format!("p{i}"), dense, dense, "Ready").await;
        for &earlier in &kids {
            edge(&c, k, earlier, dense, json!([])).await;
        }
        kids.push(k);
    }
    let (_, body) = get(&c, "/resources/hello/dense/graph?limit=5").await;
    assert_eq!(nodes(&body).len(), 5);
    assert_eq!(
        edges(&body),
        arrows(&[
            ("part/p2", "part/p1"),
            ("part/p3", "part/p1"),
            ("part/p3", "part/p2"),
            ("part/p4", "part/p1"),
            ("part/p4", "part/p2"),
        ])
    );
    assert_eq!(
        (body["total_nodes"].as_i64(), body["truncated"].as_bool()),
        (Some(5), Some(true))
    );
    let (_, body) = get(&c, "/resources/hello/dense/graph?limit=1000").await;
    assert_eq!(edges(&body).len(), 6);
    assert_eq!(body["truncated"], false);

    for (path, want) in [
        ("/resources/hello/app/graph?limit=0", 422),
        ("/resources/hello/app/graph?limit=1001", 422),
        ("/resources/hello/app/graph?limit=many", 422),
        ("/resources/hello/nope/graph", 404),
        ("/resources/nokind/app/graph?limit=5", 404),
    ] {
        let (s, body) = get(&c, path).await;
        assert_eq!(s, want, "{path}: {body}");
        assert_eq!(body["status"], want, "problem+json: {body}");
    }
}
