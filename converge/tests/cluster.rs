//! Who is here, on one `converge` (ROLE=all) with real workers over gRPC: `GET /api/v1/cluster`
//! lists the process and the workers connected to its broker (name, sdk, kinds, in-flight),
//! flags a kind a worker subscribed for that no manifest registers, and forgets a worker that
//! left; `GET /api/v1/kinds` counts the workers of each kind version; a resource whose kind
//! version no worker serves says what it waits for, in the API and in `conctl`, until a worker
//! for it connects; a killed process stays listed NotReady until its row's TTL removes it.
//! (The split-roles test shows the same across three processes.)

mod common;

use std::{process::Stdio, time::Duration};

use common::{Converge, Worker};
use converge_sdk::{HandlerError, KindVersion, Outcome, Provider, ReactionRequest, Registry};
use converge_testkit::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(30);

/// A provider of any (kind, version) that reports `{"ok": true}`.
struct Any(&'static str, i32);

impl Provider for Any {
    fn kind(&self) -> KindVersion {
        KindVersion::new(self.0, self.1)
    }

    async fn work(&self, _req: ReactionRequest) -> Result<Outcome, HandlerError> {
        Ok(Outcome::status(json!({"ok": true})))
    }
}

/// Runs an in-process SDK worker named `name` serving `kinds` (kind, version) on `broker`
/// until the token is cancelled.
fn sdk_worker(broker: &str, name: &str, kinds: &[(&'static str, i32)]) -> CancellationToken {
    let mut reg = Registry::new();
    for (k, v) in kinds {
        reg = reg.with(Any(k, *v));
    }
    let mut cfg = converge_sdk::WorkerConfig::new(broker.to_string());
    cfg.worker_name = name.into();
    let stop = CancellationToken::new();
    tokio::spawn(converge_sdk::run_worker(
        cfg,
        reg,
        stop.clone().cancelled_owned(),
    ));
    stop
}

/// A leaf manifest of `kind` at `version`.
fn leaf(kind: &str, version: i32) -> Value {
    json!({"kind": kind, "kind_version": version, "reactions": [
        {"name": "work", "trigger": "specChange", "emits": ["status"]}]})
}

/// The cluster once `pred` holds for it.
async fn cluster_when(c: &Converge, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    common::cluster_when(c, T, what, pred).await
}

/// The sorted names of the workers of the cluster's only member.
fn worker_names(cluster: &Value) -> Vec<String> {
    common::worker_names(cluster["members"].get(0))
}

/// The worker named `name` in `cluster`.
fn worker<'a>(cluster: &'a Value, name: &str) -> &'a Value {
    cluster["members"][0]["workers"]
        .as_array()
        .and_then(|ws| ws.iter().find(|w| w["name"] == name))
        .unwrap_or_else(|| panic!("no worker {name} in {cluster}"))
}

/// The coverage row of (kind, 1).
fn coverage<'a>(cluster: &'a Value, kind: &str) -> &'a Value {
    cluster["kinds"]
        .as_array()
        .and_then(|ks| {
            ks.iter()
                .find(|k| k["kind"] == kind && k["kind_version"] == 1)
        })
        .unwrap_or_else(|| panic!("no coverage of {kind} in {cluster}"))
}

/// `conctl ARGS` against `server`; its stdout, asserting it succeeded.
async fn conctl(server: &str, args: &[&str]) -> String {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_conctl"))
        .env_clear()
        .arg("--server")
        .arg(server)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run conctl");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "conctl {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cluster_lists_the_process_its_workers_and_a_kind_nobody_registered() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(0)).await;
    let hello = Worker::hello(&c.broker, "greeter", &[("WORKER_MAX_PARALLEL", "3")]);
    // "helo": a typo of the worker's; no manifest registers it.
    let typo = sdk_worker(&c.broker, "typo", &[("helo", 1)]);

    let v = cluster_when(&c, "both workers listed", |v| {
        worker_names(v) == ["greeter", "typo"]
    })
    .await;
    let members = v["members"].as_array().unwrap();
    assert_eq!(members.len(), 1, "{v}");
    let me = &members[0];
    assert_eq!(me["role"], "all", "{me}");
    assert_eq!(me["pid"], c.pid(), "{me}");
    assert_eq!(
        me["addresses"]["http"],
        c.http.trim_start_matches("http://")
    );
    assert_eq!(
        me["addresses"]["grpc"],
        c.broker.trim_start_matches("http://")
    );
    assert!(
        me["version"].as_str().is_some_and(|s| !s.is_empty()),
        "{me}"
    );

    let greeter = worker(&v, "greeter");
    assert_eq!(
        greeter["kinds"],
        json!([{"kind": "hello", "kind_version": 1, "ready": true}])
    );
    assert_eq!(greeter["unknown_kinds"], json!([]));
    assert_eq!(greeter["max_inflight"], 3);
    assert_eq!(greeter["inflight"], 0);
    assert!(
        greeter["sdk"]
            .as_str()
            .is_some_and(|s| s.starts_with("rust")),
        "{greeter}"
    );
    assert_eq!(greeter["draining"], false);
    let typo_w = worker(&v, "typo");
    assert_eq!(
        typo_w["unknown_kinds"],
        json!([{"kind": "helo", "kind_version": 1}])
    );
    assert_eq!(
        coverage(&v, "hello"),
        &json!({"kind": "hello", "kind_version": 1, "registered": true, "workers": 1, "ready_workers": 1})
    );
    assert_eq!(coverage(&v, "helo")["registered"], false);

    let (s, kinds) = c.call(Method::GET, "kinds", None).await;
    assert_eq!(s, 200);
    let row = &kinds["kinds"][0];
    assert_eq!(
        (&row["kind"], &row["workers"]),
        (&json!("hello"), &json!(1))
    );

    let table = conctl(&c.http, &["cluster"]).await;
    assert!(table.contains("greeter"), "{table}");
    assert!(table.contains("helo@1"), "{table}");
    let doc: Value = serde_json::from_str(&conctl(&c.http, &["cluster", "-o", "json"]).await)
        .expect("conctl cluster -o json prints JSON");
    assert_eq!(doc["members"][0]["id"], me["id"]);

    // A worker that leaves is gone from the list at once, not at the next refresh.
    hello.kill().await;
    typo.cancel();
    let v = cluster_when(&c, "the workers gone", |v| worker_names(v).is_empty()).await;
    assert_eq!(coverage(&v, "hello")["workers"], 0, "{v}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resource_no_worker_serves_says_what_it_waits_for() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&leaf("vpc", 1)).await;
    c.apply_manifest(&leaf("vpc", 2)).await;
    // A worker of another version of the kind does not serve vpc v1.
    let v2 = sdk_worker(&c.broker, "net-v2", &[("vpc", 2)]);
    cluster_when(&c, "the vpc v2 worker", |v| worker_names(v) == ["net-v2"]).await;
    let (s, _, body) = c
        .apply(&json!({"kind": "vpc", "kind_version": 1, "name": "main", "spec": {}}))
        .await;
    assert_eq!(s, 201, "{body}");
    let r = c.get("vpc", "main").await.unwrap();
    assert_eq!(r["waiting_for"], "no worker serves vpc v1", "{r}");
    assert_eq!(r["phase"], "Reconciling");

    let shown = conctl(&c.http, &["get", "resource", "vpc/main"]).await;
    assert!(
        shown.contains("Waiting for: no worker serves vpc v1"),
        "{shown}"
    );

    // Once a worker serves it, the resource goes on and waits for nothing.
    let stop = sdk_worker(&c.broker, "net", &[("vpc", 1)]);
    let r = c
        .wait_resource("vpc", "main", "vpc/main Ready", T, |v| {
            v["phase"] == "Ready"
        })
        .await;
    assert_eq!(r["waiting_for"], Value::Null, "{r}");
    // A resource with nothing to do waits for nothing, served or not.
    stop.cancel();
    v2.cancel();
    cluster_when(&c, "the vpc worker gone", |v| worker_names(v).is_empty()).await;
    let r = c.get("vpc", "main").await.unwrap();
    assert_eq!(r["waiting_for"], Value::Null, "{r}");
    let shown = conctl(&c.http, &["get", "resource", "vpc/main"]).await;
    assert!(!shown.contains("Waiting for"), "{shown}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_process_stays_listed_not_ready_until_its_ttl() {
    // A short liveness window and TTL, so the test sees both pass.
    let env = [("MEMBER_DEAD_AFTER", "3s"), ("MEMBER_GC_AFTER", "8s")];
    let c = Converge::start(&env).await;
    let mut peer = c.spawn_peer(&env).await;
    let pid = peer.child.id().expect("the peer runs");
    let status_of = |v: &Value| -> Option<String> {
        v["members"]
            .as_array()?
            .iter()
            .find(|m| m["pid"] == pid)
            .map(|m| m["status"].as_str().unwrap_or_default().to_string())
    };
    cluster_when(&c, "the peer listed Ready", |v| {
        status_of(v).as_deref() == Some("Ready")
    })
    .await;

    peer.child.kill().await.unwrap();
    let v = cluster_when(&c, "the killed peer listed NotReady", |v| {
        status_of(v).as_deref() == Some("NotReady")
    })
    .await;
    let me = v["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["pid"] == c.pid())
        .unwrap();
    assert_eq!(me["status"], "Ready", "{v}");
    let text = conctl(&c.http, &["cluster"]).await;
    assert!(text.contains("NotReady"), "{text}");

    cluster_when(
        &c,
        "the killed peer's row removed after MEMBER_GC_AFTER",
        |v| status_of(v).is_none(),
    )
    .await;
}
