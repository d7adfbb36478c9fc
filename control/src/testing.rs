//! Test helpers (feature `test-util`), so a test needs one import: the database helpers of
//! `converge_engine::testing` and starting a real server on free ports until it is ready,
//! from the one harness in `converge_testkit`.

pub use converge_engine::testing::{TEST_DATABASE_URL_ENV, TestDb, wait_for};
pub use converge_testkit::{free_port, spawn_ready, spawn_ready_tls};

pub mod write_only;
