//! `conctl cluster`: who is here (`GET /api/v1/cluster`): the converge processes (Ready, or
//! NotReady: silent, kept listed until their row is removed) with their shard ranges, the
//! workers connected to each broker, and per kind version how many workers serve it.

use hyper::Method;
use serde_json::Value;

use crate::{
    client::Client,
    output::{self, Format, age, cell, table},
};

/// Prints the cluster: members, then workers, then kind coverage (or the document).
pub async fn show(c: &Client, format: Format) -> anyhow::Result<()> {
    let body = c.call(Method::GET, "/cluster", None).await?.body;
    if format != Format::Table {
        return output::document(&body, format);
    }
    crate::output::out!("{}", render(&body));
    Ok(())
}

fn list(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

/// `kind@v` pairs, comma-separated (`-` for none).
fn pairs(v: &Value, unready_mark: bool) -> String {
    let shown: Vec<String> = list(v)
        .iter()
        .map(|k| {
            let mark = if unready_mark && k["ready"] == false {
                " (not ready)"
            } else {
                ""
            };
            format!("{}@{}{mark}", cell(&k["kind"]), cell(&k["kind_version"]))
        })
        .collect();
    if shown.is_empty() {
        "-".into()
    } else {
        shown.join(",")
    }
}

/// A shard range as `lo-hi` (`-` for none: a NotReady member).
fn span(v: &Value) -> String {
    match (v["lo"].as_i64(), v["hi"].as_i64()) {
        (Some(lo), Some(hi)) => format!("{lo}-{hi}"),
        _ => "-".into(),
    }
}

/// A broker's claim ranges as `kind@v:lo-hi`, comma-separated (`-` for none).
fn claims(v: &Value) -> String {
    let shown: Vec<String> = list(v)
        .iter()
        .map(|c| {
            format!(
                "{}@{}:{}",
                cell(&c["kind"]),
                cell(&c["kind_version"]),
                span(c)
            )
        })
        .collect();
    if shown.is_empty() {
        "-".into()
    } else {
        shown.join(",")
    }
}

/// The three tables as text.
fn render(body: &Value) -> String {
    let members = list(&body["members"]);
    let rows: Vec<Vec<String>> = members
        .iter()
        .map(|m| {
            let addrs = m["addresses"]
                .as_object()
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| format!("{k}={}", cell(v)))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            vec![
                cell(&m["role"]),
                cell(&m["id"]),
                cell(&m["status"]),
                cell(&m["version"]),
                span(&m["shards"]),
                claims(&m["claims"]),
                list(&m["workers"]).len().to_string(),
                age(&m["started_at"]),
                age(&m["heartbeat_at"]),
                addrs,
            ]
        })
        .collect();
    let mut out = table(
        &[
            "ROLE",
            "MEMBER",
            "STATUS",
            "VERSION",
            "SHARDS",
            "CLAIMS",
            "WORKERS",
            "AGE",
            "HEARTBEAT",
            "ADDRESSES",
        ],
        &rows,
    );
    let workers: Vec<Vec<String>> = members
        .iter()
        .flat_map(|m| {
            list(&m["workers"]).into_iter().map(move |w| {
                vec![
                    cell(&m["id"]),
                    cell(&w["name"]),
                    cell(&w["sdk"]),
                    format!("{}/{}", cell(&w["inflight"]), cell(&w["max_inflight"])),
                    age(&w["connected_at"]),
                    pairs(&w["kinds"], true),
                    pairs(&w["unknown_kinds"], false),
                ]
            })
        })
        .collect();
    out.push_str("\nWorkers:\n");
    if workers.is_empty() {
        out.push_str("none connected\n");
    } else {
        out.push_str(&table(
            &[
                "BROKER",
                "WORKER",
                "SDK",
                "INFLIGHT",
                "CONNECTED",
                "KINDS",
                "UNKNOWN-KINDS",
            ],
            &workers,
        ));
    }
    let kinds: Vec<Vec<String>> = list(&body["kinds"])
        .iter()
        .map(|k| {
            vec![
                cell(&k["kind"]),
                cell(&k["kind_version"]),
                cell(&k["workers"]),
                cell(&k["ready_workers"]),
                if k["registered"] == true { "yes" } else { "NO" }.into(),
            ]
        })
        .collect();
    out.push_str("\nKinds:\n");
    out.push_str(&table(
        &["KIND", "VERSION", "WORKERS", "READY", "REGISTERED"],
        &kinds,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_members_workers_and_coverage() {
        let body = json!({
            "members": [
                {"id": "c1", "role": "control", "status": "Ready", "version": "0.1.0",
                 "shards": {"lo": 0, "hi": 255}, "claims": [],
                 "addresses": {"http": "1:8080"},
                 "started_at": null, "heartbeat_at": null, "workers": []},
                {"id": "b0", "role": "broker", "status": "NotReady", "version": "0.1.0",
                 "addresses": {"grpc": "1:9091"},
                 "started_at": null, "heartbeat_at": null, "workers": []},
                {"id": "b1", "role": "broker", "status": "Ready", "version": "0.1.0",
                 "shards": {"lo": 128, "hi": 255},
                 "claims": [{"kind": "hello", "kind_version": 1, "lo": 0, "hi": 255}],
                 "addresses": {"grpc": "1:9090"},
                 "started_at": null, "heartbeat_at": null, "workers": [
                    {"name": "w1", "sdk": "rust/0.1.0", "inflight": 2, "max_inflight": 8,
                     "connected_at": null,
                     "kinds": [{"kind": "hello", "kind_version": 1, "ready": true},
                               {"kind": "helo", "kind_version": 1, "ready": false}],
                     "unknown_kinds": [{"kind": "helo", "kind_version": 1}]}]}
            ],
            "kinds": [
                {"kind": "hello", "kind_version": 1, "registered": true, "workers": 1, "ready_workers": 1},
                {"kind": "helo", "kind_version": 1, "registered": false, "workers": 1, "ready_workers": 0}
            ]
        });
        let text = render(&body);
        assert!(
            text.contains("0.1.0     0-255     -               0"),
            "{text}"
        );
        assert!(text.contains("NotReady   0.1.0     -         -"), "{text}");
        assert!(text.contains("128-255   hello@1:0-255   1"), "{text}");
        assert!(
            text.contains("control   c1       Ready      0.1.0"),
            "{text}"
        );
        assert!(
            text.contains("broker    b0       NotReady   0.1.0"),
            "{text}"
        );
        assert!(
            text.contains("b1       w1       rust/0.1.0   2/8"),
            "{text}"
        );
        assert!(
            text.contains("hello@1,helo@1 (not ready)   helo@1"),
            "{text}"
        );
        assert!(
            text.contains("helo    1         1         0       NO"),
            "{text}"
        );
    }
}
