//! Failover along `broker_addrs` against in-process broker doubles: a dead first broker is
//! skipped without a wait, streams move along the list in order when they end (kept results
//! follow the worker to the next broker), and HTTP/2 keepalive leaves a broker whose
//! connection went silent (black-holed) for the next one.

mod common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use common::{Probe, Scripted, TestBroker, Worker, work_task};
use converge_sdk::{
    Registry, WorkerConfig,
    pb::{work_stream_client_msg::Body as Up, work_stream_server_msg::Body as Down},
};
use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

fn registry(probe: &Arc<Probe>) -> Registry {
    Registry::new().with(Scripted::new("hello", 1, probe))
}

/// A loopback address nothing listens on (bound, then released).
fn dead_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}

/// The test config of `first`, with `more` brokers after it.
fn config(first: &TestBroker, more: &[&str]) -> WorkerConfig {
    let mut cfg = Worker::config(first);
    cfg.broker_addrs
        .extend(more.iter().map(|a| (*a).to_string()));
    cfg
}

#[tokio::test]
async fn a_dead_first_broker_is_skipped_without_waiting() {
    let mut second = TestBroker::start().await;
    let mut cfg = Worker::config(&second);
    cfg.broker_addrs.insert(0, dead_addr());
    // A wait after the refused first address would take at least 3.75 s; the second is
    // tried at once because the round of the list is not over.
    cfg.reconnect_min = Duration::from_secs(5);
    cfg.reconnect_max = Duration::from_secs(5);
    let probe = Probe::new();
    let _w = Worker::start(cfg, registry(&probe));
    let mut conn = tokio::time::timeout(Duration::from_secs(3), second.conn())
        .await
        .expect("the second broker got the stream without a backoff wait");
    conn.subscribe().await;
    assert_eq!(
        second.config_pulls.load(Ordering::SeqCst),
        1,
        "configs were primed from the second broker"
    );
    conn.send(Down::Task(work_task("t1", 1, "hello", json!({}))));
    assert!(conn.complete_for("t1").await.error_message.is_empty());
}

#[tokio::test]
async fn streams_move_along_the_list_and_kept_results_follow() {
    let mut a = TestBroker::start().await;
    let mut b = TestBroker::start().await;
    let probe = Probe::new();
    let _w = Worker::start(config(&a, &[&b.addr]), registry(&probe));

    let mut conn = a.conn().await;
    conn.subscribe().await;
    conn.send(Down::Task(work_task("kept", 7, "hello", json!({}))));
    conn.complete_for("kept").await;
    // The first broker goes away before acking: the result is kept for the next one.
    conn.close();

    let mut conn = b.conn().await;
    let sub = conn.subscribe().await;
    assert_eq!(
        sub.resumed
            .iter()
            .map(|r| (r.lease_token.as_str(), r.claim_epoch))
            .collect::<Vec<_>>(),
        [("kept", 7)],
        "the second broker hears of the unacked result"
    );
    assert!(
        matches!(conn.next().await, Up::Complete(c) if c.lease_token == "kept"),
        "and gets it re-sent"
    );
    conn.ack("kept", 7, true);
    conn.send(Down::Task(work_task("on-b", 1, "hello", json!({}))));
    assert!(conn.complete_for("on-b").await.error_message.is_empty());
    conn.ack("on-b", 1, true);
    conn.close();

    // Wrapping around: back to the first.
    let mut conn = a.conn().await;
    assert!(
        conn.subscribe().await.resumed.is_empty(),
        "acked results are forgotten"
    );
}

/// A TCP relay to `target` that can be frozen: once frozen it keeps both connections open
/// but forwards nothing, as a network partition or a stopped (SIGSTOP) broker looks to
/// the worker.
struct Relay {
    addr: String,
    frozen: Arc<AtomicBool>,
}

impl Relay {
    async fn start(target: &str) -> Self {
        let target = target.trim_start_matches("http://").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = format!("http://{}", listener.local_addr().unwrap());
        let frozen = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&frozen);
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = TcpStream::connect(&target).await else {
                    continue;
                };
                let (ri, wi) = inbound.into_split();
                let (ro, wo) = outbound.into_split();
                tokio::spawn(pump(ri, wo, Arc::clone(&flag)));
                tokio::spawn(pump(ro, wi, Arc::clone(&flag)));
            }
        });
        Self { addr, frozen }
    }

    fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` until either side closes; drops the bytes once `frozen`.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if frozen.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[tokio::test]
async fn a_silent_connection_is_dropped_by_keepalive_and_the_next_broker_taken() {
    let mut a = TestBroker::start().await;
    let mut b = TestBroker::start().await;
    let relay = Relay::start(&a.addr).await;
    let mut cfg = config(&a, &[&b.addr]);
    cfg.broker_addrs[0] = relay.addr.clone();
    let probe = Probe::new();
    let _w = Worker::start(cfg, registry(&probe));
    let mut conn = a.conn().await;
    conn.subscribe().await;

    relay.freeze();
    let started = tokio::time::Instant::now();
    // Keepalive: a PING after 10 s without a frame, dropped 10 s later without its answer.
    let mut conn_b = b
        .conn_within(Duration::from_secs(35))
        .await
        .expect("the worker left the silent broker for the next one");
    conn_b.subscribe().await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(9),
        "left after {took:?}: before any keepalive could have failed"
    );
    conn_b.send(Down::Task(work_task("after", 1, "hello", json!({}))));
    assert!(conn_b.complete_for("after").await.error_message.is_empty());
    drop(conn);
}
