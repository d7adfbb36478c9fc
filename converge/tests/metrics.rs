//! `/metrics` end to end: the real `converge` with the real `hello-worker` and
//! `classic-worker` processes reconciles a plain leaf (applied in its fencing transaction) and
//! a composite BOM (children through the bulk drain, the root through the express lane and a
//! rollup); a scrape of `/metrics` parses as Prometheus text and every family is present and
//! moved. A `ROLE=broker` process serves its own metrics on `HEALTH_ADDR`.

mod common;

use std::time::Duration;

use common::{Converge, Worker, serve_command, spawn_ready};
use converge_engine::metrics::FAMILIES;
use prom_text_format_parser::{Labels, Scrape, Type, ValueType};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);

/// One scrape of `{base}/metrics`: 200, the Prometheus text format, and every line of it
/// accepted by a Prometheus text parser.
async fn scrape(client: &reqwest::Client, base: &str) -> Scrape {
    let r = client.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let ctype = r.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    let text = r.text().await.unwrap();
    Scrape::parse(&text).unwrap_or_else(|e| panic!("not Prometheus text ({e:?}):\n{text}"))
}

/// Whether the scrape has the family `name`.
fn has(s: &Scrape, name: &str) -> bool {
    s.metrics.iter().any(|m| m.name == name)
}

/// The value of label `key`.
fn label<'a>(labels: &'a Labels, key: &str) -> Option<&'a str> {
    labels
        .iter()
        .find(|l| l.key == key)
        .map(|l| l.value.as_str())
}

/// The series of family `name` whose labels include `want`: a counter's or a gauge's
/// value, a histogram's observation count (its `_count`), each with its labels.
fn series<'a>(
    s: &'a Scrape,
    name: &'a str,
    want: &'a [(&'a str, &'a str)],
) -> impl Iterator<Item = (&'a Labels, f64)> {
    s.metrics
        .iter()
        .filter(move |m| m.name == name)
        .flat_map(|m| {
            let wanted = if m.kind == Type::Histogram {
                ValueType::Count
            } else {
                ValueType::Sample
            };
            m.samples
                .iter()
                .filter(move |x| x.value.value_type == wanted)
        })
        .filter(move |x| want.iter().all(|(k, v)| label(&x.labels, k) == Some(*v)))
        .map(|x| (&x.labels, x.value.value.as_f64()))
}

/// [`series`] summed.
fn total(s: &Scrape, name: &str, want: &[(&str, &str)]) -> f64 {
    series(s, name, want).map(|(_, v)| v).sum()
}

/// The series of family `name`, for a failure's message.
fn series_labels(s: &Scrape, name: &str) -> Vec<String> {
    series(s, name, &[])
        .map(|(l, v)| format!("{l} {v}"))
        .collect()
}

/// Applies `body` and waits until the resource it names is Ready.
async fn apply_ready(c: &Converge, body: Value) {
    let (s, _, b) = c.apply(&body).await;
    assert!(s == 200 || s == 201, "{s} {b}");
    let (kind, name) = (
        body["kind"].as_str().unwrap(),
        body["name"].as_str().unwrap(),
    );
    c.wait_resource(kind, name, &format!("{kind}/{name} Ready"), T, |v| {
        v["phase"] == "Ready"
    })
    .await;
}

fn bom() -> Value {
    json!({"kind": "classicbom", "kind_version": 1, "name": "bom",
           "spec": {"functional_domains": [{"name": "pay", "teams": ["a"]}], "region": "eu-west-1"}})
}

#[tokio::test(flavor = "multi_thread")]
async fn every_family_is_exported_and_moves_after_a_reconcile() {
    let c = Converge::start(&[]).await;
    c.apply_manifest(&Converge::hello_manifest(30)).await;
    for k in ["classicbom", "account", "vpc", "tgw", "route"] {
        c.apply_manifest(&Converge::classic_manifest(k)).await;
    }
    // Unlabelled gauges and the pool's are there from the start; a labelled family shows
    // with its first series.
    let before = scrape(&c.client, &c.http).await;
    for f in [
        "converge_queue_ready",
        "converge_outbox_pending",
        "converge_broker_streams",
        "converge_db_pool_connections",
    ] {
        assert!(has(&before, f), "{f} is not exported");
    }
    let ok = [("kind", "hello"), ("stage", "work"), ("result", "ok")];
    assert_eq!(total(&before, "converge_reconciles_total", &ok), 0.0);

    let _hello = Worker::hello(&c.broker, "hello", &[]);
    let _classic = Worker::spawn("classic-worker", &c.broker, "classic", &[]);
    // A root plain leaf: its result is applied in the statement that fences it.
    apply_ready(
        &c,
        json!({"kind": "hello", "kind_version": 1, "name": "world", "spec": {"greeting": "hi"}}),
    )
    .await;
    // Children with dependents and owners are plain too, applied where they are fenced; the
    // root's results go through the express lane, the last after its rollup.
    apply_ready(&c, bom()).await;
    let after = scrape(&c.client, &c.http).await;
    for f in FAMILIES {
        assert!(has(&after, f), "{f} is not exported");
    }

    // Counters increased.
    assert!(total(&after, "converge_reconciles_total", &ok) >= 1.0);
    for stage in ["compose", "rollup"] {
        let want = [("kind", "classicbom"), ("stage", stage), ("result", "ok")];
        assert!(
            total(&after, "converge_reconciles_total", &want) >= 1.0,
            "{stage}"
        );
    }
    // Histograms observed: apply → synced on each path (where fenced, express lane).
    for kind in ["hello", "account", "classicbom"] {
        let n = total(
            &after,
            "converge_reconcile_duration_seconds",
            &[("kind", kind)],
        );
        assert!(n >= 1.0, "no apply → synced for {kind}");
    }
    for (kind, stage) in [
        ("hello", "work"),
        ("vpc", "work"),
        ("classicbom", "compose"),
        ("classicbom", "rollup"),
    ] {
        let want = [("kind", kind), ("stage", stage)];
        let n = total(&after, "converge_task_duration_seconds", &want);
        assert!(n >= 1.0, "no task duration for {kind} {stage}");
    }
    // Only the composite's results waited in the outbox: the express lane drained them and
    // the bulk lane had nothing to apply.
    let n = total(
        &after,
        "converge_drain_batch_seconds",
        &[("lane", "express")],
    );
    assert!(n >= 1.0, "no drain batch in the express lane");
    let n = total(&after, "converge_drain_batch_seconds", &[("lane", "bulk")]);
    assert_eq!(n, 0.0, "a plain result went through the bulk lane");
    let rollups = total(
        &after,
        "converge_rollup_latency_seconds",
        &[("kind", "classicbom")],
    );
    assert!(rollups >= 1.0);
    // Gauges present (the queue estimates may read 0 once everything is drained).
    for g in ["converge_queue_ready", "converge_outbox_pending"] {
        assert_eq!(series(&after, g, &[]).count(), 1, "{g}");
    }
    assert!(total(&after, "converge_broker_streams", &[]) >= 2.0);
    assert_eq!(
        series(&after, "converge_broker_inflight", &[("kind", "account")]).count(),
        1
    );
    for state in ["idle", "in_use"] {
        let want = [("state", state)];
        assert_eq!(
            series(&after, "converge_db_pool_connections", &want).count(),
            1
        );
    }
    assert!(total(&after, "converge_db_pool_connections", &[]) >= 1.0);

    // HTTP by route template, never by raw path.
    let routes: Vec<String> = series_labels(&after, "converge_http_requests_total");
    let created = [("route", "/api/v1/resources"), ("code", "201")];
    assert!(
        total(&after, "converge_http_requests_total", &created) >= 2.0,
        "{routes:?}"
    );
    let read = [
        ("route", "/api/v1/resources/{kind}/{name}"),
        ("code", "200"),
    ];
    assert!(
        total(&after, "converge_http_requests_total", &read) >= 2.0,
        "{routes:?}"
    );
    let timed = [("route", "/api/v1/resources/{kind}/{name}")];
    assert!(total(&after, "converge_http_request_duration_seconds", &timed) >= 2.0);
    for (labels, _) in series(&after, "converge_http_requests_total", &[]) {
        let route = label(labels, "route").unwrap();
        assert!(
            route == "fallback" || (route.starts_with('/') && !route.contains("world")),
            "a raw path as a label: {route}"
        );
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_only_process_serves_its_metrics_on_health_addr() {
    let c = Converge::start(&[("ROLE", "control")]).await;
    c.apply_manifest(&Converge::hello_manifest(30)).await;
    let (_broker, health, grpc) = spawn_ready("ROLE=broker /readyz", |hp, gp| {
        let health = format!("127.0.0.1:{hp}");
        serve_command(
            &c.db.url,
            hp,
            gp,
            &[("ROLE", "broker"), ("HEALTH_ADDR", &health)],
        )
        .spawn()
        .expect("spawn the broker")
    })
    .await;
    let health = format!("http://127.0.0.1:{health}");
    let _w = Worker::hello(&format!("http://127.0.0.1:{grpc}"), "w", &[]);
    apply_ready(
        &c,
        json!({"kind": "hello", "kind_version": 1, "name": "split", "spec": {"greeting": "hi"}}),
    )
    .await;

    // The broker's process dispatched the task and applied its plain result where it fenced
    // it, so it saw apply → synced (the drain and rollup families belong to processes that
    // drain and compose: here the control one).
    let s = scrape(&c.client, &health).await;
    let drains = [
        "converge_drain_batch_seconds",
        "converge_rollup_latency_seconds",
    ];
    for f in FAMILIES.iter().filter(|f| !drains.contains(f)) {
        assert!(has(&s, f), "{f} is not exported by the broker");
    }
    let ok = [("kind", "hello"), ("stage", "work"), ("result", "ok")];
    assert!(total(&s, "converge_reconciles_total", &ok) >= 1.0);
    let n = total(&s, "converge_task_duration_seconds", &[("kind", "hello")]);
    assert!(n >= 1.0);
    assert!(total(&s, "converge_broker_streams", &[]) >= 1.0);
    let synced = total(
        &s,
        "converge_reconcile_duration_seconds",
        &[("kind", "hello")],
    );
    assert!(synced >= 1.0);
    // Its own probes are counted by their routes.
    let probes = [("route", "/readyz"), ("code", "200")];
    assert!(total(&s, "converge_http_requests_total", &probes) >= 1.0);

    // The control process ran no task (no worker reached its absent broker) and applied no
    // result.
    let control = scrape(&c.client, &c.http).await;
    let synced = total(
        &control,
        "converge_reconcile_duration_seconds",
        &[("kind", "hello")],
    );
    assert_eq!(synced, 0.0);
    assert_eq!(total(&control, "converge_reconciles_total", &[]), 0.0);
    assert_eq!(total(&control, "converge_broker_streams", &[]), 0.0);
    c.stop().await;
}
