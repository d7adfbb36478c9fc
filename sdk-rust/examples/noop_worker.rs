//! `noop_worker`: serves one kind (`NOOP_KIND`, version 1) with a handler that does nothing
//! and returns an empty outcome, so a benchmark measures the SDK and the broker rather than
//! handler code (the Rust counterpart of `sdk-go/cmd/noop-worker`). It reads the standard
//! worker environment (`BROKER_ADDR`, `WORKER_MAX_PARALLEL`, ...) and drains on SIGTERM or
//! SIGINT.
//!
//! ```sh
//! cargo build --release -p converge-sdk --example noop_worker
//! converge-bench --n 20000 --workers 1 --preload --worker-cmd target/release/examples/noop_worker
//! ```

use converge_sdk::{HandlerError, KindVersion, Outcome, Provider, ReactionRequest, Registry};

struct Noop(String);

impl Provider for Noop {
    fn kind(&self) -> KindVersion {
        KindVersion::new(self.0.clone(), 1)
    }

    async fn work(&self, _req: ReactionRequest) -> Result<Outcome, HandlerError> {
        Ok(Outcome::default())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let kind = std::env::var("NOOP_KIND").unwrap_or_default();
    if kind.trim().is_empty() {
        return Err("NOOP_KIND is required but not set".into());
    }
    converge_sdk::init_logging()?;
    converge_sdk::serve(
        Registry::new().with(Noop(kind.trim().to_string())),
        converge_sdk::shutdown_signal(),
    )
    .await?;
    Ok(())
}
