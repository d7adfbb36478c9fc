//! Composition end to end with the real `converge` binary: a composite (composer + rollup)
//! served by in-process Rust SDK providers over real gRPC expands into children wired by
//! edges and value flows, reconciles them in dependency order, and rolls up from the
//! summary; recompose diffs; a cycle is a terminal failure; a failed child degrades the root.

mod common;

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use common::Converge;
use converge_sdk::{
    ChildSpec, Condition, DepEdge, HandlerError, KindVersion, Outcome, Provider, ReactionRequest,
    Registry, ResourceRef, Stage, ValueFlow, WorkerConfig,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(30);

/// `stack`: composes, per team in spec.teams, net (vpc) <- subnet <- route, with value flows
/// (subnet.vpc_id <- net.vpc_id, route.subnet_id <- subnet.subnet_id). spec.cycle adds a
/// back edge; spec.drop_route omits the first team's route. Rollup counts ready children;
/// `rollups` counts the rollups run per root name.
struct Stack {
    rollups: Arc<Mutex<HashMap<String, u32>>>,
}

impl Provider for Stack {
    fn kind(&self) -> KindVersion {
        KindVersion::new("stack", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let spec: Value = req.spec()?;
        match req.stage {
            Stage::Compose => {
                let teams: Vec<String> =
                    serde_json::from_value(spec["teams"].clone()).unwrap_or_default();
                let mut out = Outcome::status(json!({"composed": teams.len()}));
                for (i, t) in teams.iter().enumerate() {
                    let (net, sub, route) = (
                        format!("{t}-net"),
                        format!("{t}-subnet"),
                        format!("{t}-route"),
                    );
                    let fail = spec["fail"].as_str() == Some(sub.as_str());
                    out = out
                        .with_child(ChildSpec::new(
                            "cnet",
                            1,
                            &net,
                            json!({"cidr": spec["net_cidr"][t.as_str()].as_str().unwrap_or("10.0.0.0/16")}),
                        ))
                        .with_child(ChildSpec::new(
                            "csubnet",
                            1,
                            &sub,
                            json!({"vpc_id": null, "fail": fail}),
                        ))
                        .with_edge(
                            DepEdge::new(
                                ResourceRef::new("csubnet", &sub),
                                ResourceRef::new("cnet", &net),
                            )
                            .with_value(ValueFlow::new("/vpc_id", "/vpc_id")),
                        );
                    if !(i == 0 && spec["drop_route"] == true) {
                        out = out
                            .with_child(ChildSpec::new(
                                "croute",
                                1,
                                &route,
                                json!({"subnet_id": null}),
                            ))
                            .with_edge(
                                DepEdge::new(
                                    ResourceRef::new("croute", &route),
                                    ResourceRef::new("csubnet", &sub),
                                )
                                .with_value(ValueFlow::new("/subnet_id", "/subnet_id")),
                            );
                    }
                    if spec["cycle"] == true {
                        out = out.with_edge(DepEdge::new(
                            ResourceRef::new("cnet", &net),
                            ResourceRef::new("croute", &route),
                        ));
                    }
                }
                Ok(out)
            }
            Stage::Rollup => {
                *self
                    .rollups
                    .lock()
                    .unwrap()
                    .entry(req.resource.name.clone())
                    .or_default() += 1;
                // The summary form: counts without a descendant in the request.
                assert!(req.descendants.is_empty() && !req.descendants_included);
                let s = req.summary.clone().unwrap_or_default();
                Ok(Outcome::status(
                    json!({"children": s.total, "ready": s.ready()}),
                ))
            }
            other => Err(HandlerError::terminal(format!(
                "unexpected stage {other:?}"
            ))),
        }
    }
}

/// One recorded leaf run: (kind, name, when, spec it saw).
type Run = (String, String, Instant, Value);

/// The leaves: record when each ran (for ordering) and publish an id in status.
#[derive(Clone)]
struct Leaf {
    kind: &'static str,
    runs: Arc<Mutex<Vec<Run>>>,
    /// Bumped by a test to make cnet report a new vpc_id (an out-of-band status change).
    epoch: Arc<AtomicU64>,
}

impl Provider for Leaf {
    fn kind(&self) -> KindVersion {
        KindVersion::new(self.kind, 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let spec: Value = req.spec()?;
        self.runs.lock().unwrap().push((
            self.kind.to_string(),
            req.resource.name.clone(),
            Instant::now(),
            spec.clone(),
        ));
        if spec["fail"] == true {
            return Err(HandlerError::transient("subnet exhausted"));
        }
        let id = match self.epoch.load(Ordering::SeqCst) {
            0 => format!("{}-{}", self.kind, req.resource.name),
            e if self.kind == "cnet" => format!("{}-{}-v{e}", self.kind, req.resource.name),
            _ => format!("{}-{}", self.kind, req.resource.name),
        };
        let status = match self.kind {
            "cnet" => json!({"vpc_id": id}),
            "csubnet" => json!({"subnet_id": id, "vpc_id": spec["vpc_id"]}),
            _ => json!({"route_id": id, "subnet_id": spec["subnet_id"]}),
        };
        Ok(Outcome::status(status).with_condition(Condition::ready(true, "Provisioned", "ok")))
    }
}

fn manifest(kind: &str, composite: bool) -> Value {
    if composite {
        json!({"kind": kind, "kind_version": 1, "reactions": [
            {"name": "compose", "trigger": "specChange", "emits": ["children", "edges", "status"]},
            {"name": "rollup", "trigger": "childrenSettled", "emits": ["status", "conditions"]}]})
    } else {
        json!({"kind": kind, "kind_version": 1, "reactions": [
            {"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]}]})
    }
}

struct World {
    c: Converge,
    runs: Arc<Mutex<Vec<Run>>>,
    rollups: Arc<Mutex<HashMap<String, u32>>>,
    epoch: Arc<AtomicU64>,
    stop: CancellationToken,
}

async fn world() -> World {
    world_with(&[], 0).await
}

/// A converge with `env`, the stack kinds (croute with `route_grace` seconds of orphan
/// grace) and an in-process worker serving them.
async fn world_with(env: &[(&str, &str)], route_grace: i64) -> World {
    let c = Converge::start(env).await;
    c.apply_manifest(&manifest("stack", true)).await;
    for k in ["cnet", "csubnet", "croute"] {
        let mut m = manifest(k, false);
        if k == "croute" {
            m["orphan_grace_secs"] = route_grace.into();
        }
        c.apply_manifest(&m).await;
    }
    let runs = Arc::new(Mutex::new(Vec::new()));
    let epoch = Arc::new(AtomicU64::new(0));
    let stop = CancellationToken::new();
    let rollups = Arc::new(Mutex::new(HashMap::new()));
    let mut reg = Registry::new().with(Stack {
        rollups: rollups.clone(),
    });
    for k in ["cnet", "csubnet", "croute"] {
        reg = reg.with(Leaf {
            kind: k,
            runs: runs.clone(),
            epoch: epoch.clone(),
        });
    }
    let mut cfg = WorkerConfig::new(c.broker.clone());
    cfg.max_parallel = 64;
    cfg.worker_name = "compose-test".into();
    tokio::spawn(converge_sdk::run_worker(
        cfg,
        reg,
        stop.clone().cancelled_owned(),
    ));
    World {
        c,
        runs,
        rollups,
        epoch,
        stop,
    }
}

async fn apply_stack(c: &Converge, name: &str, spec: Value) {
    let (s, _, body) = c
        .apply(&json!({"kind": "stack", "kind_version": 1, "name": name, "spec": spec}))
        .await;
    assert!(s == 200 || s == 201, "{s} {body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn composite_reconciles_children_in_dependency_order_with_value_flows_and_rolls_up() {
    let w = world().await;
    apply_stack(&w.c, "bom", json!({"teams": ["a", "b"]})).await;
    let root =
        w.c.wait_resource("stack", "bom", "root Ready", T, |v| v["phase"] == "Ready")
            .await;
    assert_eq!(
        root["status"],
        json!({"children": 6, "ready": 6}),
        "rollup status replaces compose status"
    );
    let route = w.c.get("croute", "a-route").await.unwrap();
    assert_eq!(route["phase"], "Ready");
    assert_eq!(
        route["spec"]["subnet_id"], "csubnet-a-subnet",
        "value flowed from the subnet's status"
    );
    assert_eq!(route["status"]["subnet_id"], "csubnet-a-subnet");
    assert_eq!(route["owner"], json!({"kind": "stack", "name": "bom"}));
    let subnet = w.c.get("csubnet", "b-subnet").await.unwrap();
    assert_eq!(subnet["spec"]["vpc_id"], "cnet-b-net");

    // Each child ran once per generation it reached, and never before its upstream ran.
    let runs = w.runs.lock().unwrap().clone();
    let first: HashMap<(String, String), Instant> = runs
        .iter()
        .rev()
        .map(|(k, n, t, _)| ((k.clone(), n.clone()), *t))
        .collect();
    for t in ["a", "b"] {
        let net = first[&("cnet".to_string(), format!("{t}-net"))];
        let sub = first[&("csubnet".to_string(), format!("{t}-subnet"))];
        let route = first[&("croute".to_string(), format!("{t}-route"))];
        assert!(net < sub && sub < route, "order violated for team {t}");
    }
    for (k, n, _, spec) in &runs {
        if k != "cnet" {
            let field = if k == "csubnet" {
                "vpc_id"
            } else {
                "subnet_id"
            };
            assert!(
                !spec[field].is_null(),
                "{k}/{n} ran before its value arrived: {spec}"
            );
        }
    }
    assert_eq!(
        runs.len(),
        6,
        "each child reconciled exactly once: {:?}",
        runs.iter().map(|r| (&r.0, &r.1)).collect::<Vec<_>>()
    );

    // Recompose with an unrelated root change writes nothing to the children.
    let before: Vec<i64> = children_generations(&w.c).await;
    apply_stack(&w.c, "bom", json!({"teams": ["a", "b"], "note": "touch"})).await;
    w.c.wait_resource("stack", "bom", "root Ready at gen 2", T, |v| {
        v["phase"] == "Ready" && v["synced_gen"] == 2
    })
    .await;
    assert_eq!(
        children_generations(&w.c).await,
        before,
        "an identical compose must not bump children"
    );
    assert_eq!(w.runs.lock().unwrap().len(), 6, "no child re-ran");

    // Dropping one child prunes only that child.
    apply_stack(
        &w.c,
        "bom",
        json!({"teams": ["a", "b"], "drop_route": true}),
    )
    .await;
    w.c.wait_resource("stack", "bom", "root Ready at gen 3", T, |v| {
        v["phase"] == "Ready" && v["synced_gen"] == 3
    })
    .await;
    assert!(
        w.c.get("croute", "a-route").await.is_none(),
        "the dropped child is removed"
    );
    assert!(w.c.get("croute", "b-route").await.is_some());
    assert_eq!(children_generations(&w.c).await.len(), 5);
    w.stop.cancel();
    w.c.stop().await;
}

async fn children_generations(c: &Converge) -> Vec<i64> {
    let mut out = Vec::new();
    for (k, n) in [
        ("cnet", "a-net"),
        ("csubnet", "a-subnet"),
        ("croute", "a-route"),
        ("cnet", "b-net"),
        ("csubnet", "b-subnet"),
        ("croute", "b-route"),
    ] {
        if let Some(v) = c.get(k, n).await {
            out.push(v["generation"].as_i64().unwrap());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cycle_is_a_terminal_failure_naming_it() {
    let w = world().await;
    apply_stack(&w.c, "loop", json!({"teams": ["a"], "cycle": true})).await;
    let r =
        w.c.wait_resource("stack", "loop", "Failed", T, |v| v["phase"] == "Failed")
            .await;
    assert_eq!(r["failure_terminal"], true);
    let msg = r["failure_message"].as_str().unwrap();
    assert!(
        msg.contains("dependency cycle")
            && msg.contains("cnet/a-net")
            && msg.contains("croute/a-route"),
        "{msg}"
    );
    assert!(
        w.c.get("cnet", "a-net").await.is_none(),
        "nothing from a refused compose is applied"
    );
    w.stop.cancel();
    w.c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_child_degrades_the_root_naming_it() {
    let w = world().await;
    apply_stack(
        &w.c,
        "sick",
        json!({"teams": ["a", "b"], "fail": "b-subnet"}),
    )
    .await;
    let r =
        w.c.wait_resource("stack", "sick", "Degraded", T, |v| v["phase"] == "Degraded")
            .await;
    let cond = r["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap();
    assert_eq!(cond["status"], "False");
    assert_eq!(cond["reason"], "ChildrenNotReady");
    assert!(
        cond["message"]
            .as_str()
            .unwrap()
            .contains("csubnet/b-subnet"),
        "{cond}"
    );
    assert_eq!(
        w.c.get("croute", "a-route").await.unwrap()["phase"],
        "Ready",
        "siblings proceed"
    );
    w.stop.cancel();
    w.c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn orphan_grace_readopts_a_reemitted_child_and_removes_an_expired_one() {
    let w = world_with(&[("REAPER_EVERY", "1s")], 3).await;
    apply_stack(&w.c, "g", json!({"teams": ["a"]})).await;
    w.c.wait_resource("stack", "g", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    let route = w.c.get("croute", "a-route").await.unwrap();
    let uid = route["uid"].clone();

    apply_stack(&w.c, "g", json!({"teams": ["a"], "drop_route": true})).await;
    w.c.wait_resource("croute", "a-route", "Orphaned", T, |v| {
        v["phase"] == "Orphaned"
    })
    .await;
    w.c.wait_resource("stack", "g", "Ready without the orphan", T, |v| {
        v["phase"] == "Ready" && v["synced_gen"] == 2
    })
    .await;
    // Re-emitted within the grace window: re-adopted, same resource, nothing recreated.
    apply_stack(&w.c, "g", json!({"teams": ["a"], "note": "re-emit"})).await;
    let r =
        w.c.wait_resource("croute", "a-route", "re-adopted", T, |v| {
            v["phase"] == "Ready"
        })
        .await;
    assert_eq!(r["uid"], uid, "re-adoption keeps the resource");
    let runs = w
        .runs
        .lock()
        .unwrap()
        .iter()
        .filter(|x| x.1 == "a-route")
        .count();
    assert_eq!(runs, 1, "nothing was destroyed or re-run");

    // Dropped again and left alone: removed once the grace expires (reaper sweep).
    apply_stack(
        &w.c,
        "g",
        json!({"teams": ["a"], "drop_route": true, "n": 2}),
    )
    .await;
    w.c.wait_resource("croute", "a-route", "Orphaned again", T, |v| {
        v["phase"] == "Orphaned"
    })
    .await;
    converge_control::testing::wait_for(T, "the expired orphan is removed", || async {
        w.c.get("croute", "a-route").await.is_none().then_some(())
    })
    .await;
    assert!(
        w.c.get("csubnet", "a-subnet").await.is_some(),
        "only the orphan goes"
    );
    w.stop.cancel();
    w.c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_510_child_three_level_dag_reconciles_each_child_once_in_order() {
    let w = world().await;
    let teams: Vec<String> = (0..170).map(|i| format!("t{i}")).collect();
    apply_stack(&w.c, "big", json!({"teams": teams})).await;
    let root =
        w.c.wait_resource(
            "stack",
            "big",
            "root Ready",
            Duration::from_secs(120),
            |v| v["phase"] == "Ready",
        )
        .await;
    assert_eq!(root["status"]["children"], 510);
    assert_eq!(root["status"]["ready"], 510);
    let runs = w.runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 510, "each child reconciled exactly once");
    let at: HashMap<(String, String), Instant> = runs
        .iter()
        .map(|(k, n, t, _)| ((k.clone(), n.clone()), *t))
        .collect();
    assert_eq!(at.len(), 510);
    for t in &teams {
        let net = at[&("cnet".to_string(), format!("{t}-net"))];
        let sub = at[&("csubnet".to_string(), format!("{t}-subnet"))];
        let route = at[&("croute".to_string(), format!("{t}-route"))];
        assert!(
            net < sub && sub < route,
            "team {t}: a child ran before its upstream"
        );
    }
    assert_eq!(w.c.db.lag_mismatches().await, 0, "resource_lag agrees");
    w.stop.cancel();
    w.c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_completions_never_strand_a_root() {
    // Two pods drain concurrently; the reaper backstop is off, so only the reactive cascade
    // and the straddle recheck can bring each root to Ready.
    let env = [("REAPER_EVERY", "3600s"), ("DRAIN_BATCH", "3")];
    let w = world_with(&env, 0).await;
    let _peer = w.c.spawn_peer(&env).await;
    for round in 0..50 {
        let name = format!("race-{round}");
        let teams: Vec<String> = ["a", "b", "c", "d"]
            .iter()
            .map(|t| format!("r{round}{t}"))
            .collect();
        apply_stack(&w.c, &name, json!({ "teams": teams })).await;
    }
    for round in 0..50 {
        let name = format!("race-{round}");
        w.c.wait_resource("stack", &name, "root Ready", Duration::from_secs(60), |v| {
            v["phase"] == "Ready"
        })
        .await;
    }
    // Nothing changed after the children settled, so each root rolled up once: a recheck
    // armed by the last drains is retired by the rollup's own subtree read, even while a
    // drainer pass holds it (skipping it there re-ran the whole rollup afterwards).
    let rollups = w.rollups.lock().unwrap().clone();
    let repeated: Vec<_> = rollups.iter().filter(|(_, n)| **n != 1).collect();
    assert_eq!(rollups.len(), 50, "every root rolled up");
    assert!(
        repeated.is_empty(),
        "roots rolled up more than once: {repeated:?}"
    );
    // Two pods' drains wrote resource_lag concurrently; it still agrees with resources.
    assert_eq!(w.c.db.lag_mismatches().await, 0, "resource_lag agrees");
    w.stop.cancel();
    w.c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn quarantining_a_failed_child_lets_the_root_be_ready_and_unquarantine_retries_it() {
    let w = world().await;
    apply_stack(&w.c, "q", json!({"teams": ["a", "b"], "fail": "b-subnet"})).await;
    w.c.wait_resource("stack", "q", "Degraded", T, |v| v["phase"] == "Degraded")
        .await;
    let post = |action: &str| {
        w.c.client
            .post(format!(
                "{}/api/v1/resources/csubnet/b-subnet/{action}",
                w.c.http
            ))
            .send()
    };
    assert_eq!(post("quarantine").await.unwrap().status(), 200);
    w.c.wait_resource("csubnet", "b-subnet", "Quarantined", T, |v| {
        v["phase"] == "Quarantined"
    })
    .await;
    let r =
        w.c.wait_resource("stack", "q", "Ready with the child set aside", T, |v| {
            v["phase"] == "Ready"
        })
        .await;
    assert_eq!(
        r["status"]["children"], 5,
        "the quarantined child is excluded from the rollup"
    );
    assert_eq!(w.c.db.lag_mismatches().await, 0, "resource_lag agrees");
    let attempts = w.c.get("csubnet", "b-subnet").await.unwrap()["failure_attempts"]
        .as_i64()
        .unwrap();
    assert_eq!(post("unquarantine").await.unwrap().status(), 200);
    w.c.wait_resource("csubnet", "b-subnet", "retried", T, |v| {
        v["failure_attempts"].as_i64().unwrap() > attempts
    })
    .await;
    w.c.wait_resource("stack", "q", "Degraded again", T, |v| {
        v["phase"] == "Degraded"
    })
    .await;
    w.stop.cancel();
    w.c.stop().await;
}

async fn generation(c: &Converge, kind: &str, name: &str) -> i64 {
    c.get(kind, name).await.unwrap()["generation"]
        .as_i64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn one_changed_child_updates_only_it_and_a_status_change_reflows_only_dependents() {
    let w = world().await;
    apply_stack(&w.c, "d", json!({"teams": ["a", "b"]})).await;
    w.c.wait_resource("stack", "d", "Ready", T, |v| v["phase"] == "Ready")
        .await;

    // The composer changes one child's spec: only that child gets a new generation.
    apply_stack(
        &w.c,
        "d",
        json!({"teams": ["a", "b"], "net_cidr": {"a": "10.9.0.0/16"}}),
    )
    .await;
    w.c.wait_resource("stack", "d", "Ready at gen 2", T, |v| {
        v["phase"] == "Ready" && v["synced_gen"] == 2
    })
    .await;
    w.c.wait_resource("cnet", "a-net", "a-net re-reconciled", T, |v| {
        v["synced_gen"] == 2
    })
    .await;
    assert_eq!(generation(&w.c, "cnet", "a-net").await, 2);
    for (k, n) in [
        ("cnet", "b-net"),
        ("csubnet", "b-subnet"),
        ("croute", "b-route"),
        ("csubnet", "a-subnet"),
    ] {
        assert_eq!(
            generation(&w.c, k, n).await,
            2.min(if k == "cnet" { 1 } else { 2 }),
            "{k}/{n} must not change"
        );
    }

    // b-net reports a new vpc_id out of band: its dependent subnet re-flows and re-reconciles;
    // the route (which flows subnet_id, unchanged) and team a are untouched.
    let before_route = generation(&w.c, "croute", "b-route").await;
    let before_sub = generation(&w.c, "csubnet", "b-subnet").await;
    let before_a: Vec<i64> = vec![
        generation(&w.c, "csubnet", "a-subnet").await,
        generation(&w.c, "croute", "a-route").await,
    ];
    w.epoch.store(1, Ordering::SeqCst);
    let r =
        w.c.client
            .post(format!(
                "{}/api/v1/resources/cnet/b-net/reconcile",
                w.c.http
            ))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 202);
    let sub =
        w.c.wait_resource("csubnet", "b-subnet", "re-flowed", T, |v| {
            v["spec"]["vpc_id"] == "cnet-b-net-v1" && v["phase"] == "Ready"
        })
        .await;
    assert_eq!(sub["generation"].as_i64().unwrap(), before_sub + 1);
    assert_eq!(sub["status"]["vpc_id"], "cnet-b-net-v1");
    assert_eq!(
        generation(&w.c, "croute", "b-route").await,
        before_route,
        "the route's flowed value did not change"
    );
    assert_eq!(
        vec![
            generation(&w.c, "csubnet", "a-subnet").await,
            generation(&w.c, "croute", "a-route").await
        ],
        before_a,
        "another team's children are untouched"
    );
    w.stop.cancel();
    w.c.stop().await;
}
