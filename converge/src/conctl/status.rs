//! What a resource is doing, in one line: the MESSAGE column of `conctl list` and `conctl
//! get`, read from the resource's full view (`GET /api/v1/resources/{kind}/{name}`: its
//! failure, retry, waiting reason, Ready condition and live work).

use chrono::{DateTime, Utc};
use converge_engine::words::Phase;
use futures::{StreamExt, stream};
use hyper::Method;
use serde_json::Value;

use crate::client::Client;
use crate::output::cell;

/// Resource views read at once to fill a table's MESSAGE column.
const CONCURRENT_READS: usize = 8;
/// At most this many rows of one table get a MESSAGE (each costs a read).
pub const MESSAGE_ROWS: usize = 200;

/// `True`/`False` from `is_ready`, `-` when absent.
pub fn ready(r: &Value) -> String {
    match r["is_ready"].as_bool() {
        Some(true) => "True".into(),
        Some(false) => "False".into(),
        None => "-".into(),
    }
}

/// When an RFC 3339 time comes, from now: `in 3s`, `in 2m`, `now` once past.
fn until(v: &Value) -> Option<String> {
    let t = DateTime::parse_from_rfc3339(v.as_str()?).ok()?;
    let secs = (t.with_timezone(&Utc) - Utc::now()).num_seconds();
    Some(match secs {
        s if s <= 0 => "now".into(),
        s if s < 120 => format!("in {s}s"),
        s if s < 2 * 3600 => format!("in {}m", s / 60),
        s => format!("in {}h", s / 3600),
    })
}

/// The live work, as `queued`/`running` with its attempt.
fn work(r: &Value) -> Option<String> {
    let w = r["work"].as_object()?;
    let state = if w.get("claimed") == Some(&Value::Bool(true)) {
        "running"
    } else {
        "queued"
    };
    Some(format!("attempt {} {state}", cell(&w["attempt"])))
}

/// One line saying why a resource is not simply Ready, from its full view; empty when there
/// is nothing to say. A failure being retried says so (attempt, next try, last error) and
/// is never worded as final; a terminal one starts with `terminal:`.
pub fn message(r: &Value) -> String {
    let failure = r["failure_message"].as_str().filter(|m| !m.is_empty());
    let failing_now = failure.is_some() && r["failure_gen"] == r["generation"];
    match r["phase"].as_str().and_then(Phase::parse) {
        Some(Phase::Deleting) => {
            return match failure {
                Some(m) => format!("teardown failing (attempt {}): {m}", r["failure_attempts"]),
                None => String::new(),
            };
        }
        Some(Phase::Quarantined) => return "set aside: `conctl unquarantine` resumes it".into(),
        Some(Phase::Orphaned) => {
            return "dropped by its composer; torn down after the grace".into();
        }
        _ => {}
    }
    if let (true, Some(m)) = (failing_now, failure) {
        if let Some(w) = work(r) {
            return format!("retrying ({w}): {m}");
        }
        if r["failure_terminal"] == true {
            return format!("terminal: {m}");
        }
        let next = r["failure_attempts"].as_i64().unwrap_or(0) + 1;
        return match until(&r["next_attempt_at"]) {
            Some(when) => format!("retrying (attempt {next} {when}): {m}"),
            None => format!("retrying (attempt {next}): {m}"),
        };
    }
    if let Some(why) = r["waiting_for"].as_str() {
        return format!("waiting: {why}");
    }
    let not_ready = r["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready" && c["status"] == "False");
    if let Some(c) = not_ready {
        let msg = c["message"].as_str().unwrap_or_default();
        let reason = c["reason"].as_str().unwrap_or_default();
        return match (reason.is_empty(), msg.is_empty()) {
            (_, true) => reason.to_string(),
            (true, false) => msg.to_string(),
            (false, false) => format!("{reason}: {msg}"),
        };
    }
    work(r)
        .map(|w| format!("reconciling ({w})"))
        .unwrap_or_default()
}

/// The MESSAGE of each list row (a row without the view's fields): a row that is not ready
/// has its full view read (at most [`MESSAGE_ROWS`] of them, [`CONCURRENT_READS`] at a
/// time); a ready row, a row past the cap, and one that vanished meanwhile get `-`.
pub async fn messages(c: &Client, rows: &[Value]) -> Vec<String> {
    let wanted: Vec<usize> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r["is_ready"] != true)
        .map(|(i, _)| i)
        .take(MESSAGE_ROWS)
        .collect();
    let read: Vec<(usize, String)> = stream::iter(wanted)
        .map(|i| async move {
            let r = &rows[i];
            let path = format!(
                "/resources/{}/{}",
                crate::client::enc(r["kind"].as_str().unwrap_or_default()),
                crate::client::enc(r["name"].as_str().unwrap_or_default())
            );
            let text = match c.call(Method::GET, &path, None).await {
                Ok(reply) => message(&reply.body),
                Err(_) => String::new(),
            };
            (i, text)
        })
        .buffered(CONCURRENT_READS)
        .collect()
        .await;
    let mut out = vec!["-".to_string(); rows.len()];
    for (i, text) in read {
        if !text.is_empty() {
            out[i] = text;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn failed(terminal: bool, work: Value, next: Value) -> Value {
        json!({"phase": "Failed", "generation": 2, "failure_gen": 2, "failure_attempts": 1,
               "failure_terminal": terminal, "failure_message": "boom", "work": work,
               "next_attempt_at": next, "is_ready": false})
    }

    #[test]
    fn a_retried_failure_says_so_and_a_terminal_one_says_terminal() {
        assert_eq!(
            message(&failed(true, Value::Null, Value::Null)),
            "terminal: boom"
        );
        assert_eq!(
            message(&failed(false, Value::Null, Value::Null)),
            "retrying (attempt 2): boom"
        );
        let soon = (Utc::now() + chrono::Duration::seconds(30)).to_rfc3339();
        let m = message(&failed(false, Value::Null, json!(soon)));
        assert!(
            m.starts_with("retrying (attempt 2 in 2") && m.ends_with("s): boom"),
            "{m}"
        );
        // A terminal failure with a new attempt queued (`conctl reconcile`) is being retried.
        let queued = json!({"claimed": false, "attempt": 2});
        assert_eq!(
            message(&failed(true, queued, Value::Null)),
            "retrying (attempt 2 queued): boom"
        );
        let running = json!({"claimed": true, "attempt": 3});
        assert_eq!(
            message(&failed(false, running, Value::Null)),
            "retrying (attempt 3 running): boom"
        );
    }

    #[test]
    fn waiting_reasons_conditions_and_work_fill_the_rest() {
        let r = json!({"phase": "Reconciling", "generation": 1, "failure_gen": 0,
                       "waiting_for": "no worker serves hello v1"});
        assert_eq!(message(&r), "waiting: no worker serves hello v1");
        let r = json!({"phase": "Degraded", "generation": 1, "failure_gen": 0,
                       "conditions": [{"type": "Synced", "status": "True"},
                                      {"type": "Ready", "status": "False",
                                       "reason": "ChildrenNotReady", "message": "1/2 ready"}]});
        assert_eq!(message(&r), "ChildrenNotReady: 1/2 ready");
        let r = json!({"phase": "Reconciling", "generation": 1, "failure_gen": 0,
                       "work": {"claimed": true, "attempt": 1}});
        assert_eq!(message(&r), "reconciling (attempt 1 running)");
        // An old failure (an earlier generation) is not this generation's story.
        let r = json!({"phase": "Ready", "generation": 3, "failure_gen": 2,
                       "failure_message": "old"});
        assert_eq!(message(&r), "");
        assert_eq!(ready(&json!({"is_ready": true})), "True");
        assert_eq!(ready(&json!({})), "-");
    }
}
