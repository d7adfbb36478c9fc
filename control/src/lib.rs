//! The converge control plane: the HTTP API, the schema cache, configuration and the embedded
//! development database. Its SQL and the drainer and reaper loops are in `converge_engine`;
//! the `converge` binary (package `converge`) wires it with the broker.

pub mod app;
pub mod config;
/// The engine's data layer, under the name the API's modules use.
pub use converge_engine::db;
pub mod devdb;
pub mod http;
pub mod logging;

#[cfg(feature = "test-util")]
pub mod testing;
