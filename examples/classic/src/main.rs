//! `classic-worker`: serves the classic demo's kinds (`classicbom`, `account`, `vpc`, `tgw`,
//! `route`) until SIGINT or SIGTERM, then drains.
//!
//! Configuration is the SDK's environment (`BROKER_ADDR`, `WORKER_MAX_PARALLEL`,
//! `WORKER_DRAIN_TIMEOUT`, `WORKER_KINDS`, `WORKER_NAME`, `LOG_LEVEL`, `LOG_FORMAT`), plus
//! `CLASSIC_LATENCY_MS` (simulated provisioning latency of every leaf, default 0).

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    converge_sdk::init_logging()?;
    let latency = classic_worker::latency_from_env()?;
    tracing::info!(
        latency_ms = latency.as_millis(),
        "serving the classic demo kinds"
    );
    converge_sdk::serve(classic_worker::registry(latency), shutdown_signal()).await?;
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM (what Kubernetes sends before killing a pod).
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = ctrl_c => tracing::info!("Ctrl-C received"),
        () = term => tracing::info!("SIGTERM received"),
    }
}
