//! The conformance kinds (see `conformance/KINDS.md`), one provider each.
//!
//! Every handler appends its event line first, then does exactly what the kind's contract
//! says. Specs are read leniently from JSON (the manifests own validation; a handler that
//! rejected specs itself would test the handler, not the SDK).

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use converge_sdk::{
    ChildSpec, DepEdge, HandlerError, KindVersion, Outcome, Provider, ProviderConfig,
    ReactionRequest, ResourceRef, ValueFlow,
};
use serde_json::{Map, Value, json};

use crate::EventLog;

/// All conformance kinds are version 1.
const VERSION: i32 = 1;

/// An integer field of the resource's spec, if present.
fn spec_i64(req: &ReactionRequest, key: &str) -> Option<i64> {
    req.resource.spec.get(key).and_then(Value::as_i64)
}

/// The `conf-leaf` work status: the spec echoed with what the SDK told the handler.
fn echo_status(req: &ReactionRequest, form: &str) -> Outcome {
    Outcome::status(json!({
        "echo": req.resource.spec,
        "form": form,
        "generation": req.generation,
        "attempt": req.attempt,
        "trigger": req.trigger,
    }))
}

/// Rule 7: a reaction the kind does not declare is terminal (retrying cannot add a handler).
fn unknown_reaction(req: &ReactionRequest) -> HandlerError {
    HandlerError::terminal(format!("{} has no reaction {:?}", req.kind, req.reaction))
}

/// `conf-leaf`: `work` echoes the spec; verb `ping` answers with its input.
pub struct Leaf {
    log: Arc<EventLog>,
}

impl Leaf {
    /// A leaf provider logging to `log`.
    pub fn new(log: Arc<EventLog>) -> Self {
        Self { log }
    }
}

impl Provider for Leaf {
    fn kind(&self) -> KindVersion {
        KindVersion::new("conf-leaf", VERSION)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        match req.reaction.as_str() {
            "work" => {
                self.log.record(&req, "work");
                Ok(echo_status(&req, self.log.form()))
            }
            "ping" => {
                self.log.record(&req, "operate");
                let input = req
                    .operation
                    .as_ref()
                    .and_then(|op| op.input.clone())
                    .unwrap_or(Value::Null);
                Ok(Outcome::output(
                    json!({"pong": input, "name": req.resource.name}),
                ))
            }
            _ => Err(unknown_reaction(&req)),
        }
    }
}

/// `conf-composite`: a chain of `conf-leaf` children with value flows, and a rollup.
pub struct Composite {
    log: Arc<EventLog>,
}

impl Composite {
    /// A composite provider logging to `log`.
    pub fn new(log: Arc<EventLog>) -> Self {
        Self { log }
    }

    /// How many children the spec asks for (default 2).
    fn children(req: &ReactionRequest) -> i64 {
        spec_i64(req, "children").unwrap_or(2)
    }

    fn compose(req: &ReactionRequest) -> Outcome {
        let n = Self::children(req);
        let name = |i: i64| format!("{}-{i}", req.resource.name);
        let mut out = Outcome::status(json!({"composed": n}));
        for i in 0..n {
            out = out.with_child(ChildSpec::new(
                "conf-leaf",
                VERSION,
                name(i),
                json!({"index": i}),
            ));
            if i >= 1 {
                // Child i waits for child i-1 and receives its echoed index: the suite checks
                // both the ordering and the value flow through `spec.upstream_index`.
                out = out.with_edge(
                    DepEdge::new(
                        ResourceRef::new("conf-leaf", name(i)),
                        ResourceRef::new("conf-leaf", name(i - 1)),
                    )
                    .with_value(ValueFlow::new("/upstream_index", "/echo/index")),
                );
            }
        }
        out
    }

    fn rollup(req: &ReactionRequest) -> Outcome {
        let ready = req.descendants.iter().filter(|d| d.is_ready).count();
        Outcome::status(json!({
            "composed": Self::children(req),
            "descendants": req.descendants.len(),
            "ready": ready,
        }))
    }
}

impl Provider for Composite {
    fn kind(&self) -> KindVersion {
        KindVersion::new("conf-composite", VERSION)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        match req.reaction.as_str() {
            "compose" => {
                self.log.record(&req, "compose");
                Ok(Self::compose(&req))
            }
            "rollup" => {
                self.log.record(&req, "rollup");
                Ok(Self::rollup(&req))
            }
            _ => Err(unknown_reaction(&req)),
        }
    }
}

/// `conf-summary`: children without edges, and a rollup that reads the summary and pages
/// through the descendants only when the spec's `page_size` asks it to.
pub struct Summary {
    log: Arc<EventLog>,
}

impl Summary {
    /// A summary provider logging to `log`.
    pub fn new(log: Arc<EventLog>) -> Self {
        Self { log }
    }

    fn compose(req: &ReactionRequest) -> Outcome {
        let n = spec_i64(req, "children").unwrap_or(2);
        let mut out = Outcome::status(json!({"composed": n}));
        for i in 0..n {
            out = out.with_child(ChildSpec::new(
                "conf-leaf",
                VERSION,
                format!("{}-{i}", req.resource.name),
                json!({"index": i}),
            ));
        }
        out
    }

    async fn rollup(req: &ReactionRequest) -> Result<Outcome, HandlerError> {
        let s = req.summary.clone().unwrap_or_default();
        let page_size = u32::try_from(spec_i64(req, "page_size").unwrap_or(0)).unwrap_or(0);
        let (mut pages, mut read, mut ids) = (0, 0, std::collections::HashSet::new());
        if page_size > 0 {
            let mut pager = req.descendant_pages(page_size);
            while let Some(page) = pager.next_page().await? {
                pages += 1;
                read += page.len();
                ids.extend(page.into_iter().map(|d| d.id));
            }
        }
        Ok(Outcome::status(json!({
            "sent": req.descendants.len(),
            "included": req.descendants_included,
            "total": s.total,
            "by_kind": s.by_kind,
            "by_phase": s.by_phase,
            "not_ready": s.not_ready_total,
            "pages": pages,
            "read": read,
            "distinct": ids.len(),
        })))
    }
}

impl Provider for Summary {
    fn kind(&self) -> KindVersion {
        KindVersion::new("conf-summary", VERSION)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        match req.reaction.as_str() {
            "compose" => {
                self.log.record(&req, "compose");
                Ok(Self::compose(&req))
            }
            "rollup" => {
                self.log.record(&req, "rollup");
                Self::rollup(&req).await
            }
            _ => Err(unknown_reaction(&req)),
        }
    }
}

/// `conf-final`: a leaf whose teardown (finalizer `conformance/teardown`) can fail on purpose.
pub struct Final {
    log: Arc<EventLog>,
}

impl Final {
    /// A finalizer provider logging to `log`.
    pub fn new(log: Arc<EventLog>) -> Self {
        Self { log }
    }
}

impl Provider for Final {
    fn kind(&self) -> KindVersion {
        KindVersion::new("conf-final", VERSION)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        match req.reaction.as_str() {
            "work" => {
                self.log.record(&req, "work");
                Ok(echo_status(&req, self.log.form()))
            }
            "teardown" => {
                self.log.record(&req, "delete");
                let failures = spec_i64(&req, "delete_failures").unwrap_or(0);
                if i64::from(req.attempt) <= failures {
                    return Err(HandlerError::transient(format!(
                        "teardown failure {}",
                        req.attempt
                    )));
                }
                // An empty successful outcome releases the finalizer.
                Ok(Outcome::default())
            }
            _ => Err(unknown_reaction(&req)),
        }
    }
}

/// `conf-fail`: succeeds, fails terminally, fails transiently or panics as the spec says.
pub struct Fail {
    log: Arc<EventLog>,
}

impl Fail {
    /// A failing provider logging to `log`.
    pub fn new(log: Arc<EventLog>) -> Self {
        Self { log }
    }
}

impl Provider for Fail {
    fn kind(&self) -> KindVersion {
        KindVersion::new("conf-fail", VERSION)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        if req.reaction != "work" {
            return Err(unknown_reaction(&req));
        }
        self.log.record(&req, "work");
        let ok = || Outcome::status(json!({"ok": true, "attempt": req.attempt}));
        let mode = req.resource.spec.get("mode").and_then(Value::as_str);
        match mode.unwrap_or("ok") {
            "ok" => Ok(ok()),
            "terminal" => Err(HandlerError::terminal("conformance terminal")),
            "transient" => {
                let times = spec_i64(&req, "times").unwrap_or(0);
                if times == 0 || i64::from(req.attempt) <= times {
                    Err(HandlerError::transient(format!(
                        "conformance transient {}",
                        req.attempt
                    )))
                } else {
                    Ok(ok())
                }
            }
            // Not the SDK's error type on purpose: the SDK must turn a panic into a
            // transient failure by itself.
            "panic" => panic!("conformance panic at attempt {}", req.attempt),
            other => Err(HandlerError::terminal(format!(
                "unknown conf-fail mode {other:?}"
            ))),
        }
    }
}

/// `conf-slow` (and `conf-hold`, the same under a long deadline): sleeps cooperatively, so
/// a deadline or CancelTask cuts it short; the `cancelled` event carries the reason the SDK
/// reports.
pub struct Slow {
    log: Arc<EventLog>,
    kind: &'static str,
}

impl Slow {
    /// A `conf-slow` provider logging to `log`.
    pub fn new(log: Arc<EventLog>) -> Self {
        Self {
            log,
            kind: "conf-slow",
        }
    }

    /// A `conf-hold` provider logging to `log`.
    pub fn hold(log: Arc<EventLog>) -> Self {
        Self {
            log,
            kind: "conf-hold",
        }
    }
}

impl Provider for Slow {
    fn kind(&self) -> KindVersion {
        KindVersion::new(self.kind, VERSION)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        if req.reaction != "work" {
            return Err(unknown_reaction(&req));
        }
        self.log.record(&req, "work");
        let ms = spec_i64(&req, "sleep_ms").unwrap_or(0).max(0);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(ms.unsigned_abs())) => {}
            () = req.cancel.cancelled() => {
                let reason = req.cancel_reason.get().unwrap_or_default();
                let mut extra = Map::new();
                extra.insert("reason".into(), json!(reason));
                self.log.record_with(&req, "cancelled", extra);
                return Err(HandlerError::transient("conformance sleep cancelled"));
            }
        }
        Ok(Outcome::status(
            json!({"slept_ms": ms, "attempt": req.attempt}),
        ))
    }
}

/// `conf-react`: a reactor that logs each delivery's transition and dedup token and fails
/// transiently while the attempt is at most the watched resource's `react_failures`.
pub struct React {
    log: Arc<EventLog>,
}

impl React {
    /// A reactor provider logging to `log`.
    pub fn new(log: Arc<EventLog>) -> Self {
        Self { log }
    }
}

impl Provider for React {
    fn kind(&self) -> KindVersion {
        KindVersion::new("conf-react", VERSION)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        if req.reaction != "react" {
            return Err(unknown_reaction(&req));
        }
        let mut extra = Map::new();
        extra.insert(
            "transition".into(),
            json!(req.transition.map(|t| t.as_str_name())),
        );
        extra.insert("dedup_token".into(), json!(req.dedup_token));
        self.log.record_with(&req, "react", extra);
        // The watched resource's spec says how many deliveries fail before one succeeds.
        let failures = spec_i64(&req, "react_failures").unwrap_or(0);
        if i64::from(req.attempt) <= failures {
            return Err(HandlerError::transient(format!(
                "react failure {}",
                req.attempt
            )));
        }
        Ok(Outcome::default())
    }
}

/// `conf-ready`: a leaf whose readiness follows its default config's `ready` flag.
pub struct Ready {
    log: Arc<EventLog>,
    ready: AtomicBool,
}

impl Ready {
    /// A readiness-following provider logging to `log`; ready until a config says otherwise.
    pub fn new(log: Arc<EventLog>) -> Self {
        Self {
            log,
            ready: AtomicBool::new(true),
        }
    }
}

impl Provider for Ready {
    fn kind(&self) -> KindVersion {
        KindVersion::new("conf-ready", VERSION)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        if req.reaction != "work" {
            return Err(unknown_reaction(&req));
        }
        self.log.record(&req, "work");
        Ok(echo_status(&req, self.log.form()))
    }

    fn on_config(&self, cfg: ProviderConfig) {
        // Only an explicit `"ready": false` turns the provider off; no config means ready.
        let off = cfg.spec.as_ref().and_then(|s| s.get("ready")) == Some(&Value::Bool(false));
        self.ready.store(!off, Ordering::SeqCst);
    }

    fn ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}

/// `conf-config`: echoes its effective provider config and bundle size.
pub struct Config {
    log: Arc<EventLog>,
}

impl Config {
    /// A config-echoing provider logging to `log`.
    pub fn new(log: Arc<EventLog>) -> Self {
        Self { log }
    }
}

impl Provider for Config {
    fn kind(&self) -> KindVersion {
        KindVersion::new("conf-config", VERSION)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        if req.reaction != "work" {
            return Err(unknown_reaction(&req));
        }
        self.log.record(&req, "work");
        Ok(Outcome::status(json!({
            "config": req.effective_config(),
            "bundle_len": req.effective_bundle().len(),
        })))
    }
}
