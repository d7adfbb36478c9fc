//! `POST /api/v1/resources:batch` against the real `converge`: per-item results with the
//! single apply's 422s, nothing written for a failed item, a repeated batch answering
//! `unchanged` for every item, NDJSON bodies, duplicates within a batch, the item cap, and
//! applied items reaching Ready through a real worker.

mod common;

use std::time::Duration;

use common::{Converge, Worker, wait_ready_at};
use serde_json::{Value, json};

/// POSTs `body` (already serialised) with `content_type`; returns (status, body).
async fn post_batch(c: &Converge, content_type: &str, body: String) -> (u16, Value) {
    let r = c
        .client
        .post(format!("{}/api/v1/resources:batch", c.http))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn hello(name: &str, greeting: Value) -> Value {
    json!({"kind": "hello", "kind_version": 1, "name": name, "spec": {"greeting": greeting}})
}

#[tokio::test]
async fn a_batch_applies_the_valid_items_and_answers_each_one() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(30)).await;

    // 1,000 items; three are invalid in different ways.
    let mut items: Vec<Value> = (0..1000)
        .map(|i| hello(&format!("b-{i:04}"), json!(format!("hi {i}"))))
        .collect();
    items[10] = hello("b-0010", json!(42)); // spec breaks the schema
    items[500]["spec"]["colour"] = json!("red"); // unknown spec field
    items[999]["name"] = json!("has space"); // bad name
    let (status, body) = post_batch(
        &c,
        "application/json",
        Value::Array(items.clone()).to_string(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["items"], 1000);
    assert_eq!(body["created"], 997, "{}", body["created"]);
    assert_eq!(body["failed"], 3);
    let results = body["results"].as_array().unwrap();
    assert_eq!(results.len(), 1000);
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["index"], i, "results come in item order");
    }
    let pointers = |i: usize| -> Vec<String> {
        let r = &results[i];
        assert_eq!(r["status"], 422, "item {i}: {r}");
        r["error"]["errors"]
            .as_array()
            .unwrap_or_else(|| panic!("item {i} lists its errors: {r}"))
            .iter()
            .map(|e| e["location"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(pointers(10), ["/spec/greeting"]);
    assert!(
        pointers(500).iter().any(|p| p.starts_with("/spec")),
        "{:?}",
        pointers(500)
    );
    assert_eq!(pointers(999), ["/name"]);
    assert_eq!(results[0]["status"], 201);
    assert_eq!(results[0]["result"], "created");
    assert_eq!(results[0]["name"], "b-0000");
    assert!(results[0]["uid"].is_string());

    // Nothing was written for a failed item.
    let (status, _) = c
        .call(reqwest::Method::GET, "resources/hello/b-0010", None)
        .await;
    assert_eq!(status, 404, "a failed item is not applied");
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM resources WHERE kind = 'hello'")
        .fetch_one(&c.db.pool)
        .await
        .unwrap();
    assert_eq!(stored, 997);

    // The same valid items again: every one unchanged, generations kept.
    let valid: Vec<Value> = items
        .iter()
        .enumerate()
        .filter(|(i, _)| ![10, 500, 999].contains(i))
        .map(|(_, v)| v.clone())
        .collect();
    let (status, again) = post_batch(
        &c,
        "application/json",
        Value::Array(valid.clone()).to_string(),
    )
    .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["unchanged"], 997, "{}", again["unchanged"]);
    assert!(
        again["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["result"] == "unchanged" && r["generation"] == 1 && r["status"] == 200)
    );

    // One changed spec among them: configured, generation 2, the rest unchanged.
    let mut edited = valid.clone();
    edited[3]["spec"]["greeting"] = json!("changed");
    let (_, third) = post_batch(&c, "application/json", Value::Array(edited).to_string()).await;
    assert_eq!(third["configured"], 1);
    assert_eq!(third["unchanged"], 996);
    assert_eq!(third["results"][3]["result"], "configured");
    assert_eq!(third["results"][3]["generation"], 2);

    // The applied items converge through a real worker.
    let _w = Worker::hello(&c.broker, "batch-w", &[]);
    for name in ["b-0000", "b-0003", "b-0998"] {
        let r = wait_ready_at(&c.client, &c.http, "hello", name, Duration::from_secs(60)).await;
        assert!(r["status"]["message"].is_string(), "{r}");
    }
    c.stop().await;
}

#[tokio::test]
async fn ndjson_duplicates_and_the_item_cap() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(30)).await;

    // NDJSON: one object a line, blank lines ignored, a line that is not JSON fails alone.
    let lines = [
        hello("n-1", json!("a")).to_string(),
        String::new(),
        "{not json".to_string(),
        hello("n-2", json!("b")).to_string(),
        hello("n-1", json!("again")).to_string(),
        json!({"kind": "nosuch", "kind_version": 1, "name": "x"}).to_string(),
    ]
    .join("\n");
    let (status, body) = post_batch(&c, "application/x-ndjson", lines).await;
    assert_eq!(status, 200, "{body}");
    let r = body["results"].as_array().unwrap();
    assert_eq!(r.len(), 5, "{body}");
    assert_eq!(r[0]["result"], "created");
    assert_eq!(r[1]["status"], 422, "a line that is not JSON: {}", r[1]);
    assert_eq!(r[2]["result"], "created");
    assert_eq!(
        r[3]["status"], 422,
        "a duplicate within the batch: {}",
        r[3]
    );
    assert_eq!(r[3]["error"]["errors"][0]["location"], "/name");
    assert_eq!(r[4]["status"], 404, "an unknown kind: {}", r[4]);
    let (_, n1) = c
        .call(reqwest::Method::GET, "resources/hello/n-1", None)
        .await;
    assert_eq!(n1["spec"]["greeting"], "a", "the duplicate was not applied");

    // Whole-request errors: not an array, wrong media type, too many items.
    let (status, _) =
        post_batch(&c, "application/json", json!({"kind": "hello"}).to_string()).await;
    assert_eq!(status, 422);
    let (status, _) = post_batch(&c, "text/plain", "[]".into()).await;
    assert_eq!(status, 415);
    let many = Value::Array(vec![json!({}); 10_001]).to_string();
    let (status, body) = post_batch(&c, "application/json", many).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("10000"), "{body}");
    c.stop().await;
}
