//! Reactors, drift and events end to end with the real `converge`: a reactor bound to
//! `classicbom` synced (served by the real classic worker) delivers exactly one successful
//! side effect per generation with a stable dedup token even when it fails twice first; two
//! bindings deliver independently and disabling one is live; a fleet with no bindings writes
//! no lifecycle rows; a resync-enabled kind turns Degraded and back without a spec change;
//! the event log lists a resource's transitions in order.

mod common;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use common::{Converge, Worker, wait_for};
use converge_sdk::{
    Condition, HandlerError, KindVersion, Outcome, Provider, ReactionRequest, Registry,
    WorkerConfig,
};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(60);

/// One delivery attempt a reactor saw: (binding from the token, transition, watched name,
/// generation, dedup token, succeeded).
type Attempt = (String, String, String, i64, String, bool);

/// A reactor kind that records every delivery and fails the first `fail_first` attempts of
/// each dedup token.
struct Recorder {
    kind: &'static str,
    fail_first: usize,
    seen: Arc<Mutex<Vec<Attempt>>>,
}

impl Provider for Recorder {
    fn kind(&self) -> KindVersion {
        KindVersion::new(self.kind, 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let token = req.dedup_token.clone();
        let binding = token.rsplit(':').next().unwrap_or_default().to_string();
        let transition = format!("{:?}", req.transition).to_lowercase();
        let mut seen = self.seen.lock().unwrap();
        let before = seen.iter().filter(|a| a.4 == token).count();
        let ok = before >= self.fail_first;
        seen.push((
            binding,
            transition,
            req.resource.name.clone(),
            req.resource.generation,
            token,
            ok,
        ));
        if ok {
            Ok(Outcome::default())
        } else {
            Err(HandlerError::transient(format!(
                "sink unavailable (attempt {})",
                before + 1
            )))
        }
    }
}

fn reactor_manifest(kind: &str) -> Value {
    json!({"kind": kind, "kind_version": 1,
           "reactions": [{"name": "react", "trigger": "reactor", "emits": ["sideEffect"]}]})
}

/// A leaf whose health follows a shared switch; resync-enabled through its manifest.
struct Probe {
    unhealthy: Arc<AtomicBool>,
    triggers: Arc<Mutex<Vec<String>>>,
}

impl Provider for Probe {
    fn kind(&self) -> KindVersion {
        KindVersion::new("probe", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        self.triggers.lock().unwrap().push(req.trigger.clone());
        let spec: Value = req.spec()?;
        if spec["fail_once"] == true && req.attempt == 1 {
            return Err(HandlerError::transient("first attempt fails"));
        }
        let healthy = !self.unhealthy.load(Ordering::SeqCst);
        Ok(
            Outcome::status(json!({"healthy": healthy})).with_condition(Condition::ready(
                healthy,
                if healthy { "Up" } else { "Down" },
                "probed",
            )),
        )
    }
}

fn in_process(c: &Converge, reg: Registry) -> CancellationToken {
    let stop = CancellationToken::new();
    let mut cfg = WorkerConfig::new(c.broker.clone());
    cfg.max_parallel = 64;
    tokio::spawn(converge_sdk::run_worker(
        cfg,
        reg,
        stop.clone().cancelled_owned(),
    ));
    stop
}

async fn bind(
    c: &Converge,
    name: &str,
    watch: &str,
    transition: &str,
    reactor: &str,
    enabled: bool,
) {
    let (s, body) = c
        .call(
            Method::POST,
            "reactor-bindings",
            Some(
                json!({"name": name, "watch_kind": watch, "transition": transition,
                        "reactor": reactor, "enabled": enabled}),
            ),
        )
        .await;
    assert!(s == 200 || s == 201, "{s} {body}");
}

async fn lifecycle_rows(c: &Converge) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM lifecycle_outbox")
        .fetch_one(&c.db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_classicbom_synced_binding_delivers_once_per_generation_despite_two_failures() {
    let c = Converge::start(&[]).await;
    for k in ["classicbom", "account", "vpc", "tgw", "route"] {
        c.apply_manifest(&Converge::classic_manifest(k)).await;
    }
    c.apply_manifest(&reactor_manifest("audit")).await;
    let _classic = Worker::spawn("classic-worker", &c.broker, "classic", &[]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stop = in_process(
        &c,
        Registry::new().with(Recorder {
            kind: "audit",
            fail_first: 2,
            seen: seen.clone(),
        }),
    );
    // Validation first: an unknown watched kind and a non-reactor are refused.
    let (s, _) = c
        .call(Method::POST, "reactor-bindings",
              Some(json!({"name": "x", "watch_kind": "nope", "transition": "synced", "reactor": "audit"})))
        .await;
    assert_eq!(s, 422);
    let (s, _) = c
        .call(Method::POST, "reactor-bindings",
              Some(json!({"name": "x", "watch_kind": "classicbom", "transition": "synced", "reactor": "vpc"})))
        .await;
    assert_eq!(s, 422);
    bind(&c, "bom-audit", "classicbom", "synced", "audit", true).await;

    let bom = |teams: Value| {
        json!({"kind": "classicbom", "kind_version": 1, "name": "bom",
               "spec": {"functional_domains": [{"name": "pay", "teams": teams}], "region": "eu-west-1"}})
    };
    let (s, _, body) = c.apply(&bom(json!(["a"]))).await;
    assert_eq!(s, 201, "{body}");
    let wins = |generation: i64| {
        let seen = seen.clone();
        move || {
            let seen = seen.clone();
            async move {
                let s = seen.lock().unwrap();
                s.iter().any(|a| a.3 == generation && a.5).then_some(())
            }
        }
    };
    wait_for(T, "generation 1 delivered", wins(1)).await;
    let (s, _, _) = c.apply(&bom(json!(["a", "b"]))).await;
    assert_eq!(s, 200);
    wait_for(T, "generation 2 delivered", wins(2)).await;
    wait_for(T, "every delivery acked", || async {
        (lifecycle_rows(&c).await == 0).then_some(())
    })
    .await;

    let seen = seen.lock().unwrap().clone();
    for generation in [1, 2] {
        let attempts: Vec<&Attempt> = seen.iter().filter(|a| a.3 == generation).collect();
        assert_eq!(
            attempts.len(),
            3,
            "two failures then one success for generation {generation}: {seen:?}"
        );
        assert_eq!(
            attempts.iter().filter(|a| a.5).count(),
            1,
            "exactly one success"
        );
        assert!(
            attempts.iter().all(|a| a.4 == attempts[0].4),
            "a stable dedup token"
        );
        assert!(
            attempts[0]
                .4
                .ends_with(&format!(":synced:{generation}:bom-audit")),
            "{}",
            attempts[0].4
        );
        assert!(
            attempts
                .iter()
                .all(|a| a.1 == "some(synced)" && a.2 == "bom")
        );
    }
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn two_bindings_deliver_independently_and_disabling_one_is_live() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&json!({"kind": "probe", "kind_version": 1, "reactions": [
        {"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]}]}))
        .await;
    c.apply_manifest(&reactor_manifest("sink-a")).await;
    c.apply_manifest(&reactor_manifest("sink-b")).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stop = in_process(
        &c,
        Registry::new()
            .with(Probe {
                unhealthy: Arc::default(),
                triggers: Arc::default(),
            })
            .with(Recorder {
                kind: "sink-a",
                fail_first: 0,
                seen: seen.clone(),
            })
            .with(Recorder {
                kind: "sink-b",
                fail_first: 0,
                seen: seen.clone(),
            }),
    );
    bind(&c, "to-a", "probe", "synced", "sink-a", true).await;
    bind(&c, "to-b", "probe", "synced", "sink-b", true).await;
    let delivered = |name: &'static str, binding: &'static str| {
        let seen = seen.clone();
        move || {
            let seen = seen.clone();
            async move {
                let s = seen.lock().unwrap();
                s.iter()
                    .any(|a| a.2 == name && a.0 == binding)
                    .then_some(())
            }
        }
    };
    c.apply(&json!({"kind": "probe", "kind_version": 1, "name": "p1", "spec": {}}))
        .await;
    wait_for(T, "binding a delivers", delivered("p1", "to-a")).await;
    wait_for(T, "binding b delivers", delivered("p1", "to-b")).await;

    bind(&c, "to-b", "probe", "synced", "sink-b", false).await;
    c.apply(&json!({"kind": "probe", "kind_version": 1, "name": "p2", "spec": {}}))
        .await;
    wait_for(T, "binding a delivers p2", delivered("p2", "to-a")).await;
    // Both rows would have been written by the same transition: b's absence is final.
    let b_rows: i64 =
        sqlx::query_scalar("SELECT count(*) FROM lifecycle_outbox WHERE binding_name = 'to-b'")
            .fetch_one(&c.db.pool)
            .await
            .unwrap();
    assert_eq!(b_rows, 0);
    assert!(
        !seen
            .lock()
            .unwrap()
            .iter()
            .any(|a| a.2 == "p2" && a.0 == "to-b"),
        "a disabled binding does not fire"
    );
    let (_, list) = c
        .call(Method::GET, "reactor-bindings?watch_kind=probe", None)
        .await;
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    assert_eq!(list["items"][1]["enabled"], false);
    let (s, _) = c.call(Method::DELETE, "reactor-bindings/to-b", None).await;
    assert_eq!(s, 204);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn no_bindings_means_no_lifecycle_rows_while_ten_thousand_reconcile() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&json!({"kind": "probe", "kind_version": 1, "reactions": [
        {"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]}]}))
        .await;
    let stop = in_process(
        &c,
        Registry::new().with(Probe {
            unhealthy: Arc::default(),
            triggers: Arc::default(),
        }),
    );
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM generate_series(1, 10000) g,
                LATERAL resource_apply('probe', 1, 'bulk-' || g, '{}', '{}', NULL)",
    )
    .fetch_one(&c.db.pool)
    .await
    .unwrap();
    assert_eq!(n, 10_000);
    wait_for(Duration::from_secs(180), "10,000 Ready", || async {
        let ready: i64 = sqlx::query_scalar("SELECT count(*) FROM resources WHERE phase = 'Ready'")
            .fetch_one(&c.db.pool)
            .await
            .unwrap();
        (ready == 10_000).then_some(())
    })
    .await;
    assert_eq!(
        lifecycle_rows(&c).await,
        0,
        "nothing bound, nothing written"
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resync_kind_turns_degraded_and_back_without_a_spec_change() {
    let c = Converge::start(&[("REAPER_EVERY", "1s")]).await;
    c.apply_manifest(&json!({"kind": "probe", "kind_version": 1, "resync_interval_secs": 1,
        "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]}]}))
        .await;
    let unhealthy = Arc::new(AtomicBool::new(false));
    let triggers = Arc::new(Mutex::new(Vec::new()));
    let stop = in_process(
        &c,
        Registry::new().with(Probe {
            unhealthy: unhealthy.clone(),
            triggers: triggers.clone(),
        }),
    );
    c.apply(&json!({"kind": "probe", "kind_version": 1, "name": "db", "spec": {}}))
        .await;
    c.wait_resource("probe", "db", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    unhealthy.store(true, Ordering::SeqCst);
    let v = c
        .wait_resource("probe", "db", "Degraded by a resync", T, |v| {
            v["phase"] == "Degraded"
        })
        .await;
    assert_eq!(v["generation"], 1, "no spec change");
    assert!(triggers.lock().unwrap().iter().any(|t| t == "resync"));
    unhealthy.store(false, Ordering::SeqCst);
    let v = c
        .wait_resource("probe", "db", "Ready again", T, |v| v["phase"] == "Ready")
        .await;
    assert_eq!(v["generation"], 1);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn events_list_a_resources_transitions_in_order() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&json!({"kind": "probe", "kind_version": 1, "reactions": [
        {"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]}]}))
        .await;
    let stop = in_process(
        &c,
        Registry::new().with(Probe {
            unhealthy: Arc::default(),
            triggers: Arc::default(),
        }),
    );
    c.apply(&json!({"kind": "probe", "kind_version": 1, "name": "e", "spec": {"fail_once": true}}))
        .await;
    c.wait_resource("probe", "e", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    let (s, _) = c
        .call(Method::POST, "resources/probe/e/quarantine", None)
        .await;
    assert_eq!(s, 200);
    let (s, _) = c.call(Method::DELETE, "resources/probe/e", None).await;
    assert_eq!(s, 202);
    wait_for(T, "deleted", || async {
        c.get("probe", "e").await.is_none().then_some(())
    })
    .await;

    // Page through with a small limit to exercise the cursor.
    let mut all: Vec<Value> = Vec::new();
    let mut cursor = String::new();
    loop {
        let path = format!("resources/probe/e/events?limit=2{cursor}");
        let (s, page) = c.call(Method::GET, &path, None).await;
        assert_eq!(s, 200, "{page}");
        all.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(n) => cursor = format!("&cursor={n}"),
            None => break,
        }
    }
    let steps: Vec<String> = all
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "phase" => format!(
                "{}->{}",
                e["from_phase"].as_str().unwrap(),
                e["to_phase"].as_str().unwrap()
            ),
            t => t.to_string(),
        })
        .collect();
    assert_eq!(
        steps,
        [
            "created",
            "Reconciling->Failed",
            "Failed->Ready",
            "Ready->Quarantined",
            "Quarantined->Deleting",
            "deleted"
        ],
        "{all:?}"
    );
    let failed = all.iter().find(|e| e["to_phase"] == "Failed").unwrap();
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("first attempt fails")
    );
    stop.cancel();
}
