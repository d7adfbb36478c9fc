//! `resync_recomposes` end to end, with the real `converge` and an in-process SDK worker
//! serving two composite kinds (compose + rollup) and their leaf kind.
//!
//! Both composites resync every second (`resync_interval_secs: 1`, the reaper every second).
//! With `resync_recomposes: true` a resync runs the composer again — the worker gets a
//! COMPOSE task with trigger `resync` at the unchanged generation — and what that compose
//! returns is applied: here the composer observes a new "round" each time, so its child's spec
//! changes, the child's generation bumps and its worker runs it (trigger `specChange`) to
//! Ready. With `resync_recomposes: false` a resync runs only the stages after the composer
//! (`broker/src/pipeline.rs` `plan`: the work stage, when the kind has one, and the rollup):
//! this composite's resync tasks reach the worker as ROLLUP only, its composer runs once,
//! and its child is never touched. Neither root's generation moves.

mod common;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{Converge, wait_for};
use converge_sdk::{
    ChildSpec, HandlerError, KindVersion, Outcome, Provider, ReactionRequest, Registry, Stage,
    WorkerConfig, trigger,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(60);

/// One task a worker got: (kind, resource name, stage, trigger, generation).
type Seen = (String, String, Stage, String, i64);

/// A composite kind's worker: the composer emits one `rsleaf` child (`<kind>-leaf`) whose
/// spec carries the number of composes so far (a stand-in for what a composer observes
/// outside, which a resync exists to pick up); the rollup reports the child count.
struct Composite {
    kind: &'static str,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// Records `req` and returns how many tasks of its resource and stage were seen, this one
/// included.
fn record(seen: &Mutex<Vec<Seen>>, req: &ReactionRequest) -> usize {
    let mut s = seen.lock().unwrap();
    s.push((
        req.kind.clone(),
        req.resource.name.clone(),
        req.stage,
        req.trigger.clone(),
        req.generation,
    ));
    s.iter()
        .filter(|x| x.0 == req.kind && x.1 == req.resource.name && x.2 == req.stage)
        .count()
}

impl Provider for Composite {
    fn kind(&self) -> KindVersion {
        KindVersion::new(self.kind, 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let n = record(&self.seen, &req);
        match req.stage {
            Stage::Compose => Ok(Outcome::status(json!({"composed": n})).with_child(
                ChildSpec::new(
                    "rsleaf",
                    1,
                    format!("{}-leaf", self.kind),
                    json!({"round": n}),
                ),
            )),
            Stage::Rollup => Ok(Outcome::status(json!({"children": 1}))),
            other => Err(HandlerError::terminal(format!(
                "unexpected stage {other:?}"
            ))),
        }
    }
}

/// The leaf's worker: Ready with its spec's round as its status.
struct Leaf {
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Provider for Leaf {
    fn kind(&self) -> KindVersion {
        KindVersion::new("rsleaf", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        record(&self.seen, &req);
        let spec: Value = req.spec()?;
        Ok(Outcome::status(json!({"round": spec["round"]})))
    }
}

fn composite_manifest(kind: &str, recompose: bool) -> Value {
    json!({"kind": kind, "kind_version": 1,
           "resync_interval_secs": 1, "resync_recomposes": recompose,
           "reactions": [
               {"name": "compose", "trigger": "specChange", "emits": ["children", "status"]},
               {"name": "rollup", "trigger": "childrenSettled", "emits": ["status"]}]})
}

/// The tasks of `kind/name` seen so far.
fn tasks_of(seen: &Mutex<Vec<Seen>>, kind: &str, name: &str) -> Vec<(Stage, String, i64)> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|s| s.0 == kind && s.1 == name)
        .map(|s| (s.2, s.3.clone(), s.4))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resync_recomposes_only_when_the_kind_says_so() {
    let c = Converge::start(&[("REAPER_EVERY", "1s")]).await;
    c.apply_manifest(&json!({"kind": "rsleaf", "kind_version": 1, "reactions": [
        {"name": "work", "trigger": "specChange", "emits": ["status"]}]}))
        .await;
    c.apply_manifest(&composite_manifest("rsre", true)).await;
    c.apply_manifest(&composite_manifest("rsno", false)).await;
    // The kind config the manifests seeded, as the API reports it.
    for (kind, recompose) in [("rsre", true), ("rsno", false)] {
        let (s, cfg) = c
            .call(
                reqwest::Method::GET,
                &format!("kinds/{kind}/versions/1/config"),
                None,
            )
            .await;
        assert_eq!(s, 200, "{cfg}");
        assert_eq!(cfg["resync_interval_secs"], 1, "{cfg}");
        assert_eq!(cfg["resync_recomposes"], recompose, "{cfg}");
    }

    let seen = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    tokio::spawn(converge_sdk::run_worker(
        WorkerConfig::new(c.broker.clone()),
        Registry::new()
            .with(Composite {
                kind: "rsre",
                seen: seen.clone(),
            })
            .with(Composite {
                kind: "rsno",
                seen: seen.clone(),
            })
            .with(Leaf { seen: seen.clone() }),
        stop.clone().cancelled_owned(),
    ));
    for kind in ["rsre", "rsno"] {
        let (s, _, body) = c
            .apply(&json!({"kind": kind, "kind_version": 1, "name": "root", "spec": {}}))
            .await;
        assert_eq!(s, 201, "{body}");
    }

    // recompose = true: a COMPOSE with trigger resync at generation 1, after the first one.
    let resync_compose = |(stage, trig, _): &(Stage, String, i64)| {
        *stage == Stage::Compose && trig == trigger::RESYNC
    };
    wait_for(T, "rsre/root composed again by a resync", || async {
        tasks_of(&seen, "rsre", "root")
            .iter()
            .any(resync_compose)
            .then_some(())
    })
    .await;
    let re = tasks_of(&seen, "rsre", "root");
    assert_eq!(
        re[0],
        (Stage::Compose, trigger::SPEC_CHANGE.into(), 1),
        "the first compose is the spec change's: {re:?}"
    );
    assert!(
        re.iter().filter(|t| resync_compose(t)).all(|t| t.2 == 1),
        "a resync keeps the generation: {re:?}"
    );
    // ... and its result is applied: the child's spec follows the composer's new round, its
    // generation bumps and its worker runs the new spec to Ready.
    let leaf = c
        .wait_resource("rsleaf", "rsre-leaf", "rsre's child re-applied", T, |v| {
            v["generation"].as_i64() >= Some(2)
                && v["phase"] == "Ready"
                && v["status"]["round"] == v["spec"]["round"]
        })
        .await;
    let round = leaf["spec"]["round"].as_i64().unwrap();
    assert!(round >= 2, "{leaf}");
    let leaf_tasks = tasks_of(&seen, "rsleaf", "rsre-leaf");
    assert!(
        leaf_tasks
            .iter()
            .any(|t| t.0 == Stage::Work && t.1 == trigger::SPEC_CHANGE && t.2 >= 2),
        "the re-applied child ran for its new generation: {leaf_tasks:?}"
    );

    // recompose = false: wait for two resync tasks of rsno/root (it has no work stage, so
    // each is a ROLLUP), then check it was composed only for its spec change.
    wait_for(T, "rsno/root resynced twice", || async {
        let n = tasks_of(&seen, "rsno", "root")
            .iter()
            .filter(|t| t.1 == trigger::RESYNC)
            .count();
        (n >= 2).then_some(())
    })
    .await;
    let no = tasks_of(&seen, "rsno", "root");
    let resyncs: Vec<_> = no.iter().filter(|t| t.1 == trigger::RESYNC).collect();
    assert!(
        resyncs.iter().all(|t| t.0 == Stage::Rollup && t.2 == 1),
        "a resync without recompose runs the rollup only: {no:?}"
    );
    let composes: Vec<_> = no.iter().filter(|t| t.0 == Stage::Compose).collect();
    assert_eq!(
        composes,
        [&(Stage::Compose, trigger::SPEC_CHANGE.to_string(), 1)],
        "composed once, for the spec change: {no:?}"
    );
    let child = c.get("rsleaf", "rsno-leaf").await.unwrap();
    let (gen_, spec) = (child["generation"].clone(), child["spec"].clone());
    assert_eq!(
        (gen_, spec),
        (json!(1), json!({"round": 1})),
        "rsno's child untouched"
    );
    for kind in ["rsre", "rsno"] {
        let root = c.get(kind, "root").await.unwrap();
        assert_eq!(root["generation"], 1, "{root}");
    }
    stop.cancel();
    c.stop().await;
}
