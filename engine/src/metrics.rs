//! The process's Prometheus metrics: one registry and every metric family converge exports,
//! defined here and nowhere else, and [`render`], the text a scrape of `/metrics` gets.
//!
//! The registry is process-global ([`metrics`]), like the log: a converge process exports
//! one set of families whatever its ROLE, and every part records into it where its event
//! happens (the broker at dispatch and result, the drainer per batch, the engine's wrappers
//! where a result brings a resource to synced, the HTTP middleware per request) without a
//! handle threaded through every constructor. It lives in the engine because both the
//! broker and the control plane depend on the engine and on nothing of each other.
//!
//! Label values are bounded: kind names (bounded by the registered kinds), stage and result
//! names (fixed sets), the HTTP route *template* (never the raw path), status codes, lanes
//! and pool states. No resource name, id or error text is ever a label.
//!
//! A scrape is cheap whatever the database holds: counters and histograms are in memory,
//! the broker gauges are kept by the broker as streams and leases come and go, the pool
//! gauges are read from the pool, and the two queue gauges come from one bounded catalog
//! query ([`crate::db::stats::queue_estimates`]: PostgreSQL's live-row statistics of the
//! 32 partitions of `work_queue` and `work_outbox`, no table read).

use std::{
    sync::{LazyLock, atomic::AtomicU64},
    time::{Duration, Instant},
};

use prometheus_client::{
    encoding::{EncodeLabelSet, prometheus_text},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};
use sqlx::PgPool;

use crate::{db, words::Stage};

/// The `Content-Type` of [`render`]'s text (the Prometheus text format 0.0.4).
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Longest a scrape waits for the queue estimates; past it the gauges keep their last
/// values (a scrape must answer even while the database is slow or gone).
const ESTIMATES_TIMEOUT: Duration = Duration::from_secs(1);

/// Buckets (seconds) of the latencies that span milliseconds to minutes: a task, a
/// resource's time behind, a rollup.
const LATENCY_BUCKETS: [f64; 16] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// Buckets (seconds) of the short ones: an HTTP request, a drain batch.
const SHORT_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

fn short_histogram() -> Histogram {
    Histogram::new(SHORT_BUCKETS)
}

/// A histogram family whose histograms share one set of buckets.
type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// `kind`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// The resource kind.
    pub kind: String,
}

/// `kind`, `stage`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TaskLabels {
    /// The resource kind.
    pub kind: String,
    /// A [`Stage`]'s word, or `unspecified`.
    pub stage: &'static str,
}

/// `kind`, `stage`, `result`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// The resource kind.
    pub kind: String,
    /// A [`Stage`]'s word, or `unspecified`.
    pub stage: &'static str,
    /// One of [`TaskResult`]'s names.
    pub result: &'static str,
}

/// `lane`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LaneLabel {
    /// bulk | express.
    pub lane: &'static str,
}

/// `route`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabel {
    /// The matched route template (`/api/v1/resources/{kind}/{name}`), or `unmatched`.
    pub route: String,
}

/// `route`, `code`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The matched route template, or `unmatched`.
    pub route: String,
    /// The response's status code.
    pub code: u16,
}

/// `frame`, `why`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// What named the lease: one of [`LeaseUse`]'s names.
    pub frame: &'static str,
    /// Why it was refused: one of [`Refused`]'s names.
    pub why: &'static str,
}

/// What a worker did with a lease the broker refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseUse {
    /// A `StageComplete` (a result sent after a reconnect too).
    Complete,
    /// An entry of a `WorkHeartbeat`.
    Heartbeat,
    /// A `ListDescendants` call.
    ListDescendants,
    /// A `Subscribe.resumed` entry.
    Resume,
}

impl LeaseUse {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseUse::Complete => "complete",
            LeaseUse::Heartbeat => "heartbeat",
            LeaseUse::ListDescendants => "list_descendants",
            LeaseUse::Resume => "resume",
        }
    }
}

/// Why the broker refused a worker's use of a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Another stream holds the lease.
    OtherStream,
    /// The lease's kind is not one the sender's principal may serve.
    Kind,
}

impl Refused {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::OtherStream => "other_stream",
            Refused::Kind => "kind",
        }
    }
}

/// Which rate limit refused a request (`converge_rate_limited_total{limit}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateLimited {
    /// RATE_LIMIT_PER_PRINCIPAL, on an HTTP API call.
    Principal,
    /// RATE_LIMIT_PER_ADDRESS, on an HTTP request.
    Address,
    /// RATE_LIMIT_PER_ADDRESS, on a WorkerService call with bad credentials.
    GrpcBadCredentials,
}

impl RateLimited {
    /// Every value, for the series that exist from the start.
    pub const ALL: [RateLimited; 3] = [
        RateLimited::Principal,
        RateLimited::Address,
        RateLimited::GrpcBadCredentials,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RateLimited::Principal => "principal",
            RateLimited::Address => "address",
            RateLimited::GrpcBadCredentials => "grpc_bad_credentials",
        }
    }
}

/// `limit`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabel {
    /// One of [`RateLimited`]'s names.
    pub limit: &'static str,
}

/// `state`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    /// idle | in_use.
    pub state: &'static str,
}

/// Every family, by the name it takes in the text (a counter's with `_total`).
pub const FAMILIES: [&str; 16] = [
    "converge_reconciles_total",
    "converge_reconcile_duration_seconds",
    "converge_task_duration_seconds",
    "converge_queue_ready",
    "converge_outbox_pending",
    "converge_broker_streams",
    "converge_broker_inflight",
    "converge_broker_lease_refusals_total",
    "converge_drain_batch_seconds",
    "converge_rollup_latency_seconds",
    "converge_http_requests_total",
    "converge_http_request_duration_seconds",
    "converge_db_pool_connections",
    "converge_kind_schema_compiles_total",
    "converge_read_replica_lag_seconds",
    "converge_rate_limited_total",
];

/// How a task ended, as the broker saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskResult {
    /// The worker reported success.
    Ok,
    /// The worker reported a failure to retry.
    Error,
    /// The worker reported a terminal failure (no retry until the spec changes).
    Terminal,
    /// The broker's deadline passed first.
    Deadline,
    /// The engine took the lease away first (the resource was deleted or quarantined, or its
    /// spec moved on) and the broker cancelled the task.
    Cancelled,
}

impl TaskResult {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskResult::Ok => "ok",
            TaskResult::Error => "error",
            TaskResult::Terminal => "terminal",
            TaskResult::Deadline => "deadline",
            TaskResult::Cancelled => "cancelled",
        }
    }
}

/// Every metric family of the process.
pub struct Metrics {
    registry: Registry,
    /// `converge_reconciles_total{kind,stage,result}`: task results a broker received (and
    /// deadlines it enforced), per stage.
    pub reconciles: Family<ResultLabels, Counter>,
    /// `converge_reconcile_duration_seconds{kind}`: how long a resource was behind its spec
    /// when a result brought it to synced (apply → synced).
    pub reconcile_duration: Histograms<KindLabel>,
    /// `converge_task_duration_seconds{kind,stage}`: a stage task's dispatch to its result.
    pub task_duration: Histograms<TaskLabels>,
    /// `converge_queue_ready`: rows in `work_queue`, estimated.
    pub queue_ready: Gauge,
    /// `converge_outbox_pending`: rows in `work_outbox`, estimated.
    pub outbox_pending: Gauge,
    /// `converge_broker_streams`: worker streams subscribed to this process's broker.
    pub broker_streams: Gauge,
    /// `converge_broker_inflight{kind}`: tasks this process's broker handed out and has no
    /// result for yet.
    pub broker_inflight: Family<KindLabel, Gauge>,
    /// `converge_broker_lease_refusals_total{frame,why}`: a worker's use of a lease its
    /// stream does not hold, or of a kind its principal may not serve, refused.
    pub lease_refusals: Family<RefusalLabels, Counter>,
    /// `converge_drain_batch_seconds{lane}`: one drain statement that applied results.
    pub drain_batch: Histograms<LaneLabel>,
    /// `converge_rollup_latency_seconds{kind}`: a composite's rollup run, from its claim
    /// to the ROLLUP stage's result.
    pub rollup_latency: Histograms<KindLabel>,
    /// `converge_http_requests_total{route,code}`.
    pub http_requests: Family<RequestLabels, Counter>,
    /// `converge_http_request_duration_seconds{route}`.
    pub http_request_duration: Histograms<RouteLabel>,
    /// `converge_db_pool_connections{state}`: the process's PostgreSQL pool.
    pub db_pool_connections: Family<StateLabel, Gauge>,
    /// `converge_kind_schema_compiles_total`: kind manifests whose JSON Schemas the control
    /// plane compiled (an applied manifest's check, a new or changed manifest read into the
    /// validator cache; never one for a lookup of an unknown kind).
    pub kind_schema_compiles: Counter,
    /// `converge_read_replica_lag_seconds`: how far the API's read replica
    /// (`DATABASE_READ_URL`) is behind the primary, at its last measurement; +Inf while it
    /// does not answer. Absent without a replica (never measured: 0).
    pub read_replica_lag: Gauge<f64, AtomicU64>,
    /// `converge_rate_limited_total{limit}`: requests a rate limit refused, by limit.
    pub rate_limited_total: Family<LimitLabel, Counter>,
}

impl Metrics {
    fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::with_prefix("converge"),
            reconciles: Family::default(),
            reconcile_duration: Family::new_with_constructor(latency_histogram),
            task_duration: Family::new_with_constructor(latency_histogram),
            queue_ready: Gauge::default(),
            outbox_pending: Gauge::default(),
            broker_streams: Gauge::default(),
            broker_inflight: Family::default(),
            lease_refusals: Family::default(),
            drain_batch: Family::new_with_constructor(short_histogram),
            rollup_latency: Family::new_with_constructor(latency_histogram),
            http_requests: Family::default(),
            http_request_duration: Family::new_with_constructor(short_histogram),
            db_pool_connections: Family::default(),
            kind_schema_compiles: Counter::default(),
            read_replica_lag: Gauge::default(),
            rate_limited_total: Family::default(),
        };
        let r = &mut m.registry;
        r.register(
            "reconciles",
            "Task results received by this process's broker (and deadlines it enforced), by kind, stage and result",
            m.reconciles.clone(),
        );
        r.register(
            "reconcile_duration_seconds",
            "How long a resource had been behind its spec (apply, compose or flowed value) when a result brought it to synced",
            m.reconcile_duration.clone(),
        );
        r.register(
            "task_duration_seconds",
            "From a stage task's dispatch to a worker to its result, by kind and stage",
            m.task_duration.clone(),
        );
        r.register(
            "queue_ready",
            "Tasks in work_queue (due, backing off or leased): an ESTIMATE from PostgreSQL's live-row statistics of its partitions, which lag by seconds and may read a few rows on an empty queue; the same cluster-wide figure on every process",
            m.queue_ready.clone(),
        );
        r.register(
            "outbox_pending",
            "Results in work_outbox waiting for a drainer: an ESTIMATE from PostgreSQL's live-row statistics of its partitions, which lag by seconds and may read a few rows on an empty outbox; the same cluster-wide figure on every process",
            m.outbox_pending.clone(),
        );
        r.register(
            "broker_streams",
            "Worker streams subscribed to this process's broker",
            m.broker_streams.clone(),
        );
        r.register(
            "broker_inflight",
            "Tasks this process's broker handed out and has no result for yet, by kind",
            m.broker_inflight.clone(),
        );
        // Every series exists from the start at 0, so an alert on its rate needs no series to
        // appear first (and a refusal is rare: this is how it is noticed).
        for (frame, why) in [
            (LeaseUse::Complete, Refused::OtherStream),
            (LeaseUse::Complete, Refused::Kind),
            (LeaseUse::Heartbeat, Refused::OtherStream),
            (LeaseUse::ListDescendants, Refused::OtherStream),
            (LeaseUse::ListDescendants, Refused::Kind),
            (LeaseUse::Resume, Refused::OtherStream),
            (LeaseUse::Resume, Refused::Kind),
        ] {
            let _ = m.lease_refusals.get_or_create(&RefusalLabels {
                frame: frame.as_str(),
                why: why.as_str(),
            });
        }
        r.register(
            "broker_lease_refusals",
            "A worker's use of a lease its stream does not hold (another stream holds it) or of a kind its principal may not serve, refused by this process's broker, by frame and reason",
            m.lease_refusals.clone(),
        );
        r.register(
            "drain_batch_seconds",
            "One drain statement that applied results, by lane (bulk or express)",
            m.drain_batch.clone(),
        );
        r.register(
            "rollup_latency_seconds",
            "A composite's rollup run, from its claim (its descendants settled) to the ROLLUP stage's result, by kind",
            m.rollup_latency.clone(),
        );
        r.register(
            "http_requests",
            "HTTP requests answered, by route template and status code",
            m.http_requests.clone(),
        );
        r.register(
            "http_request_duration_seconds",
            "HTTP request handling time, by route template",
            m.http_request_duration.clone(),
        );
        r.register(
            "db_pool_connections",
            "Connections of this process's PostgreSQL pool, by state (idle or in_use)",
            m.db_pool_connections.clone(),
        );
        r.register(
            "kind_schema_compiles",
            "Kind manifests whose JSON Schemas the control plane compiled: an applied manifest's check, a new or changed manifest read into the validator cache; none for a lookup of an unknown kind",
            m.kind_schema_compiles.clone(),
        );
        r.register(
            "read_replica_lag_seconds",
            "How far the API's read replica (DATABASE_READ_URL) was behind the primary at its last measurement (about every second): 0 when it has replayed everything the primary wrote, +Inf while it does not answer, 0 on a process without a replica. Reads bypass it while it lags beyond READ_MAX_LAG",
            m.read_replica_lag.clone(),
        );
        for l in RateLimited::ALL {
            let _ = m
                .rate_limited_total
                .get_or_create(&LimitLabel { limit: l.as_str() });
        }
        r.register(
            "rate_limited",
            "Requests a rate limit refused, by limit: principal (RATE_LIMIT_PER_PRINCIPAL, HTTP 429), address (RATE_LIMIT_PER_ADDRESS, HTTP 429), grpc_bad_credentials (RATE_LIMIT_PER_ADDRESS on WorkerService calls with bad credentials, RESOURCE_EXHAUSTED)",
            m.rate_limited_total.clone(),
        );
        m
    }

    /// Counts one request refused by `limit`.
    pub fn rate_limited(&self, limit: RateLimited) {
        self.rate_limited_total
            .get_or_create(&LimitLabel {
                limit: limit.as_str(),
            })
            .inc();
    }

    /// Counts a task's end and, when its dispatch time is known (a lease adopted from
    /// another broker's session has none), observes its duration. `stage` is `None` for a
    /// result whose stage is unknown (labelled `unspecified`).
    pub fn task_ended(
        &self,
        kind: &str,
        stage: Option<Stage>,
        result: TaskResult,
        sent: Option<Instant>,
    ) {
        let stage = stage.map_or("unspecified", Stage::as_str);
        self.reconciles
            .get_or_create(&ResultLabels {
                kind: kind.to_owned(),
                stage,
                result: result.as_str(),
            })
            .inc();
        let ran_out = matches!(result, TaskResult::Deadline | TaskResult::Cancelled);
        if let (Some(at), false) = (sent, ran_out) {
            self.task_duration
                .get_or_create(&TaskLabels {
                    kind: kind.to_owned(),
                    stage,
                })
                .observe(at.elapsed().as_secs_f64());
        }
    }

    /// Observes the resources a statement brought to synced: `kinds[i]` had been behind for
    /// `secs[i]` seconds.
    pub fn synced(&self, kinds: &[String], secs: &[f64]) {
        for (kind, s) in kinds.iter().zip(secs) {
            self.reconcile_duration
                .get_or_create(&KindLabel { kind: kind.clone() })
                .observe(s.max(0.0));
        }
    }

    /// `n` uses of leases (`frame`) refused for `why`.
    pub fn lease_refused(&self, frame: LeaseUse, why: Refused, n: u64) {
        self.lease_refusals
            .get_or_create(&RefusalLabels {
                frame: frame.as_str(),
                why: why.as_str(),
            })
            .inc_by(n);
    }

    /// A task of `kind` was handed out (`+1`) or came back (`-1`).
    pub fn inflight_add(&self, kind: &str, delta: i64) {
        self.broker_inflight
            .get_or_create(&KindLabel {
                kind: kind.to_owned(),
            })
            .inc_by(delta);
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// The scrape: refreshes the gauges read at scrape time (the pool's connections, the queue
/// estimates) and encodes every family in the Prometheus text format.
pub async fn render(pool: &PgPool) -> String {
    let m = metrics();
    // In memory: the pool's own counters.
    let (size, idle) = (i64::from(pool.size()), pool.num_idle() as i64);
    m.db_pool_connections
        .get_or_create(&StateLabel { state: "idle" })
        .set(idle);
    m.db_pool_connections
        .get_or_create(&StateLabel { state: "in_use" })
        .set((size - idle).max(0));
    match tokio::time::timeout(ESTIMATES_TIMEOUT, db::stats::queue_estimates(pool)).await {
        Ok(Ok(e)) => {
            m.queue_ready.set(e.queue);
            m.outbox_pending.set(e.outbox);
        }
        Ok(Err(e)) => tracing::debug!(error = %e, "queue estimates unavailable for a scrape"),
        Err(_) => tracing::debug!("queue estimates timed out for a scrape"),
    }
    let mut out = String::with_capacity(16 * 1024);
    // Writing to a String cannot fail.
    let _ = prometheus_text::encode(&mut out, &m.registry);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_registered_under_its_exported_name() {
        // A labelled family shows in the text once it has a series.
        let m = metrics();
        let kind = || KindLabel {
            kind: "unit".into(),
        };
        m.task_ended(
            "unit",
            Some(Stage::Work),
            TaskResult::Ok,
            Some(Instant::now()),
        );
        m.synced(&["unit".into()], &[1.5]);
        m.inflight_add("unit", 0);
        m.drain_batch
            .get_or_create(&LaneLabel { lane: "bulk" })
            .observe(0.01);
        m.rollup_latency.get_or_create(&kind()).observe(0.1);
        let route = || "/unit".to_string();
        m.http_requests
            .get_or_create(&RequestLabels {
                route: route(),
                code: 200,
            })
            .inc();
        m.http_request_duration
            .get_or_create(&RouteLabel { route: route() })
            .observe(0.001);
        m.db_pool_connections
            .get_or_create(&StateLabel { state: "idle" })
            .set(1);
        let mut out = String::new();
        prometheus_text::encode(&mut out, &m.registry).unwrap();
        for name in FAMILIES {
            assert!(
                out.contains(&format!("# TYPE {name} ")),
                "{name} missing:\n{out}"
            );
        }
        assert!(
            out.contains(r#"converge_reconciles_total{kind="unit",stage="work",result="ok"} 1"#),
            "{out}"
        );
    }
}
