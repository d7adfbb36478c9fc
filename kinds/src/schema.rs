//! One compiled JSON Schema of a kind, and how its violations are described: located under
//! the caller's prefix, naming the keyword, quoting a value by a short prefix at most, and,
//! for a config, never showing a secret. A valid document takes the validator's boolean fast
//! path, which allocates nothing; only a violation pays for being described.

use serde_json::Value;

use crate::{
    secrets::{Secrets, WITHHELD},
    text::{MAX_LISTED, MAX_MESSAGE, clipped, quote_value},
    violation::{Violation, Violations},
};

/// Above this many JSON values, an invalid document is described by its first violation
/// only. The validator builds every violation before handing out the first (a few hundred
/// bytes each), so an array of 8 million items each breaking a rule cost 2.8 GB to list.
pub const MAX_SEARCHED_VALUES: usize = 10_000;

/// A compiled JSON Schema (2020-12) and which of the kind's schemas it is (`spec_schema`,
/// `config_schema`, ...), for messages.
pub(crate) struct Schema {
    validator: jsonschema::Validator,
    name: &'static str,
}

impl Schema {
    /// Compiles `schema` (the manifest's field `name`); `None` when absent or null; `Err` with
    /// the compiler's reason when it is not a JSON Schema.
    pub(crate) fn compile(
        name: &'static str,
        schema: Option<&Value>,
    ) -> Result<Option<Schema>, String> {
        match schema {
            None | Some(Value::Null) => Ok(None),
            Some(s) => jsonschema::validator_for(s)
                .map(|validator| Some(Schema { validator, name }))
                .map_err(|e| e.to_string()),
        }
    }

    /// The compiled validator (for the secrets' evaluation).
    pub(crate) fn validator(&self) -> &jsonschema::Validator {
        &self.validator
    }

    /// Whether `doc` satisfies the schema: the validator's fast path, no allocation.
    pub(crate) fn is_valid(&self, doc: &Value) -> bool {
        self.validator.is_valid(doc)
    }

    /// The violations of `doc` located under `prefix`: at most `limit` (and at most
    /// [`MAX_LISTED`]) described, the rest counted; only the first for a document of more
    /// than [`MAX_SEARCHED_VALUES`] values. With `secrets`, a message about a writeOnly
    /// location is withheld, a value holding one is not quoted, and a message quoting a
    /// secret's text is withheld.
    pub(crate) fn violations(
        &self,
        doc: &Value,
        prefix: &str,
        limit: usize,
        secrets: Option<&Secrets>,
    ) -> Violations {
        let mut out = Violations::default();
        // Checking allocates nothing; only an invalid document pays for describing its errors.
        if self.validator.is_valid(doc) {
            return out;
        }
        let limit = limit.clamp(1, MAX_LISTED);
        if limit == 1 || values_beyond(doc, MAX_SEARCHED_VALUES) {
            if let Err(e) = self.validator.validate(doc) {
                let mut first = self.describe(&e, prefix, secrets);
                if limit > 1 {
                    first.message.push_str(&format!(
                        " (the first problem found: a document of more than \
                         {MAX_SEARCHED_VALUES} values is not searched for more)"
                    ));
                }
                out.errors.push(first);
            }
            return out;
        }
        for e in self.validator.iter_errors(doc) {
            if out.errors.len() == limit {
                out.omitted += 1;
            } else {
                out.errors.push(self.describe(&e, prefix, secrets));
            }
        }
        out
    }

    /// One violation, located under `prefix` (see [`Schema::violations`]).
    fn describe(
        &self,
        e: &jsonschema::ValidationError<'_>,
        prefix: &str,
        secrets: Option<&Secrets>,
    ) -> Violation {
        let at = e.instance_path().as_str();
        let keyword = e.kind().keyword();
        let withheld = || format!("fails the {}'s {keyword:?} rule{WITHHELD}", self.name);
        let message = match secrets {
            Some(s) if s.covers(at) => withheld(),
            Some(s) if s.inside(at) => clipped(MAX_MESSAGE, e.masked()),
            _ => clipped(MAX_MESSAGE, e.masked_with(quote_value(e.instance()))),
        };
        let message = match secrets {
            Some(s) if s.quotes(&message) => withheld(),
            _ => message,
        };
        Violation::of_keyword(format_args!("{prefix}{at}"), keyword, message)
    }
}

/// Whether `v` holds more than `limit` values (of any type, containers included); counts up
/// to `limit + 1` at most.
pub(crate) fn values_beyond(v: &Value, limit: usize) -> bool {
    let mut todo = vec![v];
    let mut n = 0;
    while let Some(v) = todo.pop() {
        n += 1;
        if n > limit {
            return true;
        }
        match v {
            Value::Array(a) => todo.extend(a),
            Value::Object(o) => todo.extend(o.values()),
            _ => {}
        }
    }
    false
}

/// A local reference's target in the schema `root` (`#` or `#/json/pointer`, percent-encoded
/// or not); `None` for any other reference.
pub fn local_ref<'s>(root: &'s Value, reference: &str) -> Option<&'s Value> {
    let frag = reference.strip_prefix('#')?;
    let frag = percent_encoding::percent_decode_str(frag)
        .decode_utf8()
        .ok()?;
    root.pointer(&frag)
}
