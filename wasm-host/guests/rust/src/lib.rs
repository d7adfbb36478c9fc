//! converge-guest-conformance: one `converge:handler@0.1.0` component serving every kind the
//! wasm-host tests need from a real toolchain-built guest.
//!
//! - [`conformance`]: the conformance kinds (`conf-*`, see `conformance/KINDS.md`) as far as
//!   a pure handler can serve them (the host cannot see bundles or cancel cooperatively);
//! - [`netbom`]: a composer turning a network bill of materials into a VPC and its subnets,
//!   the same semantics as the Starlark, CEL and Python versions it is compared with;
//! - [`probe`]: tries what the sandbox must deny (files, sockets) or fix (environment,
//!   clocks, randomness) and reports what it saw.
//!
//! Every call is dispatched on `req.kind`; each kind then dispatches on the stage. The built
//! component is committed as `wasm-host/tests/fixtures/conformance-guest.wasm` by
//! `wasm-host/guests/build-rust.sh`.

mod conformance;
mod netbom;
mod probe;

wit_bindgen::generate!({ world: "handler", path: "../../wit" });

use converge::handler::log::{Level, log};
// The world `use`s info, request, outcome and handler-error, so the bindings already
// define them at the crate root.
use converge::handler::types::{KindRef, Stage};
use serde_json::Value;

/// The form name the conformance statuses carry: this is the wasm form of the suite.
pub(crate) const FORM: &str = "wasm";

/// Every kind served; all at version 1.
const KINDS: [&str; 11] = [
    "conf-leaf",
    "conf-composite",
    "conf-final",
    "conf-fail",
    "conf-slow",
    "conf-hold",
    "conf-react",
    "conf-ready",
    "conf-config",
    "netbom",
    "probe",
];

struct Component;

impl Guest for Component {
    fn describe() -> Info {
        Info {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kinds: KINDS
                .iter()
                .map(|k| KindRef {
                    kind: (*k).into(),
                    version: 1,
                })
                .collect(),
        }
    }

    fn reconcile(req: Request) -> Result<Outcome, HandlerError> {
        // One line per task, so a test (or an operator) can see the host forwards logs.
        log(
            Level::Debug,
            &format!(
                "{} {} reaction={} name={} generation={} attempt={}",
                req.kind,
                stage_name(req.stage),
                req.reaction,
                req.target.name,
                req.generation,
                req.attempt
            ),
        );
        match req.kind.as_str() {
            "netbom" => netbom::reconcile(&req),
            "probe" => probe::reconcile(&req),
            kind => match conformance::reconcile(kind, &req) {
                Some(result) => result,
                None => Err(HandlerError::Terminal("unknown kind".into())),
            },
        }
    }
}

export!(Component);

/// The stage as the WIT spells it, for log lines.
fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::Compose => "compose",
        Stage::Work => "work",
        Stage::Rollup => "rollup",
        Stage::Delete => "delete",
        Stage::Operate => "operate",
        Stage::React => "react",
    }
}

/// An outcome with nothing in it: for a stage a kind has nothing to do in (and, from a
/// delete, it releases the finalizer).
pub(crate) fn empty() -> Outcome {
    Outcome {
        status: None,
        conditions: Vec::new(),
        children: Vec::new(),
        edges: Vec::new(),
        configs: Vec::new(),
        operation_output: None,
    }
}

/// An outcome carrying only `status`.
pub(crate) fn with_status(status: &Value) -> Outcome {
    Outcome {
        status: Some(status.to_string()),
        ..empty()
    }
}

/// A JSON document the host sent. The host only forwards what the core stored, so a parse
/// failure is a bug no retry fixes: terminal.
pub(crate) fn parse(what: &str, json: &str) -> Result<Value, HandlerError> {
    serde_json::from_str(json)
        .map_err(|e| HandlerError::Terminal(format!("{what} is not valid JSON: {e}")))
}

/// The target's spec, parsed.
pub(crate) fn spec(req: &Request) -> Result<Value, HandlerError> {
    parse("spec", &req.target.spec)
}
