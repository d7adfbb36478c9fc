//! The converge control plane: HTTP API, sweepers (drainer, reaper), configuration, the
//! embedded development database, and the wiring that runs control and broker duties in one
//! process (`converge`).

pub mod app;
pub mod config;
pub mod db;
pub mod devdb;
pub mod http;
pub mod logging;
pub mod server;

#[cfg(feature = "test-util")]
pub mod testing;
