//! The validator surface: every kind's manifest with its JSON Schemas compiled once, rebuilt
//! on `kind_manifest_changed` plus a failsafe re-read, so a manifest applied through one pod
//! is enforced by every pod.
//!
//! It also knows a kind's secrets: a `config_schema` subschema marked `"writeOnly": true`
//! covers config values the API never shows ([`MASK`] instead) and never echoes in a
//! validation message, while workers read them intact from the database. The secrets are
//! found by the validator that checks the config (its evaluation reports where it applied a
//! writeOnly subschema, however the schema reaches it: `$ref`, `$anchor`, `$id`-relative
//! URIs, `$dynamicRef`), united with a structural walk that covers the branches a document
//! does not take; see `KindSchemas::write_only_pointers`.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, RwLock},
    time::Duration,
};

use converge_proto::manifest::KindManifest;
use serde::Serialize;
use serde_json::Value;
use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::{
    db,
    http::problem::{MAX_LISTED, MAX_LOCATION, MAX_MESSAGE, clipped, quote_value},
};

/// One failing location in a validated document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FieldError {
    /// JSON pointer into the request body (e.g. `/spec/greeting`), or the name of the
    /// query parameter.
    pub location: String,
    /// What is wrong.
    pub message: String,
    /// The JSON Schema keyword that failed (`maxLength`, `type`, ...), for schema violations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyword: Option<String>,
}

impl FieldError {
    /// A problem at `location` that no schema keyword names.
    pub fn new(location: String, message: String) -> FieldError {
        FieldError {
            location,
            message,
            keyword: None,
        }
    }
}

/// Schema violations: at most [`MAX_LISTED`] described, and how many more were found.
#[derive(Debug, Default)]
pub struct Violations {
    /// The described ones, in the validator's order.
    pub errors: Vec<FieldError>,
    /// How many more there were.
    pub omitted: usize,
}

/// A kind's manifest with compiled validators.
pub struct KindSchemas {
    /// The manifest.
    pub manifest: KindManifest,
    spec: Option<jsonschema::Validator>,
    config: Option<jsonschema::Validator>,
    /// Whether the config_schema marks anything `"writeOnly": true`.
    config_has_write_only: bool,
}

/// Compiles the JSON Schema at `pointer` (its field named `field`); `None` when absent.
fn compile(
    pointer: &str,
    field: &str,
    schema: Option<&serde_json::Value>,
) -> Result<Option<jsonschema::Validator>, FieldError> {
    match schema {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(s) => jsonschema::validator_for(s).map(Some).map_err(|e| {
            FieldError::new(
                pointer.to_string(),
                clipped(
                    MAX_MESSAGE,
                    format_args!("{field} is not a valid JSON Schema: {e}"),
                ),
            )
        }),
    }
}

impl KindSchemas {
    /// Validates the manifest and compiles its schemas; every problem is reported.
    pub fn compile(manifest: KindManifest) -> Result<KindSchemas, Vec<String>> {
        let mut errs = manifest.validate().err().unwrap_or_default();
        match Self::build(manifest, &|i| i) {
            Ok(k) if errs.is_empty() => Ok(k),
            Ok(_) => Err(errs),
            Err(located) => {
                errs.extend(
                    located
                        .into_iter()
                        .map(|e| format!("{}: {}", e.location, e.message)),
                );
                Err(errs)
            }
        }
    }

    /// Compiles every JSON Schema the manifest holds (spec, status and config schemas, each
    /// operation's output_schema) without checking its other rules; each one that does not
    /// compile is an error at its pointer, with `at(i)` the document index of
    /// `manifest.reactions[i]`.
    pub fn build(
        manifest: KindManifest,
        at: &dyn Fn(usize) -> usize,
    ) -> Result<KindSchemas, Vec<FieldError>> {
        converge_engine::metrics::metrics()
            .kind_schema_compiles
            .inc();
        let mut errs = Vec::new();
        let spec = compile("/spec_schema", "spec_schema", manifest.spec_schema.as_ref())
            .map_err(|e| errs.push(e))
            .ok()
            .flatten();
        let config = compile(
            "/config_schema",
            "config_schema",
            manifest.config_schema.as_ref(),
        )
        .map_err(|e| errs.push(e))
        .ok()
        .flatten();
        if let Err(e) = compile(
            "/status_schema",
            "status_schema",
            manifest.status_schema.as_ref(),
        ) {
            errs.push(e);
        }
        for (i, r) in manifest.reactions.iter().enumerate() {
            let pointer = format!("/reactions/{}/output_schema", at(i));
            if let Err(e) = compile(&pointer, "output_schema", r.output_schema.as_ref()) {
                errs.push(e);
            }
        }
        if errs.is_empty() {
            let config_has_write_only = manifest.config_schema.as_ref().is_some_and(has_write_only);
            Ok(KindSchemas {
                manifest,
                spec,
                config,
                config_has_write_only,
            })
        } else {
            Err(errs)
        }
    }

    /// The violations of the kind's spec schema, located under `prefix` (e.g. "/spec").
    pub fn validate_spec(&self, spec: &serde_json::Value, prefix: &str) -> Violations {
        violations(self.spec.as_ref(), spec, prefix, None)
    }

    /// The violations of the kind's config schema (provider config specs). A message never
    /// shows a writeOnly value: one about a writeOnly location is withheld, one about a value
    /// holding secrets does not quote it (see also [`KindSchemas::redact_config_errors`]).
    pub fn validate_config(&self, config: &serde_json::Value, prefix: &str) -> Violations {
        if self.config.is_none() {
            return Violations::default();
        }
        let secrets = self.config_secrets(config);
        violations(self.config.as_ref(), config, prefix, Some(&secrets))
    }

    /// Replaces every value of `config` a writeOnly subschema covers with [`MASK`]; how many.
    /// Every API read of a provider config goes through here.
    pub fn mask_config(&self, config: &mut Value) -> usize {
        let mut n = 0;
        self.write_only(config, |_, v| {
            *v = Value::String(MASK.into());
            n += 1;
        });
        n
    }

    /// Puts the stored secret back wherever `config` (a config being written) carries
    /// [`MASK`] at a writeOnly location, so a read-modify-write round trip keeps the secret.
    /// `stored` is the spec already stored under that name for this kind (`None`: there is
    /// none); a [`MASK`] with nothing stored at its location is an error located under
    /// `prefix`. Returns how many values were kept.
    pub fn restore_config(
        &self,
        config: &mut Value,
        stored: Option<&Value>,
        prefix: &str,
    ) -> Result<usize, Vec<FieldError>> {
        let (mut kept, mut errors) = (0, Vec::new());
        self.write_only(config, |ptr, v| {
            if v.as_str() != Some(MASK) {
                return;
            }
            match stored.and_then(|s| s.pointer(ptr)) {
                Some(old) => {
                    *v = old.clone();
                    kept += 1;
                }
                None => errors.push(FieldError::new(
                    format!("{prefix}{ptr}"),
                    format!(
                        "{MASK:?} stands for the stored secret, but no config of this name and \
                         kind stores one here; send the value itself"
                    ),
                )),
            }
        });
        if errors.is_empty() {
            Ok(kept)
        } else {
            Err(errors)
        }
    }

    /// Withholds every message of `errors` (located under `prefix` in `config`) that sits at
    /// a writeOnly location or quotes one of `config`'s writeOnly values.
    pub fn redact_config_errors(&self, config: &Value, prefix: &str, errors: &mut [FieldError]) {
        let secrets = self.config_secrets(config);
        for e in errors {
            let at = e.location.strip_prefix(prefix).unwrap_or(&e.location);
            if secrets.shows(at, &e.message) {
                e.message = format!("invalid{WITHHELD}");
            }
        }
    }

    fn config_secrets(&self, config: &Value) -> Secrets {
        let mut s = Secrets::default();
        for ptr in self.write_only_pointers(config) {
            if let Some(v) = config.pointer(&ptr) {
                leaf_texts(v, &mut s.texts);
            }
            s.pointers.push(ptr);
        }
        s
    }

    /// Calls `visit(pointer, value)` for every value of `config` a writeOnly subschema of
    /// the kind's config_schema covers (the outermost one where they nest).
    fn write_only(&self, config: &mut Value, mut visit: impl FnMut(&str, &mut Value)) {
        for ptr in self.write_only_pointers(config) {
            if let Some(v) = config.pointer_mut(&ptr) {
                visit(&ptr, v);
            }
        }
    }

    /// The locations (JSON pointers) of `config` a writeOnly subschema of the kind's
    /// config_schema covers, outermost only, in document order of their pointers. Two
    /// sources, united so that a secret is masked if either finds it:
    ///
    /// - the validator itself ([`jsonschema::Validator::evaluate`]): every place it applied
    ///   a subschema carrying `"writeOnly": true` (an annotation, kept or dropped because
    ///   the subschema failed). It reaches a subschema exactly as validation does, through
    ///   the one resolver: `$ref` to a pointer, an `$anchor`, an `$id`-relative URI,
    ///   `$dynamicRef`, every applicator, `patternProperties` by its regex;
    /// - a walk of the schema's structure beside the document ([`WriteOnlyWalk`]), which
    ///   errs on the side of covering: it follows every branch whether or not the document
    ///   takes it (a stored config that fails a later schema, an `anyOf` branch a `"***"`
    ///   written back makes fail, an evaluation an unfinished regex match cut short).
    ///
    /// A document of more than [`MAX_SEARCHED_VALUES`] values is not evaluated (its output
    /// would grow with it): every string, number and boolean in it counts as covered.
    fn write_only_pointers(&self, config: &Value) -> Vec<String> {
        let (Some(root), Some(validator)) =
            (self.manifest.config_schema.as_ref(), self.config.as_ref())
        else {
            return Vec::new();
        };
        if !self.config_has_write_only {
            return Vec::new();
        }
        let mut found = Vec::new();
        if values_beyond(config, MAX_SEARCHED_VALUES) {
            scalar_pointers(config, &mut String::new(), &mut found);
            return found;
        }
        evaluated_write_only(validator, config, &mut found);
        let mut w = WriteOnlyWalk {
            root,
            found: &mut found,
        };
        w.walk(vec![root], config, &mut String::new());
        outermost(found)
    }
}

/// Whether any subschema of `schema` is marked `"writeOnly": true`: without one, a config
/// has no secrets and nothing needs to look for them.
fn has_write_only(schema: &Value) -> bool {
    let mut todo = vec![schema];
    while let Some(v) = todo.pop() {
        match v {
            Value::Object(o) => {
                if o.get("writeOnly") == Some(&Value::Bool(true)) {
                    return true;
                }
                todo.extend(o.values());
            }
            Value::Array(a) => todo.extend(a),
            _ => {}
        }
    }
    false
}

/// Pushes to `out` the instance location of every place `validator`, evaluating `doc`,
/// applied a subschema carrying `"writeOnly": true`: the annotations it collected, and the
/// ones it dropped because that subschema (or one beside it) failed.
fn evaluated_write_only(validator: &jsonschema::Validator, doc: &Value, out: &mut Vec<String>) {
    let marks = |a: Option<&Value>| a.and_then(|a| a.get("writeOnly")) == Some(&Value::Bool(true));
    let evaluation = validator.evaluate(doc);
    let mut todo = vec![evaluation.root()];
    while let Some(unit) = todo.pop() {
        if marks(unit.annotations().map(|a| a.value()))
            || marks(unit.dropped_annotations().map(|a| a.value()))
        {
            out.push(unit.instance_location().as_str().to_string());
        }
        todo.extend(unit.children());
    }
}

/// The pointers of every string, number and boolean of `v` (at `ptr`).
fn scalar_pointers(v: &Value, ptr: &mut String, out: &mut Vec<String>) {
    let at = |ptr: &mut String, token: &str, child: &Value, out: &mut Vec<String>| {
        let len = ptr.len();
        ptr.push('/');
        ptr.push_str(token);
        scalar_pointers(child, ptr, out);
        ptr.truncate(len);
    };
    match v {
        Value::Object(o) => {
            for (k, child) in o {
                at(ptr, &converge_proto::json_pointer::escape(k), child, out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                at(ptr, &i.to_string(), child, out);
            }
        }
        Value::Null => {}
        _ => out.push(ptr.clone()),
    }
}

/// `pointers` sorted, each once, without any that lies under another (the outer one covers
/// it whole).
fn outermost(mut pointers: Vec<String>) -> Vec<String> {
    pointers.sort();
    pointers.dedup();
    let mut out: Vec<String> = Vec::with_capacity(pointers.len());
    for p in pointers {
        // Sorted, so an ancestor comes before its descendants (though not always right
        // before: "/a/b" < "/a-" < "/a/c" sorts "/a-" between two children of "/a").
        let covered = out.iter().any(|o| {
            o.is_empty()
                || p.strip_prefix(o.as_str())
                    .is_some_and(|r| r.starts_with('/'))
        });
        if !covered {
            out.push(p);
        }
    }
    out
}

/// What a writeOnly value reads as.
pub const MASK: &str = "***";

const WITHHELD: &str = " (message withheld: it would show a writeOnly value)";

/// A config's writeOnly locations (JSON pointers) and the texts of their values.
#[derive(Default)]
struct Secrets {
    pointers: Vec<String>,
    texts: Vec<String>,
}

impl Secrets {
    /// Whether a message about `location` (a pointer into the config) could show a secret:
    /// it is at or under a writeOnly location, or quotes a secret's text.
    fn shows(&self, location: &str, message: &str) -> bool {
        self.covers(location) || self.quotes(message)
    }

    /// Whether `location` is at or under a writeOnly location.
    fn covers(&self, location: &str) -> bool {
        self.pointers.iter().any(|p| {
            location == p
                || location
                    .strip_prefix(p.as_str())
                    .is_some_and(|r| r.starts_with('/'))
        })
    }

    /// Whether the value at `location` holds a writeOnly value further down.
    fn inside(&self, location: &str) -> bool {
        self.pointers
            .iter()
            .any(|p| p.strip_prefix(location).is_some_and(|r| r.starts_with('/')))
    }

    /// Whether `message` quotes a secret's text.
    fn quotes(&self, message: &str) -> bool {
        self.texts.iter().any(|t| message.contains(t.as_str()))
    }
}

/// The string and number leaves of `v` (what a validation message could quote).
fn leaf_texts(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if !s.is_empty() => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(a) => a.iter().for_each(|v| leaf_texts(v, out)),
        Value::Object(o) => o.values().for_each(|v| leaf_texts(v, out)),
        _ => {}
    }
}

/// A walk of a document beside its schema, to find what `"writeOnly": true` covers: the
/// covering half of [`KindSchemas::write_only_pointers`] (the validator's evaluation is the
/// exact half, and the only one that follows `$anchor`, `$id` and `$dynamicRef`). It errs
/// on the side of covering: every subschema that *could* apply is followed whether or not it
/// validates (a stored config that fails a later schema keeps its secrets hidden): the
/// in-place applicators (`allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`,
/// `dependentSchemas`), local `$ref`s (`#`, `#/...`), `properties`, `additionalProperties` and
/// `unevaluatedProperties` (for keys not in `properties`), `patternProperties` (taken to match
/// every key: there is no regex engine here), `prefixItems`, `items` (both forms),
/// `additionalItems`, `contains` and `unevaluatedItems`.
struct WriteOnlyWalk<'s, 'o> {
    root: &'s Value,
    /// The covered locations found.
    found: &'o mut Vec<String>,
}

impl<'s> WriteOnlyWalk<'s, '_> {
    /// `schemas` all apply to `doc`, found at `ptr`.
    fn walk(&mut self, schemas: Vec<&'s Value>, doc: &Value, ptr: &mut String) {
        let applying = self.in_place_closure(schemas);
        if applying
            .iter()
            .any(|s| s.get("writeOnly") == Some(&Value::Bool(true)))
        {
            self.found.push(ptr.clone());
            return;
        }
        match doc {
            Value::Object(map) => {
                for (key, child) in map {
                    let mut subs = Vec::new();
                    for s in &applying {
                        let named = s.get("properties").and_then(|p| p.get(key));
                        match named {
                            Some(sub) => subs.push(sub),
                            None => subs.extend(
                                ["additionalProperties", "unevaluatedProperties"]
                                    .iter()
                                    .filter_map(|k| s.get(*k)),
                            ),
                        }
                        if let Some(Value::Object(pats)) = s.get("patternProperties") {
                            subs.extend(pats.values());
                        }
                    }
                    descend(
                        self,
                        subs,
                        child,
                        ptr,
                        &converge_proto::json_pointer::escape(key),
                    );
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    let mut subs = Vec::new();
                    for s in &applying {
                        let prefix = s.get("prefixItems").and_then(Value::as_array);
                        match (prefix, s.get("items")) {
                            (_, Some(Value::Array(tuple))) => match tuple.get(i) {
                                Some(sub) => subs.push(sub),
                                None => subs.extend(s.get("additionalItems")),
                            },
                            (Some(p), items) => match p.get(i) {
                                Some(sub) => subs.push(sub),
                                None => subs.extend(items),
                            },
                            (None, items) => subs.extend(items),
                        }
                        subs.extend(
                            ["contains", "unevaluatedItems"]
                                .iter()
                                .filter_map(|k| s.get(*k)),
                        );
                    }
                    descend(self, subs, child, ptr, &i.to_string());
                }
            }
            _ => {}
        }

        fn descend<'s>(
            w: &mut WriteOnlyWalk<'s, '_>,
            subs: Vec<&'s Value>,
            child: &Value,
            ptr: &mut String,
            token: &str,
        ) {
            if subs.is_empty() {
                return;
            }
            let len = ptr.len();
            ptr.push('/');
            ptr.push_str(token);
            w.walk(subs, child, ptr);
            ptr.truncate(len);
        }
    }

    /// Every object schema applying in place to one instance: `schemas` and, transitively,
    /// their in-place applicators and local `$ref` targets. Each schema appears once, so a
    /// `$ref` cycle (`{"$ref": "#"}`) ends.
    fn in_place_closure(&self, schemas: Vec<&'s Value>) -> Vec<&'s Value> {
        let mut out: Vec<&'s Value> = Vec::new();
        let mut todo = schemas;
        while let Some(s) = todo.pop() {
            if !s.is_object() || out.iter().any(|o| std::ptr::eq(*o, s)) {
                continue;
            }
            out.push(s);
            for k in ["allOf", "anyOf", "oneOf"] {
                if let Some(Value::Array(subs)) = s.get(k) {
                    todo.extend(subs);
                }
            }
            todo.extend(
                ["not", "if", "then", "else"]
                    .iter()
                    .filter_map(|k| s.get(*k)),
            );
            if let Some(Value::Object(deps)) = s.get("dependentSchemas") {
                todo.extend(deps.values());
            }
            for k in ["$ref", "$dynamicRef"] {
                if let Some(target) = s
                    .get(k)
                    .and_then(Value::as_str)
                    .and_then(|r| self.resolve(r))
                {
                    todo.push(target);
                }
            }
        }
        out
    }

    fn resolve(&self, reference: &str) -> Option<&'s Value> {
        local_ref(self.root, reference)
    }
}

/// A local reference's target in the schema `root` (`#` or `#/json/pointer`, percent-encoded
/// or not); `None` for any other reference.
pub(crate) fn local_ref<'s>(root: &'s Value, reference: &str) -> Option<&'s Value> {
    let frag = reference.strip_prefix('#')?;
    let frag = percent_encoding::percent_decode_str(frag)
        .decode_utf8()
        .ok()?;
    root.pointer(&frag)
}

/// Above this many JSON values, an invalid document is described by its first violation
/// only. The validator builds every violation before handing out the first (a few hundred
/// bytes each), so an array of 8 million items each breaking a rule cost 2.8 GB to list.
pub const MAX_SEARCHED_VALUES: usize = 10_000;

/// How many values (of any type, containers included) `v` holds, counting up to `limit + 1`.
fn values_beyond(v: &Value, limit: usize) -> bool {
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

/// The violations of `schema` (none when the axis is untyped) located under `prefix`: at most
/// [`MAX_LISTED`] described, the rest counted; only the first for a document of more than
/// [`MAX_SEARCHED_VALUES`] values. Each names its keyword and quotes at most a short prefix
/// of the value ([`quote_value`]), and is formatted through [`clipped`], so a 15 MiB value
/// failing 50 rules makes 50 short messages, never 50 copies of the value.
/// With `secrets`, a message about a writeOnly location is withheld, a value holding one is
/// not quoted ("value" stands in), and a message quoting a secret's text is withheld.
fn violations(
    schema: Option<&jsonschema::Validator>,
    doc: &serde_json::Value,
    prefix: &str,
    secrets: Option<&Secrets>,
) -> Violations {
    let mut out = Violations::default();
    let Some(v) = schema else {
        return out;
    };
    // Checking allocates nothing; only an invalid document pays for describing its errors.
    if v.is_valid(doc) {
        return out;
    }
    if values_beyond(doc, MAX_SEARCHED_VALUES) {
        if let Err(e) = v.validate(doc) {
            let mut first = describe(&e, prefix, secrets);
            first.message.push_str(&format!(
                " (the first problem found: a document of more than {MAX_SEARCHED_VALUES} \
                 values is not searched for more)"
            ));
            out.errors.push(first);
        }
        return out;
    }
    for e in v.iter_errors(doc) {
        if out.errors.len() == MAX_LISTED {
            out.omitted += 1;
        } else {
            out.errors.push(describe(&e, prefix, secrets));
        }
    }
    out
}

/// One violation as a located error (see [`violations`]).
fn describe(
    e: &jsonschema::ValidationError<'_>,
    prefix: &str,
    secrets: Option<&Secrets>,
) -> FieldError {
    let at = e.instance_path().as_str();
    let keyword = e.kind().keyword();
    let withheld = || format!("fails the config_schema's {keyword:?} rule{WITHHELD}");
    let message = match secrets {
        Some(s) if s.covers(at) => withheld(),
        Some(s) if s.inside(at) => clipped(MAX_MESSAGE, e.masked()),
        _ => clipped(MAX_MESSAGE, e.masked_with(quote_value(e.instance()))),
    };
    let message = match secrets {
        Some(s) if s.quotes(&message) => withheld(),
        _ => message,
    };
    FieldError {
        location: clipped(MAX_LOCATION, format_args!("{prefix}{at}")),
        message,
        keyword: Some(keyword.to_string()),
    }
}

/// Most (kind, version) pairs remembered as unknown; past it the memory starts afresh, so a
/// client naming random kinds cannot grow it without bound.
pub const MAX_UNKNOWN: usize = 10_000;

/// A compiled manifest and the content hash (`manifest_version`) it was compiled from.
struct Cached {
    schemas: Arc<KindSchemas>,
    manifest_version: i64,
}

/// The kinds known and unknown.
#[derive(Default)]
struct Known {
    map: HashMap<(String, i32), Cached>,
    /// (kind, version)s a lookup found unregistered, since the last change to the
    /// manifests this process heard of (`kind_manifest_changed`, its own applies, a reload).
    unknown: HashSet<(String, i32)>,
}

/// The cache, keyed by (kind, version), with a negative side: a miss costs one lookup of the
/// missing pairs (never a re-read of every manifest), a pair found unregistered is
/// remembered until the manifests change, and a manifest is compiled once per content
/// (`converge_kind_schema_compiles_total` counts every compile, [`KindSchemas::build`]).
#[derive(Default)]
pub struct Schemas {
    known: RwLock<Known>,
}

/// Compiles a stored manifest, or logs why it does not compile.
fn compile_stored(r: db::kinds::StoredManifest) -> Option<Cached> {
    let Ok(m) = serde_json::from_value::<KindManifest>(r.manifest) else {
        tracing::error!(kind = %r.pair.kind, version = r.pair.version, "stored manifest does not parse");
        return None;
    };
    match KindSchemas::compile(m) {
        Ok(k) => Some(Cached {
            schemas: Arc::new(k),
            manifest_version: r.manifest_version,
        }),
        Err(e) => {
            tracing::error!(kind = %r.pair.kind, version = r.pair.version, errors = ?e, "stored manifest does not compile");
            None
        }
    }
}

impl Schemas {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Known> {
        self.known.read().expect("schema cache poisoned")
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Known> {
        self.known.write().expect("schema cache poisoned")
    }

    /// Brings the whole cache up to the database: reads every manifest's content hash, and
    /// reads and compiles only the manifests that are new or changed; forgets deleted ones
    /// and every remembered unknown.
    pub async fn reload(&self, pool: &PgPool) -> Result<(), sqlx::Error> {
        let versions = db::kinds::manifest_versions(pool).await?;
        let changed: Vec<(String, i32)> = {
            let k = self.read();
            versions
                .iter()
                .filter(|(p, h)| {
                    k.map
                        .get(&(p.kind.clone(), p.version))
                        .is_none_or(|c| c.manifest_version != *h)
                })
                .map(|(p, _)| (p.kind.clone(), p.version))
                .collect()
        };
        let fresh = db::kinds::manifests_of(pool, &changed).await?;
        let mut compiled: HashMap<(String, i32), Cached> = fresh
            .into_iter()
            .filter_map(|r| {
                let key = (r.pair.kind.clone(), r.pair.version);
                compile_stored(r).map(|c| (key, c))
            })
            .collect();
        let mut k = self.write();
        let mut map = HashMap::with_capacity(versions.len());
        for (p, h) in versions {
            let key = (p.kind, p.version);
            let entry = match compiled.remove(&key) {
                Some(c) => Some(c),
                None => k.map.remove(&key).filter(|c| c.manifest_version == h),
            };
            if let Some(c) = entry {
                map.insert(key, c);
            }
        }
        k.map = map;
        k.unknown.clear();
        Ok(())
    }

    /// Makes sure every pair of `pairs` is either cached or remembered as unknown: the pairs
    /// that are neither (or, with `fresh`, every pair not cached: a refusal must not rest on a
    /// memory another pod's apply may have outdated a moment ago) are read in one statement,
    /// compiled when found, remembered as unknown when not.
    pub async fn lookup(
        &self,
        pool: &PgPool,
        pairs: impl IntoIterator<Item = (String, i32)>,
        fresh: bool,
    ) -> Result<(), sqlx::Error> {
        let missing: Vec<(String, i32)> = {
            let k = self.read();
            let mut seen = HashSet::new();
            pairs
                .into_iter()
                .filter(|p| !k.map.contains_key(p) && (fresh || !k.unknown.contains(p)))
                .filter(|p| seen.insert(p.clone()))
                .collect()
        };
        if missing.is_empty() {
            return Ok(());
        }
        let found = db::kinds::manifests_of(pool, &missing).await?;
        let mut compiled: HashMap<(String, i32), Cached> = found
            .into_iter()
            .filter_map(|r| {
                let key = (r.pair.kind.clone(), r.pair.version);
                compile_stored(r).map(|c| (key, c))
            })
            .collect();
        let mut k = self.write();
        for key in missing {
            match compiled.remove(&key) {
                Some(c) => {
                    k.unknown.remove(&key);
                    k.map.insert(key, c);
                }
                None => {
                    if k.unknown.len() >= MAX_UNKNOWN {
                        k.unknown.clear();
                    }
                    k.unknown.insert(key);
                }
            }
        }
        Ok(())
    }

    /// The compiled schemas of (kind, version), if cached.
    pub fn get(&self, kind: &str, version: i32) -> Option<Arc<KindSchemas>> {
        self.read()
            .map
            .get(&(kind.to_string(), version))
            .map(|c| c.schemas.clone())
    }

    /// Whether (kind, version) is remembered as unknown.
    pub fn is_unknown(&self, kind: &str, version: i32) -> bool {
        self.read().unknown.contains(&(kind.to_string(), version))
    }

    /// Whether any version of `kind` is known.
    pub fn has_kind(&self, kind: &str) -> bool {
        self.read().map.keys().any(|(k, _)| k == kind)
    }

    /// Whether some version of `kind` declares only reactor reactions.
    pub fn is_reactor_kind(&self, kind: &str) -> bool {
        self.read()
            .map
            .iter()
            .any(|((k, _), c)| k == kind && c.schemas.manifest.is_reactor())
    }

    /// Installs freshly applied schemas compiled from a manifest whose content hash is
    /// `manifest_version` (this pod sees its own apply at once), and forgets every remembered
    /// unknown: a kind just applied is never refused here.
    pub fn insert(&self, k: KindSchemas, manifest_version: i64) {
        let key = (k.manifest.kind.clone(), k.manifest.kind_version);
        let mut known = self.write();
        known.unknown.clear();
        known.map.insert(
            key,
            Cached {
                schemas: Arc::new(k),
                manifest_version,
            },
        );
    }

    /// Forgets a deleted kind version (this pod sees its own delete at once).
    pub fn remove(&self, kind: &str, version: i32) {
        self.write().map.remove(&(kind.to_string(), version));
    }

    /// Forgets every remembered unknown (the manifests changed somewhere).
    pub fn forget_unknown(&self) {
        self.write().unknown.clear();
    }

    /// Keeps the cache fresh until `shutdown`: LISTEN kind_manifest_changed + a failsafe. A
    /// notification first forgets the remembered unknowns (at once, before the re-read).
    pub async fn keep_fresh(
        self: Arc<Self>,
        pool: PgPool,
        every: Duration,
        shutdown: CancellationToken,
    ) {
        let notify = Arc::new(Notify::new());
        let listener = converge_engine::wake::spawn_listen_notify(
            pool.clone(),
            &["kind_manifest_changed"],
            notify.clone(),
            shutdown.clone(),
        );
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = notify.notified() => self.forget_unknown(),
                _ = tokio::time::sleep(every) => {}
            }
            if let Err(e) = self.reload(&pool).await {
                tracing::warn!(error = %e, "schema cache refresh failed");
            }
        }
        let _ = listener.await;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Kind `k` with `schema` as its manifest's `field` (config_schema, spec_schema).
    fn kind_with(field: &str, schema: Value) -> KindSchemas {
        let mut m = json!({
            "kind": "k", "kind_version": 1,
            "reactions": [{"name": "w", "trigger": "specChange", "emits": ["status"]}]
        });
        m[field] = schema;
        KindSchemas::compile(serde_json::from_value(m).unwrap()).unwrap()
    }

    fn kind(config_schema: Value) -> KindSchemas {
        kind_with("config_schema", config_schema)
    }

    fn secret() -> Value {
        json!({"type": "string", "writeOnly": true})
    }

    #[test]
    fn masks_what_write_only_covers_at_any_depth() {
        let k = kind(json!({
            "type": "object",
            "$defs": {"cred": {"type": "object", "properties": {"key": secret(), "id": {}}}},
            "properties": {
                "token": secret(),
                "region": {"type": "string"},
                "db": {"properties": {"password": secret(), "host": {}}},
                "creds": {"items": {"$ref": "#/$defs/cred"}},
                "tuple": {"prefixItems": [{}, secret()]},
                "vault": {"allOf": [{"properties": {"a~/b": secret()}}]},
                "whole": {"type": "object", "writeOnly": true},
                "extra": {"additionalProperties": secret(), "properties": {"plain": {}}}
            }
        }));
        let mut cfg = json!({
            "token": "t0p", "region": "eu",
            "db": {"password": "pw", "host": "h"},
            "creds": [{"key": "k1", "id": "i1"}, {"key": "k2"}],
            "tuple": ["open", "shut"],
            "vault": {"a~/b": "v"},
            "whole": {"nested": "n"},
            "extra": {"plain": "p", "x": "s1", "y": "s2"}
        });
        assert_eq!(k.mask_config(&mut cfg), 9);
        assert_eq!(
            cfg,
            json!({
                "token": MASK, "region": "eu",
                "db": {"password": MASK, "host": "h"},
                "creds": [{"key": MASK, "id": "i1"}, {"key": MASK}],
                "tuple": ["open", MASK],
                "vault": {"a~/b": MASK},
                "whole": MASK,
                "extra": {"plain": "p", "x": MASK, "y": MASK}
            })
        );
    }

    #[test]
    fn masks_what_the_validator_reaches_by_anchor_id_and_dynamic_ref() {
        let k = kind(json!({
            "$id": "https://example.invalid/cfg",
            "type": "object",
            "$defs": {
                "anchored": {"$anchor": "secret", "type": "string", "writeOnly": true},
                "byid": {"$id": "parts/key", "type": "string", "writeOnly": true},
                "dyn": {"$dynamicAnchor": "leaf", "type": "string", "writeOnly": true}
            },
            "properties": {
                "a": {"$ref": "#secret"},
                "b": {"$ref": "parts/key"},
                "c": {"$ref": "https://example.invalid/parts/key"},
                "d": {"$dynamicRef": "#leaf"},
                "plain": {"type": "string"}
            },
            "patternProperties": {"^pw_": {"$ref": "#secret"}}
        }));
        let mut cfg = json!({"a": "1", "b": "2", "c": "3", "d": "4", "plain": "p",
                             "pw_x": "5", "other": "o"});
        assert_eq!(k.mask_config(&mut cfg), 5, "{cfg}");
        assert_eq!(
            cfg,
            json!({"a": MASK, "b": MASK, "c": MASK, "d": MASK, "plain": "p",
                   "pw_x": MASK, "other": "o"})
        );
        // A value of the wrong type is still a secret (the annotation is dropped, not lost).
        let mut cfg = json!({"a": 12345});
        assert_eq!(k.mask_config(&mut cfg), 1);
        assert_eq!(cfg, json!({"a": MASK}));
        // The round trip keeps it, and messages never quote it.
        let stored = json!({"a": "s3cr3t-value", "plain": "p"});
        let mut back = json!({"a": MASK, "plain": "q"});
        assert_eq!(k.restore_config(&mut back, Some(&stored), "/spec"), Ok(1));
        assert_eq!(back["a"], "s3cr3t-value");
        let v = k.validate_config(&json!({"a": "s3cr3t-value", "plain": 5}), "/spec");
        assert!(
            v.errors.iter().all(|e| !e.message.contains("s3cr3t")),
            "{v:?}"
        );
    }

    #[test]
    fn a_huge_config_is_masked_whole() {
        let k = kind(json!({"properties": {"t": secret()}}));
        let mut cfg = json!({"t": "x", "many": vec![1; MAX_SEARCHED_VALUES], "n": null});
        k.mask_config(&mut cfg);
        assert_eq!(cfg["t"], MASK);
        assert_eq!(cfg["many"][0], MASK);
        assert_eq!(cfg["n"], Value::Null);
        // No writeOnly anywhere: nothing is looked for.
        let plain = kind(json!({"properties": {"t": {}}}));
        let mut cfg = json!({"t": "x", "many": vec![1; MAX_SEARCHED_VALUES]});
        assert_eq!(plain.mask_config(&mut cfg), 0);
    }

    #[test]
    fn a_ref_cycle_ends_and_no_schema_masks_nothing() {
        let k = kind(json!({"allOf": [{"$ref": "#"}, {"$ref": "#"}],
                            "properties": {"s": secret(), "next": {"$ref": "#"}}}));
        let mut cfg = json!({"s": "a", "next": {"s": "b", "next": {"x": 1}}});
        assert_eq!(k.mask_config(&mut cfg), 2);
        assert_eq!(
            cfg,
            json!({"s": MASK, "next": {"s": MASK, "next": {"x": 1}}})
        );
        let mut cfg = json!({"s": "a"});
        assert_eq!(kind(Value::Null).mask_config(&mut cfg), 0);
        assert_eq!(cfg, json!({"s": "a"}));
    }

    #[test]
    fn a_mask_written_back_keeps_the_stored_secret() {
        let k = kind(json!({"properties": {"token": secret(), "region": {},
                                           "db": {"properties": {"pw": secret()}}}}));
        let stored = json!({"token": "old", "region": "eu", "db": {"pw": "p1"}});
        let mut read = stored.clone();
        k.mask_config(&mut read);
        read["region"] = json!("us");
        assert_eq!(k.restore_config(&mut read, Some(&stored), "/spec"), Ok(2));
        assert_eq!(
            read,
            json!({"token": "old", "region": "us", "db": {"pw": "p1"}})
        );

        // A new value replaces it; "***" in a field that is not writeOnly is just a string.
        let mut cfg = json!({"token": "new", "region": MASK});
        assert_eq!(k.restore_config(&mut cfg, Some(&stored), "/spec"), Ok(0));
        assert_eq!(cfg, json!({"token": "new", "region": MASK}));

        // Nothing stored to keep: located errors.
        let mut cfg = json!({"token": MASK, "db": {"pw": MASK}});
        let errs = k
            .restore_config(&mut cfg, Some(&json!({"token": "t"})), "/spec")
            .unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].location, "/spec/db/pw");
        let mut cfg = json!({"token": MASK, "db": {"pw": MASK}});
        let errs = k.restore_config(&mut cfg, None, "/spec").unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
    }

    fn spec_kind(spec_schema: Value) -> KindSchemas {
        kind_with("spec_schema", spec_schema)
    }

    #[test]
    fn a_huge_value_breaking_many_rules_gets_short_messages() {
        let rules: Vec<Value> = (1..=60).map(|i| json!({"maxLength": i})).collect();
        let k = spec_kind(json!({"properties": {"v": {"allOf": rules}}}));
        let v = k.validate_spec(&json!({"v": "x".repeat(1 << 20)}), "/spec");
        assert_eq!(v.errors.len(), MAX_LISTED);
        assert_eq!(v.omitted, 10);
        let quoted = format!("\"{}…\"", "x".repeat(64));
        for e in &v.errors {
            assert_eq!(e.location, "/spec/v");
            assert_eq!(e.keyword.as_deref(), Some("maxLength"));
            assert!(e.message.starts_with(&quoted), "{}", e.message);
            assert!(e.message.len() < 200, "{}", e.message);
        }
        assert!(
            k.validate_spec(&json!({"v": "x"}), "/spec")
                .errors
                .is_empty()
        );
    }

    #[test]
    fn a_large_invalid_document_gets_its_first_violation_only() {
        let k = spec_kind(json!({"properties": {"v": {"items": {"type": "string"}}}}));
        let small = k.validate_spec(&json!({"v": vec![1; 100]}), "/spec");
        assert_eq!((small.errors.len(), small.omitted), (MAX_LISTED, 50));
        let large = k.validate_spec(&json!({"v": vec![1; MAX_SEARCHED_VALUES]}), "/spec");
        assert_eq!((large.errors.len(), large.omitted), (1, 0), "{large:?}");
        assert_eq!(large.errors[0].location, "/spec/v/0");
        assert!(large.errors[0].message.contains("first problem found"));
        let valid = k.validate_spec(&json!({"v": vec!["s"; MAX_SEARCHED_VALUES]}), "/spec");
        assert!(valid.errors.is_empty());
    }

    #[test]
    fn validation_messages_never_quote_a_secret() {
        let k = kind(json!({
            "type": "object",
            "properties": {"token": {"type": "string", "writeOnly": true, "minLength": 20},
                           "port": {"type": "integer"}},
            "not": {"required": ["token", "port"]}
        }));
        let cfg = json!({"token": "hunter2", "port": "eighty"});
        let errs = k.validate_config(&cfg, "/spec").errors;
        assert!(errs.iter().any(|e| e.location == "/spec/token"), "{errs:?}");
        assert!(errs.iter().any(|e| e.location == "/spec/port"), "{errs:?}");
        assert!(errs.iter().any(|e| e.location == "/spec"), "{errs:?}");
        for e in &errs {
            assert!(!e.message.contains("hunter2"), "{e:?}");
        }
        // The message about the plain field stays useful.
        let port = errs.iter().find(|e| e.location == "/spec/port").unwrap();
        assert!(port.message.contains("eighty"), "{port:?}");

        let mut cel = vec![FieldError::new(
            "/spec/resources/0".into(),
            "bad expression near hunter2".into(),
        )];
        k.redact_config_errors(&cfg, "/spec", &mut cel);
        assert!(!cel[0].message.contains("hunter2"), "{cel:?}");
    }
}
