//! The built-in providers. Each is a module that implements `converge_sdk::Provider` for
//! any kind an operator assigns to it; the kind's provider config says what to run.
//!
//! `exec` runs a process per task; `starlark` and `cel` are data-driven composers (a bundle
//! of `.star` files, a CEL resource graph); `wasm` runs a sandboxed WASM component per task
//! (DESIGN §7).

pub mod cel;
pub mod exec;
pub mod shared;
pub mod starlark;
pub mod wasm;
