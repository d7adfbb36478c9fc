//! The worker runtime against an in-process broker double: every stream rule of DESIGN §4
//! the SDK is responsible for, proven over real gRPC on loopback.

mod common;

use std::{sync::atomic::Ordering, time::Duration};

use common::{Conn, Probe, Scripted, TestBroker, Worker, json_of, wait_for, within, work_task};
use converge_sdk::{
    CancelReason, Registry,
    pb::{self, work_stream_client_msg::Body as Up, work_stream_server_msg::Body as Down},
};
use serde_json::json;

fn get(c: &std::sync::atomic::AtomicUsize) -> usize {
    Probe::get(c)
}

/// Starts a worker serving `hello`@1 with `probe` and returns its first stream (Subscribe
/// already read).
async fn hello_worker(
    broker: &mut TestBroker,
    probe: &std::sync::Arc<Probe>,
    tweak: impl FnOnce(&mut converge_sdk::WorkerConfig),
) -> (Worker, Conn) {
    let mut cfg = Worker::config(broker);
    tweak(&mut cfg);
    let worker = Worker::start(cfg, Registry::new().with(Scripted::new("hello", 1, probe)));
    let mut conn = broker.conn().await;
    conn.subscribe().await;
    (worker, conn)
}

#[tokio::test]
async fn subscribe_is_first_and_describes_the_worker() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let mut cfg = Worker::config(&broker);
    cfg.max_parallel = 3;
    let registry = Registry::new()
        .with(Scripted::new("hello", 1, &probe))
        .with(Scripted::new("other", 2, &probe));
    let _worker = Worker::start(cfg, registry);
    let mut conn = broker.conn().await;
    let sub = conn.subscribe().await;
    assert_eq!(sub.kinds, ["hello", "other"]);
    assert_eq!(sub.kind_versions, [1, 2]);
    assert_eq!(sub.max_inflight, 3);
    assert_eq!(sub.sdk, format!("rust/{}", env!("CARGO_PKG_VERSION")));
    assert_eq!(sub.worker_name, "test-worker");
    assert!(sub.resumed.is_empty());
    assert!(sub.dry_runs, "the SDK answers plans' dry runs");
    // Configs were primed before the stream opened, and on_config fired for each pair.
    assert!(broker.config_pulls.load(Ordering::SeqCst) >= 1);
    assert_eq!(probe.configs.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn unready_provider_is_announced_after_subscribe_and_flips_back() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    probe.ready.store(false, Ordering::SeqCst);
    let _worker = Worker::start(
        Worker::config(&broker),
        Registry::new().with(Scripted::new("hello", 1, &probe)),
    );
    let mut conn = broker.conn().await;
    conn.subscribe().await;
    match conn.next().await {
        Up::Interest(i) => {
            assert_eq!(
                (i.kind.as_str(), i.kind_version, i.has_worker),
                ("hello", 1, false)
            );
        }
        other => panic!("expected Interest right after Subscribe, got {other:?}"),
    }
    probe.ready.store(true, Ordering::SeqCst);
    match conn.next().await {
        Up::Interest(i) => assert_eq!((i.kind.as_str(), i.has_worker), ("hello", true)),
        other => panic!("expected Interest{{has_worker:true}}, got {other:?}"),
    }
    probe.ready.store(false, Ordering::SeqCst);
    match conn.next().await {
        Up::Interest(i) => assert!(!i.has_worker),
        other => panic!("expected Interest{{has_worker:false}}, got {other:?}"),
    }
}

#[tokio::test]
async fn task_result_echoes_lease_stage_and_epoch() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |_| {}).await;
    conn.send(Down::Task(work_task("lease-1", 7, "hello", json!({}))));
    let c = conn.complete_for("lease-1").await;
    assert_eq!(c.stage, pb::Stage::Work as i32);
    assert_eq!(c.claim_epoch, 7);
    assert_eq!(c.error_message, "");
    assert_eq!(json_of(&c.status)["name"], "lease-1");
    assert_eq!(c.conditions.len(), 1);
    assert_eq!(
        (
            c.conditions[0].r#type.as_str(),
            c.conditions[0].status.as_str()
        ),
        ("Ready", "True")
    );
    assert!(c.compose.is_none());
    let req = probe.requests.lock().unwrap()[0].clone();
    assert_eq!(
        (req.reaction.as_str(), req.trigger.as_str()),
        ("work", "specChange")
    );
    assert_eq!((req.generation, req.attempt, req.kind_version), (3, 1, 1));
    assert_eq!(req.deadline, None);
}

#[tokio::test]
async fn compose_results_travel_in_compose_result() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |_| {}).await;
    let task = pb::StageTask {
        stage: pb::Stage::Compose as i32,
        kind: "hello".into(),
        kind_version: 1,
        reaction: "compose".into(),
        lease_token: "c-1".into(),
        claim_epoch: 2,
        request: Some(pb::stage_task::Request::ComposeReq(pb::ComposeRequest {
            root: Some(common::resource(
                "hello",
                "root",
                json!({"mode": "compose"}),
            )),
            ..Default::default()
        })),
        ..Default::default()
    };
    conn.send(Down::Task(task));
    let c = conn.complete_for("c-1").await;
    assert_eq!(
        (c.stage, c.claim_epoch, c.error_message.as_str()),
        (pb::Stage::Compose as i32, 2, "")
    );
    assert!(c.status.is_empty() && c.conditions.is_empty());
    let compose = c.compose.expect("compose result");
    let names: Vec<_> = compose.desired.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(json_of(&compose.desired[0].spec), json!({"x": 1}));
    assert_eq!(compose.edges.len(), 1);
    assert_eq!(compose.edges[0].values[0].dependent_field, "/x");
    assert_eq!(json_of(&compose.status)["name"], "root");
    assert_eq!(compose.conditions[0].reason, "Composed");
    assert_eq!(probe.requests.lock().unwrap()[0].trigger, "specChange");
}

#[tokio::test]
async fn at_most_max_inflight_handlers_run_at_once() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |c| c.max_parallel = 2).await;
    for i in 0..5 {
        conn.send(Down::Task(work_task(
            &format!("t{i}"),
            1,
            "hello",
            json!({"mode": "block"}),
        )));
    }
    wait_for("two handlers to start", || get(&probe.started) == 2).await;
    for done in 1..=5 {
        probe.gate.add_permits(1);
        conn.next_where(|b| matches!(b, Up::Complete(_)).then_some(()))
            .await;
        wait_for("the next handler to start", || {
            get(&probe.started) == (done + 2).min(5)
        })
        .await;
    }
    assert_eq!(
        get(&probe.max),
        2,
        "never more than max_parallel handlers at once"
    );
}

#[tokio::test]
async fn unacked_result_is_resent_and_resumed_after_reconnect() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |_| {}).await;
    conn.send(Down::Task(work_task("keep", 4, "hello", json!({}))));
    conn.complete_for("keep").await;
    conn.close(); // no ack: the broker lost the stream

    let mut conn2 = broker.conn().await;
    let sub = conn2.subscribe().await;
    assert_eq!(sub.resumed.len(), 1);
    assert_eq!(
        (
            sub.resumed[0].lease_token.as_str(),
            sub.resumed[0].claim_epoch
        ),
        ("keep", 4)
    );
    match conn2.next().await {
        Up::Complete(c) => assert_eq!((c.lease_token.as_str(), c.claim_epoch), ("keep", 4)),
        other => panic!("expected the kept result to be re-sent first, got {other:?}"),
    }
    conn2.ack("keep", 4, true);
    conn2.close();

    let mut conn3 = broker.conn().await;
    assert!(
        conn3.subscribe().await.resumed.is_empty(),
        "an acked result is forgotten"
    );
    conn3.send(Down::Task(work_task("marker", 1, "hello", json!({}))));
    conn3.complete_for("marker").await;
    assert!(!conn3.saw_complete_for("keep"));
}

#[tokio::test]
async fn running_task_survives_a_stream_drop() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |_| {}).await;
    conn.send(Down::Task(work_task(
        "long",
        9,
        "hello",
        json!({"mode": "block"}),
    )));
    wait_for("the handler to start", || get(&probe.started) == 1).await;
    conn.close();

    let mut conn2 = broker.conn().await;
    let sub = conn2.subscribe().await;
    assert_eq!(sub.resumed.len(), 1);
    assert_eq!(
        (
            sub.resumed[0].lease_token.as_str(),
            sub.resumed[0].claim_epoch
        ),
        ("long", 9)
    );
    probe.gate.add_permits(1);
    let c = conn2.complete_for("long").await;
    assert_eq!((c.claim_epoch, c.error_message.as_str()), (9, ""));
    assert_eq!(get(&probe.cancelled), 0);
}

#[tokio::test]
async fn refused_ack_drops_the_result() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |_| {}).await;
    conn.send(Down::Task(work_task("stale", 5, "hello", json!({}))));
    conn.complete_for("stale").await;
    conn.ack("stale", 5, false);
    conn.close();

    let mut conn2 = broker.conn().await;
    assert!(conn2.subscribe().await.resumed.is_empty());
    conn2.send(Down::Task(work_task("marker", 1, "hello", json!({}))));
    conn2.complete_for("marker").await;
    assert!(
        !conn2.saw_complete_for("stale"),
        "a stale result is never retried"
    );
}

#[tokio::test]
async fn handler_panic_is_a_transient_failure() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |_| {}).await;
    conn.send(Down::Task(work_task(
        "p",
        1,
        "hello",
        json!({"mode": "panic"}),
    )));
    let c = conn.complete_for("p").await;
    assert!(
        c.error_message.contains("boom in p"),
        "message: {}",
        c.error_message
    );
    assert!(!c.terminal);
    // The worker keeps serving after a panic.
    conn.send(Down::Task(work_task("after", 1, "hello", json!({}))));
    assert_eq!(conn.complete_for("after").await.error_message, "");
}

#[tokio::test]
async fn handler_errors_keep_their_kind() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |_| {}).await;
    conn.send(Down::Task(work_task(
        "term",
        1,
        "hello",
        json!({"mode": "terminal"}),
    )));
    conn.send(Down::Task(work_task(
        "tran",
        1,
        "hello",
        json!({"mode": "transient"}),
    )));
    let t = conn.complete_for("term").await;
    assert_eq!((t.error_message.as_str(), t.terminal), ("bad input", true));
    let t = conn.complete_for("tran").await;
    assert_eq!((t.error_message.as_str(), t.terminal), ("try later", false));
}

#[tokio::test]
async fn malformed_tasks_fail_terminally() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |_| {}).await;
    conn.send(Down::Task(work_task("nokind", 1, "nobody", json!({}))));
    let mut v2 = work_task("v2", 1, "hello", json!({}));
    v2.kind_version = 2;
    conn.send(Down::Task(v2));
    let mut noreaction = work_task("noreaction", 1, "hello", json!({}));
    noreaction.reaction.clear();
    conn.send(Down::Task(noreaction));
    let mut nopayload = work_task("nopayload", 1, "hello", json!({}));
    nopayload.request = None;
    conn.send(Down::Task(nopayload));
    let mut mismatch = work_task("mismatch", 1, "hello", json!({}));
    mismatch.stage = pb::Stage::Rollup as i32;
    conn.send(Down::Task(mismatch));
    for token in ["nokind", "v2", "noreaction", "nopayload", "mismatch"] {
        let c = conn.complete_for(token).await;
        assert!(c.terminal && !c.error_message.is_empty(), "{token}: {c:?}");
    }
    assert_eq!(get(&probe.started), 0, "no handler ran");
}

#[tokio::test]
async fn deadline_cancels_the_handler_and_fails_transiently() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |_| {}).await;
    let mut task = work_task("slow", 3, "hello", json!({"mode": "wait_cancel"}));
    task.task_deadline_ms = 100;
    conn.send(Down::Task(task));
    let c = conn.complete_for("slow").await;
    assert_eq!(
        (c.error_message.as_str(), c.terminal, c.claim_epoch),
        ("deadline exceeded", false, 3)
    );
    wait_for("the handler to see its cancellation", || {
        get(&probe.cancelled) == 1
    })
    .await;
    let req = probe.requests.lock().unwrap()[0].clone();
    assert!(req.deadline.is_some());
    assert_eq!(req.cancel_reason.get(), Some(CancelReason::DEADLINE));
}

#[tokio::test]
async fn cancel_task_stops_the_handler_and_sends_nothing() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |c| {
        c.heartbeat_every = Duration::from_millis(30)
    })
    .await;
    conn.send(Down::Task(work_task(
        "doomed",
        2,
        "hello",
        json!({"mode": "wait_cancel"}),
    )));
    wait_for("the handler to start", || get(&probe.started) == 1).await;
    conn.send(Down::Cancel(pb::CancelTask {
        lease_token: "doomed".into(),
        claim_epoch: 2,
        reason: "superseded".into(),
    }));
    wait_for("the handler to see its cancellation", || {
        get(&probe.cancelled) == 1
    })
    .await;
    // The handler is told why: the broker's reason.
    assert_eq!(
        probe.requests.lock().unwrap()[0].cancel_reason.get(),
        Some("superseded")
    );

    // A later heartbeat lists only the marker task: the cancelled lease is forgotten.
    conn.send(Down::Task(work_task(
        "marker",
        1,
        "hello",
        json!({"mode": "block"}),
    )));
    let hb = conn
        .next_where(|b| match b {
            Up::Heartbeat(h) if h.lease_token.iter().any(|t| t == "marker") => Some(h.clone()),
            _ => None,
        })
        .await;
    assert_eq!(hb.lease_token, ["marker"]);
    probe.gate.add_permits(1);
    conn.complete_for("marker").await;
    assert!(
        !conn.saw_complete_for("doomed"),
        "a cancelled task's result is never sent"
    );
}

#[tokio::test]
async fn heartbeat_lists_running_tasks() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |c| {
        c.heartbeat_every = Duration::from_millis(30)
    })
    .await;
    conn.send(Down::Task(work_task(
        "a",
        11,
        "hello",
        json!({"mode": "block"}),
    )));
    conn.send(Down::Task(work_task(
        "b",
        12,
        "hello",
        json!({"mode": "block"}),
    )));
    wait_for("both handlers to start", || get(&probe.started) == 2).await;
    let hb = conn
        .next_where(|b| match b {
            Up::Heartbeat(h) if h.lease_token.len() == 2 => Some(h.clone()),
            _ => None,
        })
        .await;
    let mut pairs: Vec<(String, i64)> = hb
        .lease_token
        .iter()
        .cloned()
        .zip(hb.claim_epoch.iter().copied())
        .collect();
    pairs.sort();
    assert_eq!(pairs, [("a".to_string(), 11), ("b".to_string(), 12)]);
    probe.gate.add_permits(1);
    let first = conn
        .next_where(|b| match b {
            Up::Complete(c) => Some(c.lease_token.clone()),
            _ => None,
        })
        .await;
    let hb = conn
        .next_where(|b| match b {
            Up::Heartbeat(h) => Some(h.clone()),
            _ => None,
        })
        .await;
    assert_eq!(
        hb.lease_token.len(),
        1,
        "a finished handler is no longer attested"
    );
    assert_ne!(hb.lease_token[0], first);
    probe.gate.add_permits(1);
}

#[tokio::test]
async fn provider_config_is_primed_pushed_and_carried_by_requests() {
    let mut broker = TestBroker::start().await;
    broker
        .configs
        .lock()
        .unwrap()
        .push(pb::ProviderConfigEntry {
            kind: "hello".into(),
            kind_version: 1,
            config: br#"{"region":"eu","tier":{"size":1}}"#.to_vec(),
            bundle: b"v1".to_vec(),
        });
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |_| {}).await;
    {
        let cfgs = probe.configs.lock().unwrap();
        assert_eq!(cfgs.len(), 1, "primed before the stream opened");
        assert_eq!(
            cfgs[0].spec,
            Some(json!({"region": "eu", "tier": {"size": 1}}))
        );
        assert_eq!(&cfgs[0].bundle[..], b"v1");
    }
    conn.send(Down::Config(pb::ProviderConfigUpdate {
        kind: "hello".into(),
        kind_version: 1,
        config: br#"{"region":"us","tier":{"size":2}}"#.to_vec(),
        bundle: Vec::new(),
    }));
    let mut task = work_task("t", 1, "hello", json!({}));
    task.provider_config = br#"{"tier":{"zone":"a"}}"#.to_vec();
    conn.send(Down::Task(task));
    let c = conn.complete_for("t").await;
    let status = json_of(&c.status);
    assert_eq!(
        status["config"],
        json!({"region": "us", "tier": {"size": 2}})
    );
    assert_eq!(
        status["effective"],
        json!({"region": "us", "tier": {"size": 2, "zone": "a"}})
    );
    {
        let cfgs = probe.configs.lock().unwrap();
        assert_eq!(cfgs.len(), 2, "the push fired on_config");
        assert_eq!(
            cfgs[1].spec,
            Some(json!({"region": "us", "tier": {"size": 2}}))
        );
        assert!(cfgs[1].bundle.is_empty());
    }

    // An empty push means the config was deleted.
    conn.send(Down::Config(pb::ProviderConfigUpdate {
        kind: "hello".into(),
        kind_version: 1,
        ..Default::default()
    }));
    wait_for("on_config for the deletion", || {
        probe.configs.lock().unwrap().len() == 3
    })
    .await;
    assert!(probe.configs.lock().unwrap()[2].is_empty());
}

#[tokio::test]
async fn config_prime_retries_until_the_broker_answers() {
    let mut broker = TestBroker::start().await;
    broker.config_failures.store(3, Ordering::SeqCst);
    broker
        .configs
        .lock()
        .unwrap()
        .push(pb::ProviderConfigEntry {
            kind: "hello".into(),
            kind_version: 1,
            config: br#"{"ok":true}"#.to_vec(),
            bundle: Vec::new(),
        });
    let probe = Probe::new();
    let (_worker, _conn) = hello_worker(&mut broker, &probe, |_| {}).await;
    assert_eq!(
        broker.config_pulls.load(Ordering::SeqCst),
        4,
        "three failures, then success"
    );
    let cfgs = probe.configs.lock().unwrap();
    assert_eq!(
        cfgs.len(),
        1,
        "on_config fired once, with the primed default"
    );
    assert_eq!(cfgs[0].spec, Some(json!({"ok": true})));
}

#[tokio::test]
async fn config_is_pulled_again_after_a_reconnect() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |_| {}).await;
    let pulls = broker.config_pulls.load(Ordering::SeqCst);
    broker
        .configs
        .lock()
        .unwrap()
        .push(pb::ProviderConfigEntry {
            kind: "hello".into(),
            kind_version: 1,
            config: br#"{"v":2}"#.to_vec(),
            bundle: Vec::new(),
        });
    conn.close();
    let mut conn2 = broker.conn().await;
    conn2.subscribe().await;
    assert!(broker.config_pulls.load(Ordering::SeqCst) > pulls);
    let cfgs = probe.configs.lock().unwrap();
    assert_eq!(
        cfgs.last().and_then(|c| c.spec.clone()),
        Some(json!({"v": 2}))
    );
}

#[tokio::test]
async fn drain_finishes_in_flight_work_then_reconnects() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (_worker, mut conn) = hello_worker(&mut broker, &probe, |_| {}).await;
    conn.send(Down::Task(work_task(
        "inflight",
        1,
        "hello",
        json!({"mode": "block"}),
    )));
    wait_for("the handler to start", || get(&probe.started) == 1).await;
    conn.send(Down::Drain(pb::Drain {
        reason: "broker stopping".into(),
        deadline_ms: 0,
    }));
    // A task that slips in after Drain is refused (transient), never run.
    conn.send(Down::Task(work_task("late", 1, "hello", json!({}))));
    let late = conn.complete_for("late").await;
    assert!(!late.terminal && !late.error_message.is_empty());
    conn.ack("late", 1, true);
    probe.gate.add_permits(1);
    let c = conn.complete_for("inflight").await;
    assert_eq!(c.error_message, "");
    conn.ack("inflight", 1, true);
    within("the worker to close the drained stream", conn.closed()).await;
    assert_eq!(get(&probe.started), 1);

    let mut conn2 = broker.conn().await;
    assert!(conn2.subscribe().await.resumed.is_empty());
}

#[tokio::test]
async fn shutdown_waits_for_in_flight_work_and_its_ack() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (mut worker, mut conn) = hello_worker(&mut broker, &probe, |_| {}).await;
    conn.send(Down::Task(work_task(
        "w",
        1,
        "hello",
        json!({"mode": "block"}),
    )));
    wait_for("the handler to start", || get(&probe.started) == 1).await;
    worker.request_shutdown();
    let i = conn
        .next_where(|b| match b {
            Up::Interest(i) => Some(i.clone()),
            _ => None,
        })
        .await;
    assert_eq!(
        (i.kind.as_str(), i.has_worker),
        ("hello", false),
        "shutdown marks kinds unready"
    );
    assert!(!worker.is_finished());
    probe.gate.add_permits(1);
    conn.complete_for("w").await;
    assert!(!worker.is_finished(), "waits for the ack too");
    conn.ack("w", 1, true);
    worker.finished().await.expect("clean shutdown");
    assert_eq!(get(&probe.cancelled), 0);
}

#[tokio::test]
async fn shutdown_cancels_handlers_after_the_drain_timeout() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let (mut worker, mut conn) = hello_worker(&mut broker, &probe, |c| {
        c.drain_timeout = Duration::from_millis(100)
    })
    .await;
    conn.send(Down::Task(work_task(
        "stuck",
        1,
        "hello",
        json!({"mode": "wait_cancel"}),
    )));
    wait_for("the handler to start", || get(&probe.started) == 1).await;
    worker.request_shutdown();
    worker.finished().await.expect("clean shutdown");
    wait_for("the handler to be cancelled", || get(&probe.cancelled) == 1).await;
    assert_eq!(
        probe.requests.lock().unwrap()[0].cancel_reason.get(),
        Some(CancelReason::SHUTDOWN)
    );
    within("the stream to end", conn.closed()).await;
    assert!(!conn.saw_complete_for("stuck"));
}

#[tokio::test]
async fn invalid_registries_are_refused() {
    let broker = TestBroker::start().await;
    let probe = Probe::new();
    let cases = [
        (Registry::new(), "no providers"),
        (
            Registry::new().with(Scripted::new("hello", 0, &probe)),
            "versions start at 1",
        ),
        (
            Registry::new()
                .with(Scripted::new("hello", 1, &probe))
                .with(Scripted::new("hello", 1, &probe)),
            "registered twice",
        ),
    ];
    for (registry, want) in cases {
        let err = converge_sdk::run_worker(Worker::config(&broker), registry, async {})
            .await
            .expect_err(want);
        assert!(err.to_string().contains(want), "{err}");
    }
    let mut cfg = Worker::config(&broker);
    cfg.kinds = Some(vec!["missing".into()]);
    let err = converge_sdk::run_worker(
        cfg,
        Registry::new().with(Scripted::new("hello", 1, &probe)),
        async {},
    )
    .await
    .expect_err("unknown WORKER_KINDS entry");
    assert!(err.to_string().contains("missing"), "{err}");
}

#[tokio::test]
async fn worker_kinds_filters_the_registry() {
    let mut broker = TestBroker::start().await;
    let probe = Probe::new();
    let mut cfg = Worker::config(&broker);
    cfg.kinds = Some(vec!["other".into()]);
    let registry = Registry::new()
        .with(Scripted::new("hello", 1, &probe))
        .with(Scripted::new("other", 1, &probe));
    let _worker = Worker::start(cfg, registry);
    let sub = broker.conn().await.subscribe().await;
    assert_eq!(sub.kinds, ["other"]);
}
