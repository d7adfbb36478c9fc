//! The WorkerService contract against the real `converge` binary, driven by a raw gRPC client
//! so every frame can be observed: Subscribe-first, epoch fencing with CompleteAck, the
//! broker-side deadline with CancelTask, CancelTask for a deleted, quarantined or superseded
//! resource (with the Rust SDK's handler seeing each), a reactor task's deadline, one
//! deadline budget across a composite's stages, the cap on kinds per Subscribe, and a
//! default config written just before the work pushed ahead of its task (rule 2).

mod common;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{Converge, raw_worker::RawWorker, wait_for};
use converge_proto::pb::{
    self, work_stream_client_msg::Body as Out, work_stream_server_msg::Body as In,
};
use serde_json::json;

fn done(t: &pb::StageTask, epoch: i64, status: serde_json::Value) -> Out {
    Out::Complete(pb::StageComplete {
        lease_token: t.lease_token.clone(),
        stage: t.stage,
        claim_epoch: epoch,
        status: serde_json::to_vec(&status).unwrap(),
        ..Default::default()
    })
}

async fn setup(deadline_secs: i64) -> Converge {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest_any_status(deadline_secs))
        .await;
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn first_frame_must_be_subscribe_with_kinds() {
    let c = setup(0).await;
    let err = RawWorker::connect(&c, Out::Heartbeat(pb::WorkHeartbeat::default()))
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("Subscribe"), "{}", err.message());
    let err = RawWorker::connect(&c, Out::Subscribe(pb::Subscribe::default()))
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    // The broker keeps serving well-behaved workers.
    let mut w = RawWorker::subscribe(&c).await;
    c.apply(&json!({"kind": "hello", "kind_version": 1, "name": "a", "spec": {}}))
        .await;
    let t = w.task().await;
    assert_eq!(t.kind, "hello");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscribe_naming_more_kinds_than_the_limit_is_refused() {
    // MAX_KINDS_PER_STREAM's default: 1,000.
    let c = setup(0).await;
    let kinds = |n: usize| -> Vec<String> { (0..n).map(|i| format!("k{i}")).collect() };
    let sub = |n: usize| {
        Out::Subscribe(pb::Subscribe {
            kinds: kinds(n),
            max_inflight: 4,
            ..Default::default()
        })
    };
    let err = RawWorker::connect(&c, sub(1001)).await.err().unwrap();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    for part in ["1001 kinds", "at most 1000", "MAX_KINDS_PER_STREAM"] {
        assert!(err.message().contains(part), "{}", err.message());
    }
    // GetProviderConfig names kinds too, under the same limit.
    let mut client = pb::worker_service_client::WorkerServiceClient::connect(c.broker.clone())
        .await
        .unwrap();
    let err = client
        .get_provider_config(pb::GetProviderConfigRequest {
            kinds: kinds(1001),
            kind_versions: Vec::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("MAX_KINDS_PER_STREAM"), "{err:?}");
    // At the limit the stream is served (a refusal is the WorkStream call's answer).
    RawWorker::connect(&c, sub(1000))
        .await
        .expect("a Subscribe of 1,000 kinds is served");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stale_epoch_result_is_acked_false_and_changes_nothing() {
    let c = setup(0).await;
    let mut w = RawWorker::subscribe(&c).await;
    c.apply(&json!({"kind": "hello", "kind_version": 1, "name": "a", "spec": {"greeting": "x"}}))
        .await;
    let t = w.task().await;
    assert_eq!(t.stage, pb::Stage::Work as i32);
    assert_eq!(t.trigger, "specChange");
    assert_eq!(t.attempt, 1);
    assert_eq!(t.reaction, "work");
    assert_eq!(t.generation, 1);
    let Some(pb::stage_task::Request::WorkReq(req)) = &t.request else {
        panic!("no work request")
    };
    let res = req.resource.as_ref().unwrap();
    assert_eq!(res.name, "a");
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&res.spec).unwrap(),
        json!({"greeting": "x"})
    );

    w.send(done(&t, t.claim_epoch - 1, json!({"stale": true})))
        .await;
    let ack = w.ack().await;
    assert!(!ack.accepted, "a stale epoch must be refused");
    let r = c.get("hello", "a").await.unwrap();
    assert_eq!(r["phase"], "Reconciling");
    assert!(r["status"].is_null(), "stale result changed status: {r}");

    w.send(done(&t, t.claim_epoch, json!({"fresh": true})))
        .await;
    let ack = w.ack().await;
    assert!(ack.accepted);
    assert_eq!(ack.lease_token, t.lease_token);
    let r = c
        .wait_resource("hello", "a", "Ready", Duration::from_secs(10), |v| {
            v["phase"] == "Ready"
        })
        .await;
    assert_eq!(r["status"], json!({"fresh": true}));
    // A duplicate of an accepted result is refused too.
    w.send(done(&t, t.claim_epoch, json!({"dup": true}))).await;
    assert!(!w.ack().await.accepted);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn deadline_cancels_the_task_and_fails_it_transiently() {
    let c = setup(1).await;
    let mut w = RawWorker::subscribe(&c).await;
    c.apply(&json!({"kind": "hello", "kind_version": 1, "name": "slow", "spec": {}}))
        .await;
    let t = w.task().await;
    assert!(
        t.task_deadline_ms > 0 && t.task_deadline_ms <= 1000,
        "deadline {}",
        t.task_deadline_ms
    );
    // Say nothing: past the deadline the broker cancels.
    let cancel = match w.next(Duration::from_secs(5)).await {
        In::Cancel(x) => x,
        other => panic!("expected CancelTask, got {other:?}"),
    };
    assert_eq!(cancel.lease_token, t.lease_token);
    assert_eq!(cancel.reason, "deadline");
    let r = c
        .wait_resource(
            "hello",
            "slow",
            "Failed after the deadline",
            Duration::from_secs(10),
            |v| v["phase"] == "Failed",
        )
        .await;
    assert_eq!(r["failure_terminal"], false);
    assert!(
        r["failure_message"].as_str().unwrap().contains("deadline"),
        "{r}"
    );
    // The late result is refused. The retry (transient, RETRY_BASE 200 ms) may already be on
    // its way, so its task and the refusal's ack can arrive in either order.
    w.send(done(&t, t.claim_epoch, json!({"late": true}))).await;
    let (mut refused, mut retry) = (None, None);
    while refused.is_none() || retry.is_none() {
        match w.next(Duration::from_secs(10)).await {
            In::Ack(a) => refused = Some(a),
            In::Task(t2) => retry = Some(t2),
            other => panic!("expected the ack and the retry, got {other:?}"),
        }
    }
    assert!(!refused.unwrap().accepted);
    // The retry succeeds.
    let t2 = retry.unwrap();
    assert_eq!(t2.attempt, 2);
    assert_ne!(t2.lease_token, t.lease_token);
    w.send(done(&t2, t2.claim_epoch, json!({"second": true})))
        .await;
    assert!(w.ack().await.accepted);
    let r = c
        .wait_resource("hello", "slow", "Ready", Duration::from_secs(10), |v| {
            v["phase"] == "Ready"
        })
        .await;
    assert_eq!(r["status"], json!({"second": true}));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn heartbeats_keep_a_lease_and_stream_end_releases_it() {
    let c = setup(0).await;
    let mut w = RawWorker::subscribe(&c).await;
    c.apply(&json!({"kind": "hello", "kind_version": 1, "name": "hb", "spec": {}}))
        .await;
    let t = w.task().await;
    let claimed = c.get("hello", "hb").await.unwrap();
    assert_eq!(claimed["work"]["claimed"], true);
    let at = |v: &serde_json::Value| {
        v["work"]["heartbeat_at"]
            .as_str()
            .and_then(|h| chrono::DateTime::parse_from_rfc3339(h).ok())
    };
    let first = at(&claimed).expect("a claim stamps heartbeat_at");
    let beat = |epoch: i64| {
        Out::Heartbeat(pb::WorkHeartbeat {
            lease_token: vec![t.lease_token.clone()],
            claim_epoch: vec![epoch],
        })
    };
    // A heartbeat with the wrong epoch attests nothing; the right one refreshes the lease.
    // Frames of one stream are handled in order, so once the good beat has landed the stale
    // one has been handled too, and only one refresh may have happened.
    w.send(beat(t.claim_epoch + 7)).await;
    w.send(beat(t.claim_epoch)).await;
    let refreshed = c
        .wait_resource(
            "hello",
            "hb",
            "heartbeat refreshed",
            Duration::from_secs(5),
            |v| at(v).is_some_and(|h| h > first),
        )
        .await;
    assert_eq!(refreshed["work"]["claimed"], true);
    drop(w);
    let r = c
        .wait_resource(
            "hello",
            "hb",
            "lease released",
            Duration::from_secs(5),
            |v| v["work"]["claimed"] == false,
        )
        .await;
    assert_eq!(r["phase"], "Reconciling");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_held_across_a_broker_crash_is_accepted_by_another_broker() {
    let mut c = setup(0).await;
    let peer = c.spawn_peer(&[]).await;
    let mut w = RawWorker::subscribe(&c).await;
    c.apply(&json!({"kind": "hello", "kind_version": 1, "name": "survivor", "spec": {}}))
        .await;
    let t = w.task().await;
    // Broker A dies while the worker holds the task: nothing released the lease.
    c.crash().await;
    drop(w);
    // The worker reconnects to broker B, lists the task as resumed, and delivers its result.
    let resubscribe = Out::Subscribe(pb::Subscribe {
        kinds: vec!["hello".into()],
        kind_versions: vec![1],
        max_inflight: 4,
        resumed: vec![pb::ResumedTask {
            lease_token: t.lease_token.clone(),
            claim_epoch: t.claim_epoch,
        }],
        ..Default::default()
    });
    let mut w2 = RawWorker::connect_to(&peer.broker, resubscribe)
        .await
        .unwrap();
    w2.send(done(
        &t,
        t.claim_epoch,
        json!({"delivered": "after the crash"}),
    ))
    .await;
    let ack = w2.ack().await;
    assert!(
        ack.accepted,
        "a valid lease's result is accepted by any broker"
    );
    let client = reqwest::Client::new();
    common::wait_ready_at(
        &client,
        &peer.http,
        "hello",
        "survivor",
        Duration::from_secs(15),
    )
    .await;
}

/// The resource name a task is for (its WORK request's resource).
fn name_of(t: &pb::StageTask) -> String {
    match &t.request {
        Some(pb::stage_task::Request::WorkReq(r)) => r.resource.as_ref().unwrap().name.clone(),
        other => panic!("not a work task: {other:?}"),
    }
}

/// Deletes `name`, quarantines `quar` and changes `sup`'s spec (three hello resources whose
/// tasks are running).
async fn delete_quarantine_and_edit(c: &Converge, del: &str, quar: &str, sup: &str) {
    let (s, body) = c
        .call(
            reqwest::Method::DELETE,
            &format!("resources/hello/{del}"),
            None,
        )
        .await;
    assert!(s == 200 || s == 202, "{s} {body}");
    let (s, body) = c
        .call(
            reqwest::Method::POST,
            &format!("resources/hello/{quar}/quarantine"),
            None,
        )
        .await;
    assert_eq!(s, 200, "{body}");
    c.apply(&json!({"kind": "hello", "kind_version": 1, "name": sup, "spec": {"greeting": "v2"}}))
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn deleted_quarantined_and_superseded_tasks_are_cancelled_and_their_late_results_refused() {
    let c = setup(0).await;
    let mut w = RawWorker::subscribe(&c).await;
    for n in ["del", "quar", "sup"] {
        c.apply(&json!({"kind": "hello", "kind_version": 1, "name": n, "spec": {}}))
            .await;
    }
    let mut running = HashMap::new();
    for _ in 0..3 {
        let t = w.task().await;
        running.insert(name_of(&t), t);
    }
    delete_quarantine_and_edit(&c, "del", "quar", "sup").await;

    // One CancelTask per running task, with its reason, and the superseded resource's next
    // generation as a new task (in any order: the cancel and the claim race).
    let mut cancels: HashMap<String, pb::CancelTask> = HashMap::new();
    let mut next = None;
    while cancels.len() < 3 || next.is_none() {
        match w.next(Duration::from_secs(10)).await {
            In::Cancel(x) => {
                let (name, t) = running
                    .iter()
                    .find(|(_, t)| t.lease_token == x.lease_token)
                    .expect("a cancel for a running task");
                assert_eq!(x.claim_epoch, t.claim_epoch);
                assert!(cancels.insert(name.clone(), x).is_none(), "cancelled twice");
            }
            In::Task(t) => next = Some(t),
            other => panic!("expected cancels and a task, got {other:?}"),
        }
    }
    let reasons: HashMap<&str, &str> = cancels
        .iter()
        .map(|(n, x)| (n.as_str(), x.reason.as_str()))
        .collect();
    assert_eq!(
        reasons,
        HashMap::from([
            ("del", "deleted"),
            ("quar", "quarantined"),
            ("sup", "superseded")
        ])
    );
    let next = next.unwrap();
    assert_eq!((name_of(&next).as_str(), next.generation), ("sup", 2));

    // A late result for each cancelled task is refused and changes nothing.
    for t in running.values() {
        w.send(done(t, t.claim_epoch, json!({"late": true}))).await;
    }
    for _ in 0..3 {
        assert!(
            !w.ack().await.accepted,
            "a cancelled task's result is refused"
        );
    }
    w.send(done(&next, next.claim_epoch, json!({"gen": 2})))
        .await;
    assert!(w.ack().await.accepted);

    let sup = c
        .wait_resource(
            "hello",
            "sup",
            "Ready at generation 2",
            Duration::from_secs(10),
            |v| v["phase"] == "Ready",
        )
        .await;
    assert_eq!(
        (sup["synced_gen"].as_i64(), &sup["status"]),
        (Some(2), &json!({"gen": 2}))
    );
    let quar = c.get("hello", "quar").await.unwrap();
    assert_eq!(quar["phase"], "Quarantined");
    assert!(quar["status"].is_null(), "{quar}");
    wait_for(Duration::from_secs(10), "hello/del gone", || async {
        c.get("hello", "del").await.is_none().then_some(())
    })
    .await;
    c.stop().await;
}

/// A hello handler that waits for its task to be cancelled (generation 1) and records the
/// reason it was given; a later generation succeeds at once.
struct Cancellable {
    started: Arc<Mutex<Vec<String>>>,
    seen: Arc<Mutex<Vec<(String, String)>>>,
}

impl converge_sdk::Provider for Cancellable {
    fn kind(&self) -> converge_sdk::KindVersion {
        converge_sdk::KindVersion::new("hello", 1)
    }

    async fn work(
        &self,
        req: converge_sdk::ReactionRequest,
    ) -> Result<converge_sdk::Outcome, converge_sdk::HandlerError> {
        if req.generation > 1 {
            return Ok(converge_sdk::Outcome::status(json!({
                "message": "again", "observed_generation": req.generation, "attempt": req.attempt
            })));
        }
        self.started.lock().unwrap().push(req.resource.name.clone());
        req.cancel.cancelled().await;
        let reason = req.cancel_reason.get().unwrap_or("none").to_owned();
        self.seen
            .lock()
            .unwrap()
            .push((req.resource.name.clone(), reason));
        Err(converge_sdk::HandlerError::transient("cancelled"))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sdk_handler_sees_each_cancellation_with_its_reason() {
    let c = setup(0).await;
    let (started, seen) = (
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(Mutex::new(Vec::new())),
    );
    let mut reg = converge_sdk::Registry::new();
    reg.register(Cancellable {
        started: started.clone(),
        seen: seen.clone(),
    });
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(converge_sdk::run_worker(
        converge_sdk::WorkerConfig::new(c.broker.clone()),
        reg,
        stop.clone().cancelled_owned(),
    ));
    for n in ["del", "quar", "sup"] {
        c.apply(&json!({"kind": "hello", "kind_version": 1, "name": n, "spec": {}}))
            .await;
    }
    wait_for(
        Duration::from_secs(10),
        "three running handlers",
        || async { (started.lock().unwrap().len() == 3).then_some(()) },
    )
    .await;
    delete_quarantine_and_edit(&c, "del", "quar", "sup").await;
    let mut got = wait_for(
        Duration::from_secs(10),
        "three cancelled handlers",
        || async {
            let s = seen.lock().unwrap().clone();
            (s.len() == 3).then_some(s)
        },
    )
    .await;
    got.sort();
    assert_eq!(
        got,
        [
            ("del", "deleted"),
            ("quar", "quarantined"),
            ("sup", "superseded")
        ]
        .map(|(n, r)| (n.to_owned(), r.to_owned()))
    );
    // The superseded resource runs again at its new generation.
    let sup = c
        .wait_resource("hello", "sup", "Ready", Duration::from_secs(10), |v| {
            v["phase"] == "Ready"
        })
        .await;
    assert_eq!(sup["synced_gen"], 2);
    stop.cancel();
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reactor_task_carries_its_kinds_deadline_and_is_cancelled_past_it() {
    let c = setup(0).await;
    c.apply_manifest(
        &json!({"kind": "sink", "kind_version": 1, "task_deadline_secs": 1,
        "reactions": [{"name": "react", "trigger": "reactor", "emits": ["sideEffect"]}]}),
    )
    .await;
    let (s, body) = c
        .call(
            reqwest::Method::POST,
            "reactor-bindings",
            Some(
                json!({"name": "on-create", "watch_kind": "hello", "transition": "created",
                        "reactor": "sink"}),
            ),
        )
        .await;
    assert!(s == 200 || s == 201, "{s} {body}");
    let sub = Out::Subscribe(pb::Subscribe {
        kinds: vec!["sink".into()],
        kind_versions: vec![1],
        max_inflight: 4,
        ..Default::default()
    });
    let mut w = RawWorker::connect(&c, sub).await.unwrap();
    c.apply(&json!({"kind": "hello", "kind_version": 1, "name": "watched", "spec": {}}))
        .await;
    let t = w.task().await;
    assert_eq!(t.stage, pb::Stage::React as i32);
    assert!(
        t.task_deadline_ms > 0 && t.task_deadline_ms <= 1000,
        "a REACT task carries the kind's deadline: {}",
        t.task_deadline_ms
    );
    // Say nothing: past the deadline the broker cancels and the delivery is retried with the
    // same dedup token.
    match w.next(Duration::from_secs(5)).await {
        In::Cancel(x) => {
            assert_eq!(
                (x.lease_token.as_str(), x.reason.as_str()),
                (t.lease_token.as_str(), "deadline")
            );
        }
        other => panic!("expected CancelTask, got {other:?}"),
    }
    let token = |t: &pb::StageTask| match &t.request {
        Some(pb::stage_task::Request::ReactReq(r)) => r.dedup_token.clone(),
        other => panic!("not a react task: {other:?}"),
    };
    let again = w.task().await;
    assert_eq!(token(&again), token(&t));
    assert_eq!(again.attempt, 2);
    w.send(done(&t, t.claim_epoch, json!({}))).await;
    assert!(
        !w.ack().await.accepted,
        "the expired delivery's result is refused"
    );
    w.send(done(&again, again.claim_epoch, json!({}))).await;
    assert!(w.ack().await.accepted);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_composites_stages_share_one_deadline_budget() {
    let c = setup(0).await;
    c.apply_manifest(
        &json!({"kind": "pipe", "kind_version": 1, "task_deadline_secs": 30,
        "reactions": [
            {"name": "compose", "trigger": "specChange", "emits": ["children", "status"]},
            {"name": "rollup", "trigger": "childrenSettled", "emits": ["status"]}]}),
    )
    .await;
    let sub = Out::Subscribe(pb::Subscribe {
        kinds: vec!["pipe".into()],
        kind_versions: vec![1],
        max_inflight: 4,
        ..Default::default()
    });
    let mut w = RawWorker::connect(&c, sub).await.unwrap();
    c.apply(&json!({"kind": "pipe", "kind_version": 1, "name": "p", "spec": {}}))
        .await;
    let compose = w.task().await;
    assert_eq!(compose.stage, pb::Stage::Compose as i32);
    assert!(compose.task_deadline_ms > 0 && compose.task_deadline_ms <= 30_000);
    // The composer takes its time: that time is spent from the one budget.
    tokio::time::sleep(Duration::from_millis(300)).await;
    w.send(Out::Complete(pb::StageComplete {
        lease_token: compose.lease_token.clone(),
        stage: compose.stage,
        claim_epoch: compose.claim_epoch,
        compose: Some(pb::ComposeResult {
            status: b"{}".to_vec(),
            ..Default::default()
        }),
        ..Default::default()
    }))
    .await;
    assert!(w.ack().await.accepted, "the compose result is used");
    let rollup = w.task().await;
    assert_eq!(rollup.stage, pb::Stage::Rollup as i32);
    assert_eq!(
        rollup.lease_token, compose.lease_token,
        "one claim, one lease"
    );
    assert!(
        rollup.task_deadline_ms > 0 && rollup.task_deadline_ms <= compose.task_deadline_ms - 300,
        "the rollup gets what is left ({} ms), not a fresh deadline (compose had {} ms)",
        rollup.task_deadline_ms,
        compose.task_deadline_ms
    );
    w.send(done(&rollup, rollup.claim_epoch, json!({"rolled": true})))
        .await;
    assert!(w.ack().await.accepted);
    c.wait_resource("pipe", "p", "Ready", Duration::from_secs(10), |v| {
        v["phase"] == "Ready"
    })
    .await;
    c.stop().await;
}

/// The frames up to and including the next task, and the task.
async fn frames_to_task(w: &mut RawWorker) -> (Vec<pb::ProviderConfigUpdate>, pb::StageTask) {
    let mut configs = Vec::new();
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), w.rx.message())
            .await
            .expect("no frame in time")
            .expect("stream failed")
            .expect("stream ended");
        match msg.body.expect("frame without body") {
            In::Config(c) => configs.push(c),
            In::Task(t) => return (configs, t),
            other => panic!("expected a config push or a task, got {other:?}"),
        }
    }
}

/// Rule 2 holds for a default written just before the work, whatever the NOTIFY does: the
/// claim sees the default's version and the broker pushes it ahead of the task. The
/// `providerconfig_changed` trigger is disabled here, so the only way the new default can
/// reach the stream before the task is the claim-time check (the failsafe re-read runs every
/// 15 s, after the 10 s this waits).
#[tokio::test(flavor = "multi_thread")]
async fn a_default_written_before_the_work_reaches_the_stream_before_its_task() {
    let c = setup(0).await;
    let mut w = RawWorker::subscribe(&c).await;
    sqlx::query("ALTER TABLE providerconfigs DISABLE TRIGGER providerconfigs_notify")
        .execute(&c.db.pool)
        .await
        .unwrap();
    let default = |v: i64| {
        json!({"name": "hello-default", "kind": "hello", "kind_version": 1,
               "is_default": true, "spec": {"v": v}})
    };
    // POST creates (201), then replaces (200) the default.
    for (v, name, created) in [(1, "a", 201), (2, "b", 200)] {
        let (s, body) = c
            .call(reqwest::Method::POST, "providerconfigs", Some(default(v)))
            .await;
        assert_eq!(s, created, "{body}");
        c.apply(&json!({"kind": "hello", "kind_version": 1, "name": name, "spec": {}}))
            .await;
        let (configs, t) = frames_to_task(&mut w).await;
        let last = configs
            .last()
            .unwrap_or_else(|| panic!("task {name} came before any config push"));
        assert_eq!((last.kind.as_str(), last.kind_version), ("hello", 1));
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&last.config).unwrap(),
            json!({"v": v}),
            "task {name} was preceded by an older default"
        );
        w.send(done(&t, t.claim_epoch, json!({}))).await;
        assert!(w.ack().await.accepted);
    }
    c.stop().await;
}
