//! converge-sdk: write converge providers in Rust.
//!
//! Implement [`Provider`] for each (kind, kind_version) you serve, collect them in a
//! [`Registry`] and call [`serve`] (configuration from the environment) or [`run_worker`]
//! (explicit [`WorkerConfig`]). The runtime dials the broker's `WorkerService`, subscribes,
//! runs tasks with bounded concurrency, keeps results until the broker acks them, heartbeats
//! running tasks, reports readiness flips, applies provider-config pushes and reconnects with
//! backoff, failing over along a list of brokers; see DESIGN §4 for the stream rules it
//! follows.
//!
//! A kind's manifest (its spec, status and config JSON Schemas, reactions and policy) can be
//! generated from the types the handler decodes with: [`manifest::Manifest`] and
//! [`manifest::schema_of`] (schemars, draft 2020-12).
//!
//! # Environment
//!
//! [`serve`] reads [`WorkerConfig::from_env`]; empty means unset, and a malformed value is a
//! [`ConfigError`] naming the variable.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `BROKER_ADDR` | one broker or a comma-separated list (`a:9090,b:9090`), dialled in order with failover; each `https://host:port` (TLS, server name = that entry's host), `http://host:port` or `host:port` (h2c); TLS and plaintext entries cannot be mixed, and an empty entry is an error | required |
//! | `WORKER_TOKEN` | bearer token sent as `authorization: Bearer <token>` on WorkStream and GetProviderConfig; never logged, redacted in `Debug` | none |
//! | `WORKER_TOKEN_FILE` | file holding the token (whitespace-trimmed), re-read at every (re)connect so a rotated token is picked up; exclusive with `WORKER_TOKEN` | none |
//! | `BROKER_CA_FILE` | PEM roots to trust for an `https://` broker | the webpki (Mozilla) roots |
//! | `WORKER_CERT_FILE` / `WORKER_KEY_FILE` | PEM client certificate chain and key for mutual TLS (both or neither) | none |
//! | `WORKER_MAX_PARALLEL` | most tasks run at once, 1..1048576 | 16 |
//! | `WORKER_DRAIN_TIMEOUT` | how long shutdown waits for in-flight work (`500ms`, `30s`, `2m`, `7`) | 50s |
//! | `WORKER_KINDS` | comma-separated subset of the registry's kinds to serve | all |
//! | `WORKER_NAME` | advisory display name | `<hostname>-<pid>` |
//! | `GRPC_MAX_MESSAGE_BYTES` | largest message sent or accepted (decompressed), in bytes, 4194304..=536870912; raise it together with the broker's for compose results past 64 MiB | 67108864 (64 MiB) |
//! | `GRPC_COMPRESSION` | `gzip` compresses what the worker sends (the broker then answers in gzip too), `none` sends plain frames | none |
//!
//! Both token variables, half of the certificate pair, or TLS files with a non-`https://`
//! address are [`ConfigError::Conflict`]s. The token, CA, certificate and key files are read
//! when [`run_worker`] starts (an unreadable or malformed one is an error naming its
//! variable) and again at every connection, so rotating any of them needs no restart; at a
//! reconnect an unusable file is logged and retried like a broker outage. The token works
//! over h2c too (a loopback broker accepts it); beyond loopback that is warned at start.
//!
//! # Plans: dry runs
//!
//! A COMPOSE task may be a **dry run**: `POST /api/v1/resources:plan` (and `conctl diff`) asks
//! the composer what it would compose for a spec that is not applied yet, and shows the
//! children and edges it would add, change and remove. The handler runs as for a real compose
//! and returns its outcome normally; converge checks it like any compose result and stores none
//! of it. [`ReactionRequest::dry_run`] says which it is. A composer is meant to be pure (its
//! children follow from the spec, config and observed children alone); one with side effects
//! (it calls out, allocates, counts) must skip them when [`ReactionRequest::dry_run`] is set.
//! The SDK tells the broker it supports dry runs (the `Subscribe.dry_runs` flag); a worker
//! built with an older SDK is never sent one, and the plan then warns that no worker that
//! supports dry runs is connected.
//!
//! # Brokers, failover and reconnects
//!
//! The worker dials the first broker of `BROKER_ADDR` and moves on to the next (wrapping
//! around) when a connect fails, the broker refuses the stream, or an open stream ends
//! (broker gone, drained, or a lost connection). Within a round of the list a failed address
//! is followed by the next one at once; after every address failed in a row the worker
//! waits, starting at [`WorkerConfig::reconnect_min`] (1 s) and doubling to
//! [`WorkerConfig::reconnect_max`] (5 s, at most [`RECONNECT_CAP`]). Every wait is jittered
//! ±25 % and never exceeds the ceiling; after a stream ends the worker waits one such
//! jittered interval before the next broker. The backoff starts over once a stream opens
//! after failures (a failover that connects) or after a stream that outlived it. A host name
//! with several DNS records is tried record by record at each connect. HTTP/2 keepalive
//! pings every 10 s (also with no call open) drop a connection whose broker has not answered
//! within 10 s more, so a dead or black-holed broker is left within about 20 s instead of at
//! the TCP timeout.
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
mod descendants;
mod error;
mod json;
mod logging;
pub mod manifest;
mod merge;
mod provider;
mod runtime;
mod signal;
pub mod testing;
mod types;

pub use bytes::Bytes;
pub use config::{
    Compression, DEFAULT_DRAIN_TIMEOUT, DEFAULT_HEARTBEAT_EVERY, DEFAULT_MAX_PARALLEL,
    DEFAULT_READINESS_POLL, DEFAULT_RECONNECT_MAX, DEFAULT_RECONNECT_MIN, RECONNECT_CAP,
    WorkerConfig, WorkerToken,
};
/// The generated wire types of `converge.worker.v1` (for `testing::execute_task` and tests).
pub use converge_proto::pb;
pub use descendants::{DEFAULT_PAGE_SIZE, DescendantPages, RollupSummary, Subtree};
pub use error::{ConfigError, HandlerError, LoggingError, WorkerError};
pub use json::Json;
pub use logging::init_logging;
pub use merge::{effective_bundle, effective_config};
pub use provider::{Provider, Registry};
pub use runtime::{run_worker, serve};
pub use signal::shutdown_signal;
pub use types::{
    CONDITION_READY, CONDITION_SYNCED, CancelReason, ChildSpec, Condition, DepEdge, KindVersion,
    Operation, Outcome, ProviderConfig, ProviderConfigSpec, ReactionRequest, Resource, ResourceRef,
    Stage, Transition, ValueFlow, trigger,
};
