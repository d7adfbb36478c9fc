//! `hello-worker`: serves the `hello` kind until SIGINT or SIGTERM, then drains.
//!
//! Configuration is the SDK's environment (`BROKER_ADDR`, `WORKER_MAX_PARALLEL`,
//! `WORKER_DRAIN_TIMEOUT`, `WORKER_KINDS`, `WORKER_NAME`, `LOG_LEVEL`, `LOG_FORMAT`), plus
//! `HELLO_LOG` (append an execution log, for tests).

use converge_sdk::Registry;
use hello_worker::Hello;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    converge_sdk::init_logging()?;
    converge_sdk::serve(
        Registry::new().with(Hello::from_env()),
        converge_sdk::shutdown_signal(),
    )
    .await?;
    Ok(())
}
