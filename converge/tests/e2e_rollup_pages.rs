//! Rollups that don't ship the subtree, end to end with the real `converge` binary and an
//! in-process Rust SDK worker over real gRPC: a rollup handler that reads nothing gets the
//! summary and no descendant; one that pages (ListDescendants) reads every descendant
//! exactly once; a kind that declares the full form gets every descendant in the request;
//! and a page asked for after the task ended is refused (the lease is the authority).

mod common;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::Converge;
use converge_sdk::{
    ChildSpec, DescendantPages, HandlerError, KindVersion, Outcome, Provider, ReactionRequest,
    Registry, Stage, WorkerConfig,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const T: Duration = Duration::from_secs(30);

/// What the rollups saw, per root name.
#[derive(Default)]
struct Seen {
    /// Descendant id -> how many times a page returned it.
    reads: HashMap<String, HashMap<Uuid, u32>>,
    /// Pages read.
    pages: HashMap<String, u32>,
    /// A pager kept past the end of its task (spec.keep), to ask for a page afterwards.
    kept: Option<DescendantPages>,
}

/// `tree` (summary form) and `ftree` (full form): compose `spec.n` `twig` leaves; the rollup
/// reads per `spec.page` (0: nothing) and reports what it got.
struct Tree {
    kind: &'static str,
    seen: Arc<Mutex<Seen>>,
}

impl Provider for Tree {
    fn kind(&self) -> KindVersion {
        KindVersion::new(self.kind, 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let spec: Value = req.spec()?;
        let name = req.resource.name.clone();
        match req.stage {
            Stage::Compose => {
                let mut out = Outcome::status(json!({}));
                for i in 0..spec["n"].as_u64().unwrap_or(0) {
                    out =
                        out.with_child(ChildSpec::new("twig", 1, format!("{name}-{i}"), json!({})));
                }
                Ok(out)
            }
            Stage::Rollup => {
                let s = req.summary.clone().unwrap_or_default();
                let page = u32::try_from(spec["page"].as_u64().unwrap_or(0)).unwrap_or(0);
                if page > 0 {
                    let mut pages = req.descendant_pages(page);
                    while let Some(rows) = pages.next_page().await? {
                        let mut seen = self.seen.lock().unwrap();
                        *seen.pages.entry(name.clone()).or_default() += 1;
                        let reads = seen.reads.entry(name.clone()).or_default();
                        for r in rows {
                            *reads.entry(r.id).or_default() += 1;
                        }
                    }
                }
                if spec["keep"] == true {
                    self.seen.lock().unwrap().kept = Some(req.descendant_pages(5));
                }
                Ok(Outcome::status(json!({
                    "total": s.total,
                    "ready": s.ready(),
                    "by_kind": s.by_kind,
                    "sent": req.descendants.len(),
                    "included": req.descendants_included,
                })))
            }
            other => Err(HandlerError::terminal(format!(
                "unexpected stage {other:?}"
            ))),
        }
    }
}

struct Twig;

impl Provider for Twig {
    fn kind(&self) -> KindVersion {
        KindVersion::new("twig", 1)
    }

    async fn work(&self, _req: ReactionRequest) -> Result<Outcome, HandlerError> {
        Ok(Outcome::status(json!({"ok": true})))
    }
}

fn composite(kind: &str, full: bool) -> Value {
    let mut rollup = json!({"name": "rollup", "trigger": "childrenSettled", "emits": ["status"]});
    if full {
        rollup["descendants"] = json!("full");
    }
    json!({"kind": kind, "kind_version": 1, "reactions": [
        {"name": "compose", "trigger": "specChange", "emits": ["children", "status"]}, rollup]})
}

struct World {
    c: Converge,
    seen: Arc<Mutex<Seen>>,
    stop: CancellationToken,
}

async fn world() -> World {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&composite("tree", false)).await;
    c.apply_manifest(&composite("ftree", true)).await;
    c.apply_manifest(&json!({"kind": "twig", "kind_version": 1, "reactions": [
        {"name": "work", "trigger": "specChange", "emits": ["status"]}]}))
        .await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let reg = Registry::new()
        .with(Tree {
            kind: "tree",
            seen: seen.clone(),
        })
        .with(Tree {
            kind: "ftree",
            seen: seen.clone(),
        })
        .with(Twig);
    let mut cfg = WorkerConfig::new(c.broker.clone());
    cfg.max_parallel = 32;
    cfg.worker_name = "rollup-pages-test".into();
    let stop = CancellationToken::new();
    tokio::spawn(converge_sdk::run_worker(
        cfg,
        reg,
        stop.clone().cancelled_owned(),
    ));
    World { c, seen, stop }
}

async fn ready_root(w: &World, kind: &str, name: &str, spec: Value) -> Value {
    let (s, _, body) =
        w.c.apply(&json!({"kind": kind, "kind_version": 1, "name": name, "spec": spec}))
            .await;
    assert!(s == 200 || s == 201, "{s} {body}");
    w.c.wait_resource(kind, name, "root Ready", T, |v| v["phase"] == "Ready")
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rollup_that_reads_nothing_gets_the_summary_and_no_descendant() {
    let w = world().await;
    let root = ready_root(&w, "tree", "quiet", json!({"n": 12})).await;
    assert_eq!(
        root["status"],
        json!({"total": 12, "ready": 12, "by_kind": {"twig": 12}, "sent": 0, "included": false})
    );
    assert!(!w.seen.lock().unwrap().pages.contains_key("quiet"));
    w.stop.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rollup_that_pages_reads_every_descendant_exactly_once() {
    let w = world().await;
    let root = ready_root(&w, "tree", "paged", json!({"n": 23, "page": 5})).await;
    assert_eq!(root["status"]["sent"], 0);
    let ids: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM resources WHERE kind = 'twig'")
        .fetch_all(&w.c.db.pool)
        .await
        .unwrap();
    assert_eq!(ids.len(), 23);
    let seen = w.seen.lock().unwrap();
    // The root may roll up more than once (each run pages the whole subtree); within the
    // last run every child comes once: the counts are equal across children.
    let reads = &seen.reads["paged"];
    let runs = reads.values().copied().max().unwrap_or(0);
    assert!(runs >= 1);
    assert_eq!(reads.len(), 23, "every child was read: {reads:?}");
    assert!(
        ids.iter().all(|id| reads.get(id) == Some(&runs)),
        "{reads:?}"
    );
    // 23 at 5 a page: 5 pages per run.
    assert_eq!(seen.pages["paged"], 5 * runs);
    drop(seen);
    w.stop.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_full_form_carries_every_descendant_and_pages_without_a_call() {
    let w = world().await;
    let root = ready_root(&w, "ftree", "full", json!({"n": 9, "page": 4})).await;
    assert_eq!(
        root["status"],
        json!({"total": 9, "ready": 9, "by_kind": {"twig": 9}, "sent": 9, "included": true})
    );
    // The included rows come as one page whatever the page size asked for.
    let seen = w.seen.lock().unwrap();
    let runs = seen.reads["full"].values().copied().max().unwrap_or(0);
    assert_eq!(seen.pages["full"], runs);
    assert_eq!(seen.reads["full"].len(), 9);
    drop(seen);
    w.stop.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_asked_for_after_the_task_ended_is_refused() {
    let w = world().await;
    ready_root(&w, "tree", "late", json!({"n": 3, "keep": true})).await;
    let mut pages = w
        .seen
        .lock()
        .unwrap()
        .kept
        .take()
        .expect("the pager was kept");
    let err = pages.next_page().await.expect_err("the lease is gone");
    assert!(!err.is_terminal(), "a lost lease is transient: {err:?}");
    assert!(err.to_string().contains("lease is gone"), "{err}");
    w.stop.cancel();
}
