//! The WorkerService contract against the real `converge` binary, driven by a raw gRPC client
//! so every frame can be observed: Subscribe-first, epoch fencing with CompleteAck, and the
//! broker-side deadline with CancelTask.

mod common;

use std::time::Duration;

use common::{Converge, raw_worker::RawWorker};
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
    c.apply_manifest(&Converge::hello_manifest(deadline_secs))
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
