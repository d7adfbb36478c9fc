//! The conformance event log: one JSON line per handler invocation, appended to the file
//! named by `CONFORMANCE_LOG`, so the runner can count attempts, cancellations and teardowns
//! from outside the process (status alone cannot show a retry that later succeeded).

use std::{fs::File, io::Write, path::Path};

use converge_sdk::ReactionRequest;
use serde_json::{Map, Value, json};

/// Where handler events go; a no-op when no log path was configured.
#[derive(Debug)]
pub struct EventLog {
    form: String,
    file: Option<File>,
}

impl EventLog {
    /// Reads `CONFORMANCE_FORM` (default [`crate::DEFAULT_FORM`]) and `CONFORMANCE_LOG`.
    pub fn from_env() -> std::io::Result<EventLog> {
        let form = std::env::var("CONFORMANCE_FORM")
            .ok()
            .filter(|f| !f.is_empty())
            .unwrap_or_else(|| crate::DEFAULT_FORM.to_string());
        match std::env::var_os("CONFORMANCE_LOG").filter(|p| !p.is_empty()) {
            Some(path) => EventLog::to_file(form, Path::new(&path)),
            None => Ok(EventLog { form, file: None }),
        }
    }

    /// A log appending to `path` (created if missing).
    pub fn to_file(form: String, path: &Path) -> std::io::Result<EventLog> {
        // O_APPEND: concurrent handlers (and a restarted worker) never overwrite each other.
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(EventLog {
            form,
            file: Some(file),
        })
    }

    /// The form name reported in status documents.
    pub fn form(&self) -> &str {
        &self.form
    }

    /// Appends one event line for `req`.
    pub fn record(&self, req: &ReactionRequest, event: &str) {
        self.record_with(req, event, Map::new());
    }

    /// Appends one event line for `req` with `extra` keys (`reason` on `cancelled`,
    /// `transition` and `dedup_token` on `react`).
    pub fn record_with(&self, req: &ReactionRequest, event: &str, extra: Map<String, Value>) {
        let Some(file) = &self.file else { return };
        let mut obj = json!({
            "form": self.form,
            "kind": req.kind,
            "name": req.resource.name,
            "reaction": req.reaction,
            "stage": req.stage.as_str_name(),
            "generation": req.generation,
            "attempt": req.attempt,
            "event": event,
        });
        if let Value::Object(m) = &mut obj {
            m.extend(extra);
        }
        let mut line = obj.to_string();
        line.push('\n');
        // One write call per line: with O_APPEND the kernel keeps lines from interleaving.
        // `File` is unbuffered, so nothing needs flushing afterwards.
        let mut f: &File = file;
        if let Err(e) = f.write_all(line.as_bytes()) {
            tracing::warn!(error = %e, "cannot write the conformance event log");
        }
    }
}
