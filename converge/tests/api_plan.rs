//! `POST /api/v1/resources:plan` against the real `converge`: a spec change on a Starlark, a
//! CEL and an SDK composite reports the children and edges its compose would add, change and
//! remove (value flows from upstreams' statuses substituted, so a flowed child compares
//! unchanged), and the database is identical afterwards (every table but the liveness and
//! wake-up bookkeeping, hashed row by row, and no row of resources, resource_deps,
//! resource_events, work_queue or work_outbox even rewritten: their xmins are the same); the
//! apply's checks come back as problem details per document; the one-document, array and
//! NDJSON bodies all answer.
//!
//! The composites are composed for real first: an in-process Rust SDK worker stands in for
//! the stdworker and runs the same composers on its effective config (the Starlark bundle in
//! `converge-starlark-compose`, the CEL graph by `converge_cel`), so the children the plan
//! compares with are those a real compose stored. The SDK composite (`provider: sdk`) is
//! planned through a dry run on that worker (over real gRPC, through `plan_requests`); raw
//! workers show who gets dry runs (only a stream that declared `Subscribe.dry_runs`), that a
//! stream cannot answer another's dry run, that a refused answer is a compose error, and the
//! no-worker and timeout warnings.

mod common;

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use base64::Engine;
use common::{Converge, raw_worker::RawWorker, sibling_bin};
use converge_control::app::starlark_sample::{BundleSource, Runner, Sample};
use converge_proto::pb::{
    self, work_stream_client_msg::Body as Out, work_stream_server_msg::Body as In,
};
use converge_sdk::{
    ChildSpec, Condition, DepEdge, HandlerError, KindVersion, Outcome, Provider, ReactionRequest,
    Registry, ResourceRef, Stage, ValueFlow, WorkerConfig,
};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(60);

/// Per root R: pnet R-a (size from the spec), psub R-a-sub (vpc_id flowed from R-a), pnet
/// R-b when `keep`, and pnet R-c with psub R-c-sub when `extra`.
const BUNDLE: &str = r#"
def compose(spec, config, root):
    r = root["name"]
    children = [child("pnet", r + "-a", {"size": spec["size"]}),
                child("psub", r + "-a-sub", {"vpc_id": None, "cidr": "10.0.0.0/24"})]
    edges = [edge("psub", r + "-a-sub", "pnet", r + "-a", values = {"/vpc_id": "/vpc_id"})]
    if spec["keep"]:
        children.append(child("pnet", r + "-b", {"size": 1}))
    if spec["extra"]:
        children.append(child("pnet", r + "-c", {"size": 1}))
        children.append(child("psub", r + "-c-sub", {"vpc_id": None, "cidr": "10.0.1.0/24"}))
        edges.append(edge("psub", r + "-c-sub", "pnet", r + "-c", values = {"/vpc_id": "/vpc_id"}))
    return {"children": children, "edges": edges}
"#;

/// The same composition as a CEL graph.
fn graph() -> Value {
    json!({"resources": [
        {"id": "a", "template": {"kind": "pnet", "name": "${root.name}-a",
                                 "spec": {"size": "${spec.size}"}}},
        {"id": "asub", "template": {"kind": "psub", "name": "${root.name}-a-sub",
                                    "spec": {"vpc_id": "${a.status.vpc_id}", "cidr": "10.0.0.0/24"}}},
        {"id": "b", "when": "${spec.keep}",
         "template": {"kind": "pnet", "name": "${root.name}-b", "spec": {"size": 1}}},
        {"id": "c", "when": "${spec.extra}",
         "template": {"kind": "pnet", "name": "${root.name}-c", "spec": {"size": 1}}},
        {"id": "csub", "template": {"kind": "psub", "name": "${root.name}-c-sub",
                                    "spec": {"vpc_id": "${c.status.vpc_id}", "cidr": "10.0.1.0/24"}}}
    ]})
}

fn composite_manifest(kind: &str, provider: &str) -> Value {
    json!({"kind": kind, "kind_version": 1, "provider": provider,
           "spec_schema": {"type": "object", "required": ["size", "keep", "extra"],
                           "properties": {"size": {"type": "integer", "minimum": 1},
                                          "keep": {"type": "boolean"},
                                          "extra": {"type": "boolean"}},
                           "additionalProperties": false},
           "reactions": [{"name": "compose", "trigger": "specChange",
                          "emits": ["children", "edges", "status"]}]})
}

fn leaf_manifest(kind: &str) -> Value {
    json!({"kind": kind, "kind_version": 1,
           "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status", "conditions"]}]})
}

/// How many dry runs the SDK composer was asked for (`ReactionRequest::dry_run`).
static DRY_RUNS: AtomicUsize = AtomicUsize::new(0);

/// The stdworker's part (and an SDK composer's, for `sdknet`): composes with the composer
/// its provider names (`sdknet`: the Starlark bundle), on the effective config the task
/// carries.
struct Composer {
    kind: &'static str,
    starlark: Runner,
}

impl Provider for Composer {
    fn kind(&self) -> KindVersion {
        KindVersion::new(self.kind, 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        if req.stage != Stage::Compose {
            return Ok(Outcome::default());
        }
        if req.dry_run() {
            DRY_RUNS.fetch_add(1, Ordering::SeqCst);
        }
        let spec: Value = req.spec()?;
        let out = if self.kind == "celnet" {
            converge_cel::Graph::compile(&req.effective_config(), converge_cel::Limits::default())
                .map_err(|e| HandlerError::terminal(format!("{e:?}")))?
                .compose(&req.resource.name, &spec)
                .map_err(|e| HandlerError::terminal(e.to_string()))?
        } else {
            let root = json!({"name": req.resource.name, "kind": self.kind, "kind_version": 1,
                              "labels": {}});
            match self
                .starlark
                .compose(
                    BundleSource::Zip(req.effective_bundle()),
                    &spec,
                    &req.effective_config(),
                    &root,
                )
                .await
            {
                Sample::Composed(o) => o,
                other => return Err(HandlerError::terminal(format!("{other:?}"))),
            }
        };
        let mut outcome = Outcome::default();
        for c in out.children {
            outcome = outcome.with_child(ChildSpec::new(c.kind, c.kind_version, c.name, c.spec));
        }
        for e in out.edges {
            let mut edge = DepEdge::new(
                ResourceRef::new(&e.from.kind, &e.from.name),
                ResourceRef::new(&e.to.kind, &e.to.name),
            );
            for v in e.values {
                edge = edge.with_value(ValueFlow::new(v.dependent_field, v.source_field));
            }
            outcome = outcome.with_edge(edge);
        }
        Ok(outcome)
    }
}

/// The leaves: each reports an id its dependents' flows read.
struct Leaf(&'static str);

impl Provider for Leaf {
    fn kind(&self) -> KindVersion {
        KindVersion::new(self.0, 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let id = format!("{}-{}", self.0, req.resource.name);
        let status = if self.0 == "pnet" {
            json!({"vpc_id": id})
        } else {
            json!({"subnet_id": id})
        };
        Ok(Outcome::status(status).with_condition(Condition::ready(true, "Provisioned", "ok")))
    }
}

/// A converge with the kinds, both composers' default configs and a worker serving them.
async fn world() -> (Converge, CancellationToken) {
    let bin = sibling_bin("converge-starlark-compose");
    let c = Converge::start(&[("CONVERGE_STARLARK_BIN", bin.to_str().unwrap())]).await;
    c.apply_manifest(&leaf_manifest("pnet")).await;
    c.apply_manifest(&leaf_manifest("psub")).await;
    c.apply_manifest(&composite_manifest("starnet", "starlark"))
        .await;
    c.apply_manifest(&composite_manifest("celnet", "cel")).await;
    c.apply_manifest(&composite_manifest("sdknet", "sdk")).await;
    let bundle = base64::engine::general_purpose::STANDARD
        .encode(common::stored_zip(&[("compose.star", BUNDLE)]));
    for config in [
        json!({"name": "starnet", "kind": "starnet", "kind_version": 1, "is_default": true,
               "spec": {}, "data": bundle}),
        json!({"name": "celnet", "kind": "celnet", "kind_version": 1, "is_default": true,
               "spec": graph()}),
        json!({"name": "sdknet", "kind": "sdknet", "kind_version": 1, "is_default": true,
               "spec": {}, "data": bundle}),
    ] {
        let (s, body) = c.call(Method::POST, "providerconfigs", Some(config)).await;
        assert!(s == 200 || s == 201, "{s} {body}");
    }
    let stop = CancellationToken::new();
    let reg = Registry::new()
        .with(Composer {
            kind: "starnet",
            starlark: Runner::new(&bin),
        })
        .with(Composer {
            kind: "celnet",
            starlark: Runner::new(&bin),
        })
        .with(Composer {
            kind: "sdknet",
            starlark: Runner::new(&bin),
        })
        .with(Leaf("pnet"))
        .with(Leaf("psub"));
    let mut cfg = WorkerConfig::new(c.broker.clone());
    cfg.worker_name = "plan-test".into();
    tokio::spawn(converge_sdk::run_worker(
        cfg,
        reg,
        stop.clone().cancelled_owned(),
    ));
    (c, stop)
}

fn root(kind: &str, name: &str, spec: Value) -> Value {
    json!({"kind": kind, "kind_version": 1, "name": name, "spec": spec})
}

/// `POST /resources:plan` with `body` as JSON.
async fn plan(c: &Converge, body: &Value) -> Value {
    let (s, v) = c
        .call(Method::POST, "resources:plan", Some(body.clone()))
        .await;
    assert_eq!(s, 200, "{v}");
    v
}

/// Every table's rows, hashed in a stable order, but the tables background loops write on
/// their own clock (membership and liveness heartbeats, the wake-up counters).
async fn dump(c: &Converge) -> Vec<(String, String)> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT relname::text FROM pg_class
         WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'
           AND relname NOT IN ('cluster_members', 'broker_liveness', 'wake_state')
         ORDER BY 1",
    )
    .fetch_all(&c.db.pool)
    .await
    .unwrap();
    let mut out = Vec::new();
    for t in tables {
        let sql = format!(
            "SELECT count(*)::text || ':' || coalesce(md5(string_agg(x::text, E'\\n' ORDER BY x::text)), '')
             FROM \"{t}\" x"
        );
        let h: String = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&c.db.pool)
            .await
            .unwrap();
        out.push((t, h));
    }
    out
}

/// Per table that a stored change would touch: its row count and the sum of its rows' xmin
/// (a row rewritten with the same content still moves it).
async fn xmins(c: &Converge) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for t in [
        "resources",
        "resource_deps",
        "resource_events",
        "work_queue",
        "work_outbox",
        "plan_requests",
    ] {
        let sql = format!(
            "SELECT count(*)::text || ':' || coalesce(sum(xmin::text::numeric), 0)::text FROM {t}"
        );
        let h: String = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&c.db.pool)
            .await
            .unwrap();
        out.push((t.to_string(), h));
    }
    out
}

/// Waits until a broker lists a ready worker that answers dry runs of `kind` (what the plan
/// checks before it asks for one).
async fn dry_runs_served(c: &Converge, kind: &str) {
    common::wait_for(T, "a dry-run worker listed", || async {
        let ok: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM cluster_members m, jsonb_array_elements(m.workers) w,
                                  jsonb_array_elements(w->'kinds') k
                            WHERE (w->>'dry_runs')::boolean AND (k->>'ready')::boolean
                              AND k->>'kind' = $1)",
        )
        .bind(kind)
        .fetch_one(&c.db.pool)
        .await
        .unwrap();
        ok.then_some(())
    })
    .await;
}

/// Waits until `kind/name` is Ready with every child Ready, `n` of them, and the engine has
/// nothing left to do.
async fn settled(c: &Converge, kind: &str, name: &str, n: usize) {
    c.wait_resource(kind, name, "the composite Ready", T, |v| {
        v["phase"] == "Ready"
    })
    .await;
    common::wait_for(T, "every child Ready", || async {
        let (s, v) = c
            .call(
                Method::GET,
                &format!("resources/{kind}/{name}/children?limit=100"),
                None,
            )
            .await;
        let items = v["resources"].as_array().cloned().unwrap_or_default();
        (s == 200 && items.len() == n && items.iter().all(|i| i["phase"] == "Ready")).then_some(())
    })
    .await;
    // The last child's drain pends its owner again (a childrenSettled pass): nothing queued,
    // in flight or waiting to drain, or a dump could catch that pass half done.
    common::wait_for(T, "the queues empty", || async {
        let busy: i64 = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM work_queue) + (SELECT count(*) FROM work_outbox)
                    + (SELECT count(*) FROM rollup_recheck)",
        )
        .fetch_one(&c.db.pool)
        .await
        .unwrap();
        (busy == 0).then_some(())
    })
    .await;
}

fn refs(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}/{}",
                r["kind"].as_str().unwrap(),
                r["name"].as_str().unwrap()
            )
        })
        .collect();
    out.sort();
    out
}

fn edge_refs(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{}/{} -> {}/{}",
                e["from"]["kind"].as_str().unwrap(),
                e["from"]["name"].as_str().unwrap(),
                e["to"]["kind"].as_str().unwrap(),
                e["to"]["name"].as_str().unwrap()
            )
        })
        .collect();
    out.sort();
    out
}

/// A spec change on composite `kind` (`r` composed and settled with size 1, keep) plans:
/// R-a changed (size), R-b removed, R-c and R-c-sub added with their edge, R-a-sub (whose
/// vpc_id the engine flowed in) unchanged; and nothing is written.
async fn a_spec_change_plans_children_and_edges(c: &Converge, kind: &str) {
    let r = format!("{kind}-r");
    let v1 = json!({"size": 1, "keep": true, "extra": false});
    let (s, _, body) = c.apply(&root(kind, &r, v1.clone())).await;
    assert_eq!(s, 201, "{body}");
    settled(c, kind, &r, 3).await;

    // The same document: unchanged, nothing composed, nothing to apply.
    let same = plan(c, &root(kind, &r, v1)).await;
    assert_eq!(same["unchanged"], 1, "{same}");
    assert_eq!(same["changed"], 0, "{same}");
    assert_eq!(same["results"][0]["action"], "unchanged", "{same}");
    assert!(same["results"][0]["children"].is_null(), "{same}");

    let before = dump(c).await;
    let untouched = xmins(c).await;
    let v2 = json!({"size": 2, "keep": false, "extra": true});
    let p = plan(c, &root(kind, &r, v2)).await;
    let after = dump(c).await;
    assert_eq!(before, after, "a plan writes nothing");
    assert_eq!(untouched, xmins(c).await, "a plan rewrites no row");

    assert_eq!(
        (
            p["items"].clone(),
            p["update"].clone(),
            p["changed"].clone()
        ),
        (json!(1), json!(1), json!(1)),
        "{p}"
    );
    let item = &p["results"][0];
    assert_eq!(item["action"], "update", "{item}");
    assert_eq!(
        item["composer"],
        match kind {
            "celnet" => "cel",
            "sdknet" => "sdk",
            _ => "starlark",
        }
    );
    assert!(item["warnings"].as_array().unwrap().is_empty(), "{item}");
    assert!(
        item["error"].is_null() && item["compose_error"].is_null(),
        "{item}"
    );
    let diff: Vec<(String, String)> = item["diff"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["op"].as_str().unwrap().into(),
                d["path"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        diff,
        [
            ("replace".into(), "/spec/extra".into()),
            ("replace".into(), "/spec/keep".into()),
            ("replace".into(), "/spec/size".into()),
        ],
        "{item}"
    );
    assert_eq!(item["diff"][2]["old"], 1);
    assert_eq!(item["diff"][2]["new"], 2);

    let children = &item["children"];
    assert_eq!(
        refs(&children["add"]),
        [format!("pnet/{r}-c"), format!("psub/{r}-c-sub")],
        "{children}"
    );
    assert_eq!(
        refs(&children["remove"]),
        [format!("pnet/{r}-b")],
        "{children}"
    );
    assert_eq!(
        refs(&children["change"]),
        [format!("pnet/{r}-a")],
        "{children}"
    );
    assert_eq!(
        children["change"][0]["diff"],
        json!([{"op": "replace", "path": "/spec/size", "old": 1, "new": 2}]),
        "{children}"
    );
    // R-a-sub's composed vpc_id is null; the engine substitutes R-a's status, so it stays.
    assert_eq!(children["unchanged"], 1, "{children}");
    let added_sub = children["add"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "psub")
        .unwrap();
    assert_eq!(
        added_sub["spec"],
        json!({"vpc_id": null, "cidr": "10.0.1.0/24"}),
        "a new upstream reports no status yet: nothing flows"
    );

    let edges = &item["edges"];
    assert_eq!(
        edge_refs(&edges["add"]),
        [format!("psub/{r}-c-sub -> pnet/{r}-c")],
        "{edges}"
    );
    assert_eq!(
        edges["add"][0]["value_mappings"],
        json!([{"dependent_field": "/vpc_id", "source_field": "/vpc_id"}])
    );
    assert_eq!(edges["unchanged"], 1, "{edges}");
    assert!(edges["remove"].as_array().unwrap().is_empty(), "{edges}");
    assert!(edges["change"].as_array().unwrap().is_empty(), "{edges}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spec_change_on_starlark_and_cel_composites_plans_their_children() {
    let (c, stop) = world().await;
    a_spec_change_plans_children_and_edges(&c, "starnet").await;
    a_spec_change_plans_children_and_edges(&c, "celnet").await;

    // A composite not created yet: every child and edge is an add.
    let p = plan(
        &c,
        &root(
            "celnet",
            "fresh",
            json!({"size": 1, "keep": false, "extra": false}),
        ),
    )
    .await;
    let item = &p["results"][0];
    assert_eq!(
        (item["action"].clone(), item["status"].clone()),
        (json!("create"), json!(201)),
        "{item}"
    );
    assert_eq!(
        refs(&item["children"]["add"]),
        ["pnet/fresh-a", "psub/fresh-a-sub"]
    );
    assert_eq!(
        edge_refs(&item["edges"]["add"]),
        ["psub/fresh-a-sub -> pnet/fresh-a"]
    );
    assert!(
        c.get("celnet", "fresh").await.is_none(),
        "a plan creates nothing"
    );
    stop.cancel();
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_sdk_composite_is_planned_through_a_dry_run_on_its_worker() {
    let (c, stop) = world().await;
    dry_runs_served(&c, "sdknet").await;
    let asked = DRY_RUNS.load(Ordering::SeqCst);
    a_spec_change_plans_children_and_edges(&c, "sdknet").await;
    assert!(
        DRY_RUNS.load(Ordering::SeqCst) > asked,
        "the composer saw ctx.dry_run()"
    );
    let p = plan(
        &c,
        &root(
            "sdknet",
            "fresh",
            json!({"size": 1, "keep": false, "extra": false}),
        ),
    )
    .await;
    let item = &p["results"][0];
    assert_eq!(item["action"], "create", "{item}");
    assert_eq!(
        refs(&item["children"]["add"]),
        ["pnet/fresh-a", "psub/fresh-a-sub"],
        "{item}"
    );
    assert!(
        c.get("sdknet", "fresh").await.is_none(),
        "a dry run creates nothing"
    );
    stop.cancel();
    c.stop().await;
}

/// A raw worker of kind `rawnet` that says (`dry_runs`) or does not say it answers dry runs.
async fn raw(c: &Converge, name: &str, dry_runs: bool) -> RawWorker {
    RawWorker::connect(
        c,
        Out::Subscribe(pb::Subscribe {
            kinds: vec!["rawnet".into()],
            kind_versions: vec![1],
            max_inflight: 4,
            worker_name: name.into(),
            sdk: "test/0".into(),
            dry_runs,
            ..Default::default()
        }),
    )
    .await
    .unwrap()
}

/// The StageComplete of a dry run `t` with `children` (kind, name, spec).
fn composed(t: &pb::StageTask, children: &[(&str, &str, Value)]) -> Out {
    Out::Complete(pb::StageComplete {
        lease_token: t.lease_token.clone(),
        claim_epoch: t.claim_epoch,
        stage: pb::Stage::Compose as i32,
        compose: Some(pb::ComposeResult {
            desired: children
                .iter()
                .map(|(k, n, spec)| pb::ChildSpec {
                    kind: (*k).into(),
                    name: (*n).into(),
                    spec: serde_json::to_vec(spec).unwrap(),
                    kind_version: 1,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// `POST /resources:plan` of one `rawnet` document, answered on its own task (the raw
/// workers answer the dry run meanwhile).
fn plan_later(c: &Converge, name: &str) -> tokio::task::JoinHandle<Value> {
    let (client, url) = (
        c.client.clone(),
        format!("{}/api/v1/resources:plan", c.http),
    );
    let body = root(
        "rawnet",
        name,
        json!({"size": 3, "keep": true, "extra": false}),
    );
    tokio::spawn(async move {
        let r = client.post(url).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.json().await.unwrap()
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn dry_runs_go_only_to_workers_that_declare_them_and_are_answered_only_by_theirs() {
    let c = Converge::start(&[("PLAN_DRY_RUN_TIMEOUT", "2s")]).await;
    c.apply_manifest(&leaf_manifest("pnet")).await;
    c.apply_manifest(&composite_manifest("rawnet", "sdk")).await;
    let untouched = xmins(&c).await;
    let warning = |p: &Value| {
        p["results"][0]["warnings"][0]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };

    // No worker at all, then only one that never declared dry runs (an older SDK).
    let none = plan(
        &c,
        &root(
            "rawnet",
            "x",
            json!({"size": 3, "keep": true, "extra": false}),
        ),
    )
    .await;
    assert!(
        warning(&none).contains("no worker that supports dry runs"),
        "{none}"
    );
    let mut old = raw(&c, "old", false).await;
    common::wait_for(T, "the old worker listed", || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM cluster_members m, jsonb_array_elements(m.workers) w
             WHERE w->>'name' = 'old'",
        )
        .fetch_one(&c.db.pool)
        .await
        .unwrap();
        (n == 1).then_some(())
    })
    .await;
    let p = plan(
        &c,
        &root(
            "rawnet",
            "x",
            json!({"size": 3, "keep": true, "extra": false}),
        ),
    )
    .await;
    assert!(
        warning(&p).contains("no worker that supports dry runs"),
        "{p}"
    );

    // A worker that declares them gets the task; the old one cannot answer it for it.
    let mut new = raw(&c, "new", true).await;
    dry_runs_served(&c, "rawnet").await;
    let pending = plan_later(&c, "x");
    let t = new.task().await;
    assert!(t.dry_run, "{t:?}");
    assert_eq!(t.stage, pb::Stage::Compose as i32);
    assert!(t.resource_id.is_empty(), "a create has no stored resource");
    let Some(pb::stage_task::Request::ComposeReq(req)) = &t.request else {
        panic!("not a compose: {t:?}")
    };
    let root_res = req.root.as_ref().unwrap();
    assert_eq!(root_res.name, "x");
    assert_eq!(
        serde_json::from_slice::<Value>(&root_res.spec).unwrap(),
        json!({"size": 3, "keep": true, "extra": false})
    );
    old.send(composed(&t, &[("pnet", "forged", json!({"size": 9}))]))
        .await;
    let refused = old.ack().await;
    assert!(!refused.accepted, "another stream's dry run: {refused:?}");
    new.send(composed(&t, &[("pnet", "x-a", json!({"size": 3}))]))
        .await;
    assert!(new.ack().await.accepted);
    let p = pending.await.unwrap();
    let item = &p["results"][0];
    assert_eq!(refs(&item["children"]["add"]), ["pnet/x-a"], "{item}");
    assert!(item["warnings"].as_array().unwrap().is_empty(), "{item}");

    // An answer the engine would refuse is the item's compose error.
    let pending = plan_later(&c, "x");
    let t = new.task().await;
    new.send(composed(&t, &[("nokind", "x-a", json!({}))]))
        .await;
    assert!(new.ack().await.accepted);
    let p = pending.await.unwrap();
    let err = p["results"][0]["compose_error"].as_str().unwrap_or("");
    assert!(err.contains("compose result refused"), "{p}");

    // No answer in time: a warning, and the worker is told to stop.
    let pending = plan_later(&c, "x");
    let t = new.task().await;
    let p = pending.await.unwrap();
    assert!(warning(&p).contains("timed out"), "{p}");
    assert!(warning(&p).contains("the worker did not answer"), "{p}");
    match new.next(Duration::from_secs(10)).await {
        In::Cancel(x) => assert_eq!(x.lease_token, t.lease_token),
        other => panic!("expected a cancel, got {other:?}"),
    }
    // Its late answer changes nothing.
    new.send(composed(&t, &[("pnet", "late", json!({"size": 1}))]))
        .await;
    assert!(!new.ack().await.accepted);

    assert_eq!(untouched, xmins(&c).await, "dry runs store nothing");
    assert!(c.get("rawnet", "x").await.is_none());
    c.stop().await;
}

/// Composes one pnet child whose size says whether the composer saw the plain token.
const SECRET_BUNDLE: &str = r#"
def compose(spec, config, root):
    size = 2 if config["token"] == "plain-token-5e1d" else 1
    return {"children": [child("pnet", root["name"] + "-a", {"size": size})]}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_composes_with_sealed_secrets_opened_or_says_it_cannot() {
    let bin = sibling_bin("converge-starlark-compose");
    let c = Converge::start(&[("CONVERGE_STARLARK_BIN", bin.to_str().unwrap())]).await;
    c.apply_manifest(&leaf_manifest("pnet")).await;
    c.apply_manifest(
        &json!({"kind": "secnet", "kind_version": 1, "provider": "starlark",
        "config_schema": {"type": "object", "properties": {
            "token": {"type": "string", "writeOnly": true}}},
        "reactions": [{"name": "compose", "trigger": "specChange",
                       "emits": ["children", "status"]}]}),
    )
    .await;
    let bundle = base64::engine::general_purpose::STANDARD
        .encode(common::stored_zip(&[("compose.star", SECRET_BUNDLE)]));
    let (s, body) = c
        .call(
            Method::POST,
            "providerconfigs",
            Some(
                json!({"name": "secnet", "kind": "secnet", "kind_version": 1,
                        "is_default": true, "spec": {"token": "plain-token-5e1d"},
                        "data": bundle}),
            ),
        )
        .await;
    assert!(s == 200 || s == 201, "{s} {body}");
    let stored: Value =
        sqlx::query_scalar("SELECT spec FROM providerconfigs WHERE name = 'secnet'")
            .fetch_one(&c.db.pool)
            .await
            .unwrap();
    assert!(
        converge_engine::sealing::is_envelope(&stored["token"]),
        "stored sealed: {stored}"
    );

    // The API holds the key: the composer sees the plain token.
    let doc = json!({"kind": "secnet", "kind_version": 1, "name": "s", "spec": {}});
    let p = plan(&c, &doc).await;
    let item = &p["results"][0];
    assert!(item["warnings"].as_array().unwrap().is_empty(), "{item}");
    assert_eq!(
        item["children"]["add"][0]["spec"],
        json!({"size": 2}),
        "{item}"
    );

    // A value sealed under a key this process lacks: not composed, and the warning says so.
    let other = converge_engine::sealing::Keyring::new(
        Some(converge_engine::sealing::Key::from_bytes(&[7; 32])),
        Vec::new(),
    );
    let lost = other
        .seal("secnet", "/token", &json!("plain-token-5e1d"))
        .unwrap();
    sqlx::query(
        "UPDATE providerconfigs SET spec = jsonb_set(spec, '{token}', $1) WHERE name = 'secnet'",
    )
    .bind(&lost)
    .execute(&c.db.pool)
    .await
    .unwrap();
    let p = plan(&c, &doc).await;
    let item = &p["results"][0];
    assert!(item["children"].is_null(), "{item}");
    let warning = item["warnings"][0].as_str().unwrap_or("");
    assert!(
        warning.contains("/token does not open") && warning.contains("lacks the key"),
        "{item}"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_are_the_applys_problems_per_document_in_every_body_form() {
    let bin = sibling_bin("converge-starlark-compose");
    let c = Converge::start(&[("CONVERGE_STARLARK_BIN", bin.to_str().unwrap())]).await;
    c.apply_manifest(&leaf_manifest("pnet")).await;
    c.apply_manifest(&composite_manifest("celnet", "cel")).await;
    c.apply_manifest(&composite_manifest("sdknet", "sdk")).await;
    let (s, _, body) = c.apply(&json!({"kind": "pnet", "kind_version": 1, "name": "p", "spec": {"size": 1}, "labels": {"team": "a"}})).await;
    assert_eq!(s, 201, "{body}");
    let before = dump(&c).await;

    let docs = json!([
        // A schema error: the apply's 422, every failing pointer located.
        root("celnet", "bad", json!({"size": 0, "keep": true})),
        // An unknown kind: the apply's 404.
        root("nokind", "x", json!({})),
        // A label change only.
        {"kind": "pnet", "kind_version": 1, "name": "p", "spec": {"size": 1}, "labels": {"team": "b"}},
        // The same resource twice: the batch's refusal.
        {"kind": "pnet", "kind_version": 1, "name": "p", "spec": {"size": 1}},
        // A CEL composite without a graph configured: its compose would fail.
        root("celnet", "nograph", json!({"size": 1, "keep": true, "extra": false})),
        // A composer on a worker: planned without children, and said so.
        root("sdknet", "s", json!({"size": 1, "keep": true, "extra": false})),
    ]);
    let p = plan(&c, &docs).await;
    assert_eq!(
        (
            p["items"].clone(),
            p["create"].clone(),
            p["update"].clone(),
            p["failed"].clone()
        ),
        (json!(6), json!(2), json!(1), json!(4)),
        "{p}"
    );
    let r = p["results"].as_array().unwrap();
    assert_eq!(r[0]["status"], 422, "{p}");
    assert!(r[0]["action"].is_null());
    assert_eq!(r[0]["error"]["status"], 422);
    let locations: Vec<&str> = r[0]["error"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["location"].as_str().unwrap())
        .collect();
    assert!(
        locations.contains(&"/spec/size") && locations.contains(&"/spec"),
        "{locations:?}"
    );
    assert_eq!(r[1]["status"], 404, "{p}");
    assert_eq!(
        (r[1]["kind"].clone(), r[1]["name"].clone()),
        (json!("nokind"), json!("x"))
    );
    assert_eq!(r[2]["action"], "update", "{p}");
    assert_eq!(
        r[2]["diff"],
        json!([{"op": "replace", "path": "/labels/team", "old": "a", "new": "b"}])
    );
    assert_eq!(r[3]["status"], 422, "{p}");
    assert!(
        r[3]["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("also item 2"),
        "{p}"
    );
    assert_eq!(r[4]["action"], "create", "{p}");
    assert!(
        r[4]["compose_error"]
            .as_str()
            .unwrap()
            .contains("no cel graph"),
        "{p}"
    );
    assert_eq!(r[5]["composer"], "sdk", "{p}");
    assert!(r[5]["children"].is_null(), "{p}");
    assert!(
        r[5]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("runs on a worker"),
        "{p}"
    );

    // One document (the apply's body) and NDJSON (the batch's) answer the same shape.
    let one = plan(&c, &json!({"kind": "pnet", "kind_version": 1, "name": "p", "spec": {"size": 1}, "labels": {"team": "a"}})).await;
    assert_eq!(
        (
            one["items"].clone(),
            one["unchanged"].clone(),
            one["changed"].clone()
        ),
        (json!(1), json!(1), json!(0)),
        "{one}"
    );
    let lines = "{\"kind\": \"pnet\", \"kind_version\": 1, \"name\": \"q\"}\n{\"kind\": \"pnet\", \"kind_version\": 1, \"name\": \"p\", \"spec\": {\"size\": 3}, \"labels\": {\"team\": \"a\"}}\n";
    let resp = c
        .client
        .post(format!("{}/api/v1/resources:plan", c.http))
        .header("content-type", "application/x-ndjson")
        .body(lines)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let nd: Value = resp.json().await.unwrap();
    assert_eq!(
        (
            nd["create"].clone(),
            nd["update"].clone(),
            nd["changed"].clone()
        ),
        (json!(1), json!(1), json!(2)),
        "{nd}"
    );
    assert_eq!(nd["results"][1]["diff"][0]["path"], "/spec/size", "{nd}");

    assert_eq!(before, dump(&c).await, "no plan wrote anything");
    c.stop().await;
}

/// Runs `conctl --server <c> diff ARGS`: (exit code, stdout, stderr).
async fn conctl_diff(c: &Converge, args: &[&str]) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_conctl"))
        .env_clear()
        .arg("--server")
        .arg(&c.http)
        .arg("diff")
        .args(args)
        .output()
        .await
        .expect("run conctl diff");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn conctl_diff_prints_the_plan_and_exits_0_1_or_2() {
    let (c, stop) = world().await;
    let v1 = json!({"size": 1, "keep": true, "extra": false});
    let (s, _, body) = c.apply(&root("starnet", "r", v1.clone())).await;
    assert_eq!(s, 201, "{body}");
    settled(&c, "starnet", "r", 3).await;
    let dir = std::env::temp_dir().join(format!("api-plan-diff-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tree")).unwrap();
    let put = |name: &str, doc: &Value| {
        let p = dir.join(name);
        std::fs::write(&p, doc.to_string()).unwrap();
        p.to_string_lossy().into_owned()
    };
    let same = put("same.json", &root("starnet", "r", v1));
    let changed = put(
        "changed.json",
        &root(
            "starnet",
            "r",
            json!({"size": 2, "keep": false, "extra": true}),
        ),
    );
    put(
        "tree/a.json",
        &root(
            "starnet",
            "r",
            json!({"size": 2, "keep": true, "extra": false}),
        ),
    );
    put(
        "tree/b.json",
        &root(
            "starnet",
            "bad",
            json!({"size": 0, "keep": true, "extra": false}),
        ),
    );
    let before = dump(&c).await;

    let (code, stdout, stderr) = conctl_diff(&c, &["-f", &same]).await;
    assert_eq!((code, stdout.as_str()), (0, ""), "{stderr}");

    let (code, stdout, stderr) = conctl_diff(&c, &["-f", &changed]).await;
    assert_eq!(code, 1, "{stdout}{stderr}");
    for want in [
        "--- starnet/r (stored)\n+++ starnet/r (applied)\n",
        "-/spec/size: 1\n+/spec/size: 2\n",
        " children of starnet/r:\n",
        "+  pnet/r-c: {\"size\":1}\n",
        "+  psub/r-c-sub: ",
        "-  pnet/r-b\n",
        "   pnet/r-a:\n-    /spec/size: 1\n+    /spec/size: 2\n",
        " edges of starnet/r:\n+  psub/r-c-sub -> pnet/r-c [/vpc_id <- /vpc_id]\n",
    ] {
        assert!(stdout.contains(want), "{want:?} missing from:\n{stdout}");
    }

    let (code, stdout, _) = conctl_diff(&c, &["-o", "json", "-f", &changed]).await;
    assert_eq!(code, 1);
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (plan["changed"].clone(), plan["update"].clone()),
        (json!(1), json!(1)),
        "{plan}"
    );
    assert_eq!(plan["results"][0]["origin"], changed.as_str());

    // A directory with a document the apply refuses: exit 2, the problem on stderr, the
    // other document's diff still shown.
    let tree = dir.join("tree");
    let (code, stdout, stderr) = conctl_diff(&c, &["-f", tree.to_str().unwrap()]).await;
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.contains("error: starnet/bad:") && stderr.contains("/spec/size"),
        "{stderr}"
    );
    assert!(stdout.contains("+/spec/size: 2"), "{stdout}");

    assert_eq!(before, dump(&c).await, "conctl diff wrote nothing");
    let _ = std::fs::remove_dir_all(&dir);
    stop.cancel();
    c.stop().await;
}
