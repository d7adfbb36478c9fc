//! Watches end to end, with the real `converge` binary and real `hello-worker` processes:
//! a resource's watch reports Reconciling → Ready (and a spec edit's round trip) in order,
//! a watch resumed with `Last-Event-ID` continues with no gap and no duplicate, the global
//! event watch follows the log, `conctl wait` and `conctl get --watch` use them, and the
//! watcher limit answers a 503 problem.

mod common;

use std::time::Duration;

use common::{Converge, Worker};
use futures::StreamExt;
use reqwest::Method;
use serde_json::{Value, json};
use sse_stream::{Sse, SseStream};
use tokio::process::Command;

const T: Duration = Duration::from_secs(30);

fn hello(name: &str, spec: Value) -> Value {
    json!({"kind": "hello", "kind_version": 1, "name": name, "spec": spec})
}

async fn setup(env: &[(&str, &str)]) -> Converge {
    let c = Converge::start(env).await;
    c.apply_manifest(&Converge::hello_manifest(30)).await;
    c
}

/// An open SSE stream.
struct Stream(
    std::pin::Pin<Box<dyn futures::Stream<Item = Result<Sse, sse_stream::Error>> + Send>>,
);

impl Stream {
    /// Opens `path` (under /api/v1) as an event stream, resuming after `last_id` if given.
    async fn open(c: &Converge, path: &str, last_id: Option<&str>) -> Stream {
        let mut req = c
            .client
            .get(format!("{}/api/v1{path}", c.http))
            .header("accept", "text/event-stream");
        if let Some(id) = last_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        Stream(Box::pin(SseStream::from_bytes_stream(resp.bytes_stream())))
    }

    /// The next message: its id and its data, skipping keep-alives.
    async fn next(&mut self) -> (String, Value) {
        loop {
            let sse = tokio::time::timeout(T, self.0.next())
                .await
                .expect("a message within the timeout")
                .expect("the stream is open")
                .expect("a well-formed message");
            if let Some(data) = sse.data {
                let id = sse.id.expect("every message has an id");
                return (id, serde_json::from_str(&data).unwrap());
            }
        }
    }

    /// Messages until one whose event satisfies `stop` (included).
    async fn until(&mut self, stop: impl Fn(&Value) -> bool) -> Vec<(String, Value)> {
        let mut got = Vec::new();
        loop {
            let m = self.next().await;
            let done = stop(&m.1["event"]);
            got.push(m);
            if done {
                return got;
            }
        }
    }
}

fn is_phase(e: &Value, from: &str, to: &str) -> bool {
    e["type"] == "phase" && e["from_phase"] == from && e["to_phase"] == to
}

/// The transitions of a run of watch messages, as `from->to@generation`.
fn transitions(msgs: &[(String, Value)]) -> Vec<String> {
    msgs.iter()
        .filter(|(_, m)| m["event"]["type"] == "phase")
        .map(|(_, m)| {
            let e = &m["event"];
            format!(
                "{}->{}@{}",
                e["from_phase"].as_str().unwrap(),
                e["to_phase"].as_str().unwrap(),
                e["generation"]
            )
        })
        .collect()
}

/// The ids of a page of events at `path` (under /api/v1).
async fn page_ids(c: &Converge, path: &str) -> Vec<i64> {
    let (status, page) = c.call(Method::GET, path, None).await;
    assert_eq!(status, 200, "{path}: {page}");
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect()
}

/// Every event id of hello/`name` in the log after `after`.
async fn log_ids(c: &Converge, name: &str, after: i64) -> Vec<i64> {
    page_ids(
        c,
        &format!("resources/hello/{name}/events?cursor={after}&limit=1000"),
    )
    .await
}

fn ids(msgs: &[(String, Value)]) -> Vec<i64> {
    msgs.iter().map(|(id, _)| id.parse().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_reports_reconciling_then_ready_in_order_and_resumes_without_gap_or_duplicate() {
    let c = setup(&[]).await;
    // No worker yet: the resource waits in Reconciling.
    c.apply(&hello("app", json!({"greeting": "hi"}))).await;
    let mut w = Stream::open(&c, "/resources/hello/app?watch=true", None).await;
    let (start, first) = w.next().await;
    assert!(
        first["event"].is_null(),
        "the first message is the state: {first}"
    );
    assert_eq!(first["resource"]["phase"], "Reconciling");
    let start: i64 = start.parse().unwrap();

    let _worker = Worker::hello(&c.broker, "w1", &[]);
    let seen = w.until(|e| is_phase(e, "Reconciling", "Ready")).await;
    assert_eq!(transitions(&seen), ["Reconciling->Ready@1"]);
    let ready = &seen.last().unwrap().1["resource"];
    assert_eq!(
        (ready["synced_gen"].as_i64(), ready["phase"].as_str()),
        (Some(1), Some("Ready"))
    );

    // A spec edit: Ready -> Reconciling -> Ready at generation 2, in that order.
    c.apply(&hello("app", json!({"greeting": "hey"}))).await;
    let edit = w.until(|e| is_phase(e, "Reconciling", "Ready")).await;
    assert_eq!(
        transitions(&edit),
        ["Ready->Reconciling@2", "Reconciling->Ready@2"]
    );
    let mut before = seen;
    before.extend(edit);
    assert_eq!(
        ids(&before),
        log_ids(&c, "app", start).await,
        "the log, in order"
    );

    // Disconnect, change it twice more, and resume from the last id received: exactly the
    // events after it, then live ones.
    let last = before.last().unwrap().0.clone();
    drop(w);
    c.apply(&hello("app", json!({"greeting": "hello"}))).await;
    c.wait_resource("hello", "app", "Ready at generation 3", T, |v| {
        v["phase"] == "Ready" && v["synced_gen"] == 3
    })
    .await;
    let mut w = Stream::open(&c, "/resources/hello/app?watch=true", Some(&last)).await;
    let resumed = w.until(|e| is_phase(e, "Reconciling", "Ready")).await;
    assert_eq!(
        transitions(&resumed),
        ["Ready->Reconciling@3", "Reconciling->Ready@3"]
    );
    let (status, _) = c
        .call(Method::POST, "resources/hello/app/quarantine", None)
        .await;
    assert_eq!(status, 200);
    let live = w.until(|e| is_phase(e, "Ready", "Quarantined")).await;

    let mut all = before;
    all.extend(resumed);
    all.extend(live);
    let got = ids(&all);
    let unique: std::collections::BTreeSet<i64> = got.iter().copied().collect();
    assert_eq!(unique.len(), got.len(), "no duplicate: {got:?}");
    assert_eq!(got, log_ids(&c, "app", start).await, "no gap: {got:?}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_event_watch_follows_the_whole_log_and_pages_agree() {
    let c = setup(&[]).await;
    let _worker = Worker::hello(&c.broker, "w1", &[]);
    let mut w = Stream::open(&c, "/events?watch=true&kind=hello", None).await;
    for name in ["a", "b"] {
        c.apply(&hello(name, json!({"greeting": "hi"}))).await;
    }
    let mut ready = std::collections::BTreeSet::new();
    let mut msgs = Vec::new();
    while ready.len() < 2 {
        let (id, e) = w.next().await;
        assert_eq!(e["kind"], "hello");
        if e["to_phase"] == "Ready" {
            ready.insert(e["name"].as_str().unwrap().to_string());
        }
        msgs.push((id.parse::<i64>().unwrap(), e));
    }
    // The same events, paged from the start of the log.
    let paged = page_ids(&c, "events?kind=hello&limit=1000").await;
    let watched: Vec<i64> = msgs.iter().map(|(id, _)| *id).collect();
    assert!(
        paged.starts_with(&watched),
        "watched {watched:?}, paged {paged:?}"
    );
    // Resuming with `cursor` replays from there.
    let mut again = Stream::open(
        &c,
        &format!("/events?watch=true&cursor={}", watched[0]),
        None,
    )
    .await;
    let (id, _) = again.next().await;
    assert_eq!(id.parse::<i64>().unwrap(), watched[1]);
    c.stop().await;
}

/// Runs conctl against `server` with `args`; (exit code, stdout, stderr).
async fn conctl(server: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_conctl"))
        .env_clear()
        .env("CONVERGE_SERVER", server)
        .args(args)
        .output()
        .await
        .expect("run conctl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn conctl_wait_succeeds_on_ready_and_fails_on_timeout_or_terminal_failure() {
    let c = setup(&[]).await;
    c.apply(&hello("slow", json!({"greeting": "hi"}))).await;
    // No worker serves hello yet: the wait runs out.
    let (code, _, err) = conctl(
        &c.http,
        &["wait", "hello/slow", "--for=Ready", "--timeout=2s"],
    )
    .await;
    assert_ne!(code, 0);
    assert!(
        err.contains("timed out") && err.contains("hello/slow") && err.contains("Reconciling"),
        "{err}"
    );

    // A wait started before the worker connects ends when the resource is Ready.
    let server = c.http.clone();
    let waiting = tokio::spawn(async move {
        conctl(
            &server,
            &["wait", "hello/slow", "--for=Ready", "--timeout=60s"],
        )
        .await
    });
    let _worker = Worker::hello(&c.broker, "w1", &[]);
    let (code, out, err) = waiting.await.unwrap();
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("hello/slow is Ready"), "{out}");

    // Already Ready: at once.
    let (code, _, err) = conctl(&c.http, &["wait", "hello/slow", "--for=ready"]).await;
    assert_eq!(code, 0, "{err}");

    c.apply(&hello("doomed", json!({"fail": "terminal"}))).await;
    let (code, _, err) = conctl(
        &c.http,
        &["wait", "hello/doomed", "--for=Ready", "--timeout=60s"],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("failed terminally"), "{err}");

    let (code, _, err) = conctl(&c.http, &["wait", "hello/nope", "--for=Ready"]).await;
    assert_ne!(code, 0);
    assert!(err.contains("not found"), "{err}");
    let (code, _, err) = conctl(&c.http, &["wait", "hello/slow", "--for=Sleepy"]).await;
    assert_ne!(code, 0);
    assert!(err.contains("not a phase"), "{err}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn conctl_get_watch_prints_each_change() {
    let c = setup(&[]).await;
    c.apply(&hello("app", json!({"greeting": "hi"}))).await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_conctl"))
        .env_clear()
        .env("CONVERGE_SERVER", &c.http)
        .args(["get", "resource", "hello/app", "--watch", "-o", "json"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(child.stdout.take().unwrap()));
    let mut next = async || -> Value {
        let line = tokio::time::timeout(T, lines.next_line())
            .await
            .expect("a line within the timeout")
            .unwrap()
            .expect("conctl still running");
        serde_json::from_str(&line).unwrap()
    };
    let first = next().await;
    assert_eq!(first["resource"]["phase"], "Reconciling");
    let _worker = Worker::hello(&c.broker, "w1", &[]);
    loop {
        let m = next().await;
        if is_phase(&m["event"], "Reconciling", "Ready") {
            assert_eq!(m["resource"]["phase"], "Ready");
            break;
        }
    }
    child.kill().await.unwrap();
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn watches_beyond_the_limit_get_a_503_problem() {
    let c = setup(&[("MAX_WATCHERS", "1")]).await;
    c.apply(&hello("app", json!({"greeting": "hi"}))).await;
    let _held = Stream::open(&c, "/events?watch=true", None).await;
    let r = c
        .client
        .get(format!("{}/api/v1/resources/hello/app?watch=true", c.http))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    assert!(r.headers().contains_key("retry-after"));
    let p: Value = r.json().await.unwrap();
    assert!(
        p["detail"].as_str().unwrap().contains("MAX_WATCHERS"),
        "{p}"
    );
    // A plain read is not a watch.
    let (status, _) = c.call(Method::GET, "resources/hello/app", None).await;
    assert_eq!(status, 200);
    c.stop().await;
}
