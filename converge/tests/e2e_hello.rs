//! End to end with the real `converge` binary and real `hello-worker` processes over gRPC:
//! apply → Ready, spec edits, validation, failure and recovery, terminal stop, and a worker
//! killed mid-task.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Converge, Worker};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);

fn hello(name: &str, spec: Value) -> Value {
    json!({"kind": "hello", "kind_version": 1, "name": name, "spec": spec})
}

async fn setup(env: &[(&str, &str)]) -> Converge {
    let c = Converge::start(env).await;
    c.apply_manifest(&Converge::hello_manifest(30)).await;
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_reaches_ready_and_a_spec_edit_reconciles_again() {
    let c = setup(&[]).await;
    let _w = Worker::hello(&c.broker, "w1", &[]);
    let (status, result, body) = c.apply(&hello("world", json!({"greeting": "hi"}))).await;
    assert_eq!((status, result.as_str()), (201, "created"), "{body}");
    let r = c
        .wait_resource("hello", "world", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert_eq!(r["status"]["message"], "hi, world!");
    assert_eq!(r["status"]["observed_generation"], 1);
    assert_eq!(
        (r["generation"].as_i64(), r["synced_gen"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(r["is_ready"], true);

    let (status, result, _) = c.apply(&hello("world", json!({"greeting": "hi"}))).await;
    assert_eq!((status, result.as_str()), (200, "unchanged"));

    let (status, result, body) = c.apply(&hello("world", json!({"greeting": "hey"}))).await;
    assert_eq!((status, result.as_str()), (200, "configured"));
    assert_eq!(body["generation"], 2);
    let r = c
        .wait_resource("hello", "world", "Ready at generation 2", T, |v| {
            v["phase"] == "Ready" && v["synced_gen"] == 2
        })
        .await;
    assert_eq!(r["status"]["message"], "hey, world!");
    assert_eq!(r["status"]["observed_generation"], 2);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_input_is_refused_with_problem_details_and_nothing_written() {
    let c = setup(&[("MAX_BODY_BYTES", "4096")]).await;
    let url = format!("{}/api/v1/resources", c.http);

    let r = c
        .client
        .post(&url)
        .json(&hello("bad", json!({"greeting": 5, "bogus": true})))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let p: Value = r.json().await.unwrap();
    let locations: Vec<&str> = p["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["location"].as_str().unwrap())
        .collect();
    assert!(locations.contains(&"/spec/greeting"), "{p}");
    assert!(
        locations.contains(&"/spec"),
        "additionalProperties is reported at /spec: {p}"
    );
    assert!(
        c.get("hello", "bad").await.is_none(),
        "nothing may be written"
    );

    let r = c
        .client
        .post(&url)
        .json(&json!({"kind": "nope", "kind_version": 1, "name": "x", "spec": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = c
        .client
        .post(&url)
        .json(&json!({"kind": "hello", "name": "x", "spec": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422, "kind_version is required");
    let r = c
        .client
        .post(&url)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let big = hello("big", json!({"greeting": "x".repeat(8000)}));
    let r = c.client.post(&url).json(&big).send().await.unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(r.headers()["content-type"], "application/problem+json");

    let r = c
        .client
        .put(format!("{}/api/v1/kinds/broken/manifest", c.http))
        .json(&json!({"kind": "broken", "kind_version": 1, "reactions": [
            {"name": "c1", "trigger": "specChange", "emits": ["children"]},
            {"name": "op", "trigger": "operation", "emits": ["operationOutput"]}
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let p: Value = r.json().await.unwrap();
    assert!(
        p["errors"].as_array().unwrap().len() >= 2,
        "every violated rule is listed: {p}"
    );
    let r = c
        .client
        .get(format!("{}/api/v1/kinds/broken/manifest", c.http))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn handler_error_fails_then_recovers() {
    let c = setup(&[]).await;
    let _w = Worker::hello(&c.broker, "w1", &[]);
    c.apply(&hello("flaky", json!({"fail_attempts": 2}))).await;
    let r = c
        .wait_resource("hello", "flaky", "Failed", T, |v| v["phase"] == "Failed")
        .await;
    assert_eq!(r["failure_terminal"], false);
    assert!(
        r["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Synced" && c["status"] == "False"),
        "{r}"
    );
    let r = c
        .wait_resource("hello", "flaky", "Ready after retries", T, |v| {
            v["phase"] == "Ready"
        })
        .await;
    assert_eq!(r["status"]["attempt"], 3);
    assert_eq!(r["failure_attempts"], 0);
    assert!(
        r["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["status"] != "False"),
        "a clean reconcile clears the stored failure: {r}"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn terminal_error_stops_retries_until_the_spec_changes() {
    let c = setup(&[]).await;
    let _w = Worker::hello(&c.broker, "w1", &[]);
    c.apply(&hello("doomed", json!({"fail": "terminal"}))).await;
    let r = c
        .wait_resource("hello", "doomed", "terminally Failed", T, |v| {
            v["phase"] == "Failed"
        })
        .await;
    assert_eq!(r["failure_terminal"], true);
    assert_eq!(r["failure_attempts"], 1);
    // Several backoff periods (RETRY_BASE=200ms) pass: no retry may happen.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = c.get("hello", "doomed").await.unwrap();
    assert_eq!(
        r["failure_attempts"], 1,
        "a terminal failure must not be retried: {r}"
    );
    assert!(r["work"].is_null(), "no task may be queued: {r}");
    c.apply(&hello("doomed", json!({"greeting": "fixed"})))
        .await;
    let r = c
        .wait_resource("hello", "doomed", "Ready after the spec change", T, |v| {
            v["phase"] == "Ready"
        })
        .await;
    assert_eq!(r["status"]["message"], "fixed, doomed!");
    c.stop().await;
}

/// The condition named `type` of a resource read, if it has one.
fn condition<'a>(r: &'a Value, type_: &str) -> Option<&'a Value> {
    r["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failure_turns_ready_false_and_a_waiting_retry_says_when() {
    // A long backoff keeps the retry waiting while the test reads it.
    let c = setup(&[("RETRY_BASE", "30s"), ("RETRY_MAX", "60s")]).await;
    let _w = Worker::hello(&c.broker, "w1", &[]);
    c.apply(&hello("turns", json!({"greeting": "hi"}))).await;
    let r = c
        .wait_resource("hello", "turns", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert_eq!(condition(&r, "Ready").unwrap()["status"], "True", "{r}");
    assert!(r["next_attempt_at"].is_null(), "{r}");

    // The worker reported Ready=True before; a terminal failure must not leave it standing.
    c.apply(&hello("turns", json!({"fail": "terminal"}))).await;
    let r = c
        .wait_resource("hello", "turns", "terminally Failed", T, |v| {
            v["phase"] == "Failed" && v["failure_terminal"] == true
        })
        .await;
    let ready = condition(&r, "Ready").expect("a Ready condition");
    assert_eq!(
        (&ready["status"], &ready["reason"]),
        (&json!("False"), &json!("TerminalError")),
        "{r}"
    );
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("terminal failure"),
        "the failure's message: {r}"
    );
    assert!(r["next_attempt_at"].is_null(), "nothing is retried: {r}");
    // The list row says so too, without a read per row.
    let row = list_row(&c, "turns").await;
    assert_eq!(
        (&row["phase"], &row["failure_terminal"]),
        (&json!("Failed"), &json!(true)),
        "{row}"
    );
    assert!(
        row["failure_message"]
            .as_str()
            .unwrap()
            .contains("terminal failure"),
        "{row}"
    );

    // A transient failure: Ready=False for that reason, and the detail says when it is retried.
    c.apply(&hello("turns", json!({"fail": "transient"}))).await;
    let r = c
        .wait_resource("hello", "turns", "a retry waiting", T, |v| {
            v["phase"] == "Failed"
                && v["failure_terminal"] == false
                && !v["next_attempt_at"].is_null()
        })
        .await;
    assert_eq!(
        condition(&r, "Ready").unwrap()["reason"],
        "ReconcileError",
        "{r}"
    );
    let at = chrono::DateTime::parse_from_rfc3339(r["next_attempt_at"].as_str().unwrap())
        .expect("an RFC 3339 time");
    let work_at = chrono::DateTime::parse_from_rfc3339(r["work"]["not_before"].as_str().unwrap())
        .expect("the queue row's not_before");
    assert_eq!(at, work_at, "the retry time is the queued task's: {r}");
    let row = list_row(&c, "turns").await;
    assert_eq!(
        (&row["phase"], &row["failure_terminal"]),
        (&json!("Failed"), &json!(false)),
        "being retried: {row}"
    );
    assert!(row["failure_attempts"].as_i64().unwrap() >= 1, "{row}");
    assert!(
        row["failure_message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{row}"
    );

    // Fixed: Ready=True again, no stored False condition, nothing waiting.
    c.apply(&hello("turns", json!({"greeting": "back"}))).await;
    let r = c
        .wait_resource("hello", "turns", "Ready again", T, |v| {
            v["phase"] == "Ready"
        })
        .await;
    assert_eq!(condition(&r, "Ready").unwrap()["status"], "True", "{r}");
    assert!(r["next_attempt_at"].is_null(), "{r}");
    assert!(
        list_row(&c, "turns").await["failure_message"].is_null(),
        "not failing: no message"
    );
    c.stop().await;
}

/// The row of hello `name` in `GET /api/v1/resources`.
async fn list_row(c: &Converge, name: &str) -> Value {
    let (status, page) = c
        .call(reqwest::Method::GET, "resources?kind=hello&limit=500", None)
        .await;
    assert_eq!(status, 200, "{page}");
    page["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("{name} in the list: {page}"))
        .clone()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn log_lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn worker_killed_mid_task_hands_the_task_to_another_worker_once() {
    let c = setup(&[]).await;
    let dir = std::env::temp_dir().join(format!("converge-kill-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let (la, lb) = (dir.join("a.log"), dir.join("b.log"));
    let wa = Worker::hello(&c.broker, "a", &[("HELLO_LOG", la.to_str().unwrap())]);
    let wb = Worker::hello(&c.broker, "b", &[("HELLO_LOG", lb.to_str().unwrap())]);
    c.apply(&hello("victim", json!({"sleep_ms": 3000}))).await;
    // Whichever worker starts the task first is killed mid-task.
    let first = converge_control::testing::wait_for(T, "a worker started the task", || async {
        if log_lines(&la).iter().any(|l| l.starts_with("start")) {
            Some("a")
        } else if log_lines(&lb).iter().any(|l| l.starts_with("start")) {
            Some("b")
        } else {
            None
        }
    })
    .await;
    let (victim, survivor, survivor_log) = if first == "a" {
        (wa, wb, lb.clone())
    } else {
        (wb, wa, la.clone())
    };
    let killed_at = now_ms();
    victim.kill().await;
    let line = converge_control::testing::wait_for(
        Duration::from_secs(10),
        "the survivor started the task",
        || async {
            log_lines(&survivor_log)
                .into_iter()
                .find(|l| l.starts_with("start"))
        },
    )
    .await;
    let started: u64 = line.split_whitespace().last().unwrap().parse().unwrap();
    assert!(
        started.saturating_sub(killed_at) < 2000,
        "the task reached the second worker {} ms after the stream ended",
        started.saturating_sub(killed_at)
    );
    let r = c
        .wait_resource("hello", "victim", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert_eq!(r["status"]["worker"], survivor.name.as_str());
    let done: usize = [&la, &lb]
        .iter()
        .map(|p| {
            log_lines(p)
                .iter()
                .filter(|l| l.starts_with("done"))
                .count()
        })
        .sum();
    assert_eq!(done, 1, "the task must be applied exactly once");
    assert_eq!(r["synced_gen"], 1);
    let _ = std::fs::remove_dir_all(&dir);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_status_breaking_the_status_schema_fails_terminally_and_keeps_the_old_status() {
    let c = Converge::start(&[]).await;
    // The example's schema, with messages capped at 12 characters.
    let mut m = Converge::hello_manifest(30);
    m["status_schema"]["properties"]["message"]["maxLength"] = 12.into();
    c.apply_manifest(&m).await;
    let _w = Worker::hello(&c.broker, "w1", &[]);
    c.apply(&hello("st", json!({"greeting": "hi"}))).await;
    let before = c
        .wait_resource("hello", "st", "Ready", T, |v| v["phase"] == "Ready")
        .await;
    assert_eq!(before["status"]["message"], "hi, st!");

    // "greetings, st!" is 14 characters: the result is refused, terminally, by pointer and rule.
    c.apply(&hello("st", json!({"greeting": "greetings"})))
        .await;
    let r = c
        .wait_resource("hello", "st", "terminally Failed", T, |v| {
            v["phase"] == "Failed" && v["failure_terminal"] == true
        })
        .await;
    let err = r["failure_message"].as_str().unwrap_or_default();
    for want in ["status_schema of hello v1", "at /message", "maxLength"] {
        assert!(err.contains(want), "{want} missing from {r}");
    }
    assert_eq!(
        r["status"], before["status"],
        "the previous status stays: {r}"
    );
    assert_eq!(condition(&r, "Ready").unwrap()["status"], "False", "{r}");
}
