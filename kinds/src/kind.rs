//! One (kind, version): its manifest, parsed and with every JSON Schema it holds compiled
//! once, what routing needs from it, and the rules the kind imposes, one method each. Every
//! door asks these methods (the API's applies, the broker's results, composes and claims), so
//! a rule is stated once.

use std::collections::HashMap;

use converge_engine::{
    ids::KindPair,
    sealing::{self, Keyring, SealError},
};
use converge_proto::manifest::{self, Descendants, Emit, KindManifest};
use serde_json::Value;

use crate::{
    schema::Schema,
    secrets::{self, MASK, Secrets},
    text::{MAX_LISTED, MAX_MESSAGE, clipped},
    violation::{Violation, Violations},
};

/// A kind version's manifest with its schemas compiled, its routing facts and its rules.
pub struct Kind {
    /// The (kind, version).
    pub pair: KindPair,
    /// The manifest.
    pub manifest: KindManifest,
    /// The stored manifest's content hash (`manifest_version`); 0 for a manifest checked but
    /// not stored yet.
    pub manifest_version: i64,
    /// The reaction run for a spec change without children (the worker), if declared.
    pub work_reaction: Option<String>,
    /// The composer reaction, if declared.
    pub compose_reaction: Option<String>,
    /// The rollup reaction, if declared.
    pub rollup_reaction: Option<String>,
    /// Whether the rollup request carries every descendant (`"descendants": "full"`), not
    /// only the summary.
    pub rollup_full: bool,
    /// Whether the composer's edges are applied (its emits has `edges`).
    pub compose_edges: bool,
    /// Whether the composer's configs are applied (its emits has `configs`).
    pub compose_configs: bool,
    /// The teardown reaction (deleteRequested), if declared.
    pub delete_reaction: Option<String>,
    /// Verb → the operation reaction that handles it.
    pub verbs: HashMap<String, String>,
    /// A reactor kind's reaction (its tasks come from the lifecycle outbox, not the queue).
    pub reactor_reaction: Option<String>,
    spec: Option<Schema>,
    status: Option<Schema>,
    config: Option<Schema>,
    /// Verb → the compiled `output_schema` of its operation reaction, for those that declare
    /// one.
    outputs: HashMap<String, Schema>,
    /// Whether the config_schema marks anything `"writeOnly": true`.
    config_has_write_only: bool,
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kind")
            .field("pair", &self.pair)
            .field("manifest_version", &self.manifest_version)
            .finish_non_exhaustive()
    }
}

impl Kind {
    /// Compiles every JSON Schema `manifest` holds (spec, status and config schemas, each
    /// operation's `output_schema`) without checking its other rules; each one that does not
    /// compile is a violation at its pointer, with `at(i)` the document index of
    /// `manifest.reactions[i]`. Counted in `converge_kind_schema_compiles_total`.
    pub(crate) fn build(
        manifest: KindManifest,
        manifest_version: i64,
        at: &dyn Fn(usize) -> usize,
    ) -> Result<Kind, Vec<Violation>> {
        converge_engine::metrics::metrics()
            .kind_schema_compiles
            .inc();
        let mut errs = Vec::new();
        let mut compile = |pointer: String, name: &'static str, schema: Option<&Value>| {
            Schema::compile(name, schema)
                .map_err(|e| {
                    errs.push(Violation::new(
                        pointer,
                        clipped(
                            MAX_MESSAGE,
                            format_args!("{name} is not a valid JSON Schema: {e}"),
                        ),
                    ))
                })
                .ok()
                .flatten()
        };
        let spec = compile(
            "/spec_schema".into(),
            "spec_schema",
            manifest.spec_schema.as_ref(),
        );
        let status = compile(
            "/status_schema".into(),
            "status_schema",
            manifest.status_schema.as_ref(),
        );
        let config = compile(
            "/config_schema".into(),
            "config_schema",
            manifest.config_schema.as_ref(),
        );
        let mut outputs = HashMap::new();
        for (i, r) in manifest.reactions.iter().enumerate() {
            let pointer = format!("/reactions/{}/output_schema", at(i));
            let compiled = compile(pointer, "output_schema", r.output_schema.as_ref());
            if let (Some(verb), Some(s)) = (&r.verb, compiled) {
                outputs.insert(verb.clone(), s);
            }
        }
        if !errs.is_empty() {
            return Err(errs);
        }
        let m = &manifest;
        Ok(Kind {
            pair: KindPair::new(m.kind.clone(), m.kind_version),
            manifest_version,
            work_reaction: m.worker_reaction().map(|x| x.name.clone()),
            compose_reaction: m.composer_reaction().map(|x| x.name.clone()),
            rollup_reaction: m.rollup_reaction().map(|x| x.name.clone()),
            rollup_full: m
                .rollup_reaction()
                .is_some_and(|x| x.descendants == Some(Descendants::Full)),
            compose_edges: m.composer_reaction().is_some_and(|x| x.emits(Emit::Edges)),
            compose_configs: m
                .composer_reaction()
                .is_some_and(|x| x.emits(Emit::Configs)),
            delete_reaction: m.delete_reaction().map(|x| x.name.clone()),
            reactor_reaction: m
                .is_reactor()
                .then(|| m.reactions.first().map(|x| x.name.clone()))
                .flatten(),
            verbs: m
                .reactions
                .iter()
                .filter_map(|x| Some((x.verb.clone()?, x.name.clone())))
                .collect(),
            config_has_write_only: m
                .config_schema
                .as_ref()
                .is_some_and(secrets::has_write_only),
            spec,
            status,
            config,
            outputs,
            manifest,
        })
    }

    /// Compiles `manifest` (content hash `manifest_version`) as [`Kind::build`] does, with
    /// reactions located at their own index: for a test or a tool that holds a manifest it
    /// knows to be good.
    pub fn compile(manifest: KindManifest, manifest_version: i64) -> Result<Kind, Vec<Violation>> {
        Kind::build(manifest, manifest_version, &|i| i)
    }

    /// Whether a reconcile is a single WORK stage (no composer, no rollup): the hot path
    /// that needs no pipeline state.
    pub fn is_plain_leaf(&self) -> bool {
        self.work_reaction.is_some()
            && self.compose_reaction.is_none()
            && self.rollup_reaction.is_none()
    }

    /// Whether the kind declares only reactor reactions (it is bound, never created).
    pub fn is_reactor(&self) -> bool {
        self.manifest.is_reactor()
    }

    /// Whether the manifest declares the exec provider.
    pub fn is_exec(&self) -> bool {
        self.manifest.is_exec()
    }

    /// Whether the kind has a `spec_schema` to check a spec against (without one, nothing
    /// needs parsing).
    pub fn checks_spec(&self) -> bool {
        self.spec.is_some()
    }

    /// Whether a config of the kind is checked at all (a `config_schema`, or the exec rule):
    /// without either, nothing needs parsing.
    pub fn checks_config(&self) -> bool {
        self.config.is_some() || self.is_exec()
    }

    /// Rule: a resource's spec satisfies the kind's `spec_schema`. Its violations located
    /// under `prefix` (e.g. `/spec`), at most [`MAX_LISTED`] described: an API apply lists
    /// them all in one answer.
    pub fn spec_violations(&self, spec: &Value, prefix: &str) -> Violations {
        match &self.spec {
            Some(s) => s.violations(spec, prefix, MAX_LISTED, None),
            None => Violations::default(),
        }
    }

    /// [`Kind::spec_violations`], the first only: what a composed child (as emitted, and at
    /// each claim, with values flowed into it since) is refused on.
    pub fn spec_violation(&self, spec: &Value) -> Option<Violation> {
        first(self.spec.as_ref()?.violations(spec, "", 1, None))
    }

    /// Rule: a reconcile's status satisfies the kind's `status_schema`. The first violation.
    pub fn status_violation(&self, status: &Value) -> Option<Violation> {
        first(self.status.as_ref()?.violations(status, "", 1, None))
    }

    /// Whether `status` would be stored: no `status_schema`, or one it satisfies (the fast
    /// path, nothing described).
    pub fn status_fits(&self, status: &Value) -> bool {
        self.status.as_ref().is_none_or(|s| s.is_valid(status))
    }

    /// Rule: a successful operation's output satisfies its verb's `output_schema`. The first
    /// violation; none for a verb without one.
    pub fn output_violation(&self, verb: &str, output: &Value) -> Option<Violation> {
        first(self.outputs.get(verb)?.violations(output, "", 1, None))
    }

    /// Rule: a provider config's spec satisfies the kind's `config_schema`. Its violations
    /// located under `prefix`; a message never shows a writeOnly value (one about a
    /// writeOnly location is withheld, one about a value holding secrets does not quote it).
    pub fn config_violations(&self, config: &Value, prefix: &str) -> Violations {
        let Some(schema) = &self.config else {
            return Violations::default();
        };
        if schema.is_valid(config) {
            return Violations::default();
        }
        let secrets = self.config_secrets(config);
        schema.violations(config, prefix, MAX_LISTED, Some(&secrets))
    }

    /// [`Kind::config_violations`], the first only: what a composer's config is refused on.
    pub fn config_violation(&self, config: &Value) -> Option<Violation> {
        let schema = self.config.as_ref()?;
        if schema.is_valid(config) {
            return None;
        }
        let secrets = self.config_secrets(config);
        first(schema.violations(config, "", 1, Some(&secrets)))
    }

    /// Rule (an exec kind's): the fields of a config acting as an override that say what
    /// runs ([`manifest::EXEC_OVERRIDE_FORBIDDEN`]) which `spec` sets; none for a kind
    /// without the exec provider.
    pub fn exec_override_violations(&self, spec: &Value) -> Vec<&'static str> {
        if self.is_exec() {
            manifest::exec_override_fields(spec)
        } else {
            Vec::new()
        }
    }

    /// Rule: whether this (composer) kind's manifest names (kind, version) in its `edges`,
    /// so its composer may configure that kind without emitting a child of it.
    pub fn declares(&self, kind: &str, version: i32) -> bool {
        self.manifest
            .edges
            .iter()
            .flat_map(|e| [&e.from, &e.to])
            .any(|end| end.kind == kind && end.kind_version == version)
    }

    /// Rule: a composer's edge from a child of kind `from` to one of kind `to`, carrying the
    /// value flows `flows` (dependent field, source field), is among the `edges` its kind
    /// declares, when it declares any. An edge is declared when a declared edge joins the same
    /// (kind, version)s in the same direction; when the declared edges joining them list
    /// value flows, each of its flows must be one of them (a flow not declared escapes the
    /// type check an apply makes). The reason it is not, if it is not.
    pub fn undeclared_edge<'f>(
        &self,
        from: (&str, i32),
        to: (&str, i32),
        flows: impl IntoIterator<Item = (&'f str, &'f str)>,
    ) -> Option<String> {
        let edges = &self.manifest.edges;
        if edges.is_empty() {
            return None;
        }
        let end = |e: &manifest::EdgeEnd, (k, v): (&str, i32)| e.kind == k && e.kind_version == v;
        let joining: Vec<&manifest::EdgeDecl> = edges
            .iter()
            .filter(|e| end(&e.from, from) && end(&e.to, to))
            .collect();
        let (me, mv) = (&self.pair.kind, self.pair.version);
        if joining.is_empty() {
            let declared: Vec<String> = edges
                .iter()
                .map(|e| {
                    format!(
                        "{} v{} -> {} v{}",
                        e.from.kind, e.from.kind_version, e.to.kind, e.to.kind_version
                    )
                })
                .collect();
            return Some(clipped(
                MAX_MESSAGE,
                format_args!(
                    "{} v{} -> {} v{} is not among the edges kind {me} v{mv} declares ({})",
                    from.0,
                    from.1,
                    to.0,
                    to.1,
                    declared.join(", ")
                ),
            ));
        }
        let declared_flows: Vec<(&str, &str)> = joining
            .iter()
            .flat_map(|e| &e.values)
            .map(|v| (v.dependent_field.as_str(), v.source_field.as_str()))
            .collect();
        if declared_flows.is_empty() {
            return None;
        }
        flows
            .into_iter()
            .find(|f| !declared_flows.contains(f))
            .map(|(dependent, source)| {
                clipped(
                    MAX_MESSAGE,
                    format_args!(
                        "its value flow {source} -> {dependent} is not among those kind {me} \
                         v{mv} declares for {} v{} -> {} v{}",
                        from.0, from.1, to.0, to.1
                    ),
                )
            })
    }

    /// Replaces every value of `config` a writeOnly subschema of the kind's `config_schema`
    /// covers with [`MASK`]; how many. Every API read of a provider config goes through here.
    /// An envelope of a sealed value is masked wherever it sits, writeOnly or not (a field
    /// the schema no longer marks still shows no ciphertext).
    pub fn mask_config(&self, config: &mut Value) -> usize {
        let mut n = 0;
        self.write_only(config, |_, v| {
            *v = Value::String(MASK.into());
            n += 1;
        });
        n + sealing::mask_envelopes(config, MASK)
    }

    /// Seals, in place under `keys`' current key, every value of `config` (a plaintext
    /// config of this kind: no envelope left in it) a writeOnly subschema covers; how many.
    /// Without a key, a writeOnly value that is neither `null` nor `""` is refused
    /// ([`SealError::NoKey`], naming its pointer and the setting).
    pub fn seal_config(&self, keys: &Keyring, config: &mut Value) -> Result<usize, SealError> {
        let pointers = self.write_only_pointers(config);
        keys.seal_config(&self.pair.kind, config, &pointers)
    }

    /// Replaces every value of `spec` a writeOnly subschema of the kind's `spec_schema`
    /// covers with [`MASK`]; how many. What a plan shows of a spec goes through here, so a
    /// secret a spec carries is never echoed back, not even as a diff.
    pub fn mask_spec(&self, spec: &mut Value) -> usize {
        let pointers = match (&self.manifest.spec_schema, &self.spec) {
            (Some(root), Some(schema)) if secrets::has_write_only(root) => {
                secrets::write_only_pointers(root, schema.validator(), spec)
            }
            _ => return 0,
        };
        let mut n = 0;
        for ptr in pointers {
            if let Some(v) = spec.pointer_mut(&ptr) {
                *v = Value::String(MASK.into());
                n += 1;
            }
        }
        n
    }

    /// Puts the stored secret back wherever `config` (a config being written) carries
    /// [`MASK`] at a writeOnly location, so a read-modify-write round trip keeps the secret.
    /// `stored` is the spec already stored under that name for this kind (`None`: there is
    /// none); a [`MASK`] with nothing stored at its location is a violation located under
    /// `prefix`. Returns how many values were kept.
    pub fn restore_config(
        &self,
        config: &mut Value,
        stored: Option<&Value>,
        prefix: &str,
    ) -> Result<usize, Vec<Violation>> {
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
                None => errors.push(Violation::new(
                    format_args!("{prefix}{ptr}"),
                    format_args!(
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

    /// Withholds every message of `violations` (located under `prefix` in `config`) that
    /// sits at a writeOnly location or quotes one of `config`'s writeOnly values: for the
    /// answers other checks of a config give (a CEL graph's compile errors, its value flows).
    pub fn redact_config_violations(
        &self,
        config: &Value,
        prefix: &str,
        violations: &mut [Violation],
    ) {
        let secrets = self.config_secrets(config);
        for e in violations {
            let at = e.pointer.strip_prefix(prefix).unwrap_or(&e.pointer);
            if secrets.shows(at, &e.message) {
                e.message = format!("invalid{}", secrets::WITHHELD);
            }
        }
    }

    fn config_secrets(&self, config: &Value) -> Secrets {
        Secrets::of(config, self.write_only_pointers(config))
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

    /// The JSON pointers of `config` a writeOnly subschema of the kind's config_schema
    /// covers, outermost only, sorted (none when the kind declares no secrets).
    pub fn config_secret_pointers(&self, config: &Value) -> Vec<String> {
        self.write_only_pointers(config)
    }

    fn write_only_pointers(&self, config: &Value) -> Vec<String> {
        match (&self.manifest.config_schema, &self.config) {
            (Some(root), Some(schema)) if self.config_has_write_only => {
                secrets::write_only_pointers(root, schema.validator(), config)
            }
            _ => Vec::new(),
        }
    }
}

fn first(v: Violations) -> Option<Violation> {
    v.errors.into_iter().next()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::MAX_SEARCHED_VALUES;

    /// Kind `k` with `schema` as its manifest's `field` (config_schema, spec_schema).
    fn kind_with(field: &str, schema: Value) -> Kind {
        let mut m = json!({
            "kind": "k", "kind_version": 1,
            "reactions": [{"name": "w", "trigger": "specChange", "emits": ["status"]}]
        });
        m[field] = schema;
        Kind::compile(serde_json::from_value(m).unwrap(), 1).unwrap()
    }

    fn kind(config_schema: Value) -> Kind {
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
        let v = k.config_violations(&json!({"a": "s3cr3t-value", "plain": 5}), "/spec");
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
    fn a_spec_is_masked_by_its_spec_schema() {
        let k = kind_with(
            "spec_schema",
            json!({"properties": {"db": {"properties": {"password": secret()}}}}),
        );
        let mut spec = json!({"db": {"password": "hunter2", "user": "a"}});
        assert_eq!(k.mask_spec(&mut spec), 1);
        assert_eq!(spec, json!({"db": {"password": MASK, "user": "a"}}));
        // The config_schema's secrets are not the spec's.
        let mut spec = json!({"t": "x"});
        assert_eq!(
            kind(json!({"properties": {"t": secret()}})).mask_spec(&mut spec),
            0
        );
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
        assert_eq!(errs[0].pointer, "/spec/db/pw");
        let mut cfg = json!({"token": MASK, "db": {"pw": MASK}});
        let errs = k.restore_config(&mut cfg, None, "/spec").unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
    }

    fn spec_kind(spec_schema: Value) -> Kind {
        kind_with("spec_schema", spec_schema)
    }

    #[test]
    fn a_huge_value_breaking_many_rules_gets_short_messages() {
        let rules: Vec<Value> = (1..=60).map(|i| json!({"maxLength": i})).collect();
        let k = spec_kind(json!({"properties": {"v": {"allOf": rules}}}));
        let v = k.spec_violations(&json!({"v": "x".repeat(1 << 20)}), "/spec");
        assert_eq!(v.errors.len(), MAX_LISTED);
        assert_eq!(v.omitted, 10);
        let quoted = format!("\"{}…\"", "x".repeat(64));
        for e in &v.errors {
            assert_eq!(e.pointer, "/spec/v");
            assert_eq!(e.keyword.as_deref(), Some("maxLength"));
            assert!(e.message.starts_with(&quoted), "{}", e.message);
            assert!(e.message.len() < 200, "{}", e.message);
        }
        assert!(
            k.spec_violations(&json!({"v": "x"}), "/spec")
                .errors
                .is_empty()
        );
    }

    #[test]
    fn a_large_invalid_document_gets_its_first_violation_only() {
        let k = spec_kind(json!({"properties": {"v": {"items": {"type": "string"}}}}));
        let small = k.spec_violations(&json!({"v": vec![1; 100]}), "/spec");
        assert_eq!((small.errors.len(), small.omitted), (MAX_LISTED, 50));
        let large = k.spec_violations(&json!({"v": vec![1; MAX_SEARCHED_VALUES]}), "/spec");
        assert_eq!((large.errors.len(), large.omitted), (1, 0), "{large:?}");
        assert_eq!(large.errors[0].pointer, "/spec/v/0");
        assert!(large.errors[0].message.contains("first problem found"));
        let valid = k.spec_violations(&json!({"v": vec!["s"; MAX_SEARCHED_VALUES]}), "/spec");
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
        let errs = k.config_violations(&cfg, "/spec").errors;
        assert!(errs.iter().any(|e| e.pointer == "/spec/token"), "{errs:?}");
        assert!(errs.iter().any(|e| e.pointer == "/spec/port"), "{errs:?}");
        assert!(errs.iter().any(|e| e.pointer == "/spec"), "{errs:?}");
        for e in &errs {
            assert!(!e.message.contains("hunter2"), "{e:?}");
        }
        // The message about the plain field stays useful.
        let port = errs.iter().find(|e| e.pointer == "/spec/port").unwrap();
        assert!(port.message.contains("eighty"), "{port:?}");

        let mut cel = vec![Violation::new(
            "/spec/resources/0",
            "bad expression near hunter2",
        )];
        k.redact_config_violations(&cfg, "/spec", &mut cel);
        assert!(!cel[0].message.contains("hunter2"), "{cel:?}");
    }

    /// A composer `c` declaring `edges`.
    fn composer(edges: Value) -> Kind {
        let m = json!({
            "kind": "c", "kind_version": 1, "edges": edges,
            "reactions": [{"name": "compose", "trigger": "specChange", "emits": ["children", "edges"]}]
        });
        Kind::compile(serde_json::from_value(m).unwrap(), 1).unwrap()
    }

    #[test]
    fn a_composer_that_declares_edges_emits_only_those() {
        // No declared edges: any edge goes.
        let open = composer(json!([]));
        assert_eq!(open.undeclared_edge(("a", 1), ("b", 1), []), None);

        let c = composer(json!([
            {"from": {"kind": "app"}, "to": {"kind": "db"},
             "values": [{"dependent_field": "/host", "source_field": "/endpoint"}]},
            {"from": {"kind": "app"}, "to": {"kind": "cache", "kind_version": 2}}
        ]));
        // Declared: the same ends, the same direction, a declared flow (or any flow where
        // the declared edge lists none).
        assert_eq!(c.undeclared_edge(("app", 1), ("db", 1), []), None);
        assert_eq!(
            c.undeclared_edge(("app", 1), ("db", 1), [("/host", "/endpoint")]),
            None
        );
        assert_eq!(
            c.undeclared_edge(("app", 1), ("cache", 2), [("/x", "/y")]),
            None
        );
        // Reversed, another version, another kind: not declared, and the answer lists what is.
        for (from, to) in [
            (("db", 1), ("app", 1)),
            (("app", 1), ("cache", 1)),
            (("app", 1), ("queue", 1)),
        ] {
            let why = c
                .undeclared_edge(from, to, [])
                .unwrap_or_else(|| panic!("{from:?} -> {to:?} is not declared"));
            assert!(
                why.contains(&format!(
                    "{} v{} -> {} v{} is not among the edges kind c v1 declares",
                    from.0, from.1, to.0, to.1
                )) && why.contains("app v1 -> db v1, app v1 -> cache v2"),
                "{why}"
            );
        }
        // A flow the declared edge does not list escapes the apply's type check: refused.
        let why = c
            .undeclared_edge(("app", 1), ("db", 1), [("/host", "/secret")])
            .expect("an undeclared flow");
        assert!(
            why.contains("its value flow /secret -> /host is not among those kind c v1 declares"),
            "{why}"
        );
    }
}
