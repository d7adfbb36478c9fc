//! One kind catalog per process, kept fresh across pods (issue 42): two real `converge`
//! processes on one database. A stricter manifest applied on A is enforced by B's API within
//! one second (B's catalog follows the manifest channel: one NOTIFY round trip, not its
//! failsafe re-read), and both serve the new manifest's schemas as components of
//! `/openapi.json`. A manifest that would break a value flow another kind declares is refused
//! at apply, naming the flow.

mod common;

use std::time::Duration;

use common::{Converge, wait_for};
use converge_testkit::{Api, Method};
use serde_json::{Value, json};

/// The bound issue 42 sets: one notify round trip, far under the failsafe re-read.
const ONE_NOTIFY: Duration = Duration::from_secs(1);

/// Kind `pkind` v1 with `spec_schema`.
fn pkind(spec_schema: Value) -> Value {
    json!({"kind": "pkind", "kind_version": 1, "spec_schema": spec_schema,
           "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]})
}

/// POSTs `pkind/name` with `spec` on `api`; (status, body).
async fn apply(api: &Api, name: &str, spec: Value) -> (u16, Value) {
    let body = json!({"kind": "pkind", "kind_version": 1, "name": name, "spec": spec});
    api.call(Method::POST, "resources", Some(&body)).await
}

/// PUTs `manifest` on `api` (with `query`); (status, body).
async fn put_manifest(api: &Api, manifest: &Value, query: &str) -> (u16, Value) {
    let kind = manifest["kind"].as_str().unwrap();
    api.call(
        Method::PUT,
        &format!("kinds/{kind}/manifest{query}"),
        Some(manifest),
    )
    .await
}

/// The `/openapi.json` `api` serves.
async fn openapi(api: &Api) -> Value {
    reqwest::get(format!("{}/openapi.json", api.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stricter_manifest_applied_on_one_pod_holds_on_the_other_within_a_second() {
    let a = Converge::start(&[]).await;
    let peer = a.spawn_peer(&[]).await;
    let b = Api::new(&peer.http);

    // pkind v1 takes any object; B knows it (it accepts a spec only v1's loose schema allows).
    let loose = pkind(json!({"type": "object"}));
    let (s, body) = put_manifest(&a, &loose, "").await;
    assert!((200..300).contains(&s), "{s} {body}");
    wait_for(Duration::from_secs(30), "B accepts pkind v1", || async {
        let (s, _) = apply(&b, "p-loose", json!({"size": "big"})).await;
        (200..300).contains(&s).then_some(())
    })
    .await;

    // A stricter v1 on A: size an integer (forced: a resource of v1 exists).
    let strict = pkind(json!({"type": "object", "properties": {
        "size": {"type": "integer", "minimum": 1}}}));
    let (s, body) = put_manifest(&a, &strict, "?force=true").await;
    assert!((200..300).contains(&s), "{s} {body}");
    // A enforces its own apply at once.
    let (s, body) = apply(&a, "p-a", json!({"size": "big"})).await;
    assert_eq!(s, 422, "A: {body}");
    // B within one notify round trip.
    let refusal = wait_for(
        ONE_NOTIFY,
        "B refuses what the stricter v1 refuses",
        || async {
            let (s, body) = apply(&b, "p-b", json!({"size": "big"})).await;
            (s == 422).then_some(body)
        },
    )
    .await;
    let text = refusal.to_string();
    assert!(text.contains("/size"), "{text}");
    let (s, body) = apply(&b, "p-b-ok", json!({"size": 3})).await;
    assert!(
        (200..300).contains(&s),
        "B accepts a valid spec: {s} {body}"
    );

    // Both documents carry the new manifest's components (B's catalog has moved: its
    // document is built from the same snapshot that refused).
    for (pod, api) in [("A", &*a), ("B", &b)] {
        let doc = openapi(api).await;
        let schemas = &doc["components"]["schemas"];
        assert_eq!(
            schemas["Kind_pkind_v1_Spec"]["properties"]["size"]["type"], "integer",
            "{pod}: {}",
            schemas["Kind_pkind_v1_Spec"]
        );
        for part in ["Status", "Config"] {
            assert!(
                schemas.get(format!("Kind_pkind_v1_{part}")).is_some(),
                "{pod}: no {part} component"
            );
        }
    }
    drop(peer);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_manifest_breaking_a_flow_another_kind_declares_is_refused_naming_it() {
    let c = Converge::start(&[]).await;
    let leaf = |kind: &str, field: &str, schema: Value| {
        let mut m = json!({"kind": kind, "kind_version": 1,
            "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]});
        m[field] = schema;
        m
    };
    let db = leaf(
        "pdb",
        "status_schema",
        json!({"type": "object", "properties": {"endpoint": {"type": "string"}}}),
    );
    let app = leaf(
        "papp",
        "spec_schema",
        json!({"type": "object", "properties": {"host": {"type": "string"}}}),
    );
    let mut stack = leaf("pstack", "spec_schema", json!({"type": "object"}));
    stack["reactions"][0]["emits"] = json!(["children", "edges", "status"]);
    stack["edges"] = json!([{"from": {"kind": "papp"}, "to": {"kind": "pdb"},
        "values": [{"dependent_field": "/host", "source_field": "/endpoint"}]}]);
    for m in [&db, &app, &stack] {
        let (s, body) = put_manifest(&c, m, "").await;
        assert!((200..300).contains(&s), "{m}: {s} {body}");
    }
    // pdb's status endpoint retyped: no resource uses pdb, yet pstack's flow would break.
    let mut retyped = db.clone();
    retyped["status_schema"]["properties"]["endpoint"] = json!({"type": "integer"});
    for query in ["", "?force=true"] {
        let (s, body) = put_manifest(&c, &retyped, query).await;
        assert_eq!(s, 409, "{query}: {body}");
        let text = body.to_string();
        assert!(
            text.contains("kind pstack v1 declares at /edges/0/values/0 the value flow")
                && text.contains("pdb.status/endpoint -> papp.spec/host"),
            "{text}"
        );
    }
    // The stored manifest is unchanged, and a compatible change still applies.
    let (s, stored) = c.call(Method::GET, "kinds/pdb/manifest", None).await;
    assert_eq!(s, 200, "{stored}");
    assert_eq!(
        stored["status_schema"]["properties"]["endpoint"]["type"], "string",
        "{stored}"
    );
    let mut more = db;
    more["status_schema"]["properties"]["port"] = json!({"type": "integer"});
    let (s, body) = put_manifest(&c, &more, "").await;
    assert!((200..300).contains(&s), "{s} {body}");
    c.stop().await;
}
