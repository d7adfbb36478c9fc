//! Peers that stall, hang, die or flood (issue 24): none of them may stall anyone else, and
//! what they held comes back within seconds. Real `converge` processes, real hello workers,
//! a raw gRPC client for the peer that misbehaves.

mod common;

use std::time::{Duration, Instant};

use common::{
    Converge, Worker, raw_worker::RawWorker, serve_command, spawn_ready, wait_for, wait_ready_at,
};
use converge_control::testing::TestDb;
use converge_proto::pb::{self, work_stream_client_msg::Body as Out};
use serde_json::{Value, json};

/// One test at a time: each starts its own converge and workers and measures recovery
/// bounds, and a flood or a SIGSTOP beside another's measurement only adds noise.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn hello(name: &str, spec: Value) -> Value {
    json!({"kind": "hello", "kind_version": 1, "name": name, "spec": spec})
}

/// Waits until `name`'s task is held by a broker (a worker received it).
async fn wait_claimed(c: &Converge, name: &str) -> Value {
    c.wait_resource(
        "hello",
        name,
        "task claimed",
        Duration::from_secs(20),
        |v| v["work"]["claimed"] == true,
    )
    .await
}

async fn wait_ready(c: &Converge, name: &str, within: Duration) -> Value {
    c.wait_resource("hello", name, "Ready", within, |v| v["phase"] == "Ready")
        .await
}

/// Lines `start <name> …` in a hello worker's HELLO_LOG.
fn starts(log: &std::path::Path) -> Vec<String> {
    events(log, "start")
}

/// The `event` lines of a hello worker's HELLO_LOG (`<event> <name> <attempt> <unix ms>`).
fn events(log: &std::path::Path, event: &str) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split(' ').next() == Some(event))
        .map(str::to_owned)
        .collect()
}

/// Milliseconds since the Unix epoch, the clock of HELLO_LOG's lines.
fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_subscriber_blocks_no_config_push_and_no_other_worker() {
    let _serial = SERIAL.lock().await;
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(0)).await;
    // The stalled peer subscribes, receives one task, and never reads again.
    let stalled = RawWorker::connect(
        &c,
        Out::Subscribe(pb::Subscribe {
            kinds: vec!["hello".into()],
            kind_versions: vec![1],
            max_inflight: 1,
            worker_name: "stalled".into(),
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    c.apply(&hello("held", json!({}))).await;
    wait_claimed(&c, "held").await;

    // 100 edits of a 256 KiB default config: every one is pushed to the stalled stream,
    // far more than its queue and the HTTP/2 windows hold.
    let pad = "x".repeat(256 * 1024);
    let edit = |i: usize| {
        json!({"name": "defaults", "kind": "hello", "kind_version": 1, "is_default": true,
               "spec": {"edit": i, "pad": pad}})
    };
    for i in 0..100 {
        let (s, body) = c
            .call(reqwest::Method::POST, "providerconfigs", Some(edit(i)))
            .await;
        assert!(s == 200 || s == 201, "config edit {i}: {s} {body}");
    }

    // A second worker subscribes (its configs are primed under the same lock the pushes
    // take) and completes a task well before the stalled stream could be closed.
    let t = Instant::now();
    let _w = Worker::hello(&c.broker, "fresh", &[]);
    c.apply(&hello("fresh", json!({}))).await;
    wait_ready(&c, "fresh", Duration::from_secs(30)).await;
    let took = t.elapsed();
    eprintln!("second worker subscribed and completed a task in {took:?}");
    assert!(
        took < Duration::from_secs(5),
        "the second worker waited {took:?}: it must not wait for the stalled stream (closed after 10 s)"
    );

    // The stalled stream is closed and its task comes back: the fresh worker finishes it.
    // More edits keep frames arriving for the stalled stream while it is being closed.
    let mut i = 100;
    wait_for(
        Duration::from_secs(60),
        "the stalled stream's task re-run",
        || {
            i += 1;
            let edit = edit(i);
            let c = &c;
            async move {
                c.call(reqwest::Method::POST, "providerconfigs", Some(edit))
                    .await;
                let v = c.get("hello", "held").await?;
                (v["phase"] == "Ready").then_some(v)
            }
        },
    )
    .await;

    // What the stalled client finally reads ends with the broker's reason.
    let mut rx = stalled.rx;
    let status = loop {
        match tokio::time::timeout(Duration::from_secs(60), rx.message())
            .await
            .expect("the stalled stream must end")
        {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stalled stream ended without a status"),
            Err(s) => break s,
        }
    };
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("unread"), "{status:?}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hung_worker_loses_its_tasks_to_another_and_gets_none_back() {
    let _serial = SERIAL.lock().await;
    const N: usize = 50;
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(120)).await;
    let dir = converge_auth::testing::scratch_dir("hung-worker");
    let (log_a, log_b) = (dir.join("a.log"), dir.join("b.log"));
    let a = Worker::hello(
        &c.broker,
        "hung",
        &[
            ("WORKER_MAX_PARALLEL", "64"),
            ("HELLO_LOG", log_a.to_str().unwrap()),
        ],
    );
    for i in 0..N {
        c.apply(&hello(&format!("r{i}"), json!({"sleep_ms": 2000})))
            .await;
    }
    wait_for(
        Duration::from_secs(30),
        "the first worker runs every task",
        || async { (starts(&log_a).len() == N).then_some(()) },
    )
    .await;
    // The worker hangs: its process stops, its TCP connection stays open.
    let pid = a.child.id().unwrap().to_string();
    let stopped = Instant::now();
    let stopped_ms = unix_ms();
    assert!(
        std::process::Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    let _b = Worker::hello(
        &c.broker,
        "healthy",
        &[
            ("WORKER_MAX_PARALLEL", "64"),
            ("HELLO_LOG", log_b.to_str().unwrap()),
        ],
    );
    for i in 0..N {
        wait_ready(&c, &format!("r{i}"), Duration::from_secs(90)).await;
    }
    let took = stopped.elapsed();
    eprintln!(
        "{N} tasks of a SIGSTOPped worker Ready through another worker {took:?} after the stop"
    );
    // Keepalive (5 s + 5 s) ends the hung worker's stream; the 120 s deadline and the 30 s
    // lease staleness never come into it.
    assert!(
        took < Duration::from_secs(25),
        "the hung worker held its tasks for {took:?}"
    );
    // A task the first worker finished before it stopped (on a loaded machine the stop can
    // come more than a task's 2 s after its start) was reported or is re-run; every other
    // task re-ran on the healthy worker.
    let finished_before_stop = events(&log_a, "done")
        .iter()
        .filter(|l| l.rsplit(' ').next().and_then(|ms| ms.parse::<u128>().ok()) < Some(stopped_ms))
        .count();
    let rerun = starts(&log_b).len();
    assert!(
        rerun >= N - finished_before_stop && rerun <= N,
        "every task the hung worker held re-ran on the healthy worker: {rerun} re-ran, \
         {finished_before_stop} of {N} had finished before the stop"
    );
    // Resumed, the hung worker finds nothing new was ever sent to it.
    assert!(
        std::process::Command::new("kill")
            .args(["-CONT", &pid])
            .status()
            .unwrap()
            .success()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        starts(&log_a).len(),
        N,
        "no task was handed back to the hung worker"
    );
    drop(a);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_brokers_leases_come_back_within_seconds() {
    let _serial = SERIAL.lock().await;
    let mut c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(0)).await;
    let peer = c.spawn_peer(&[]).await;
    // A worker on broker A takes the task; then A is SIGKILLed (nothing released the lease)
    // and the worker is gone with it.
    let mut w = RawWorker::subscribe(&c).await;
    c.apply(&hello("orphan", json!({}))).await;
    w.task().await;
    c.crash().await;
    let crashed = Instant::now();
    drop(w);
    let _b = Worker::hello(&peer.broker, "survivor", &[]);
    let client = reqwest::Client::new();
    wait_ready_at(
        &client,
        &peer.http,
        "hello",
        "orphan",
        Duration::from_secs(60),
    )
    .await;
    let took = crashed.elapsed();
    eprintln!("a SIGKILLed broker's lease re-dispatched and done {took:?} after the kill");
    assert!(
        took < Duration::from_secs(10),
        "the dead broker's lease waited {took:?} (the 30 s staleness, not liveness)"
    );
}

/// Opens up to `n` TCP connections to `addr` that never send a byte.
async fn idle_flood(addr: &str, n: usize) -> Vec<tokio::net::TcpStream> {
    let mut out = Vec::with_capacity(n);
    for chunk in 0..n.div_ceil(100) {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..100.min(n - chunk * 100) {
            let addr = addr.to_owned();
            set.spawn(async move {
                tokio::time::timeout(Duration::from_secs(3), tokio::net::TcpStream::connect(addr))
                    .await
                    .ok()
                    .and_then(Result::ok)
            });
        }
        while let Some(r) = set.join_next().await {
            if let Some(s) = r.unwrap() {
                out.push(s);
            }
        }
    }
    out
}

/// Total CPU seconds `pid` has used (user + system).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_connection_flood_leaves_probes_and_workers_working() {
    let _serial = SERIAL.lock().await;
    const FLOOD: usize = 1500;
    let db = TestDb::new().await;
    let (child, hp, gp) = spawn_ready("converge /readyz", |hp, gp| {
        // The usual service limit, as a hard limit converge cannot raise: `ulimit -n` in
        // sh sets both the soft and the hard limit before it execs converge.
        let serve = serve_command(&db.url, hp, gp, &[]);
        let serve = serve.as_std();
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg("ulimit -n 1024 && exec \"$0\" \"$@\"")
            .arg(serve.get_program())
            .args(serve.get_args())
            .env_clear()
            .kill_on_drop(true);
        for (k, v) in serve.get_envs() {
            if let Some(v) = v {
                cmd.env(k, v);
            }
        }
        cmd.spawn().expect("spawn converge under ulimit -n 1024")
    })
    .await;
    let pid = child.id().unwrap();
    let (http, broker) = (format!("127.0.0.1:{hp}"), format!("127.0.0.1:{gp}"));
    let api = format!("http://{http}");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let r = client
        .put(format!("{api}/api/v1/kinds/hello/manifest"))
        .json(&Converge::hello_manifest(0))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());

    let mut flood = idle_flood(&http, FLOOD).await;
    flood.extend(idle_flood(&broker, FLOOD).await);
    eprintln!(
        "{} idle connections opened against a 1,024-descriptor converge",
        flood.len()
    );

    // The probe gets in (the oldest silent connection makes room for it).
    let t = Instant::now();
    let r = client.get(format!("{api}/readyz")).send().await;
    let probe = t.elapsed();
    let status = r.expect("/readyz must answer under the flood").status();
    assert_eq!(status, 200);
    eprintln!("/readyz answered in {probe:?} under the flood");

    // A real worker connects and completes a task while the flood is still open.
    let _w = Worker::hello(&format!("http://{broker}"), "through-the-flood", &[]);
    let r = client
        .post(format!("{api}/api/v1/resources"))
        .json(&hello("flooded", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    wait_ready_at(&client, &api, "hello", "flooded", Duration::from_secs(60)).await;

    // A fresh flood while the process is otherwise idle: no accept loop spins on EMFILE.
    flood.extend(idle_flood(&http, FLOOD).await);
    let before = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let used = cpu_seconds(pid) - before;
    eprintln!("converge used {used:.2} CPU s over 3 s with the flood open");
    assert!(
        used < 1.5,
        "converge burned {used:.2} CPU s in 3 s under an idle flood"
    );
    drop(flood);
    drop(child);
}

/// The value of the sample `series` (its name and labels exactly as exported) in converge's
/// `/metrics`; 0 when absent.
async fn sample(c: &Converge, series: &str) -> f64 {
    let text = c
        .client
        .get(format!("{}/metrics", c.http))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// `(name, attempt)` of each `start` line of a HELLO_LOG.
fn started(log: &std::path::Path) -> Vec<(String, u32)> {
    starts(log)
        .iter()
        .map(|l| {
            let mut f = l.split_whitespace().skip(1);
            let name = f.next().unwrap().to_owned();
            (name, f.next().unwrap().parse().unwrap())
        })
        .collect()
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_that_hangs_past_a_deadline_is_handed_no_retry() {
    let _serial = SERIAL.lock().await;
    const N: usize = 16;
    let c = Converge::start(&[]).await;
    // A 4 s deadline: shorter than keepalive's detection of a hung worker (5 s + 5 s), so
    // every task of the hung worker is retried while its connection is still open.
    c.apply_manifest(&Converge::hello_manifest(4)).await;
    let dir = converge_auth::testing::scratch_dir("hung-deadline");
    let (log_a, log_b) = (dir.join("a.log"), dir.join("b.log"));
    let a = Worker::hello(
        &c.broker,
        "hung",
        &[
            ("WORKER_MAX_PARALLEL", "64"),
            ("HELLO_LOG", log_a.to_str().unwrap()),
        ],
    );
    for i in 0..N {
        c.apply(&hello(&format!("r{i}"), json!({"sleep_ms": 1500})))
            .await;
    }
    wait_for(
        Duration::from_secs(30),
        "the first worker starts every task",
        || async { (starts(&log_a).len() == N).then_some(()) },
    )
    .await;
    // It hangs whole, connection open, before any of its 1.5 s tasks ends.
    let pid = a.child.id().unwrap();
    signal(pid, "-STOP");
    let stopped = Instant::now();
    let _b = Worker::hello(
        &c.broker,
        "healthy",
        &[
            ("WORKER_MAX_PARALLEL", "64"),
            ("HELLO_LOG", log_b.to_str().unwrap()),
        ],
    );
    // Each task hits its deadline on the hung worker and its retry runs once, on the
    // healthy one: a retry handed back to the hung worker would hit the deadline again and
    // come back as attempt 3.
    for i in 0..N {
        let r = wait_ready(&c, &format!("r{i}"), Duration::from_secs(60)).await;
        assert_eq!(
            (&r["status"]["worker"], &r["status"]["attempt"]),
            (&json!("healthy"), &json!(2)),
            "r{i}: {r}"
        );
    }
    eprintln!(
        "{N} tasks of a SIGSTOPped worker past their 4 s deadline Ready on another worker {:?} after the stop",
        stopped.elapsed()
    );
    let deadlines = sample(
        &c,
        r#"converge_reconciles_total{kind="hello",stage="work",result="deadline"}"#,
    )
    .await;
    assert_eq!(
        deadlines, N as f64,
        "one deadline per task, none for a retry"
    );
    let mut on_b = started(&log_b);
    on_b.sort();
    let mut want: Vec<(String, u32)> = (0..N).map(|i| (format!("r{i}"), 2)).collect();
    want.sort();
    assert_eq!(on_b, want, "every retry ran once, on the healthy worker");

    // The hung worker wakes up with the healthy one gone: once it has answered the broker,
    // it takes tasks again. The probe is the last task it is sent, so when it starts the
    // worker has read every frame sent to it before: a retry among them would have started
    // first.
    drop(_b);
    signal(pid, "-CONT");
    c.apply(&hello("probe", json!({}))).await;
    let r = wait_ready(&c, "probe", Duration::from_secs(60)).await;
    assert_eq!(r["status"]["worker"], "hung", "{r}");
    let on_a = started(&log_a);
    assert_eq!(on_a.len(), N + 1, "{on_a:?}");
    assert!(
        on_a.iter()
            .all(|(name, attempt)| *attempt == 1 || name == "probe"),
        "a retry was handed to the hung worker: {on_a:?}"
    );
    drop(a);
    let _ = std::fs::remove_dir_all(&dir);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_converge_restarted_after_a_long_outage_runs_no_task_twice() {
    let _serial = SERIAL.lock().await;
    const N: usize = 64;
    // Down 15 s, longer than MEMBER_DEAD_AFTER: the new process finds its predecessor's row
    // silent for longer than the dead-after window.
    let env = [("MEMBER_DEAD_AFTER", "10s")];
    let mut c = Converge::start(&env).await;
    c.apply_manifest(&Converge::hello_manifest(0)).await;
    let dir = converge_auth::testing::scratch_dir("restart-once");
    let log = dir.join("w.log");
    let w = Worker::hello(
        &c.broker,
        "keeper",
        &[
            ("WORKER_MAX_PARALLEL", "64"),
            ("HELLO_LOG", log.to_str().unwrap()),
        ],
    );
    for i in 0..N {
        c.apply(&hello(&format!("r{i}"), json!({"sleep_ms": 3000})))
            .await;
    }
    wait_for(
        Duration::from_secs(30),
        "every task running on the worker",
        || async { (starts(&log).len() == N).then_some(()) },
    )
    .await;
    // kill -9 with 64 tasks in flight; the worker finishes them meanwhile and keeps the
    // results for its reconnect.
    c.crash().await;
    let crashed = Instant::now();
    tokio::time::sleep(Duration::from_secs(15)).await; // the outage itself, not a wait for state
    c.restart(&env).await;
    for i in 0..N {
        wait_ready(&c, &format!("r{i}"), Duration::from_secs(60)).await;
    }
    eprintln!(
        "{N} tasks in flight across a 15 s outage Ready {:?} after the kill",
        crashed.elapsed()
    );
    let mut runs = std::collections::BTreeMap::<String, usize>::new();
    for (name, _) in started(&log) {
        *runs.entry(name).or_default() += 1;
    }
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert_eq!(runs.len(), N);
    assert!(twice.is_empty(), "tasks run twice: {twice:?}");
    drop(w);
    let _ = std::fs::remove_dir_all(&dir);
    c.stop().await;
}
