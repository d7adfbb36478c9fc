//! The converge broker: serves `WorkerService` to workers, claims tasks from the sharded
//! queue for the kinds that have a ready subscriber, dispatches them over the workers'
//! streams, and records their results fenced on `claim_epoch`.
//!
//! Shape: [`Broker::new`] builds a cheap cloneable handle; [`Broker::run`] owns the loops
//! (dispatcher, completion writer, LISTEN, cache refresh) until shutdown; [`grpc_service`]
//! returns the tonic service for a server (or an in-memory transport in tests);
//! [`Broker::roster`] is what the process's membership loop (`converge_engine::membership`)
//! publishes as this broker's connected workers, and that loop also releases the leases of
//! brokers that stopped stamping.
//!
//! The parts are components that own their state and are given only the handles of the
//! parts below them; this file alone knows them all and wires them. From the bottom:
//!
//! - `manifests` (the broker's door onto the process's kind catalog, `converge_kinds`),
//!   `convert`, `compose`, `authz` (the authentication layer every WorkerService request
//!   passes before a message is decoded), `error`: leaves;
//! - `pipeline`: a composite's stage decisions, returned as steps (uses `compose`);
//! - `registry`: streams and in-flight leases (keeps a `pipeline` with its lease);
//! - `configs`: default provider configs pushed to the registry's streams;
//! - `dryrun`: plans' dry-run composes, sent to the registry's dry-run streams and answered
//!   into `plan_requests` only (uses `compose`, `configs`, `manifests`);
//! - `revoke`: leases the engine took away, cancelled on the registry's streams;
//! - `caches`: the LISTEN + refresh loop over `configs` (and `revoke`'s notices, and
//!   `dryrun`'s wake-ups), waking the dispatcher when the kind catalog changes;
//! - `complete`: the completion writer (acks through `registry`);
//! - `handout`: placement, deadlines, and the execution of pipeline steps;
//! - `dispatch`: the claim loop (hands out through `handout`);
//! - `service`: the WorkerService sessions;
//! - `wire`: transport rules (gzip answered in kind, the oversized-frame status).
//!
//! `broker/tests/module_graph.rs` fails if a `use` ever closes a circle among them.

pub mod authz;
pub mod error;

mod ahead;
mod caches;
mod complete;
mod compose;
mod configs;
mod convert;
mod dispatch;
mod dryrun;
mod handout;
mod manifests;
mod pipeline;
mod registry;
mod revoke;
mod service;
pub mod wire;

use std::{sync::Arc, time::Duration};

use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

/// The engine's data layer, ids and wake-ups, under the names the broker's users know.
pub use converge_engine::{db, ids, wake};
use converge_kinds::KindCatalog;
use converge_proto::pb;
pub use error::{Error, Result};
use ids::ShardRange;

/// Broker settings (parsed from the environment by the `converge` binary).
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// This broker's identity, stamped on its claims: its process's `cluster_members` id, so
    /// the leases of a broker whose row went silent can be found and released.
    pub broker_id: String,
    /// The shard range this broker claims from when `topology` is not set.
    pub shards: ShardRange,
    /// Dynamic sharding: the process's live shard ranges, whose claim range of each pair
    /// replaces `shards` (the `converge` binary always sets it).
    pub topology: Option<Arc<converge_engine::topology::Topology>>,
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
    /// Failsafe re-read of default provider configs.
    pub cache_refresh: Duration,
    /// Largest WorkerService message accepted or sent, decompressed
    /// (`GRPC_MAX_MESSAGE_BYTES`).
    pub max_message_bytes: usize,
    /// Who may speak the WorkerService (`None`: authentication is off, loopback or
    /// AUTH=none).
    pub auth: Option<Arc<converge_auth::Authenticator>>,
    /// Most kinds one Subscribe may name (`MAX_KINDS_PER_STREAM`).
    pub max_kinds_per_stream: usize,
    /// RATE_LIMIT_PER_ADDRESS for calls refused for their credentials: past it, a client
    /// address's further bad attempts are answered RESOURCE_EXHAUSTED (`None`: no limit).
    pub bad_credentials_limit:
        Option<Arc<converge_auth::ratelimit::KeyedLimiter<converge_auth::ratelimit::AddressKey>>>,
    /// The keys of secrets at rest: the broker opens a provider config's sealed values for
    /// the workers of its kind, and seals the writeOnly values of a composer's configs
    /// before they are stored (`converge_engine::sealing`).
    pub secrets: converge_engine::sealing::Keyring,
}

impl BrokerConfig {
    /// A broker id unique per process start: `<host>-<pid>-<8 random hex>`. A restarted
    /// container keeps its hostname and pid (often 1), and cluster membership must never
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
            topology: None,
            claim_batch: 256,
            failsafe_poll: Duration::from_secs(1),
            default_max_inflight: 100,
            shutdown_drain: Duration::from_secs(45),
            subscribe_timeout: Duration::from_secs(10),
            cache_refresh: Duration::from_secs(15),
            max_message_bytes: converge_proto::MAX_MESSAGE_BYTES,
            auth: None,
            max_kinds_per_stream: DEFAULT_MAX_KINDS_PER_STREAM,
            bad_credentials_limit: None,
            secrets: Default::default(),
        }
    }
}

/// The default of [`BrokerConfig::max_kinds_per_stream`] (`MAX_KINDS_PER_STREAM`): a worker
/// serving more kinds opens more streams. 100 streams of 10,000 kinds each held 548 MiB and
/// slowed every dispatch pass (issue 41).
pub const DEFAULT_MAX_KINDS_PER_STREAM: usize = 1_000;

/// A cheap, cloneable handle to one broker.
#[derive(Clone)]
pub struct Broker {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    cfg: BrokerConfig,
    registry: Arc<registry::Registry>,
    completions: complete::CompletionHandle,
    dispatch: dispatch::DispatchHandle,
    service: service::Workers,
    /// The loops, until [`Broker::run`] takes them.
    loops: std::sync::Mutex<Option<Loops>>,
    /// Set once shutdown begins: no more claims, new streams refused.
    draining: CancellationToken,
}

/// The parts that run as loops; built with the broker, started by [`Broker::run`].
struct Loops {
    completer: complete::Completer,
    dispatcher: dispatch::Dispatcher,
    caches: caches::CacheRefresh,
    dry_runs: Arc<dryrun::DryRuns>,
}

impl Broker {
    /// Builds a broker over `pool` that reads the process's kinds from `catalog` (kept fresh
    /// by the process's `converge_kinds::CatalogFollower`, not by the broker). Nothing runs
    /// until [`Broker::run`].
    pub fn new(pool: PgPool, cfg: BrokerConfig, catalog: KindCatalog) -> Self {
        let draining = CancellationToken::new();
        // The dispatcher's wake-up, created first: the parts below it wake it (a lease came
        // back, new children, a new manifest) without naming it.
        let wake = Arc::new(Notify::new());
        let registry = Arc::new(registry::Registry::default());
        let kinds_changed = catalog.subscribe();
        let manifests = Arc::new(manifests::Manifests::new(pool.clone(), catalog));
        let configs = Arc::new(configs::Configs::new(
            pool.clone(),
            registry.clone(),
            cfg.secrets.clone(),
        ));
        let (completer, completions) = complete::Completer::new(
            pool.clone(),
            registry.clone(),
            manifests.clone(),
            wake.clone(),
        );
        let handout = handout::Handout::new(
            pool.clone(),
            registry.clone(),
            completions.clone(),
            manifests.clone(),
            wake.clone(),
            KEEPALIVE_ROUND,
        );
        let (dispatcher, dispatch) = dispatch::Dispatcher::new(
            dispatch::DispatchOptions {
                broker_id: cfg.broker_id.clone(),
                shards: cfg.shards,
                topology: cfg.topology.clone(),
                claim_batch: cfg.claim_batch,
                failsafe_poll: cfg.failsafe_poll,
            },
            pool.clone(),
            dispatch::Parts {
                registry: registry.clone(),
                manifests: manifests.clone(),
                completions: completions.clone(),
                handout: handout.clone(),
                configs: configs.clone(),
            },
            wake.clone(),
            draining.clone(),
        );
        let dry_runs = Arc::new(dryrun::DryRuns::new(
            pool.clone(),
            cfg.broker_id.clone(),
            registry.clone(),
            manifests.clone(),
            configs.clone(),
        ));
        let revocations = Arc::new(revoke::Revocations::new(
            pool.clone(),
            registry.clone(),
            wake.clone(),
        ));
        let caches = caches::CacheRefresh::new(
            pool.clone(),
            kinds_changed,
            configs.clone(),
            revocations,
            dry_runs.clone(),
            wake,
            cfg.cache_refresh,
        );
        let service = service::Workers::new(
            service::ServiceOptions {
                broker_id: cfg.broker_id.clone(),
                default_max_inflight: cfg.default_max_inflight,
                subscribe_timeout: cfg.subscribe_timeout,
                max_message_bytes: cfg.max_message_bytes,
                auth: cfg.auth.clone(),
                max_kinds_per_stream: cfg.max_kinds_per_stream,
            },
            pool.clone(),
            service::Parts {
                registry: registry.clone(),
                configs,
                completions: completions.clone(),
                handout,
                manifests,
                dispatch: dispatch.clone(),
                dry_runs: dry_runs.clone(),
            },
            draining.clone(),
        );
        Broker {
            inner: Arc::new(Inner {
                pool,
                cfg,
                registry,
                completions,
                dispatch,
                service,
                loops: std::sync::Mutex::new(Some(Loops {
                    completer,
                    dispatcher,
                    caches,
                    dry_runs,
                })),
                draining,
            }),
        }
    }

    /// The broker's settings.
    pub fn config(&self) -> &BrokerConfig {
        &self.inner.cfg
    }

    /// Hints the dispatcher that work may be claimable (in-process twin of `work_ready`).
    pub fn wake(&self) {
        self.inner.dispatch.wake();
    }

    /// Registers a hint woken whenever results land in the outbox (so an in-process drainer
    /// need not wait for the coalesced `outbox_ready` NOTIFY). Only the first call counts.
    pub fn set_outbox_hook(&self, notify: Arc<Notify>) {
        self.inner.completions.set_outbox_hook(notify);
    }

    /// Registers a hint woken whenever a composite's result lands in the outbox, for an
    /// in-process express drainer. Only the first call counts.
    pub fn set_express_hook(&self, notify: Arc<Notify>) {
        self.inner.completions.set_express_hook(notify);
    }

    /// The handle the dispatcher waits on; other components may wake it.
    pub fn dispatch_notify(&self) -> Arc<Notify> {
        self.inner.dispatch.notify()
    }

    /// Number of tasks currently handed out by this broker.
    pub fn inflight(&self) -> usize {
        self.inner.registry.inflight_count()
    }

    /// The connected workers, for the process's membership loop to publish.
    pub fn roster(&self) -> Arc<dyn converge_engine::membership::Roster> {
        self.inner.registry.clone()
    }

    /// Runs the broker's loops until `shutdown` fires, then drains: sends `Drain` to every
    /// stream, waits up to `shutdown_drain` for in-flight results, releases what is left.
    /// Keep the gRPC server running until this returns, so results can still arrive, and the
    /// process's `cluster_members` row stamped (its leases are released by then).
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let Loops {
            completer,
            dispatcher,
            caches,
            dry_runs,
        } = self
            .inner
            .loops
            .lock()
            .expect("broker loops lock poisoned")
            .take()
            .ok_or_else(|| Error::Protocol("broker is already running".into()))?;
        let loops = CancellationToken::new();
        let completer = tokio::spawn(completer.run());
        let dispatcher = tokio::spawn(dispatcher.run(loops.clone()));
        let listener = tokio::spawn(caches.run(loops.clone()));
        let dry_runs = tokio::spawn(dry_runs.run(loops.clone()));

        shutdown.cancelled().await;
        self.drain().await;
        loops.cancel();
        let _ = dispatcher.await;
        let _ = listener.await;
        let _ = dry_runs.await;
        completer.abort();
        Ok(())
    }

    /// Releases every task claimed ahead of a free slot (see [`ahead`]).
    async fn release_ahead(&self) {
        let ahead = self.inner.registry.take_all_ahead();
        if ahead.is_empty() {
            return;
        }
        if let Err(e) = db::queue::lease_release(&self.inner.pool, &ahead).await {
            tracing::warn!(error = %e, count = ahead.len(), "could not release tasks claimed ahead; their leases will lapse");
        }
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
        // Tasks claimed ahead never reached a worker: back to the queue at once, for the
        // brokers that stay.
        self.release_ahead().await;
        tracing::info!(inflight = self.inflight(), "draining in-flight tasks");
        while self.inflight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // A claim pass under way when the drain began may have held a few more.
        self.release_ahead().await;
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
        while inner.completions.pending() > 0 && tokio::time::Instant::now() < flush_until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Nothing more can be accepted (the leases are released): end every stream, so its
        // worker moves to another broker and the gRPC server can finish its shutdown. New
        // streams are already refused while draining.
        inner
            .registry
            .close_all(&Status::unavailable("broker is shutting down"));
    }
}

/// The tonic trait, delegated to the sessions' part (the public service type stays
/// `WorkerServiceServer<Broker>`).
#[tonic::async_trait]
impl pb::worker_service_server::WorkerService for Broker {
    type WorkStreamStream = registry::Outbound;

    async fn work_stream(
        &self,
        req: Request<Streaming<pb::WorkStreamClientMsg>>,
    ) -> std::result::Result<Response<Self::WorkStreamStream>, Status> {
        self.inner.service.work_stream(req).await
    }

    async fn get_provider_config(
        &self,
        req: Request<pb::GetProviderConfigRequest>,
    ) -> std::result::Result<Response<pb::GetProviderConfigResponse>, Status> {
        self.inner.service.get_provider_config(req).await
    }

    async fn list_descendants(
        &self,
        req: Request<pb::ListDescendantsRequest>,
    ) -> std::result::Result<Response<pb::ListDescendantsResponse>, Status> {
        self.inner.service.list_descendants(req).await
    }
}

/// The WorkerService as tonic serves it: [`wire::mirror_compression`] (headers only), then
/// [`authz::Authenticated`], then the generated server that decodes messages.
pub type GrpcService = tonic::service::interceptor::InterceptedService<
    authz::Authenticated<pb::worker_service_server::WorkerServiceServer<Broker>>,
    wire::MirrorCompression,
>;

/// The tonic service for `broker`: every request authenticated from its headers before
/// anything of its body is read or decoded, the message size limit of its config both ways,
/// and gzip accepted from any worker and sent to the workers that send it (plain frames
/// still work).
pub fn grpc_service(broker: &Broker) -> GrpcService {
    use tonic::codec::CompressionEncoding::Gzip;
    let limit = broker.config().max_message_bytes;
    let server = pb::worker_service_server::WorkerServiceServer::new(broker.clone())
        .max_decoding_message_size(limit)
        .max_encoding_message_size(limit)
        .accept_compressed(Gzip)
        .send_compressed(Gzip);
    let server = authz::Authenticated::new(server, broker.config().auth.clone())
        .with_bad_credentials_limit(broker.config().bad_credentials_limit.clone());
    tonic::service::interceptor::InterceptedService::new(
        server,
        wire::mirror_compression as wire::MirrorCompression,
    )
}

/// How often the broker pings each connection (HTTP/2 PING), and how long it waits for the
/// answer before it drops the connection. A worker that stops answering (SIGSTOP, a frozen
/// VM, a black-holed network) therefore loses its streams, and they their leases, within
/// [`KEEPALIVE_INTERVAL`] + [`KEEPALIVE_TIMEOUT`] instead of the lease staleness window.
/// Every SDK answers pings from its transport (not its handlers), so a busy worker is safe.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// See [`KEEPALIVE_INTERVAL`].
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection whose peer stopped sending is dropped at most this long after its last byte
/// (a PING after [`KEEPALIVE_INTERVAL`] of silence, [`KEEPALIVE_TIMEOUT`] for its answer),
/// plus a second for the session to see it: a stream still open this long after one of its
/// tasks hit its deadline has answered a PING sent after the deadline.
const KEEPALIVE_ROUND: Duration =
    Duration::from_secs(KEEPALIVE_INTERVAL.as_secs() + KEEPALIVE_TIMEOUT.as_secs() + 1);
/// Concurrent HTTP/2 streams one connection may open (a worker needs one WorkStream plus a
/// few unary calls); a peer cannot make the broker hold unbounded stream state.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 128;

/// A gRPC server router with the WorkerService, `grpc.health.v1`, and server reflection that
/// lists both, as `grpc.reflection.v1` and as `v1alpha` (what older grpcurl builds ask).
/// Health follows `health`, the process's readiness: SERVING while it serves, NOT_SERVING
/// while it drains or cannot reach PostgreSQL (for the server as a whole, `""`, and for the
/// WorkerService), flipped at each change until the process ends.
pub fn grpc_router(
    broker: &Broker,
    health: converge_engine::health::Health,
) -> tonic::transport::server::Router {
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection_v1 = reflection()
        .build_v1()
        .expect("the embedded descriptor sets are valid");
    let reflection_v1alpha = reflection()
        .build_v1alpha()
        .expect("the embedded descriptor sets are valid");
    let (reporter, health_service) = tonic_health::server::health_reporter();
    let mut readiness = health.subscribe();
    tokio::spawn(async move {
        loop {
            let status = if readiness.borrow_and_update().serving() {
                tonic_health::ServingStatus::Serving
            } else {
                tonic_health::ServingStatus::NotServing
            };
            reporter.set_service_status("", status).await;
            reporter
                .set_service_status(
                    <pb::worker_service_server::WorkerServiceServer<Broker> as tonic::server::NamedService>::NAME,
                    status,
                )
                .await;
            // Ends with the process's Health (every sender dropped).
            if readiness.changed().await.is_err() {
                break;
            }
        }
    });
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(grpc_service(broker))
}
