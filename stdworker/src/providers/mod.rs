//! The built-in providers. Each is a module that implements `converge_sdk::Provider` for
//! any kind an operator assigns to it; the kind's provider config says what to run.
//!
//! Only `exec` exists today; `wasm`, `starlark` and `cel` (DESIGN §7) slot in beside it.

pub mod exec;
