//! The home of kinds. A kind is data (its manifest: schemas, reactions, policy); this crate
//! is where that data becomes something the rest of converge can ask: each (kind, version)'s
//! manifest parsed and its JSON Schemas compiled once per process ([`Kind`]), held by the
//! process's one [`KindCatalog`], and the rules a kind imposes, each stated once:
//!
//! - what a spec, a status, an operation's output and a provider config must satisfy, and
//!   what a config acting as an override of an exec kind may not set ([`Kind`]'s methods);
//! - what a composer may emit: children of registered kinds within their schemas, configs of
//!   the kinds it names, edges among those its manifest declares ([`Kind::declares`],
//!   [`Kind::undeclared_edge`]);
//! - what a manifest must be to be applied ([`check`]), its value flows typed against the
//!   kinds they join ([`flows`]), and which flows other kinds declare a new manifest would
//!   break ([`Snapshot::flows_broken_by`]);
//! - which config values are secrets, masked in every read and never quoted ([`secrets`]).
//!
//! The catalog answers in its own terms ([`Violation`]: a pointer, the rule, what is wrong,
//! quoted within the bounds of [`text`]); each door turns that into its own failure: the API
//! into a 422 problem, the broker into a task's terminal failure.
//!
//! Dependencies run one way: `converge-proto` (the manifest model) and `converge-engine` (its
//! reads of `kind_manifest` and its LISTEN helper) below, `converge-broker` and
//! `converge-control` above. No other crate parses a stored manifest or compiles a kind's
//! schema (`kinds/tests/one_home.rs` fails if one does).

pub mod catalog;
pub mod check;
pub mod flows;
pub mod kind;
mod schema;
pub mod secrets;
pub mod text;
pub mod violation;

pub use catalog::{CatalogFollower, KindCatalog, MANIFEST_CHANNEL, Snapshot};
pub use kind::Kind;
pub use schema::{MAX_SEARCHED_VALUES, local_ref};
pub use secrets::MASK;
pub use violation::{Violation, Violations};
