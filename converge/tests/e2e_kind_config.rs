//! Live-editable kind config against the real `converge` and hello worker: a deadline and a
//! transient-attempts cap edited through the API apply to the next task, with no restart.

mod common;

use std::time::Duration;

use common::{Converge, Worker};
use serde_json::json;

const T: Duration = Duration::from_secs(30);

fn config(deadline: i64, attempts: i64) -> serde_json::Value {
    json!({"max_inflight": 0, "task_deadline_seconds": deadline, "resync_interval_seconds": 0,
           "orphan_grace_seconds": 0, "max_transient_attempts": attempts})
}

#[tokio::test(flavor = "multi_thread")]
async fn deadline_and_attempt_cap_edits_apply_live() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(30)).await;
    let _w = Worker::hello(&c.broker, "w1", &[]);
    let url = format!("{}/api/v1/kinds/hello/versions/1/config", c.http);

    let r = c.client.put(&url).json(&config(1, 3)).send().await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let got: serde_json::Value = c
        .client
        .get(&url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            got["task_deadline_secs"].as_i64(),
            got["max_transient_attempts"].as_i64()
        ),
        (Some(1), Some(3))
    );

    // The 1 s deadline now cuts a 3 s handler: transient failure naming the deadline.
    c.apply(
        &json!({"kind": "hello", "kind_version": 1, "name": "slow", "spec": {"sleep_ms": 3000}}),
    )
    .await;
    let r = c
        .wait_resource("hello", "slow", "deadline failure", T, |v| {
            v["phase"] == "Failed"
        })
        .await;
    assert!(
        r["failure_message"].as_str().unwrap().contains("deadline"),
        "{r}"
    );

    // The cap of 3 escalates an always-failing handler to terminal after 3 attempts.
    c.apply(&json!({"kind": "hello", "kind_version": 1, "name": "poison", "spec": {"fail": "transient"}})).await;
    let r = c
        .wait_resource("hello", "poison", "escalated to terminal", T, |v| {
            v["failure_terminal"] == true
        })
        .await;
    assert_eq!(r["failure_attempts"], 3);
    assert_eq!(r["phase"], "Failed");

    // Bad input and unknown kinds.
    let r = c
        .client
        .put(&url)
        .json(&config(-1, 0))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let r = c
        .client
        .put(&url)
        .json(&json!({"max_inflight": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422, "every field is required");
    let r = c
        .client
        .put(format!("{}/api/v1/kinds/nope/versions/1/config", c.http))
        .json(&config(0, 0))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    c.stop().await;
}
