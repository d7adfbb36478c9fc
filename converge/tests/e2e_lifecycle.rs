//! Lifecycle end to end with the real `converge` binary and in-process Rust SDK workers:
//! ordered soft delete of a 3-level DAG (teardowns strictly dependents-before-dependencies,
//! a stuck finalizer holding everything above it), operations (a verb runs once and its
//! output is stored; an undeclared verb is 422), spec rollback, and flipping a resource to a
//! new kind version in place.

mod common;

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::Converge;
use converge_sdk::{
    ChildSpec, Condition, DepEdge, HandlerError, KindVersion, Outcome, Provider, ReactionRequest,
    Registry, ResourceRef, Stage, WorkerConfig,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(30);
const FINALIZER: &str = "test.converge.dev/teardown";

/// What the workers saw, shared with the test.
#[derive(Default)]
struct Record {
    /// `kind/name` of every successful teardown, in order.
    deletes: Mutex<Vec<String>>,
    /// Names whose teardown fails (a stuck finalizer).
    stuck: Mutex<HashSet<String>>,
    /// (name, verb, input) of every operation run.
    ops: Mutex<Vec<(String, String, Value)>>,
    /// (kind version, name, generation) of every work run of `vleaf`.
    versions: Mutex<Vec<(i32, String, i64)>>,
}

/// The three tree kinds: `ltree` composes branches `<root>-b<i>` (b<i> depends on b<i-1>),
/// `lbranch` composes leaves `<branch>-l<j>` (l<j> depends on l<j-1>), `lleaf` is a leaf with
/// a verb. Every kind has a finalizer and records its teardown.
struct Tree {
    kind: &'static str,
    rec: Arc<Record>,
}

impl Provider for Tree {
    fn kind(&self) -> KindVersion {
        KindVersion::new(self.kind, 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let name = req.resource.name.clone();
        match req.stage {
            Stage::Delete => {
                if self.rec.stuck.lock().unwrap().contains(&name) {
                    return Err(HandlerError::transient(format!("{name} is stuck")));
                }
                self.rec
                    .deletes
                    .lock()
                    .unwrap()
                    .push(format!("{}/{name}", self.kind));
                Ok(Outcome::default())
            }
            Stage::Compose => {
                let spec: Value = req.spec()?;
                let (child_kind, n, suffix) = match self.kind {
                    "ltree" => ("lbranch", spec["branches"].as_u64().unwrap_or(0), "b"),
                    _ => ("lleaf", spec["leaves"].as_u64().unwrap_or(0), "l"),
                };
                let mut out = Outcome::status(json!({"composed": n}));
                for i in 0..n {
                    let child = format!("{name}-{suffix}{i}");
                    let cspec = if child_kind == "lbranch" {
                        json!({"leaves": spec["leaves"]})
                    } else {
                        json!({})
                    };
                    out = out.with_child(ChildSpec::new(child_kind, 1, &child, cspec));
                    if i > 0 {
                        let prev = format!("{name}-{suffix}{}", i - 1);
                        out = out.with_edge(DepEdge::new(
                            ResourceRef::new(child_kind, &child),
                            ResourceRef::new(child_kind, &prev),
                        ));
                    }
                }
                Ok(out)
            }
            Stage::Rollup => Ok(Outcome::status(
                json!({"descendants": req.descendants.len()}),
            )),
            Stage::Operate => {
                let op = req
                    .operation
                    .clone()
                    .expect("an operate task has an operation");
                self.rec.ops.lock().unwrap().push((
                    name.clone(),
                    op.verb.clone(),
                    op.input.clone().unwrap_or(Value::Null),
                ));
                Ok(Outcome::output(json!({"pong": op.input, "from": name})))
            }
            Stage::Work => Ok(Outcome::status(json!({"ok": true}))
                .with_condition(Condition::ready(true, "Done", "ok"))),
            other => Err(HandlerError::terminal(format!("unexpected {other:?}"))),
        }
    }
}

/// `vleaf` at version 1 or 2: reports which version's handler ran.
struct VersionedLeaf {
    version: i32,
    rec: Arc<Record>,
}

impl Provider for VersionedLeaf {
    fn kind(&self) -> KindVersion {
        KindVersion::new("vleaf", self.version)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        self.rec.versions.lock().unwrap().push((
            req.kind_version,
            req.resource.name.clone(),
            req.generation,
        ));
        Ok(Outcome::status(
            json!({"handled_by": self.version, "spec": req.resource.spec}),
        ))
    }
}

fn composite(kind: &str) -> Value {
    json!({"kind": kind, "kind_version": 1, "finalizer_name": FINALIZER, "reactions": [
        {"name": "compose", "trigger": "specChange", "emits": ["children", "edges", "status"]},
        {"name": "rollup", "trigger": "childrenSettled", "emits": ["status", "conditions"]},
        {"name": "teardown", "trigger": "deleteRequested", "finalizer": FINALIZER, "emits": ["finalizer"]}]})
}

fn leaf_manifest() -> Value {
    json!({"kind": "lleaf", "kind_version": 1, "finalizer_name": FINALIZER, "reactions": [
        {"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]},
        {"name": "ping", "trigger": "operation", "verb": "ping", "emits": ["operationOutput"]},
        // The handler answers every verb with {"pong": input, "from": name}: this one says
        // pong must be an object.
        {"name": "typed", "trigger": "operation", "verb": "typed", "emits": ["operationOutput"],
         "output_schema": {"type": "object", "required": ["pong", "from"],
                           "properties": {"pong": {"type": "object"}, "from": {"type": "string"}}}},
        {"name": "teardown", "trigger": "deleteRequested", "finalizer": FINALIZER, "emits": ["finalizer"]}]})
}

fn vleaf_manifest(version: i32) -> Value {
    json!({"kind": "vleaf", "kind_version": version, "reactions": [
        {"name": "work", "trigger": "specChange", "emits": ["status"]}]})
}

struct World {
    c: Converge,
    rec: Arc<Record>,
    stop: CancellationToken,
}

async fn world() -> World {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&composite("ltree")).await;
    c.apply_manifest(&composite("lbranch")).await;
    c.apply_manifest(&leaf_manifest()).await;
    c.apply_manifest(&vleaf_manifest(1)).await;
    c.apply_manifest(&vleaf_manifest(2)).await;
    let rec = Arc::new(Record::default());
    let stop = CancellationToken::new();
    let mut reg = Registry::new();
    for kind in ["ltree", "lbranch", "lleaf"] {
        reg = reg.with(Tree {
            kind,
            rec: rec.clone(),
        });
    }
    for version in [1, 2] {
        reg = reg.with(VersionedLeaf {
            version,
            rec: rec.clone(),
        });
    }
    let mut cfg = WorkerConfig::new(c.broker.clone());
    cfg.max_parallel = 64;
    tokio::spawn(converge_sdk::run_worker(
        cfg,
        reg,
        stop.clone().cancelled_owned(),
    ));
    World { c, rec, stop }
}

async fn call(
    c: &Converge,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    c.call(method, path, body).await
}

async fn apply_tree(c: &Converge, name: &str, branches: u64, leaves: u64) {
    let (s, _, body) = c
        .apply(&json!({"kind": "ltree", "kind_version": 1, "name": name,
                       "spec": {"branches": branches, "leaves": leaves}}))
        .await;
    assert!(s == 200 || s == 201, "{s} {body}");
    c.wait_resource("ltree", name, "tree Ready", T, |v| v["phase"] == "Ready")
        .await;
}

/// The index of `kind/name` in the teardown order.
fn pos(order: &[String], kind: &str, name: &str) -> usize {
    let key = format!("{kind}/{name}");
    order
        .iter()
        .position(|x| *x == key)
        .unwrap_or_else(|| panic!("{key} was never torn down: {order:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_root_tears_the_dag_down_dependents_first_and_a_stuck_finalizer_holds_its_ancestors()
 {
    let w = world().await;
    let c = &w.c;
    apply_tree(c, "t", 3, 3).await;

    let (s, body) = call(c, reqwest::Method::DELETE, "resources/ltree/t", None).await;
    assert_eq!((s, &body["phase"]), (202, &json!("Deleting")), "{body}");
    assert_eq!(body["marked"], 13, "root + 3 branches + 9 leaves");
    common::wait_for(T, "the whole tree gone", || async {
        c.get("ltree", "t").await.is_none().then_some(())
    })
    .await;
    let order = w.rec.deletes.lock().unwrap().clone();
    assert_eq!(
        order.len(),
        13,
        "every node's teardown ran exactly once: {order:?}"
    );
    for b in 0..3 {
        let branch = format!("t-b{b}");
        assert!(pos(&order, "lbranch", &branch) < pos(&order, "ltree", "t"));
        if b > 0 {
            // b<i> depends on b<i-1>: the dependent goes first.
            let prev = format!("t-b{}", b - 1);
            assert!(
                pos(&order, "lbranch", &branch) < pos(&order, "lbranch", &prev),
                "{order:?}"
            );
        }
        for l in 0..3 {
            let leaf = format!("{branch}-l{l}");
            assert!(
                pos(&order, "lleaf", &leaf) < pos(&order, "lbranch", &branch),
                "{order:?}"
            );
            if l > 0 {
                let prev = format!("{branch}-l{}", l - 1);
                assert!(
                    pos(&order, "lleaf", &leaf) < pos(&order, "lleaf", &prev),
                    "{order:?}"
                );
            }
        }
    }

    // A stuck leaf: what depends on it (its later sibling) and unrelated subtrees go; its
    // owner, the branch its owner depends on, and the root stay Deleting; it shows why.
    apply_tree(c, "s", 3, 2).await;
    w.rec.stuck.lock().unwrap().insert("s-b1-l0".into());
    w.rec.deletes.lock().unwrap().clear();
    let (s, _) = call(c, reqwest::Method::DELETE, "resources/ltree/s", None).await;
    assert_eq!(s, 202);
    let stuck = c
        .wait_resource("lleaf", "s-b1-l0", "the stuck teardown to fail", T, |v| {
            v["phase"] == "Deleting"
                && v["failure_message"]
                    .as_str()
                    .is_some_and(|m| m.contains("s-b1-l0 is stuck"))
        })
        .await;
    assert_eq!(stuck["finalizers"], json!([FINALIZER]));
    common::wait_for(T, "everything not above the stuck leaf gone", || async {
        let mut gone = true;
        for (k, n) in [
            ("lleaf", "s-b1-l1"),
            ("lbranch", "s-b2"),
            ("lleaf", "s-b2-l0"),
            ("lleaf", "s-b0-l0"),
            ("lleaf", "s-b0-l1"),
        ] {
            gone &= c.get(k, n).await.is_none();
        }
        gone.then_some(())
    })
    .await;
    for (k, n) in [("ltree", "s"), ("lbranch", "s-b1"), ("lbranch", "s-b0")] {
        let v = c
            .get(k, n)
            .await
            .unwrap_or_else(|| panic!("{k}/{n} must wait"));
        assert_eq!(v["phase"], "Deleting", "{k}/{n}");
    }
    let order = w.rec.deletes.lock().unwrap().clone();
    for held in ["lbranch/s-b1", "lbranch/s-b0", "ltree/s", "lleaf/s-b1-l0"] {
        assert!(
            !order.contains(&held.to_string()),
            "{held} ran early: {order:?}"
        );
    }

    // Unstick: the rest follows, in order.
    w.rec.stuck.lock().unwrap().clear();
    common::wait_for(T, "the stuck tree gone", || async {
        c.get("ltree", "s").await.is_none().then_some(())
    })
    .await;
    let order = w.rec.deletes.lock().unwrap().clone();
    assert!(pos(&order, "lleaf", "s-b1-l0") < pos(&order, "lbranch", "s-b1"));
    assert!(pos(&order, "lbranch", "s-b1") < pos(&order, "lbranch", "s-b0"));
    assert!(pos(&order, "lbranch", "s-b0") < pos(&order, "ltree", "s"));
    w.stop.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operation_runs_once_and_stores_its_output_and_an_undeclared_verb_is_422() {
    let w = world().await;
    let c = &w.c;
    apply_tree(c, "o", 1, 1).await;
    let (s, op) = call(
        c,
        reqwest::Method::POST,
        "resources/lleaf/o-b0-l0/ops",
        Some(json!({"verb": "ping", "input": {"x": 1}})),
    )
    .await;
    assert_eq!(s, 202, "{op}");
    assert_eq!(op["state"], "pending");
    let uid = op["uid"].as_str().unwrap().to_string();
    let done = common::wait_for(T, "the operation to succeed", || async {
        let (_, v) = call(
            c,
            reqwest::Method::GET,
            &format!("resources/lleaf/o-b0-l0/ops/{uid}"),
            None,
        )
        .await;
        (v["state"] == "succeeded").then_some(v)
    })
    .await;
    assert_eq!(done["output"], json!({"pong": {"x": 1}, "from": "o-b0-l0"}));
    assert_eq!(done["attempts"], 1);
    assert_eq!(
        w.rec.ops.lock().unwrap().clone(),
        vec![("o-b0-l0".to_string(), "ping".to_string(), json!({"x": 1}))],
        "the verb ran exactly once"
    );
    let (_, list) = call(c, reqwest::Method::GET, "resources/lleaf/o-b0-l0/ops", None).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);

    let (s, body) = call(
        c,
        reqwest::Method::POST,
        "resources/lleaf/o-b0-l0/ops",
        Some(json!({"verb": "reboot"})),
    )
    .await;
    assert_eq!(s, 422, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("ping"), "{body}");
    let (s, _) = call(
        c,
        reqwest::Method::GET,
        "resources/lleaf/o-b0-l0/ops/00000000-0000-0000-0000-000000000000",
        None,
    )
    .await;
    assert_eq!(s, 404);
    w.stop.cancel();
}

/// Runs `verb` with `input` on `o-b0-l0` and waits for the operation to end.
async fn run_op(c: &Converge, verb: &str, input: Value) -> Value {
    let (s, op) = call(
        c,
        reqwest::Method::POST,
        "resources/lleaf/o-b0-l0/ops",
        Some(json!({"verb": verb, "input": input})),
    )
    .await;
    assert_eq!(s, 202, "{op}");
    let uid = op["uid"].as_str().unwrap().to_string();
    common::wait_for(T, &format!("operation {verb} to end"), || async {
        let (_, v) = call(
            c,
            reqwest::Method::GET,
            &format!("resources/lleaf/o-b0-l0/ops/{uid}"),
            None,
        )
        .await;
        (v["state"] == "succeeded" || v["state"] == "failed").then_some(v)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_output_that_breaks_the_verbs_output_schema_fails_the_operation_terminally() {
    let w = world().await;
    let c = &w.c;
    apply_tree(c, "o", 1, 1).await;
    let ok = run_op(c, "typed", json!({"x": 1})).await;
    assert_eq!(ok["state"], "succeeded", "{ok}");
    assert_eq!(ok["output"]["pong"], json!({"x": 1}));

    let bad = run_op(c, "typed", json!("not an object")).await;
    assert_eq!(bad["state"], "failed", "{bad}");
    assert_eq!(bad["attempts"], 1, "terminal: not retried: {bad}");
    assert_eq!(
        bad["output"],
        Value::Null,
        "the output is not stored: {bad}"
    );
    let err = bad["error"].as_str().unwrap_or_default();
    assert!(
        err.contains(r#"output_schema of operation "typed" of lleaf v1 at /pong"#)
            && err.contains("\"type\""),
        "{bad}"
    );
    // The same output from a verb without an output_schema is stored as it came.
    let free = run_op(c, "ping", json!("not an object")).await;
    assert_eq!(free["state"], "succeeded", "{free}");
    w.stop.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn rollback_restores_an_older_spec_as_a_new_generation() {
    let w = world().await;
    let c = &w.c;
    for (i, greeting) in ["one", "two", "three"].iter().enumerate() {
        let (s, _, body) = c
            .apply(&json!({"kind": "vleaf", "kind_version": 1, "name": "r",
                           "spec": {"greeting": greeting}}))
            .await;
        assert!(s == 200 || s == 201, "{body}");
        assert_eq!(body["generation"], i + 1);
    }
    let (_, hist) = call(
        c,
        reqwest::Method::GET,
        "resources/vleaf/r/spec-history",
        None,
    )
    .await;
    let gens: Vec<i64> = hist["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["generation"].as_i64().unwrap())
        .collect();
    assert_eq!(gens, [3, 2, 1]);
    let (s, raw) = call(
        c,
        reqwest::Method::GET,
        "raw/resources/vleaf/r/spec/1",
        None,
    )
    .await;
    assert_eq!((s, raw), (200, json!({"greeting": "one"})));

    let (s, body) = call(
        c,
        reqwest::Method::POST,
        "resources/vleaf/r/rollback",
        Some(json!({"generation": 1})),
    )
    .await;
    assert_eq!(
        (s, &body),
        (202, &json!({"generation": 4, "changed": true}))
    );
    let v = c
        .wait_resource("vleaf", "r", "rolled back and reconciled", T, |v| {
            v["phase"] == "Ready" && v["synced_gen"] == 4
        })
        .await;
    assert_eq!(v["spec"], json!({"greeting": "one"}));
    assert_eq!(v["status"]["spec"], json!({"greeting": "one"}));
    let (s, _) = call(
        c,
        reqwest::Method::POST,
        "resources/vleaf/r/rollback",
        Some(json!({"generation": 99})),
    )
    .await;
    assert_eq!(s, 404);
    w.stop.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn flipping_to_v2_keeps_the_uid_and_reconciles_with_the_v2_handler() {
    let w = world().await;
    let c = &w.c;
    let (_, _, created) = c
        .apply(&json!({"kind": "vleaf", "kind_version": 1, "name": "f", "spec": {"a": 1}}))
        .await;
    let v1 = c
        .wait_resource("vleaf", "f", "v1 Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert_eq!(v1["status"]["handled_by"], 1);
    let (s, _, flipped) = c
        .apply(&json!({"kind": "vleaf", "kind_version": 2, "name": "f", "spec": {"a": 1}}))
        .await;
    assert_eq!(s, 200, "{flipped}");
    assert_eq!(flipped["uid"], created["uid"], "same resource");
    assert_eq!(
        flipped["generation"], 2,
        "a version flip is a new generation"
    );
    let v2 = c
        .wait_resource("vleaf", "f", "v2 Ready", T, |v| {
            v["phase"] == "Ready" && v["synced_gen"] == 2
        })
        .await;
    assert_eq!(v2["status"]["handled_by"], 2);
    assert_eq!(v2["kind_version"], 2);
    assert_eq!(v2["uid"], created["uid"]);
    assert!(
        w.rec
            .versions
            .lock()
            .unwrap()
            .contains(&(2, "f".to_string(), 2)),
        "the v2 handler ran generation 2"
    );

    // Retire v1: no new resources at v1; existing v2 ones are untouched.
    let (s, body) = call(
        c,
        reqwest::Method::PUT,
        "kinds/vleaf/versions/1/config",
        Some(
            json!({"max_inflight": 0, "task_deadline_seconds": 0, "resync_interval_seconds": 0,
                    "orphan_grace_seconds": 0, "max_transient_attempts": 0, "retired": true}),
        ),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let (s, _, body) = c
        .apply(&json!({"kind": "vleaf", "kind_version": 1, "name": "late", "spec": {}}))
        .await;
    assert_eq!(s, 409, "{body}");

    // A breaking change to v2 while f uses it: 409, listing what breaks.
    let mut breaking = vleaf_manifest(2);
    breaking["reactions"] =
        json!([{"name": "work2", "trigger": "specChange", "emits": ["status"]}]);
    let (s, body) = call(
        c,
        reqwest::Method::PUT,
        "kinds/vleaf/manifest",
        Some(breaking),
    )
    .await;
    assert_eq!(s, 409, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("\"work\" removed"),
        "{body}"
    );
    w.stop.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_composer_prune_goes_through_the_same_ordered_teardown() {
    let w = world().await;
    let c = &w.c;
    apply_tree(c, "p", 2, 2).await;
    // The recompose drops branch p-b1: it and its leaves are torn down (leaves first, each
    // through its finalizer), while p-b0 and the root stay.
    let (s, _, body) = c
        .apply(&json!({"kind": "ltree", "kind_version": 1, "name": "p",
                       "spec": {"branches": 1, "leaves": 2}}))
        .await;
    assert_eq!(s, 200, "{body}");
    common::wait_for(T, "the pruned branch gone", || async {
        c.get("lbranch", "p-b1").await.is_none().then_some(())
    })
    .await;
    c.wait_resource("ltree", "p", "root Ready after the prune", T, |v| {
        v["phase"] == "Ready" && v["synced_gen"] == 2
    })
    .await;
    let order = w.rec.deletes.lock().unwrap().clone();
    assert_eq!(
        order.len(),
        3,
        "p-b1 and its two leaves, nothing else: {order:?}"
    );
    assert!(pos(&order, "lleaf", "p-b1-l1") < pos(&order, "lleaf", "p-b1-l0"));
    assert!(pos(&order, "lleaf", "p-b1-l0") < pos(&order, "lbranch", "p-b1"));
    assert!(c.get("lbranch", "p-b0").await.is_some());
    assert!(c.get("lleaf", "p-b0-l1").await.is_some());
    w.stop.cancel();
}
