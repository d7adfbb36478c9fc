//! `conformance-worker`: the Rust SDK form of the conformance suite. Serves every kind in
//! `conformance/KINDS.md` until SIGINT or SIGTERM, then drains and exits 0.
//!
//! Environment: the SDK's (`BROKER_ADDR`, `WORKER_MAX_PARALLEL`, `WORKER_NAME`,
//! `WORKER_DRAIN_TIMEOUT`, `LOG_LEVEL`, `LOG_FORMAT`) plus `CONFORMANCE_FORM` and
//! `CONFORMANCE_LOG`.

use std::sync::Arc;

use converge_conformance_worker::{EventLog, registry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    converge_sdk::init_logging()?;
    let log = Arc::new(EventLog::from_env()?);
    converge_sdk::serve(registry(log), converge_sdk::shutdown_signal()).await?;
    Ok(())
}
