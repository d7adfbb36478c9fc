//! Wires one `converge` process: its listeners, migrations, its membership of the cluster
//! (`cluster_members`), its one kind catalog (read by both duties, followed by one LISTEN),
//! then the duties its ROLE names (control: HTTP API, drainer, reaper; broker:
//! WorkerService), and an orderly shutdown: the process reports itself not ready (`/readyz`
//! 503, gRPC Health NOT_SERVING), the broker drains while the HTTP listener still answers
//! probes, then the listeners close, and the process leaves the cluster last.

use std::{net::SocketAddr, sync::Arc};

use anyhow::Context;
use converge_broker::{Broker, BrokerConfig};
use tokio::{net::TcpListener, task::JoinSet};
use tokio_util::sync::CancellationToken;

use converge_auth::{
    Authenticator,
    listen::{self, Budget, GuardedListener},
    tls::{self, ServerTls, TlsFiles},
};

use converge_control::{
    app::{
        self,
        reads::Reads,
        runtime::Runtime,
        watch::{WatchConfig, WatchHub},
    },
    config::{AuthMode, Config},
    http::{
        self,
        ratelimit::{ClientAddr, RateLimits},
    },
};
use converge_engine::{
    db::{self, cluster::Member},
    drainer::{Drainer, DrainerConfig},
    health::Health,
    membership::Membership,
    reaper::{Reaper, ReaperConfig},
    sealing,
    topology::{Shards, Topology},
};
use converge_kinds::{CatalogFollower, KindCatalog};

/// How often the TLS files are checked for changes.
const RELOAD_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// How long the listeners and loops get to stop once the broker has drained, before what
/// is left is aborted.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// How often the kind catalog re-reads the manifests' content hashes whatever it hears on
/// `kind_manifest_changed` (a failsafe: a missed NOTIFY costs at most this long).
const CATALOG_FAILSAFE: std::time::Duration = std::time::Duration::from_secs(15);
/// How often AUTH_FILE is re-read whatever its directory's change events say: it is watched
/// (`converge_auth::watch`), so this only bounds a change on a filesystem that sends no
/// events (NFS, some FUSE mounts).
const AUTH_FAILSAFE: std::time::Duration = std::time::Duration::from_secs(5);
/// How often the tokens minted through the API are re-read whatever `api_tokens_changed`
/// says (a failsafe: a revoke's NOTIFY reaches every pod within milliseconds).
const TOKENS_FAILSAFE: std::time::Duration = std::time::Duration::from_secs(5);

/// The security material of one process: principals and TLS configurations, each kept
/// fresh from its files by a task of its own.
struct Security {
    auth: Option<Arc<Authenticator>>,
    http_tls: Option<Arc<ServerTls>>,
    grpc_tls: Option<Arc<ServerTls>>,
}

impl Security {
    fn load(cfg: &Config) -> anyhow::Result<Security> {
        cfg.check_exposure()?;
        let auth = match &cfg.auth {
            AuthMode::File(path) => {
                let auth = Authenticator::load(path)?;
                if let Some(settings) = &cfg.oidc {
                    // The keys are fetched by `keep_fresh`: an issuer down at boot does not
                    // stop the boot (its tokens are refused with 503 until it answers).
                    let verifier = converge_auth::oidc::Verifier::new(settings.clone())
                        .map_err(|e| anyhow::anyhow!("invalid OIDC_CA_FILE: {e}"))?;
                    tracing::info!(
                        issuer = %settings.issuer,
                        audiences = ?settings.audiences,
                        roles_claim = %settings.roles_claim,
                        ui_sign_in = settings.client_id.is_some(),
                        "people sign in through OIDC"
                    );
                    auth.set_oidc(verifier);
                }
                Some(auth)
            }
            AuthMode::NoneExplicit => {
                tracing::warn!(
                    "AUTH=none: the API and the WorkerService accept anyone who can reach them"
                );
                None
            }
            AuthMode::Loopback => None,
        };
        let (http_tls, grpc_tls) = match &cfg.tls {
            None => (None, None),
            Some(files) => {
                // The HTTP API authenticates with tokens; only the broker asks for client
                // certificates.
                let http = TlsFiles {
                    client_ca: None,
                    ..files.clone()
                };
                (
                    Some(ServerTls::load(http, tls::ALPN_HTTP)?),
                    Some(ServerTls::load(files.clone(), tls::ALPN_GRPC)?),
                )
            }
        };
        Ok(Security {
            auth,
            http_tls,
            grpc_tls,
        })
    }

    fn keep_fresh(&self, tasks: &mut JoinSet<()>, stop: &CancellationToken) {
        if let Some(a) = &self.auth {
            tasks.spawn(a.clone().keep_fresh(AUTH_FAILSAFE, stop.clone()));
            if let Some(v) = a.oidc() {
                tasks.spawn(v.clone().keep_fresh(stop.clone()));
            }
        }
        for t in [&self.http_tls, &self.grpc_tls].into_iter().flatten() {
            tasks.spawn(t.clone().keep_fresh(RELOAD_EVERY, stop.clone()));
        }
    }
}

/// Serves `app` on `listener` (over TLS when `tls` is set) until `stop`.
fn serve_http(
    tasks: &mut JoinSet<()>,
    listener: GuardedListener,
    app: axum::Router,
    tls: Option<Arc<ServerTls>>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    match tls {
        Some(tls) => {
            let listener = tls::accept_tls(listener, tls, stop.clone())?;
            spawn_serve(tasks, listener, app, stop);
        }
        None => spawn_serve(tasks, listener, app, stop),
    }
    Ok(())
}

fn spawn_serve<L>(tasks: &mut JoinSet<()>, listener: L, app: axum::Router, stop: CancellationToken)
where
    L: axum::serve::Listener<Addr = SocketAddr>,
    ClientAddr: for<'a> axum::extract::connect_info::Connected<axum::serve::IncomingStream<'a, L>>,
{
    // Each request carries its peer's address (the per-address rate limit keys on it).
    let app = app.into_make_service_with_connect_info::<ClientAddr>();
    tasks.spawn(async move {
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
        {
            tracing::error!(error = %e, "HTTP server failed");
        }
    });
}

async fn bind(addr: SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen for {what} on {addr}"))
}

/// A failed sign-in to PostgreSQL as the boot reports it: a password source's own error
/// alone (it names its setting: DATABASE_PASSWORD_COMMAND, DB_IAM_AUTH, DATABASE_URL's
/// sslmode), the database's under "cannot connect". Shared by `serve`, `migrate` and
/// `secrets`.
pub fn signin_error(e: db::ConnectError) -> anyhow::Error {
    signin_error_of("DATABASE_URL", e)
}

/// [`signin_error`] for the pool of the URL setting `url_var` (DATABASE_READ_URL's too).
fn signin_error_of(url_var: &str, e: db::ConnectError) -> anyhow::Error {
    match e {
        db::ConnectError::Password(p) => anyhow::Error::new(p),
        db @ db::ConnectError::Db(_) => {
            anyhow::Error::new(db).context(format!("cannot connect to PostgreSQL ({url_var})"))
        }
    }
}

/// Runs until `shutdown` fires, then stops in order: HTTP, broker drain, gRPC, sweepers.
pub async fn run(cfg: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let started_at = chrono::Utc::now();
    let url = cfg.database_url.clone().context(
        "DATABASE_URL is required (or run `converge dev`, which starts its own PostgreSQL)",
    )?;
    let settings = db::EngineSettings {
        retry_base: cfg.retry_base,
        retry_max: cfg.retry_max,
        warm_up: true,
    };
    let security = Security::load(&cfg)?;
    // The keys of secrets at rest: a key that cannot be read stops the boot, before any
    // value could be stored unsealed or a sealed one go out unopened.
    let secrets = sealing::Keyring::load(&cfg.secrets)
        .await
        .context("loading the secrets keys")?;
    match secrets.current_id() {
        Some(id) => tracing::info!(
            key_id = id,
            old_keys = secrets.ids().len() - 1,
            "provider config secrets are sealed at rest"
        ),
        None => tracing::warn!(
            "no secrets key ({} / {}): provider configs with writeOnly values are refused",
            sealing::KEY_FILE_VAR,
            sealing::KEY_COMMAND_VAR
        ),
    }
    // Listen first: a port handed to this process is taken before it opens any connection
    // of its own (the kernel could give one of those that very port as its local end), and a
    // port conflict fails before the database is touched.
    let http_listener = if cfg.role.control() {
        bind(cfg.listen_addr, "the HTTP API (LISTEN_ADDR)").await?
    } else {
        bind(cfg.health_addr, "probes (HEALTH_ADDR)").await?
    };
    let broker_listener = if cfg.role.broker() {
        Some(bind(cfg.broker_listen_addr, "the broker (BROKER_LISTEN_ADDR)").await?)
    } else {
        None
    };
    let mut addresses = serde_json::Map::new();
    let http_name = if cfg.role.control() { "http" } else { "health" };
    addresses.insert(
        http_name.into(),
        http_listener.local_addr()?.to_string().into(),
    );
    if let Some(l) = &broker_listener {
        addresses.insert("grpc".into(), l.local_addr()?.to_string().into());
    }
    // Migrations and engine files first, on a connection of their own: the serving pool's
    // connections then all open on the engine functions they warm up (`db::EngineSettings`).
    {
        let (migrating, _) = db::connect_signed_in(
            &url,
            1,
            &db::EngineSettings {
                warm_up: false,
                ..settings.clone()
            },
            &cfg.signin(),
        )
        .await
        .map_err(signin_error)?;
        db::migrate(&migrating)
            .await
            .context("applying migrations failed")?;
        migrating.close().await;
    }
    tracing::info!(role = ?cfg.role, "migrations applied");
    let (pool, password_refresher) =
        db::connect_signed_in(&url, cfg.db_max_connections, &settings, &cfg.signin())
            .await
            .map_err(signin_error)?;

    let loops = CancellationToken::new();
    let mut tasks = JoinSet::new();
    security.keep_fresh(&mut tasks, &loops);
    if let Some(r) = password_refresher {
        tracing::info!("the database password comes from {}", r.setting());
        tasks.spawn(r.run(loops.clone()));
    }
    // The tokens minted through the API join the principals (authentication on only): read
    // once before any door opens, then followed (`app::tokens`).
    if let Some(auth) = &security.auth {
        app::tokens::reload(&pool, auth)
            .await
            .context("loading the API tokens (api_tokens)")?;
        tasks.spawn(
            app::tokens::TokenFollower::new(pool.clone(), auth.clone(), TOKENS_FAILSAFE)
                .run(loops.clone()),
        );
    }
    // Readiness (`/readyz`, gRPC Health): not while draining or while PostgreSQL is gone.
    let health = Health::new();
    tasks.spawn(health.clone().watch_database(pool.clone(), loops.clone()));
    // The API's read replica, when there is one: a lazy pool (a replica down at boot is not
    // fatal, the checks find it later) and a loop measuring its lag (`app::reads`).
    let reads = match (&cfg.database_read_url, cfg.role.control()) {
        (Some(read_url), true) => {
            // Signed in as the primary's pool is: a password source that cannot answer for
            // the replica stops the boot, naming its setting.
            let (replica, refresher) =
                Reads::connect_replica(read_url, cfg.db_max_connections, &cfg.signin())
                    .await
                    .map_err(|e| signin_error_of("DATABASE_READ_URL", e))?;
            if let Some(r) = refresher {
                tracing::info!("the read replica's password comes from {}", r.setting());
                tasks.spawn(r.run(loops.clone()));
            }
            let reads = Reads::with_replica(replica, cfg.read_max_lag);
            tasks.spawn(reads.clone().keep_checking(pool.clone(), loops.clone()));
            tracing::info!(max_lag = ?cfg.read_max_lag, "lists and feeds may read from DATABASE_READ_URL");
            reads
        }
        _ => Reads::primary_only(),
    };
    let nofile = listen::raise_nofile();
    let budget = Budget::new(cfg.connection_limits(nofile), loops.clone());
    tracing::info!(
        nofile,
        max_connections = budget.limits().max,
        per_peer = budget.limits().max_per_peer,
        idle_timeout = ?budget.limits().idle_timeout,
        "connection budget"
    );
    let http_listener = GuardedListener::new(http_listener, budget.clone());
    let broker_listener = broker_listener.map(|l| GuardedListener::new(l, budget.clone()));
    // The process's one kind catalog: loaded once before any duty reads it, then followed by
    // one LISTEN. The broker and the API share it (with ROLE=all, one copy of every kind).
    let catalog = KindCatalog::new();
    catalog
        .reload(&pool)
        .await
        .context("loading kind manifests")?;
    tasks.spawn(
        CatalogFollower::new(pool.clone(), catalog.clone(), CATALOG_FAILSAFE).run(loops.clone()),
    );
    // The rate limits: one per-address limiter shared by the HTTP API and the broker's
    // bad-credential refusals, so one address has one budget across both doors.
    let per_address = cfg
        .rate_limit_per_address
        .map(converge_auth::ratelimit::KeyedLimiter::new);
    if let Some(l) = &per_address {
        tasks.spawn(l.clone().keep_swept(loops.clone()));
    }
    let limits = RateLimits::new(cfg.rate_limit_per_principal, per_address.clone());
    limits.keep_swept(&mut tasks, &loops);
    if cfg.rate_limit_per_principal.is_some() || per_address.is_some() {
        tracing::info!(
            per_principal = ?cfg.rate_limit_per_principal.map(|r| r.to_string()),
            per_address = ?cfg.rate_limit_per_address.map(|r| r.to_string()),
            "rate limits"
        );
    }
    // One id per process start: the cluster_members row's, and the broker's on its claims.
    let member_id = BrokerConfig::unique_id(&hostname());
    // Dynamic sharding: this process's shard ranges, re-read from live membership. Every
    // loop below that works shards reads them on each pass.
    let topology = Topology::new(member_id.clone());
    tasks.spawn(
        topology
            .clone()
            .follow(pool.clone(), cfg.member_dead_after, loops.clone()),
    );
    let broker = cfg.role.broker().then(|| {
        Broker::new(
            pool.clone(),
            BrokerConfig {
                broker_id: member_id.clone(),
                topology: Some(topology.clone()),
                claim_batch: cfg.claim_batch,
                failsafe_poll: cfg.broker_failsafe,
                shutdown_drain: cfg.shutdown_drain,
                max_message_bytes: cfg.grpc_max_message_bytes,
                auth: security.auth.clone(),
                max_kinds_per_stream: cfg.max_kinds_per_stream,
                bad_credentials_limit: per_address.clone(),
                secrets: secrets.clone(),
                ..BrokerConfig::default()
            },
            catalog.clone(),
        )
    });
    let mut membership = Membership::new(
        pool.clone(),
        Member {
            id: member_id,
            role: cfg.role,
            version: http::health::build_version().into(),
            host: hostname(),
            pid: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
            addresses: addresses.into(),
            started_at,
        },
    )
    .with_dead_after(cfg.member_dead_after)
    .with_gc_after(cfg.member_gc_after);
    if let Some(b) = &broker {
        membership = membership.with_roster(b.roster(), b.dispatch_notify());
        // A claim range that grew may hold claimable work at once.
        let (moved, dispatch, stop) = (topology.moved(), b.dispatch_notify(), loops.clone());
        tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = moved.notified() => dispatch.notify_one(),
                }
            }
        });
    }
    // Stopped with the other loops, after the broker drained: the row outlives its leases.
    tasks.spawn(membership.run(loops.clone()));

    let http_stop = CancellationToken::new();
    let app = if cfg.role.control() {
        // DRAINERS drainers over disjoint shard slices (a drain is one transaction at a time;
        // more drainers let several run at once when the database has cores to spare).
        let hub = Arc::new(tokio::sync::Notify::new());
        let mut handles = Vec::new();
        let drainers = cfg.drainers.clamp(1, 16);
        for slice in 0..drainers {
            let (drainer, handle) = Drainer::new(
                pool.clone(),
                DrainerConfig {
                    shards: Shards::Control {
                        topology: topology.clone(),
                        slice,
                        of: drainers,
                    },
                    batch: cfg.drain_batch,
                    failsafe: cfg.drainer_failsafe,
                    express: false,
                },
                broker.as_ref().map(Broker::dispatch_notify),
            );
            handles.push(handle);
            tasks.spawn(drainer.run(loops.clone()));
        }
        // One express drainer over every shard: composites' results only, woken by the
        // broker the moment one lands.
        let (express, express_handle) = Drainer::new(
            pool.clone(),
            DrainerConfig {
                shards: Shards::Control {
                    topology: topology.clone(),
                    slice: 0,
                    of: 1,
                },
                batch: cfg.drain_batch,
                failsafe: cfg.drainer_failsafe,
                express: true,
            },
            broker.as_ref().map(Broker::dispatch_notify),
        );
        tasks.spawn(express.run(loops.clone()));
        if let Some(b) = &broker {
            b.set_outbox_hook(hub.clone());
            b.set_express_hook(express_handle.notify());
        }
        // Fan the co-located broker's "results landed" hint out to every drainer.
        let (fan_hub, fan_stop) = (hub.clone(), loops.clone());
        tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = fan_stop.cancelled() => break,
                    _ = fan_hub.notified() => handles.iter().for_each(|h| h.wake()),
                }
            }
        });
        let reaper = Reaper::new(
            pool.clone(),
            ReaperConfig {
                shards: Shards::Control {
                    topology: topology.clone(),
                    slice: 0,
                    of: 1,
                },
                every: cfg.reaper_every,
                stale_after: cfg.lease_stale_after,
                requeue_after: cfg.retry_base.max(std::time::Duration::from_secs(10)),
                unclaimed_delete_after: cfg.unclaimed_delete_after,
                events_retention: cfg.events_retention,
                // The membership loop's boot grace, for the same reason: a restarted
                // converge's workers resume their leases before anything takes them away.
                boot_grace: cfg.member_dead_after,
            },
        );
        tasks.spawn(reaper.run(loops.clone()));

        // The watches' one event-log tail. Its streams end with the HTTP server (an open
        // stream would otherwise hold the graceful shutdown for ever).
        let watches = WatchHub::start(
            pool.clone(),
            WatchConfig {
                max_watchers: cfg.max_watchers,
            },
            http_stop.clone(),
        );
        let state = http::AppState {
            applies: app::apply_coalescer::ApplyCoalescer::start(pool.clone()),
            pool: pool.clone(),
            catalog,
            dispatch_hint: broker.as_ref().map(Broker::dispatch_notify),
            auth: security.auth.clone(),
            watches,
            max_bundle_bytes: cfg.max_bundle_bytes,
            secrets: secrets.clone(),
            runtime: Runtime {
                reads: reads.clone(),
                health: health.clone(),
                member_liveness: cfg.member_dead_after,
                limits,
                https: security.http_tls.is_some(),
                plan_dry_run_timeout: cfg.plan_dry_run_timeout,
            },
        };
        http::router(state, cfg.max_body_bytes)
    } else {
        http::health::probe_router(pool.clone(), health.clone())
    };
    let http_listener_addr = http_listener.local_addr()?;
    let broker_addr = match &broker_listener {
        Some(l) => Some(l.local_addr()?),
        None => None,
    };
    tracing::info!(
        addr = %http_listener_addr,
        tls = security.http_tls.is_some(),
        auth = security.auth.is_some(),
        "{}",
        if cfg.role.control() { "HTTP API listening" } else { "probes listening" }
    );
    serve_http(
        &mut tasks,
        http_listener,
        app,
        security.http_tls.clone(),
        http_stop.clone(),
    )?;

    let grpc_stop = CancellationToken::new();
    let mut broker_task = None;
    if let (Some(b), Some(listener)) = (&broker, broker_listener) {
        tracing::info!(
            addr = %listener.local_addr()?,
            tls = security.grpc_tls.is_some(),
            mtls = security.grpc_tls.as_ref().is_some_and(|t| t.verifies_clients()),
            auth = security.auth.is_some(),
            "broker gRPC listening"
        );
        let router = converge_broker::grpc_router(b, health.clone());
        let stop = grpc_stop.clone();
        if let Some(tls) = security.grpc_tls.clone() {
            let incoming = tls::accept_tls(listener, tls, stop.clone())?.into_stream();
            tasks.spawn(async move {
                if let Err(e) = router
                    .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
                    .await
                {
                    tracing::error!(error = %e, "gRPC server failed");
                }
            });
        } else {
            tasks.spawn(async move {
                let incoming = listener.into_stream();
                if let Err(e) = router
                    .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
                    .await
                {
                    tracing::error!(error = %e, "gRPC server failed");
                }
            });
        }
        broker_task = Some(tokio::spawn(b.clone().run(shutdown.clone())));
    }
    if cfg.banner {
        crate::banner::print(&crate::banner::Doors {
            http: http_listener_addr,
            http_tls: security.http_tls.is_some(),
            broker: broker_addr,
            grpc_tls: security.grpc_tls.is_some(),
            auth: security.auth.is_some(),
        });
    }

    shutdown.cancelled().await;
    tracing::info!("shutting down");
    // Not ready from now on: load balancers and workers stop sending, while the HTTP
    // listener keeps answering (probes: 503) until the broker drained.
    health.start_draining();
    if let Some(t) = broker_task {
        match t.await {
            Ok(Err(e)) => tracing::error!(error = %e, "broker stopped with an error"),
            Err(e) => tracing::error!(error = %e, "broker task failed"),
            Ok(Ok(())) => {}
        }
    }
    http_stop.cancel();
    grpc_stop.cancel();
    loops.cancel();
    // Every loop and server ends on its own once cancelled; a connection that keeps a
    // server's graceful shutdown waiting (a client holding a request open) must not keep
    // the process alive past its orchestrator's patience, so what is left after
    // STOP_GRACE is aborted.
    let stopped = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(STOP_GRACE, stopped).await.is_err() {
        tracing::warn!(
            left = tasks.len(),
            grace = ?STOP_GRACE,
            "tasks still running after the stop grace; aborting them"
        );
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
    pool.close().await;
    tracing::info!("stopped");
    Ok(())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "converge".into())
}
