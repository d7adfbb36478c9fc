//! converge-sdk: write converge providers in Rust.
//!
//! Implement [`Provider`] for each (kind, kind_version) you serve, collect them in a
//! [`Registry`] and call [`serve`] (configuration from the environment) or [`run_worker`]
//! (explicit [`WorkerConfig`]). The runtime dials the broker's `WorkerService`, subscribes,
//! runs tasks with bounded concurrency, keeps results until the broker acks them, heartbeats
//! running tasks, reports readiness flips, applies provider-config pushes and reconnects with
//! backoff; see DESIGN §4 for the stream rules it follows.
//!
//! ```no_run
//! use converge_sdk::{HandlerError, KindVersion, Outcome, Provider, ReactionRequest, Registry};
//!
//! struct Hello;
//!
//! impl Provider for Hello {
//!     fn kind(&self) -> KindVersion {
//!         KindVersion::new("hello", 1)
//!     }
//!
//!     async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
//!         Ok(Outcome::status(serde_json::json!({ "message": format!("hello, {}!", req.resource.name) })))
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! converge_sdk::init_logging()?;
//! converge_sdk::serve(Registry::new().with(Hello), async {
//!     let _ = tokio::signal::ctrl_c().await;
//! })
//! .await?;
//! # Ok(())
//! # }
//! ```

mod config;
mod convert;
mod error;
mod json;
mod logging;
mod merge;
mod provider;
mod runtime;
mod signal;
pub mod testing;
mod types;

pub use bytes::Bytes;
pub use config::{
    DEFAULT_DRAIN_TIMEOUT, DEFAULT_HEARTBEAT_EVERY, DEFAULT_MAX_PARALLEL, DEFAULT_READINESS_POLL,
    DEFAULT_RECONNECT_MAX, DEFAULT_RECONNECT_MIN, WorkerConfig,
};
/// The generated wire types of `converge.worker.v1` (for `testing::execute_task` and tests).
pub use converge_proto::pb;
pub use error::{ConfigError, HandlerError, LoggingError, WorkerError};
pub use json::Json;
pub use logging::init_logging;
pub use merge::{effective_bundle, effective_config};
pub use provider::{Provider, Registry};
pub use runtime::{run_worker, serve};
pub use signal::shutdown_signal;
pub use types::{
    CONDITION_READY, CONDITION_SYNCED, ChildSpec, Condition, DepEdge, KindVersion, Operation,
    Outcome, ProviderConfig, ProviderConfigSpec, ReactionRequest, Resource, ResourceRef, Stage,
    Transition, ValueFlow, trigger,
};
