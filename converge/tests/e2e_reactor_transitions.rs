//! Reactor bindings' `label_match` and every transition end to end, with the real `converge`
//! and an in-process SDK worker serving both the watched kind and the reactor kind.
//!
//! Four resources of a watched kind (`rwatch`) with different labels each go through all five
//! transitions — created, synced (Ready), degraded (Ready=False), failed (a terminal error),
//! deleted — and the reactor (`rsink`) must receive exactly the deliveries the bindings select:
//! a binding per transition matching `team=a`, one matching `team=a, env=prod` (every label
//! must match), one with no `label_match` (every resource), and a disabled binding per
//! transition (nothing). Each delivery arrives once, with the transition, a dedup token
//! `<id>:<transition>:<generation>:<binding>` and the resource as it was at that transition
//! (name, labels, generation, phase); once every delivery is acked the outbox is empty and no
//! delivery was seen twice. What exists already (one binding's retries keep their token; two
//! bindings deliver independently; disabling one is live) is in `e2e_reactors.rs`.

mod common;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{Converge, wait_for};
use converge_sdk::{
    Condition, HandlerError, KindVersion, Outcome, Provider, ReactionRequest, Registry, Transition,
    WorkerConfig,
};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(60);

/// The transitions a binding can watch, as the API spells them.
const TRANSITIONS: [&str; 5] = ["created", "synced", "degraded", "failed", "deleted"];

/// One delivery the reactor saw.
#[derive(Debug, Clone, PartialEq)]
struct Delivery {
    /// The binding, from the end of the dedup token.
    binding: String,
    /// The transition the task carried.
    transition: String,
    /// The dedup token.
    token: String,
    /// The watched resource's snapshot: name, generation, phase, labels, id.
    name: String,
    generation: i64,
    phase: String,
    labels: BTreeMap<String, String>,
    id: String,
}

/// The watched kind's worker: its spec's `mode` decides the outcome (`ok` → Ready,
/// `degraded` → synced with Ready=False, `fail` → a terminal error).
struct Watched;

impl Provider for Watched {
    fn kind(&self) -> KindVersion {
        KindVersion::new("rwatch", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let spec: Value = req.spec()?;
        match spec["mode"].as_str() {
            Some("ok") => Ok(Outcome::status(json!({"healthy": true}))
                .with_condition(Condition::ready(true, "Up", "probed"))),
            Some("degraded") => Ok(Outcome::status(json!({"healthy": false}))
                .with_condition(Condition::ready(false, "Down", "probed"))),
            _ => Err(HandlerError::terminal("told to fail")),
        }
    }
}

/// The reactor: records every delivery and succeeds.
struct Sink {
    seen: Arc<Mutex<Vec<Delivery>>>,
}

fn transition_name(t: Option<Transition>) -> String {
    match t {
        Some(Transition::Created) => "created",
        Some(Transition::Synced) => "synced",
        Some(Transition::Degraded) => "degraded",
        Some(Transition::Failed) => "failed",
        Some(Transition::Deleted) => "deleted",
        other => panic!("a delivery without a known transition: {other:?}"),
    }
    .to_string()
}

impl Provider for Sink {
    fn kind(&self) -> KindVersion {
        KindVersion::new("rsink", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let r = &req.resource;
        self.seen.lock().unwrap().push(Delivery {
            binding: req
                .dedup_token
                .rsplit(':')
                .next()
                .unwrap_or_default()
                .into(),
            transition: transition_name(req.transition),
            token: req.dedup_token.clone(),
            name: r.name.clone(),
            generation: r.generation,
            phase: r.phase.clone(),
            labels: r.labels.clone(),
            id: r.id.to_string(),
        });
        Ok(Outcome::default())
    }
}

async fn bind(c: &Converge, body: Value) {
    let (s, resp) = c
        .call(Method::POST, "reactor-bindings", Some(body.clone()))
        .await;
    assert_eq!(s, 201, "{body}: {resp}");
}

/// `name`'s spec and labels as one apply.
async fn apply(c: &Converge, name: &str, labels: &Value, mode: &str, n: i64) {
    let body = json!({"kind": "rwatch", "kind_version": 1, "name": name,
                      "labels": labels, "spec": {"mode": mode, "n": n}});
    let (s, _, resp) = c.apply(&body).await;
    assert!(s == 200 || s == 201, "{body}: {s} {resp}");
}

async fn outbox_rows(c: &Converge) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM lifecycle_outbox")
        .fetch_one(&c.db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn label_match_selects_and_every_transition_is_delivered_once_with_its_snapshot() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&json!({"kind": "rwatch", "kind_version": 1, "reactions": [
        {"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]}]}))
        .await;
    c.apply_manifest(&json!({"kind": "rsink", "kind_version": 1, "reactions": [
        {"name": "react", "trigger": "reactor", "emits": ["sideEffect"]}]}))
        .await;
    for t in TRANSITIONS {
        bind(
            &c,
            json!({"name": format!("team-a-{t}"), "watch_kind": "rwatch",
                        "transition": t, "reactor": "rsink", "label_match": {"team": "a"}}),
        )
        .await;
        bind(
            &c,
            json!({"name": format!("off-{t}"), "watch_kind": "rwatch",
                        "transition": t, "reactor": "rsink", "enabled": false}),
        )
        .await;
    }
    bind(
        &c,
        json!({"name": "prod-synced", "watch_kind": "rwatch", "transition": "synced",
                    "reactor": "rsink", "label_match": {"team": "a", "env": "prod"}}),
    )
    .await;
    bind(
        &c,
        json!({"name": "all-synced", "watch_kind": "rwatch", "transition": "synced",
                    "reactor": "rsink"}),
    )
    .await;
    let (s, list) = c
        .call(Method::GET, "reactor-bindings?watch_kind=rwatch", None)
        .await;
    assert_eq!(s, 200, "{list}");
    let by_name = |n: &str| {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == n)
            .cloned()
            .unwrap_or_else(|| panic!("binding {n} listed: {list}"))
    };
    assert_eq!(
        by_name("prod-synced")["label_match"],
        json!({"team": "a", "env": "prod"})
    );
    assert_eq!(by_name("off-failed")["enabled"], false);

    let seen = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    tokio::spawn(converge_sdk::run_worker(
        WorkerConfig::new(c.broker.clone()),
        Registry::new()
            .with(Watched)
            .with(Sink { seen: seen.clone() }),
        stop.clone().cancelled_owned(),
    ));

    // Labels: a1 carries both of prod-synced's (and one more is fine: containment); a2 only
    // team=a; b1 another team; n1 none.
    let resources: [(&str, Value); 4] = [
        ("a1", json!({"team": "a", "env": "prod", "tier": "gold"})),
        ("a2", json!({"team": "a", "env": "dev"})),
        ("b1", json!({"team": "b", "env": "prod"})),
        ("n1", json!({})),
    ];
    let phase_of = |name: &'static str, phase: &'static str| {
        let c = &c;
        async move {
            c.wait_resource("rwatch", name, phase, T, |v| v["phase"] == phase)
                .await
        }
    };
    let mut ids = BTreeMap::new();
    for (name, labels) in &resources {
        apply(&c, name, labels, "ok", 1).await;
    }
    for (name, _) in &resources {
        let v = phase_of(name, "Ready").await;
        ids.insert(*name, v["uid"].as_str().unwrap_or_default().to_string());
    }
    for (name, labels) in &resources {
        apply(&c, name, labels, "degraded", 2).await;
    }
    for (name, _) in &resources {
        phase_of(name, "Degraded").await;
    }
    for (name, labels) in &resources {
        apply(&c, name, labels, "fail", 3).await;
    }
    for (name, _) in &resources {
        let v = phase_of(name, "Failed").await;
        assert_eq!(v["failure_terminal"], true, "{v}");
    }
    for (name, _) in &resources {
        let (s, body) = c
            .call(Method::DELETE, &format!("resources/rwatch/{name}"), None)
            .await;
        assert!((200..300).contains(&s), "delete {name}: {s} {body}");
    }

    // What the bindings select: every transition of a1 and a2 through team-a-*, a1's synced
    // through prod-synced, and every resource's synced through all-synced. (transition,
    // generation, phase of the snapshot) per transition.
    let life = [
        ("created", 1, "Reconciling"),
        ("synced", 1, "Ready"),
        ("degraded", 2, "Degraded"),
        ("failed", 3, "Failed"),
        ("deleted", 3, "Deleting"),
    ];
    let mut want: Vec<(String, String, String, i64, String)> = Vec::new();
    for name in ["a1", "a2"] {
        for (t, g, p) in life {
            want.push((format!("team-a-{t}"), t.into(), name.into(), g, p.into()));
        }
    }
    want.push((
        "prod-synced".into(),
        "synced".into(),
        "a1".into(),
        1,
        "Ready".into(),
    ));
    for (name, _) in &resources {
        want.push((
            "all-synced".into(),
            "synced".into(),
            (*name).into(),
            1,
            "Ready".into(),
        ));
    }
    want.sort();

    let got = |seen: &Arc<Mutex<Vec<Delivery>>>| {
        let mut g: Vec<(String, String, String, i64, String)> = seen
            .lock()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d.binding.clone(),
                    d.transition.clone(),
                    d.name.clone(),
                    d.generation,
                    d.phase.clone(),
                )
            })
            .collect();
        g.sort();
        g
    };
    // Every wanted delivery arrived and was acked (a delivery leaves the outbox only once its
    // reactor succeeded, so an empty outbox means nothing is left to arrive).
    wait_for(T, "every delivery made and acked", || async {
        (got(&seen).len() >= want.len() && outbox_rows(&c).await == 0).then_some(())
    })
    .await;
    for (name, _) in &resources {
        wait_for(T, "deleted", || async {
            c.get("rwatch", name).await.is_none().then_some(())
        })
        .await;
    }
    assert_eq!(outbox_rows(&c).await, 0, "nothing left to deliver");
    assert_eq!(
        got(&seen),
        want,
        "exactly the deliveries the bindings select"
    );

    let seen = seen.lock().unwrap().clone();
    for d in &seen {
        // The snapshot is the watched resource's, labels included, and the token names it.
        let labels: BTreeMap<String, String> = serde_json::from_value(
            resources
                .iter()
                .find(|(n, _)| *n == d.name)
                .unwrap()
                .1
                .clone(),
        )
        .unwrap();
        assert_eq!(d.labels, labels, "{d:?}");
        assert_eq!(
            d.token,
            format!(
                "{}:{}:{}:{}",
                ids[d.name.as_str()],
                d.transition,
                d.generation,
                d.binding
            ),
            "{d:?}"
        );
        assert_eq!(d.id, ids[d.name.as_str()], "{d:?}");
    }
    // Once each: no token twice, and no disabled binding ever delivered or queued.
    let mut tokens: Vec<&str> = seen.iter().map(|d| d.token.as_str()).collect();
    tokens.sort_unstable();
    let n = tokens.len();
    tokens.dedup();
    assert_eq!(tokens.len(), n, "a delivery was made twice: {seen:?}");
    assert!(!seen.iter().any(|d| d.binding.starts_with("off-")));
    stop.cancel();
    c.stop().await;
}
