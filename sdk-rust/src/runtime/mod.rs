//! The worker runtime: `serve` / `run_worker`, and the loops that live as long as the worker
//! (config prime, reconnecting sessions, heartbeat, readiness poll, shutdown drain).

mod backoff;
mod dial;
mod failover;
mod session;
mod state;
pub(crate) mod task;

use std::{future::Future, sync::Arc, time::Duration};

use tokio::{task::JoinSet, time::MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use self::state::Shared;
use crate::{config::WorkerConfig, error::WorkerError, provider::Registry};

/// How long cancelled handlers get to return at the end of shutdown before being aborted.
const SHUTDOWN_CANCEL_GRACE: Duration = Duration::from_secs(1);

/// Reads [`WorkerConfig::from_env`] and runs [`run_worker`] until `shutdown` resolves and the
/// drain completes. Never installs signal handlers and never exits the process: the caller
/// owns signals and exit codes.
pub async fn serve(
    providers: Registry,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), WorkerError> {
    let config = WorkerConfig::from_env()?;
    run_worker(config, providers, shutdown).await
}

/// Runs a worker: loads provider configs, then keeps one WorkStream session open to a
/// broker of [`WorkerConfig::broker_addrs`] (failing over along the list, with backoff) and
/// runs the tasks it receives.
///
/// When `shutdown` resolves the worker stops taking tasks (it tells the broker every kind is
/// unready and refuses stragglers as transient failures), waits up to
/// [`WorkerConfig::drain_timeout`] for running handlers to finish and for their results to be
/// acked, then cancels whatever still runs and returns `Ok`. Broker outages are retried
/// forever; only an unusable configuration or registry is an error.
pub async fn run_worker(
    config: WorkerConfig,
    providers: Registry,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), WorkerError> {
    config.validate()?;
    let registry = providers.validated(config.kinds.as_deref())?;
    // Reads the token and TLS files once now, so a bad path fails here, not in a retry loop.
    dial::check(&config)?;
    let shared = Arc::new(Shared::new(config, registry));
    let mut shutdown = Box::pin(shutdown);
    info!(
        brokers = ?shared.cfg.broker_addrs,
        worker = %shared.cfg.worker_name,
        kinds = ?shared.registry,
        max_parallel = shared.cfg.max_parallel,
        tls = shared.cfg.is_tls(),
        token = shared.cfg.token.is_some(),
        "worker starting"
    );
    if shared.cfg.token.is_some() && !shared.cfg.is_tls() {
        for addr in shared.cfg.broker_addrs.iter().filter(|a| !is_loopback(a)) {
            warn!(broker = %addr, "the worker token is sent over plaintext h2c to a host beyond loopback; use an https:// BROKER_ADDR");
        }
    }

    let failover = tokio::select! {
        () = &mut shutdown => {
            info!("shutdown before the provider configs were loaded");
            return Ok(());
        }
        f = session::prime(&shared) => f,
    };

    let stop = CancellationToken::new();
    let mut loops = JoinSet::new();
    loops.spawn(session::connection_loop(
        Arc::clone(&shared),
        stop.clone(),
        failover,
    ));
    loops.spawn(heartbeat_loop(Arc::clone(&shared), stop.clone()));
    loops.spawn(readiness_loop(Arc::clone(&shared), stop.clone()));

    shutdown.await;
    let (running, unacked) = shared.counts();
    info!(running, unacked, drain_timeout = ?shared.cfg.drain_timeout, "shutdown requested; draining");
    shared.begin_shutdown();
    let mut outstanding = shared.outstanding();
    // Only whether it finished matters; the borrowed value must not live across an await.
    let drained = tokio::time::timeout(shared.cfg.drain_timeout, outstanding.wait_for(|n| *n == 0))
        .await
        .is_ok();
    if !drained {
        let (running, unacked) = shared.counts();
        warn!(
            running,
            unacked, "drain timeout passed; cancelling the remaining handlers"
        );
    }
    let aborts = shared.cancel_all();
    let cancelled = aborts.len();
    if cancelled > 0 {
        // Give cancelled handlers a moment to stop cooperatively before dropping them.
        let mut live = shared.live_handlers();
        let stopped = tokio::time::timeout(SHUTDOWN_CANCEL_GRACE, live.wait_for(|n| *n == 0))
            .await
            .is_ok();
        if !stopped {
            warn!("handlers ignored cancellation; aborting them");
        }
        for a in aborts {
            a.abort();
        }
    }
    stop.cancel();
    while loops.join_next().await.is_some() {}
    info!(cancelled, "worker stopped");
    Ok(())
}

/// Whether the broker address names this host (`localhost`, 127.0.0.0/8, `[::1]`), where
/// a plaintext token crosses no network.
fn is_loopback(addr: &str) -> bool {
    let Ok(ep) = tonic::transport::Endpoint::from_shared(addr.to_string()) else {
        return false;
    };
    match ep.uri().host() {
        Some("localhost") => true,
        Some(h) => h
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

/// Every `heartbeat_every`, one coalesced heartbeat of the tasks still running.
async fn heartbeat_loop(shared: Arc<Shared>, stop: CancellationToken) {
    let period = shared.cfg.heartbeat_every;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let n = shared.heartbeat();
        if n > 0 {
            debug!(tasks = n, "heartbeat sent");
        }
    }
}

/// Every `readiness_poll`, polls each provider's `ready()`; edges become Interest frames.
async fn readiness_loop(shared: Arc<Shared>, stop: CancellationToken) {
    let period = shared.cfg.readiness_poll;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let readiness = session::poll_readiness(&shared);
        shared.update_readiness(&readiness);
    }
}

#[cfg(test)]
mod tests {
    use super::is_loopback;

    #[test]
    fn loopback_addresses_are_recognised() {
        for a in [
            "http://127.0.0.1:9090",
            "http://localhost:1",
            "http://[::1]:9090",
            "http://127.1.2.3:1",
        ] {
            assert!(is_loopback(a), "{a}");
        }
        for a in [
            "http://10.0.0.1:9090",
            "http://broker.example:9090",
            "http://[2001:db8::1]:1",
        ] {
            assert!(!is_loopback(a), "{a}");
        }
    }
}
