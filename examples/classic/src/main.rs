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
    converge_sdk::serve(
        classic_worker::registry(latency),
        converge_sdk::shutdown_signal(),
    )
    .await?;
    Ok(())
}
