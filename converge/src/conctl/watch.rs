//! `conctl get resource KIND/NAME --watch` and `conctl wait KIND/NAME --for=PHASE`: both
//! follow the resource's watch (`GET /api/v1/resources/{kind}/{name}?watch=true`), whose
//! messages carry the event-log entry and the resource as it then is. A stream the server
//! ends (a restart, a rolling upgrade) is resumed from the last message's id, so no change is
//! missed or shown twice.

use std::time::Duration;

use anyhow::bail;
use serde_json::Value;
use tokio::time::Instant;

use crate::client::{Client, Message};
use crate::output::{Format, cell};

/// How long to wait before reopening a watch the server ended.
const REOPEN_AFTER: Duration = Duration::from_secs(1);

/// A resource's watch, reopened from its last id whenever the server ends it.
struct Follow<'a> {
    client: &'a Client,
    path: String,
    last_id: Option<String>,
    events: Option<crate::client::Events>,
}

impl<'a> Follow<'a> {
    fn new(client: &'a Client, resource_path: &str) -> Self {
        Follow {
            client,
            path: format!("{resource_path}?watch=true"),
            last_id: None,
            events: None,
        }
    }

    /// The next message. The first opening's errors (404, 401, ...) are returned; after
    /// that, a stream that ends or breaks is reopened from the last id.
    async fn next(&mut self) -> anyhow::Result<Message> {
        loop {
            let events = match &mut self.events {
                Some(e) => e,
                None => {
                    let opened = self.client.watch(&self.path, self.last_id.as_deref()).await;
                    match opened {
                        Ok(e) => self.events.insert(e),
                        Err(e) if self.last_id.is_none() => return Err(e),
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

/// `get resource KIND/NAME --watch`: prints the resource as it is, then every change, until
/// interrupted. Scripts get one JSON document per line (`-o json`) or YAML documents.
pub async fn print_changes(
    c: &Client,
    target: &str,
    resource_path: &str,
    format: Format,
) -> anyhow::Result<()> {
    let mut follow = Follow::new(c, resource_path);
    loop {
        let m = follow.next().await?;
        match format {
            Format::Table => println!("{}", line(target, &m.data)),
            Format::Json => println!("{}", serde_json::to_string(&m.data)?),
            Format::Yaml => print!("---\n{}", serde_yaml::to_string(&m.data)?),
        }
    }
}

/// What `wait` makes of one message.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Keep waiting.
    Wait,
    /// The resource reached the phase.
    Reached,
    /// It never will without a change: why.
    Never(String),
}

fn judge(target: &str, want: &str, m: &Value) -> Verdict {
    let r = &m["resource"];
    if r.is_null() {
        // Only a deleted resource comes back null (the first message of a watch of a missing
        // one is a 404 instead).
        return Verdict::Never(format!("{target} was deleted"));
    }
    let phase = r["phase"].as_str().unwrap_or_default();
    if phase.eq_ignore_ascii_case(want) {
        return Verdict::Reached;
    }
    // Failed is a failure at the current generation; a terminal one is not retried.
    if phase == "Failed" && r["failure_terminal"] == true {
        return Verdict::Never(format!(
            "{target} failed terminally at generation {}: {} (it retries only when its spec \
             changes)",
            cell(&r["generation"]),
            r["failure_message"].as_str().unwrap_or("no message")
        ));
    }
    Verdict::Wait
}

/// `wait KIND/NAME --for=PHASE`: returns once the resource is in `want`; fails on a terminal
/// failure, on deletion, or when `timeout` passes first.
pub async fn wait_for(
    c: &Client,
    target: &str,
    resource_path: &str,
    want: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut follow = Follow::new(c, resource_path);
    let mut phase = String::from("unknown");
    loop {
        let m = match tokio::time::timeout_at(deadline, follow.next()).await {
            Ok(m) => m?,
            Err(_) => bail!(
                "timed out after {timeout:?} waiting for {target} to be {want} (it is {phase})"
            ),
        };
        phase = cell(&m.data["resource"]["phase"]);
        match judge(target, want, &m.data) {
            Verdict::Reached => {
                println!("{target} is {want}");
                return Ok(());
            }
            Verdict::Never(why) => bail!("{why}"),
            Verdict::Wait => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_wait_ends_on_the_phase_a_terminal_failure_or_a_delete() {
        let at = |phase: &str, terminal: bool| {
            json!({"event": null, "resource": {"phase": phase, "generation": 2,
                "failure_terminal": terminal, "failure_message": "boom"}})
        };
        assert_eq!(judge("k/n", "Ready", &at("Ready", false)), Verdict::Reached);
        assert_eq!(judge("k/n", "ready", &at("Ready", false)), Verdict::Reached);
        assert_eq!(
            judge("k/n", "Ready", &at("Reconciling", false)),
            Verdict::Wait
        );
        // A transient failure is retried.
        assert_eq!(judge("k/n", "Ready", &at("Failed", false)), Verdict::Wait);
        match judge("k/n", "Ready", &at("Failed", true)) {
            Verdict::Never(why) => {
                assert!(why.contains("failed terminally") && why.contains("boom"))
            }
            v => panic!("{v:?}"),
        }
        assert_eq!(
            judge("k/n", "Failed", &at("Failed", true)),
            Verdict::Reached
        );
        let gone = json!({"event": {"type": "deleted"}, "resource": null});
        assert!(matches!(judge("k/n", "Ready", &gone), Verdict::Never(_)));
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
