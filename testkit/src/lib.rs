//! Start a real `converge` in a test and talk to it: where the binary is, a `converge serve`
//! command with a clean environment and fast timings, free ports and a readiness wait that
//! restarts a server that lost its port, signals and liveness of processes, and a client for
//! the HTTP API (plain, or HTTPS trusting a test CA with feature `tls`).
//!
//! The one harness behind the end-to-end tests of `converge`, `converge-sdk` and stdworker
//! (its own workspace, so this crate depends on no control plane, broker or engine). The
//! fresh database a test hands converge is `converge_engine::testing::TestDb`.

mod api;
mod command;
mod process;
mod ready;
pub mod source;

pub use api::Api;
#[cfg(feature = "tls")]
pub use command::secure_env;
pub use command::{
    clean_command, converge_bin, log_level, pg_bin_dir, serve_command, serve_on,
    test_secrets_key_file,
};
pub use process::{alive, signal, terminate};
#[cfg(feature = "tls")]
pub use ready::spawn_ready_tls;
pub use ready::{free_port, spawn_ready, spawn_ready_probe, wait_for};
/// The HTTP method type [`Api::call`] takes, so a test needs no `reqwest` of its own.
pub use reqwest::Method;
