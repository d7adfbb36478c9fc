//! The converge broker: serves `WorkerService` to workers, claims tasks from the sharded
//! queue for the kinds that have a ready subscriber, dispatches them over the workers'
//! streams, and records their results fenced on `claim_epoch`.
//!
//! Shape: [`Broker::new`] builds a cheap cloneable handle; [`Broker::run`] owns the loops
//! (dispatcher, completion writer, LISTEN, cache refresh) until shutdown; [`grpc_service`]
//! returns the tonic service for a server (or an in-memory transport in tests).

pub mod error;

mod authz;
mod caches;
mod complete;
mod compose;
mod convert;
mod dispatch;
pub mod liveness;
mod pipeline;
mod registry;
mod service;

use std::{sync::Arc, time::Duration};

use sqlx::PgPool;
use tokio::sync::{Mutex as AsyncMutex, Notify, mpsc};
use tokio_util::sync::CancellationToken;

/// The engine's data layer, ids and wake-ups, under the names the broker's modules use.
pub use converge_engine::{db, ids, wake};
use converge_proto::pb;
pub use error::{Error, Result};
use ids::ShardRange;

/// Broker settings (parsed from the environment by the `converge` binary).
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// This broker's identity (advisory, stamped on claims).
    pub broker_id: String,
    /// The shard range this broker claims from.
    pub shards: ShardRange,
    /// Most rows one claim statement takes.
    pub claim_batch: usize,
    /// Failsafe poll behind the `work_ready` LISTEN.
    pub failsafe_poll: Duration,
    /// Used when a worker subscribes with `max_inflight = 0`.
    pub default_max_inflight: u32,
    /// How long shutdown waits for in-flight results after sending `Drain`.
    pub shutdown_drain: Duration,
    /// How long a new stream may take to send its Subscribe frame.
    pub subscribe_timeout: Duration,
    /// Failsafe re-read of manifests and default provider configs.
    pub cache_refresh: Duration,
    /// Who may speak the WorkerService (`None`: authentication is off, loopback or
    /// AUTH=none).
    pub auth: Option<Arc<converge_auth::Authenticator>>,
}

impl BrokerConfig {
    /// A broker id unique per process start: `<host>-<pid>-<8 random hex>`. A restarted
    /// container keeps its hostname and pid (often 1), and broker liveness must never
    /// mistake the new broker for the dead one.
    pub fn unique_id(host: &str) -> String {
        format!(
            "{host}-{}-{}",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        )
    }
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            broker_id: BrokerConfig::unique_id("broker"),
            shards: ShardRange::ALL,
            claim_batch: 256,
            failsafe_poll: Duration::from_secs(1),
            default_max_inflight: 100,
            shutdown_drain: Duration::from_secs(45),
            subscribe_timeout: Duration::from_secs(10),
            cache_refresh: Duration::from_secs(15),
            auth: None,
        }
    }
}

/// A cheap, cloneable handle to one broker.
#[derive(Clone)]
pub struct Broker {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    cfg: BrokerConfig,
    registry: registry::Registry,
    /// Wakes the dispatcher (a slot freed, a stream subscribed, work was scheduled).
    dispatch_wake: Arc<Notify>,
    /// Woken after results land in the outbox (the in-process drainer, with ROLE=all).
    outbox_hook: std::sync::OnceLock<Arc<Notify>>,
    /// Woken when composites' results land; see `set_express_hook`.
    express_hook: std::sync::OnceLock<Arc<Notify>>,
    pending_completions: std::sync::atomic::AtomicUsize,
    manifests: caches::Manifests,
    configs: caches::Configs,
    /// Serialises config priming and pushes so a stream never sees an older default after a
    /// newer one.
    config_lock: AsyncMutex<()>,
    completions: mpsc::UnboundedSender<complete::Job>,
    completions_rx: std::sync::Mutex<Option<mpsc::UnboundedReceiver<complete::Job>>>,
    /// Set once shutdown begins: no more claims, new streams refused.
    draining: CancellationToken,
}

impl Broker {
    /// Builds a broker over `pool`. Nothing runs until [`Broker::run`].
    pub fn new(pool: PgPool, cfg: BrokerConfig) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Broker {
            inner: Arc::new(Inner {
                pool,
                cfg,
                registry: registry::Registry::default(),
                dispatch_wake: Arc::new(Notify::new()),
                outbox_hook: std::sync::OnceLock::new(),
                express_hook: std::sync::OnceLock::new(),
                pending_completions: std::sync::atomic::AtomicUsize::new(0),
                manifests: caches::Manifests::default(),
                configs: caches::Configs::default(),
                config_lock: AsyncMutex::new(()),
                completions: tx,
                completions_rx: std::sync::Mutex::new(Some(rx)),
                draining: CancellationToken::new(),
            }),
        }
    }

    /// The broker's settings.
    pub fn config(&self) -> &BrokerConfig {
        &self.inner.cfg
    }

    /// Hints the dispatcher that work may be claimable (in-process twin of `work_ready`).
    pub fn wake(&self) {
        self.inner.dispatch_wake.notify_one();
    }

    /// Registers a hint woken whenever results land in the outbox (so an in-process drainer
    /// need not wait for the coalesced `outbox_ready` NOTIFY). Only the first call counts.
    pub fn set_outbox_hook(&self, notify: Arc<Notify>) {
        let _ = self.inner.outbox_hook.set(notify);
    }

    /// Registers a hint woken whenever a composite's result lands in the outbox, for an
    /// in-process express drainer. Only the first call counts.
    pub fn set_express_hook(&self, notify: Arc<Notify>) {
        let _ = self.inner.express_hook.set(notify);
    }

    /// The handle the dispatcher waits on; other components may wake it.
    pub fn dispatch_notify(&self) -> Arc<Notify> {
        self.inner.dispatch_wake.clone()
    }

    /// Number of tasks currently handed out by this broker.
    pub fn inflight(&self) -> usize {
        self.inner.registry.inflight_count()
    }

    /// Runs the broker's loops until `shutdown` fires, then drains: sends `Drain` to every
    /// stream, waits up to `shutdown_drain` for in-flight results, releases what is left.
    /// Keep the gRPC server running until this returns, so results can still arrive.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let rx = self
            .inner
            .completions_rx
            .lock()
            .expect("completion receiver lock poisoned")
            .take()
            .ok_or_else(|| Error::Protocol("broker is already running".into()))?;
        self.inner.manifests.reload(&self.inner.pool).await?;
        let loops = CancellationToken::new();
        let completer = tokio::spawn(complete::run(self.clone(), rx));
        let dispatcher = tokio::spawn(dispatch::run(self.clone(), loops.clone()));
        let listener = tokio::spawn(caches::listen(self.clone(), loops.clone()));
        let alive = tokio::spawn(liveness::run(self.clone(), loops.clone()));

        shutdown.cancelled().await;
        self.drain().await;
        loops.cancel();
        let _ = dispatcher.await;
        let _ = listener.await;
        let _ = alive.await;
        liveness::leave(&self).await;
        completer.abort();
        Ok(())
    }

    async fn drain(&self) {
        let inner = &self.inner;
        inner.draining.cancel();
        let deadline = tokio::time::Instant::now() + inner.cfg.shutdown_drain;
        let deadline_ms = chrono::Utc::now().timestamp_millis()
            + i64::try_from(inner.cfg.shutdown_drain.as_millis()).unwrap_or(i64::MAX / 2);
        inner
            .registry
            .broadcast(pb::work_stream_server_msg::Body::Drain(pb::Drain {
                reason: "broker shutting down".into(),
                deadline_ms,
            }));
        tracing::info!(inflight = self.inflight(), "draining in-flight tasks");
        while self.inflight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let left = inner.registry.take_all_inflight();
        if !left.is_empty() {
            tracing::warn!(
                count = left.len(),
                "drain window over; releasing unfinished leases"
            );
            if let Err(e) = db::queue::lease_release(&inner.pool, &left).await {
                tracing::error!(error = %e, "could not release leases at shutdown");
            }
        }
        // Give the completer a moment to write results that arrived during the drain.
        let flush_until = tokio::time::Instant::now() + Duration::from_millis(500);
        while self.pending_completions() > 0 && tokio::time::Instant::now() < flush_until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// The tonic service for `broker`, with converge's message size limits.
pub fn grpc_service(broker: &Broker) -> pb::worker_service_server::WorkerServiceServer<Broker> {
    pb::worker_service_server::WorkerServiceServer::new(broker.clone())
        .max_decoding_message_size(converge_proto::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(converge_proto::MAX_MESSAGE_BYTES)
}

/// How often the broker pings each connection (HTTP/2 PING), and how long it waits for the
/// answer before it drops the connection. A worker that stops answering (SIGSTOP, a frozen
/// VM, a black-holed network) therefore loses its streams, and they their leases, within
/// [`KEEPALIVE_INTERVAL`] + [`KEEPALIVE_TIMEOUT`] instead of the lease staleness window.
/// Every SDK answers pings from its transport (not its handlers), so a busy worker is safe.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// See [`KEEPALIVE_INTERVAL`].
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);
/// Concurrent HTTP/2 streams one connection may open (a worker needs one WorkStream plus a
/// few unary calls); a peer cannot make the broker hold unbounded stream state.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 128;

/// A gRPC server router with the WorkerService, server reflection and `grpc.health.v1`.
pub fn grpc_router(broker: &Broker) -> tonic::transport::server::Router {
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .expect("the embedded descriptor set is valid");
    let (health_reporter, health) = tonic_health::server::health_reporter();
    tokio::spawn(async move {
        health_reporter
            .set_serving::<pb::worker_service_server::WorkerServiceServer<Broker>>()
            .await;
    });
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
        .add_service(health)
        .add_service(reflection)
        .add_service(grpc_service(broker))
}
