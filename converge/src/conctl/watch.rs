//! `conctl get KIND/NAME --watch` and `conctl wait KIND/NAME --for=PHASE` follow the
//! resource's watch (`GET /api/v1/resources/{kind}/{name}?watch=true`), whose messages carry
//! the event-log entry and the resource as it then is; `conctl events --watch` follows the
//! log's (`GET /api/v1/events?watch=true`). A stream the server ends (a restart, a rolling
//! upgrade) is resumed from the last message's id, so no change is missed or shown twice.

use std::time::Duration;

use anyhow::bail;
use converge_engine::words::{Phase, TaskType};
use hyper::Method;
use serde_json::Value;
use tokio::time::Instant;

use crate::client::{Client, Message, is_not_found};
use crate::output::{Format, cell, out, outln};

/// How long to wait before reopening a watch the server ended.
const REOPEN_AFTER: Duration = Duration::from_secs(1);

/// A watch, reopened from its last id whenever the server ends it.
pub struct Follow<'a> {
    client: &'a Client,
    path: String,
    last_id: Option<String>,
    opened: bool,
    events: Option<crate::client::Events>,
}

impl<'a> Follow<'a> {
    /// Follows the `?watch=true` URL `watch_path` (under `/api/v1`).
    pub fn new(client: &'a Client, watch_path: String) -> Self {
        Follow {
            client,
            path: watch_path,
            last_id: None,
            opened: false,
            events: None,
        }
    }

    /// Starts after the log position `id` (sent as `Last-Event-ID`), e.g. the last event a
    /// page showed.
    pub fn resume_after(&mut self, id: String) {
        self.last_id = Some(id);
    }

    /// The next message. The first opening's errors (404, 401, ...) are returned; after
    /// that, a stream that ends or breaks is reopened from the last id.
    pub async fn next(&mut self) -> anyhow::Result<Message> {
        loop {
            let events = match &mut self.events {
                Some(e) => e,
                None => {
                    let opened = self.client.watch(&self.path, self.last_id.as_deref()).await;
                    match opened {
                        Ok(e) => {
                            self.opened = true;
                            self.events.insert(e)
                        }
                        Err(e) if !self.opened => return Err(e),
                        Err(e) => {
                            eprintln!("warning: {e:#}; retrying");
                            tokio::time::sleep(REOPEN_AFTER).await;
                            continue;
                        }
                    }
                }
            };
            match events.next().await {
                Ok(Some(m)) => {
                    if m.id.is_some() {
                        self.last_id = m.id.clone();
                    }
                    return Ok(m);
                }
                Ok(None) => {}
                Err(e) => eprintln!("warning: {e:#}; resuming"),
            }
            self.events = None;
            tokio::time::sleep(REOPEN_AFTER).await;
        }
    }
}

/// One line for a watch message: the entry, then the resource's phase and generations.
fn line(target: &str, m: &Value) -> String {
    let r = &m["resource"];
    let state = if r.is_null() {
        "gone".to_string()
    } else {
        format!(
            "{}  gen {} synced {}",
            cell(&r["phase"]),
            cell(&r["generation"]),
            cell(&r["synced_gen"])
        )
    };
    let e = &m["event"];
    if e.is_null() {
        return format!("{target}  now  {state}");
    }
    let what = match e["type"].as_str().unwrap_or_default() {
        "phase" => format!("{} -> {}", cell(&e["from_phase"]), cell(&e["to_phase"])),
        "created" => format!("created -> {}", cell(&e["to_phase"])),
        "deleted" => "deleted".to_string(),
        other => other.to_string(),
    };
    let mut s = format!("{}  {target}  {what}  [{state}]", cell(&e["at"]));
    if let Some(msg) = e["message"].as_str() {
        s.push_str(&format!("  {msg}"));
    }
    s
}

/// `get KIND/NAME --watch`: prints the resource as it is, then every change, until
/// interrupted. Scripts get one JSON document per line (`-o json`) or YAML documents.
pub async fn print_changes(
    c: &Client,
    target: &str,
    resource_path: &str,
    format: Format,
) -> anyhow::Result<()> {
    let mut follow = Follow::new(c, format!("{resource_path}?watch=true"));
    loop {
        let m = follow.next().await?;
        match format {
            Format::Table => outln!("{}", line(target, &m.data)),
            Format::Json => outln!("{}", serde_json::to_string(&m.data)?),
            Format::Yaml => out!("---\n{}", serde_yaml::to_string(&m.data)?),
        }
    }
}

/// What `wait` makes of one sighting of the resource.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Keep waiting.
    Wait,
    /// The resource reached the phase.
    Reached,
    /// It never will without a change: why.
    Never(String),
}

/// How often `wait` re-reads a Failed resource besides its watch: a failure that follows a
/// failure (Failed to Failed: a new attempt failing again, retries running out) changes no
/// phase, so it writes no event and the watch says nothing.
const POLL_FAILED: Duration = Duration::from_millis(500);

/// How long a terminal failure with no attempt queued must stand before a wait that began
/// on it gives up. An attempt's queue row goes when its worker answers and its result is
/// applied a moment later, so a wait starting in between (`conctl reconcile X && conctl
/// wait X` with a fast worker) sees the old failure and nothing queued.
const SETTLE: Duration = Duration::from_secs(1);

/// The failure a resource shows: a new failure (another attempt, another generation)
/// changes it.
fn failure_of(r: &Value) -> [Value; 4] {
    [
        r["generation"].clone(),
        r["failure_gen"].clone(),
        r["failure_attempts"].clone(),
        r["failure_message"].clone(),
    ]
}

/// The judgement of `wait`, sighting after sighting. A terminal failure ends the wait only
/// when it is news: recorded after the wait began, or standing with nothing queued to
/// retry it. A failure that predates the wait while a new attempt is queued or running
/// (`conctl reconcile`), and a transient failure being retried, keep it waiting.
struct Judge {
    target: String,
    want: String,
    /// The failure the first sighting showed.
    baseline: Option<[Value; 4]>,
    /// A reconcile was seen queued or running during the wait: its result is on its way.
    attempt_seen: bool,
    /// Since when the baseline's terminal failure has stood with nothing queued.
    stale_since: Option<Instant>,
}

impl Judge {
    fn new(target: &str, want: &str) -> Self {
        Judge {
            target: target.into(),
            want: want.into(),
            baseline: None,
            attempt_seen: false,
            stale_since: None,
        }
    }

    fn see(&mut self, r: &Value, now: Instant) -> Verdict {
        if r.is_null() {
            // Only a deleted resource comes back null (the first message of a watch of a
            // missing one is a 404 instead).
            return Verdict::Never(format!("{} was deleted", self.target));
        }
        let failure = failure_of(r);
        let baseline = self.baseline.get_or_insert_with(|| failure.clone());
        let phase = r["phase"].as_str().unwrap_or_default();
        if phase.eq_ignore_ascii_case(&self.want) {
            return Verdict::Reached;
        }
        if r["work"]["task_type"] == TaskType::Reconcile.as_str() {
            self.attempt_seen = true;
            self.stale_since = None;
            return Verdict::Wait;
        }
        if !(phase == Phase::Failed.as_str() && r["failure_terminal"] == true) {
            self.stale_since = None;
            return Verdict::Wait;
        }
        let never = Verdict::Never(format!(
            "{} failed terminally at generation {}: {} (it is retried when its spec changes \
             or on `conctl reconcile`)",
            self.target,
            cell(&r["generation"]),
            r["failure_message"].as_str().unwrap_or("no message")
        ));
        if failure != *baseline {
            return never;
        }
        // The failure the wait began with, and nothing queued now.
        if self.attempt_seen {
            return Verdict::Wait;
        }
        let since = *self.stale_since.get_or_insert(now);
        if now.duration_since(since) >= SETTLE {
            never
        } else {
            Verdict::Wait
        }
    }
}

/// Whether a Failed resource is being retried: a transient failure, or a new attempt queued
/// or running.
fn retried(r: &Value) -> bool {
    r["failure_terminal"] != true || !r["work"].is_null()
}

/// `wait KIND/NAME --for=PHASE`: returns once the resource is in `want`; fails on a
/// terminal failure (see [`Judge`]), on deletion, or when `timeout` passes first. Follows
/// the resource's watch, and re-reads it every [`POLL_FAILED`] while it is Failed.
pub async fn wait_for(
    c: &Client,
    target: &str,
    resource_path: &str,
    want: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut follow = Follow::new(c, format!("{resource_path}?watch=true"));
    let mut judge = Judge::new(target, want);
    let mut phase = String::from("unknown");
    let mut first = true;
    loop {
        let failed = phase == Phase::Failed.as_str();
        let sighting = async {
            tokio::select! {
                m = follow.next() => m.map(|m| Some(m.data["resource"].clone())),
                () = tokio::time::sleep(POLL_FAILED), if failed => {
                    match c.call(Method::GET, resource_path, None).await {
                        Ok(r) => Ok(Some(r.body)),
                        Err(e) if is_not_found(&e) => Ok(Some(Value::Null)),
                        // The watch is the main source; a failed re-read waits for the next.
                        Err(_) => Ok(None),
                    }
                }
            }
        };
        let r = match tokio::time::timeout_at(deadline, sighting).await {
            Ok(r) => r?,
            Err(_) => bail!(
                "timed out after {timeout:?} waiting for {target} to be {want} (it is {phase})"
            ),
        };
        let Some(r) = r else { continue };
        phase = cell(&r["phase"]);
        match judge.see(&r, Instant::now()) {
            Verdict::Reached => {
                outln!("{target} is {want}");
                return Ok(());
            }
            Verdict::Never(why) => bail!("{why}"),
            Verdict::Wait if first && phase == Phase::Failed.as_str() && retried(&r) => {
                // Say why a wait on a Failed resource goes on (and that it began).
                eprintln!(
                    "{target} is Failed, {}; waiting for it to be {want}",
                    crate::status::message(&r)
                );
            }
            Verdict::Wait => {}
        }
        first = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(phase: &str, terminal: bool, attempts: i64, work: Value) -> Value {
        json!({"phase": phase, "generation": 2, "failure_gen": 2,
               "failure_attempts": attempts, "failure_terminal": terminal,
               "failure_message": "boom", "work": work})
    }

    #[test]
    fn a_wait_ends_on_the_phase_a_new_terminal_failure_or_a_delete() {
        let t0 = Instant::now();
        let mut j = Judge::new("k/n", "Ready");
        assert_eq!(
            j.see(&at("Reconciling", false, 0, Value::Null), t0),
            Verdict::Wait
        );
        // A transient failure is retried.
        assert_eq!(
            j.see(&at("Failed", false, 1, Value::Null), t0),
            Verdict::Wait
        );
        match j.see(&at("Failed", true, 2, Value::Null), t0) {
            Verdict::Never(why) => {
                assert!(
                    why.contains("failed terminally") && why.contains("boom"),
                    "{why}"
                )
            }
            v => panic!("{v:?}"),
        }
        assert_eq!(
            j.see(&at("Ready", false, 0, Value::Null), t0),
            Verdict::Reached
        );
        let mut j = Judge::new("k/n", "ready");
        assert_eq!(
            j.see(&at("Ready", false, 0, Value::Null), t0),
            Verdict::Reached
        );
        let mut j = Judge::new("k/n", "Failed");
        assert_eq!(
            j.see(&at("Failed", true, 1, Value::Null), t0),
            Verdict::Reached
        );
        let gone = json!({"event": {"type": "deleted"}, "resource": null});
        assert!(matches!(
            Judge::new("k/n", "Ready").see(&gone["resource"], t0),
            Verdict::Never(_)
        ));
    }

    #[test]
    fn an_old_terminal_failure_with_an_attempt_queued_does_not_end_the_wait() {
        let t0 = Instant::now();
        let queued = json!({"task_type": "reconcile", "claimed": false, "attempt": 2});
        let running = json!({"task_type": "reconcile", "claimed": true, "attempt": 2});
        let mut j = Judge::new("k/n", "Ready");
        // `conctl reconcile` queued attempt 2 of a resource that failed terminally.
        assert_eq!(j.see(&at("Failed", true, 1, queued), t0), Verdict::Wait);
        assert_eq!(j.see(&at("Failed", true, 1, running), t0), Verdict::Wait);
        // Its queue row is gone, its result not yet applied: the same old failure.
        let later = t0 + SETTLE * 10;
        assert_eq!(
            j.see(&at("Failed", true, 1, Value::Null), later),
            Verdict::Wait
        );
        // It recovered.
        assert_eq!(
            j.see(&at("Ready", false, 0, Value::Null), later),
            Verdict::Reached
        );

        // The new attempt failed terminally again: that ends the wait at once.
        let mut j = Judge::new("k/n", "Ready");
        let queued = json!({"task_type": "reconcile", "claimed": false, "attempt": 2});
        assert_eq!(j.see(&at("Failed", true, 1, queued), t0), Verdict::Wait);
        assert!(matches!(
            j.see(&at("Failed", true, 2, Value::Null), t0),
            Verdict::Never(_)
        ));

        // An operate task is no retry of the failure.
        let mut j = Judge::new("k/n", "Ready");
        let operate = json!({"task_type": "operate", "claimed": true, "attempt": 1});
        assert_eq!(j.see(&at("Failed", true, 1, operate), t0), Verdict::Wait);
        assert_eq!(
            j.see(&at("Failed", true, 1, Value::Null), t0),
            Verdict::Wait
        );
    }

    #[test]
    fn a_standing_terminal_failure_ends_the_wait_once_settled() {
        let t0 = Instant::now();
        let mut j = Judge::new("k/n", "Ready");
        assert_eq!(
            j.see(&at("Failed", true, 1, Value::Null), t0),
            Verdict::Wait
        );
        assert_eq!(
            j.see(&at("Failed", true, 1, Value::Null), t0 + SETTLE / 2),
            Verdict::Wait
        );
        assert!(matches!(
            j.see(&at("Failed", true, 1, Value::Null), t0 + SETTLE),
            Verdict::Never(_)
        ));
        // An old failure whose result lands within the settle time: no failure at all.
        let mut j = Judge::new("k/n", "Ready");
        assert_eq!(
            j.see(&at("Failed", true, 1, Value::Null), t0),
            Verdict::Wait
        );
        assert_eq!(
            j.see(&at("Ready", false, 0, Value::Null), t0 + SETTLE / 2),
            Verdict::Reached
        );
    }

    #[test]
    fn lines_show_the_entry_and_the_state() {
        let m = json!({"event": {"type": "phase", "at": "t", "from_phase": "Reconciling",
            "to_phase": "Ready", "message": null},
            "resource": {"phase": "Ready", "generation": 1, "synced_gen": 1}});
        assert_eq!(
            line("k/n", &m),
            "t  k/n  Reconciling -> Ready  [Ready  gen 1 synced 1]"
        );
        let m = json!({"event": null, "resource": {"phase": "Ready", "generation": 1, "synced_gen": 1}});
        assert_eq!(line("k/n", &m), "k/n  now  Ready  gen 1 synced 1");
    }
}
