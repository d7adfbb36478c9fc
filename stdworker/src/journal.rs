//! The task journal: one JSON line per handler invocation, for operators and the
//! conformance suite (`STDWORKER_TASK_JOURNAL=<path>`).
//!
//! The sandboxed providers (wasm, starlark, cel) run code that cannot write files, so the
//! worker records what it ran on their behalf: `{"form", "kind", "name", "reaction",
//! "stage", "generation", "attempt", "event"}` when a task starts (`event` is the stage's
//! short name: `work`, `compose`, `rollup`, `delete`, `operate`, `react`; a `react` line adds
//! the delivery's `"transition"` and `"dedup_token"`), and a second line with
//! `event: "cancelled"` and the cancellation's `"reason"` when it fired before the task
//! finished. `form` is the provider's name. Lines are appended with one `write` each on an `O_APPEND` file,
//! so concurrent tasks never interleave within a line.

use std::{
    fs::{File, OpenOptions},
    io::Write,
    path::Path,
    sync::Arc,
};

use converge_sdk::{
    HandlerError, KindVersion, Outcome, Provider, ProviderConfig, ReactionRequest, Stage,
};
use serde_json::{Map, Value, json};
use tracing::warn;

/// The variable naming the journal file; unset or empty means no journal.
pub const JOURNAL_VAR: &str = "STDWORKER_TASK_JOURNAL";

/// An append-only journal file shared by every provider of the process.
#[derive(Debug, Clone)]
pub struct Journal {
    file: Arc<File>,
}

impl Journal {
    /// Opens (creating) the journal at `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            file: Arc::new(file),
        })
    }

    /// The journal named by [`JOURNAL_VAR`], if set.
    pub fn from_env() -> anyhow::Result<Option<Self>> {
        match std::env::var_os(JOURNAL_VAR) {
            Some(p) if !p.is_empty() => Self::open(Path::new(&p))
                .map(Some)
                .map_err(|e| anyhow::anyhow!("{JOURNAL_VAR}={}: {e}", p.to_string_lossy())),
            _ => Ok(None),
        }
    }

    /// The keys of every line for `req` but `event`.
    fn fields(form: &str, req: &ReactionRequest) -> Map<String, Value> {
        let Value::Object(m) = json!({
            "form": form,
            "kind": req.kind,
            "name": req.resource.name,
            "reaction": req.reaction,
            "stage": req.stage.as_str_name(),
            "generation": req.generation,
            "attempt": req.attempt,
        }) else {
            unreachable!("a JSON object literal")
        };
        m
    }

    /// One line of `fields` with `event` and the `extra` keys, ready to append.
    fn line(fields: &Map<String, Value>, event: &str, extra: &[(&str, Value)]) -> Vec<u8> {
        let mut m = fields.clone();
        m.insert("event".into(), json!(event));
        for (k, v) in extra {
            m.insert((*k).into(), v.clone());
        }
        let mut bytes = Value::Object(m).to_string().into_bytes();
        bytes.push(b'\n');
        bytes
    }

    fn append(&self, bytes: &[u8]) {
        // One write call per line: O_APPEND makes it atomic against other writers.
        if let Err(e) = (&*self.file).write_all(bytes) {
            warn!(error = %e, "cannot append to the task journal");
        }
    }
}

/// The journal's event name for a stage.
pub fn stage_event(stage: Stage) -> &'static str {
    match stage {
        Stage::Compose => "compose",
        Stage::Rollup => "rollup",
        Stage::Delete => "delete",
        Stage::Operate => "operate",
        Stage::React => "react",
        Stage::Work | Stage::Unspecified => "work",
    }
}

/// A provider whose tasks are journaled under `form`.
#[derive(Debug)]
pub struct Journaled<P> {
    inner: P,
    form: &'static str,
    journal: Journal,
}

impl<P> Journaled<P> {
    /// Wraps `inner`, recording its tasks in `journal` as `form`.
    pub fn new(inner: P, form: &'static str, journal: Journal) -> Self {
        Self {
            inner,
            form,
            journal,
        }
    }
}

impl<P: Provider> Provider for Journaled<P> {
    fn kind(&self) -> KindVersion {
        self.inner.kind()
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let fields = Journal::fields(self.form, &req);
        let extra = if req.stage == Stage::React {
            let transition = req.transition.map(|t| t.as_str_name());
            vec![
                ("transition", json!(transition)),
                ("dedup_token", json!(req.dedup_token)),
            ]
        } else {
            Vec::new()
        };
        self.journal
            .append(&Journal::line(&fields, stage_event(req.stage), &extra));
        // Kept now: the request moves into the provider.
        let (cancel, reason) = (req.cancel.clone(), req.cancel_reason.clone());
        let result = self.inner.work(req).await;
        if cancel.is_cancelled() {
            let why = reason.get().map(|r| ("reason", json!(r)));
            let extra: Vec<_> = why.into_iter().collect();
            self.journal
                .append(&Journal::line(&fields, "cancelled", &extra));
        }
        result
    }

    fn on_config(&self, cfg: ProviderConfig) {
        self.inner.on_config(cfg);
    }

    fn ready(&self) -> bool {
        self.inner.ready()
    }
}
