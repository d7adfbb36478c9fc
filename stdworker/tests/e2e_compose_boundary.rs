//! A composer writes only what its kind may (issue 41), end to end with the real `converge`
//! (from `CONVERGE_BIN`) and the real `stdworker`.
//!
//! Exec: against a converge serving TLS with an `AUTH_FILE`, a composer whose token allows
//! only its composer kind (an in-test Rust SDK worker) returns a *default* provider config for
//! an exec kind whose program would create a file, and a child of that kind for it to run.
//! The compose is refused whole (no config, no child), and the stdworker serving the exec kind
//! (with its own token) runs nothing: the file never appears, though the same stdworker runs
//! the admin's default config as soon as there is one.
//!
//! Starlark and CEL: a bundle and a graph composing a child whose spec breaks its kind's
//! `spec_schema` are refused naming the child and the JSON pointer; no child (and so no edge:
//! an edge row needs both ends) is stored. The bare gRPC composer's cases are in
//! `converge/tests/composer_boundary.rs`.

mod common;

use std::time::Duration;

use common::{Converge, Stdworker, leaf_manifest, scratch_dir};
use converge_auth::testing::TestCa;
use converge_sdk::{
    ChildSpec, HandlerError, KindVersion, Outcome, Provider, ProviderConfigSpec, ReactionRequest,
    Registry, WorkerConfig, WorkerToken,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(60);

fn sha256_hex(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The hostile composer: a child of `bexec` and a default config for `bexec` whose program
/// creates the file at `mark`.
struct Hostile {
    mark: String,
}

impl Provider for Hostile {
    fn kind(&self) -> KindVersion {
        KindVersion::new("evilc", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let root = req.resource.name.clone();
        Ok(Outcome::status(json!({"composed": true}))
            .with_child(ChildSpec::new("bexec", 1, format!("{root}-x"), json!({})))
            .with_config(ProviderConfigSpec {
                name: format!("{root}-cfg"),
                kind: "bexec".into(),
                kind_version: 1,
                is_default: true,
                spec: json!({"program": "/bin/sh",
                             "args": ["-c", format!("cat >/dev/null; touch {}", self.mark)]}),
            }))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_composer_cannot_make_an_exec_worker_run_its_program() {
    let dir = scratch_dir("boundary");
    let ca = TestCa::new("stdworker boundary CA");
    let (admin, composer, exec) = (
        "cvg_boundary_admin",
        "cvg_boundary_composer",
        "cvg_boundary_exec",
    );
    let principals = json!({"principals": [
        {"name": "ops", "role": "admin", "token_sha256": sha256_hex(admin)},
        {"name": "composer-w", "role": "worker", "token_sha256": sha256_hex(composer),
         "kinds": ["evilc"]},
        {"name": "exec-w", "role": "worker", "token_sha256": sha256_hex(exec), "kinds": ["bexec"]},
    ]});
    let c = Converge::start_secure(&dir, &ca, &principals, admin, &[]).await;
    let mut bexec = leaf_manifest("bexec");
    bexec["provider"] = json!("exec");
    c.apply_manifest(&bexec).await;
    c.apply_manifest(&json!({"kind": "evilc", "kind_version": 1, "reactions": [
        {"name": "compose", "trigger": "specChange", "emits": ["children", "configs", "status"]}]}))
        .await;
    let ca_file = ca.write(&dir, "ca");
    let w = Stdworker::start(
        &c.broker,
        "bexec",
        &[
            ("BROKER_CA_FILE", ca_file.to_str().unwrap()),
            ("WORKER_TOKEN", exec),
        ],
    );
    let mark = dir.join("owned");
    let stop = CancellationToken::new();
    let mut cfg = WorkerConfig::new(c.broker.clone());
    cfg.worker_name = "hostile".into();
    cfg.token = Some(WorkerToken::Value(composer.into()));
    cfg.broker_ca_file = Some(ca_file.clone());
    tokio::spawn(converge_sdk::run_worker(
        cfg,
        Registry::new().with(Hostile {
            mark: mark.to_str().unwrap().into(),
        }),
        stop.clone().cancelled_owned(),
    ));

    c.apply("evilc", "r1", json!({})).await;
    let r = c
        .wait_resource("evilc", "r1", "Failed", T, |v| v["phase"] == "Failed")
        .await;
    assert_eq!(r["failure_terminal"], true, "{r}");
    let msg = r["failure_message"].as_str().unwrap_or_default();
    eprintln!("evilc/r1: {msg}");
    assert!(
        msg.contains("provider config \"r1-cfg\"") && msg.contains("default config"),
        "{r}"
    );
    let (s, body) = c
        .call(reqwest::Method::GET, "providerconfigs/r1-cfg", None)
        .await;
    assert_eq!(s, 404, "the config was stored: {body}");
    assert!(
        c.get("bexec", "r1-x").await.is_none(),
        "the child was stored"
    );

    // The stdworker is live and runs what an admin's default config says: a resource of the
    // kind runs, creating its own file; the composer's never appears.
    let ran = dir.join("ran");
    c.put_config(
        "bexec-default",
        "bexec",
        true,
        json!({"program": "/bin/sh",
               "args": ["-c", format!("cat >/dev/null; touch {}", ran.display())]}),
    )
    .await;
    c.apply("bexec", "direct", json!({})).await;
    c.wait_resource("bexec", "direct", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert!(ran.exists(), "the admin's program ran");
    assert!(!mark.exists(), "the composer's program ran");
    assert!(
        c.get("bexec", "r1-x").await.is_none(),
        "the child was stored"
    );

    stop.cancel();
    assert!(w.stop().await.success());
    c.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Leaf kinds served in process: `vpc` (a string cidr, nothing else) and `subnet`.
struct Leaf(&'static str);

impl Provider for Leaf {
    fn kind(&self) -> KindVersion {
        KindVersion::new(self.0, 1)
    }

    async fn work(&self, _req: ReactionRequest) -> Result<Outcome, HandlerError> {
        Ok(Outcome::status(json!({"vpc_id": "vpc-1"})))
    }
}

fn composite_manifest(kind: &str) -> Value {
    json!({"kind": kind, "kind_version": 1, "reactions": [
        {"name": "compose", "trigger": "specChange", "emits": ["children", "edges", "status"]}]})
}

/// No child of `kind` is stored.
async fn none_of(c: &Converge, kind: &str) {
    let (s, list) = c
        .call(
            reqwest::Method::GET,
            &format!("resources?kind={kind}"),
            None,
        )
        .await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(
        list["resources"],
        json!([]),
        "children of {kind} were stored"
    );
}

/// `kind/name` Failed terminally with a message holding each of `want`.
async fn refused(c: &Converge, kind: &str, name: &str, want: &[&str]) {
    let r = c
        .wait_resource(kind, name, "Failed", T, |v| v["phase"] == "Failed")
        .await;
    assert_eq!(r["failure_terminal"], true, "{r}");
    let msg = r["failure_message"].as_str().unwrap_or_default();
    eprintln!("{kind}/{name}: {msg}");
    assert!(msg.starts_with("compose result refused: "), "{r}");
    for w in want {
        assert!(msg.contains(w), "{w:?} not in {msg:?}");
    }
}

const STAR_BAD: &str = r#"
def compose(spec, config):
    vpc = child("vpc", spec["name"] + "-vpc", {"cidr": 10})
    subnet = child("subnet", spec["name"] + "-subnet", {"vpc_id": None})
    return {
        "children": [subnet, vpc],
        "edges": [edge("subnet", subnet["name"], "vpc", vpc["name"],
                       values = {"/vpc_id": "/vpc_id"})],
    }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn starlark_and_cel_children_breaking_their_schema_are_refused() {
    let c = Converge::start().await;
    let mut vpc = leaf_manifest("vpc");
    vpc["spec_schema"] = json!({"type": "object", "additionalProperties": false,
        "properties": {"cidr": {"type": "string"}}});
    c.apply_manifest(&vpc).await;
    c.apply_manifest(&leaf_manifest("subnet")).await;
    c.apply_manifest(&composite_manifest("slbad")).await;
    c.apply_manifest(&composite_manifest("celbad")).await;
    let stop = CancellationToken::new();
    let mut cfg = WorkerConfig::new(c.broker.clone());
    cfg.worker_name = "leaves".into();
    tokio::spawn(converge_sdk::run_worker(
        cfg,
        Registry::new().with(Leaf("vpc")).with(Leaf("subnet")),
        stop.clone().cancelled_owned(),
    ));
    c.put_config_bundle(
        "slbad-default",
        "slbad",
        true,
        json!({}),
        &converge_starlark::pack(&[("compose.star", STAR_BAD)]),
    )
    .await;
    // The vpc's cidr comes from the root's spec: an int there stays an int in the child.
    c.put_config(
        "celbad-default",
        "celbad",
        true,
        json!({"resources": [
            {"id": "subnet", "template": {"kind": "subnet", "name": "${root.name}-subnet",
                                          "spec": {"vpc_id": "${vpc.status.vpc_id}"}}},
            {"id": "vpc", "template": {"kind": "vpc", "name": "${root.name}-vpc",
                                       "spec": {"cidr": "${spec.cidr}"}}}
        ]}),
    )
    .await;
    let w = Stdworker::start_env(
        &c.broker,
        &[
            ("STDWORKER_STARLARK_KINDS", "slbad"),
            ("STDWORKER_CEL_KINDS", "celbad"),
        ],
    );

    c.apply("slbad", "s1", json!({"name": "s1"})).await;
    refused(
        &c,
        "slbad",
        "s1",
        &[
            "child vpc/s1-vpc",
            "spec_schema of vpc v1",
            "at /cidr",
            "\"type\"",
        ],
    )
    .await;
    c.apply("celbad", "c1", json!({"cidr": 10})).await;
    refused(
        &c,
        "celbad",
        "c1",
        &[
            "child vpc/c1-vpc",
            "spec_schema of vpc v1",
            "at /cidr",
            "\"type\"",
        ],
    )
    .await;
    // Nothing of either result: no vpc, no subnet, so no edge between them.
    none_of(&c, "vpc").await;
    none_of(&c, "subnet").await;

    // The same graph with a string cidr composes as before.
    c.apply("celbad", "c2", json!({"cidr": "10.0.0.0/16"}))
        .await;
    c.wait_resource("subnet", "c2-subnet", "Ready", T, |v| {
        v["phase"] == "Ready" && v["spec"]["vpc_id"] == "vpc-1"
    })
    .await;

    assert!(w.stop().await.success());
    stop.cancel();
    c.stop().await;
}
