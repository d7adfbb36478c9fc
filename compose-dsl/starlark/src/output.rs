//! Decoding `compose`'s return value into a [`ComposeOutput`] (the shared compose result of
//! `converge-compose-output`): the output-size cap, the dict check, the child/edge/config
//! caps of [`Limits`], then the shared shape rules.

use serde_json::Value;

use crate::{ComposeOutput, Error, LimitKind, Limits};

/// Decodes and validates the JSON returned by `compose`.
pub(crate) fn from_json(value: Value, limits: &Limits) -> Result<ComposeOutput, Error> {
    if crate::json::len(&value) > limits.max_output_bytes {
        return Err(Error::Limit(LimitKind::OutputSize));
    }
    if !value.is_object() {
        return Err(Error::output(
            "compose must return a dict with keys children, edges, configs, status",
        ));
    }
    let mut out: ComposeOutput =
        serde_json::from_value(value).map_err(|e| Error::output(e.to_string()))?;
    if out.status.as_ref().is_some_and(Value::is_null) {
        out.status = None;
    }
    validate(&out, limits)?;
    Ok(out)
}

/// Checks the caps, then uniqueness, edge endpoints, pointers and acyclicity.
fn validate(out: &ComposeOutput, limits: &Limits) -> Result<(), Error> {
    if out.children.len() > limits.max_children {
        return Err(Error::Limit(LimitKind::Children));
    }
    if out.edges.len() > limits.max_edges {
        return Err(Error::Limit(LimitKind::Edges));
    }
    if out.configs.len() > limits.max_configs {
        return Err(Error::Limit(LimitKind::Configs));
    }
    out.validate().map_err(|e| Error::output(e.into_message()))
}
