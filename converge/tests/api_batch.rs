//! `POST /api/v1/resources:batch` against the real `converge`: per-item results with the
//! single apply's 422s, nothing written for a failed item, a repeated batch answering
//! `unchanged` for every item, NDJSON bodies, duplicates within a batch, the item cap,
//! applied items reaching Ready through a real worker, a bounded reply whose memory returns,
//! and unknown kinds costing a lookup, never a recompile (issue 41).

mod common;

use std::time::Duration;

const T: Duration = Duration::from_secs(30);

use common::{Converge, Worker, wait_for, wait_ready_at};
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
        // Kinds that can never be registered fail alone, before any lookup: U+0000 (which
        // PostgreSQL refuses as a query parameter; it once made the whole batch a 500) and
        // a name that breaks the kind-name rule.
        json!({"kind": "no\u{0}pe", "kind_version": 1, "name": "y"}).to_string(),
        json!({"kind": "Not A Kind", "kind_version": 1, "name": "z"}).to_string(),
        hello("n-3", json!("c")).to_string(),
    ]
    .join("\n");
    let (status, body) = post_batch(&c, "application/x-ndjson", lines).await;
    assert_eq!(status, 200, "{body}");
    let r = body["results"].as_array().unwrap();
    assert_eq!(r.len(), 8, "{body}");
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
    for i in [5, 6] {
        assert_eq!(r[i]["status"], 422, "an illegal kind name: {}", r[i]);
        assert_eq!(r[i]["error"]["errors"][0]["location"], "/kind", "{}", r[i]);
    }
    assert_eq!(r[7]["result"], "created", "{}", r[7]);
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

/// converge's resident set (`VmRSS`) and its peak (`VmHWM`), in KiB.
fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A kind whose spec has 40 fields, each allowing only a long list of long words: a value
/// breaks each field's rules with a message that quotes the list.
fn strict_manifest() -> Value {
    let words: Vec<String> = (0..40)
        .map(|i| format!("allowed-{i:02}-{}", "w".repeat(40)))
        .collect();
    let props: serde_json::Map<String, Value> = (0..40)
        .map(|i| {
            (
                format!("f{i:02}"),
                json!({"type": "string", "maxLength": 8, "pattern": "^[a-z]+$", "enum": words}),
            )
        })
        .collect();
    json!({"kind": "strict", "kind_version": 1,
        "spec_schema": {"type": "object", "properties": props, "additionalProperties": false},
        "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]})
}

/// POSTs `body` as a JSON array batch; returns (status, reply bytes).
async fn post_raw(c: &Converge, body: String) -> (u16, Vec<u8>) {
    let r = c
        .client
        .post(format!("{}/api/v1/resources:batch", c.http))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.bytes().await.unwrap().to_vec())
}

/// Issue 41 item 3: a batch of failing items with large values answers a bounded reply
/// (each problem at most 2 KiB, the whole at most 4 MiB, the rest counted) and the memory
/// it took is returned.
#[tokio::test]
async fn failing_items_with_large_values_get_a_bounded_reply_and_memory_returns() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&strict_manifest()).await;
    let item = |i: usize, len: usize| {
        let spec: serde_json::Map<String, Value> = (0..40)
            .map(|f| {
                (
                    format!("f{f:02}"),
                    json!(format!("{i}-{f}-{}", "Ø".repeat(len))),
                )
            })
            .collect();
        json!({"kind": "strict", "kind_version": 1, "name": format!("s-{i}"), "spec": spec})
    };
    // Warm up (pools, caches, the allocator's arenas) with a small batch of the same shape.
    let warm: Vec<Value> = (0..50).map(|i| item(i, 100)).collect();
    let (status, _) = post_raw(&c, Value::Array(warm).to_string()).await;
    assert_eq!(status, 200);
    let (rss_before, _) = rss_kib(c.pid());

    // 1,000 items, 40 failing fields each, every value ~200 bytes: ~8 MiB of request.
    let items: Vec<Value> = (0..1000).map(|i| item(i, 100)).collect();
    let body = Value::Array(items).to_string();
    let request_bytes = body.len();
    let (status, reply) = post_raw(&c, body).await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_slice(&reply).expect("the reply is one JSON document");
    assert!(reply.len() <= 4 << 20, "{} bytes", reply.len());
    assert_eq!(
        (v["items"].as_u64(), v["failed"].as_u64()),
        (Some(1000), Some(1000))
    );
    let results = v["results"].as_array().unwrap();
    assert_eq!(
        results.len() as u64 + v["results_omitted"].as_u64().unwrap(),
        1000
    );
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["index"], i, "results are item order from the first");
        assert_eq!(r["status"], 422, "{r}");
        let problem = serde_json::to_vec(&r["error"]).unwrap();
        assert!(
            problem.len() <= 2048,
            "item {i}: {} bytes: {}",
            problem.len(),
            r["error"]
        );
        let listed = r["error"]["errors"].as_array().map_or(0, Vec::len) as u64;
        let omitted = r["error"]["errors_omitted"].as_u64().unwrap_or(0);
        assert!(
            listed >= 1 && listed + omitted >= 40,
            "item {i}: {}",
            r["error"]
        );
    }
    let (_, peak) = rss_kib(c.pid());
    // Memory grown by the request is returned once the reply is read.
    let settled = wait_for(
        Duration::from_secs(20),
        "converge's RSS back within 50 MB of where it started",
        || async {
            let (now, _) = rss_kib(c.pid());
            (now <= rss_before + 50 * 1000).then_some(now)
        },
    )
    .await;
    println!(
        "request {request_bytes} bytes -> reply {} bytes ({} results listed); converge RSS \
         {rss_before} KiB before, {settled} KiB after, peak {peak} KiB",
        reply.len(),
        results.len()
    );

    // 10,000 failing items: more problems than 4 MiB holds; the first ones are listed, the
    // rest counted, and the counts cover every item.
    let items: Vec<Value> = (0..10_000).map(|i| item(i, 4)).collect();
    let (status, reply) = post_raw(&c, Value::Array(items).to_string()).await;
    assert_eq!(status, 200);
    assert!(reply.len() <= 4 << 20, "{} bytes", reply.len());
    let v: Value = serde_json::from_slice(&reply).unwrap();
    let listed = v["results"].as_array().unwrap().len() as u64;
    let omitted = v["results_omitted"].as_u64().unwrap();
    assert_eq!(
        (v["failed"].as_u64(), listed + omitted),
        (Some(10_000), 10_000)
    );
    assert!(
        omitted > 0 && listed > 1000,
        "{listed} listed, {omitted} omitted"
    );
    println!(
        "10,000 failing items: {} bytes, {listed} listed, {omitted} omitted",
        reply.len()
    );
    c.stop().await;
}

/// converge_kind_schema_compiles_total from /metrics.
async fn compiles(c: &Converge) -> f64 {
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
        .find_map(|l| l.strip_prefix("converge_kind_schema_compiles_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no converge_kind_schema_compiles_total in /metrics:\n{text}"))
}

/// Issue 41 item 3: a batch naming 500 unknown kinds costs a lookup, not a re-read and
/// recompile of every stored manifest per item; a kind applied a moment later, through this
/// process or another, is never refused.
#[tokio::test]
async fn unknown_kinds_are_looked_up_not_recompiled_and_a_new_kind_is_never_refused() {
    let c = Converge::start(&[]).await;
    // Stored behind the API's back, so the cache reads them in on the notification alone
    // (an apply through the API also compiles its check, racing that re-read): once both
    // are compiled, nothing else is left to compile.
    let c0 = compiles(&c).await;
    for m in [Converge::hello_manifest(30), strict_manifest()] {
        let m: converge_proto::manifest::KindManifest = serde_json::from_value(m).unwrap();
        let doc = serde_json::to_value(&m).unwrap();
        converge_control::db::kinds::manifest_put(&c.db.pool, &m.kind, m.kind_version, &doc)
            .await
            .unwrap();
    }
    let before = wait_for(
        T,
        "both stored manifests compiled into the cache",
        || async {
            let n = compiles(&c).await;
            (n == c0 + 2.0).then_some(n)
        },
    )
    .await;
    let items: Vec<Value> = (0..500)
        .map(
            |i| json!({"kind": format!("nosuch-{i}"), "kind_version": 1, "name": format!("u-{i}")}),
        )
        .collect();
    let started = std::time::Instant::now();
    let (status, body) = post_batch(&c, "application/json", Value::Array(items).to_string()).await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["failed"], 500);
    for r in body["results"].as_array().unwrap() {
        assert_eq!(r["status"], 404, "{r}");
    }
    // Again: the unknown kinds are remembered, still nothing compiled.
    let items: Vec<Value> = (0..500)
        .map(
            |i| json!({"kind": format!("nosuch-{i}"), "kind_version": 1, "name": format!("u-{i}")}),
        )
        .collect();
    let again = std::time::Instant::now();
    let (status, _) = post_batch(&c, "application/json", Value::Array(items).to_string()).await;
    assert_eq!(status, 200);
    println!(
        "a 500-item batch of unknown kinds answered in {took:?} (again: {:?})",
        again.elapsed()
    );
    assert_eq!(
        compiles(&c).await,
        before,
        "no manifest was compiled for an unknown kind"
    );

    // Applied a moment later through this process: at once accepted.
    let mut m = Converge::hello_manifest(30);
    m["kind"] = json!("nosuch-7");
    c.apply_manifest(&m).await;
    let one = |kind: &str, name: &str| json!({"kind": kind, "kind_version": 1, "name": name});
    let (status, body) = post_batch(
        &c,
        "application/json",
        json!([one("nosuch-7", "u-7")]).to_string(),
    )
    .await;
    assert_eq!(
        (status, &body["results"][0]["status"]),
        (200, &json!(201)),
        "{body}"
    );

    // Applied through another process: the next apply here, single or batched, takes it.
    let peer = c.spawn_peer(&[]).await;
    let at_peer = converge_testkit::Api::new(&peer.http);
    for (i, kind) in ["nosuch-8", "nosuch-9"].into_iter().enumerate() {
        let mut m = Converge::hello_manifest(30);
        m["kind"] = json!(kind);
        at_peer.apply_manifest(&m).await;
        if i == 0 {
            let (status, _, body) = c.apply(&one(kind, "u-single")).await;
            assert_eq!(status, 201, "{body}");
        } else {
            let (status, body) = post_batch(
                &c,
                "application/json",
                json!([one(kind, "u-batch")]).to_string(),
            )
            .await;
            assert_eq!(body["results"][0]["status"], 201, "{status} {body}");
        }
    }
    c.stop().await;
}
