//! Config schemas that reach a `"writeOnly": true` value by the routes the validator follows,
//! for the property tests of secret masking (the control crate's own, and the end-to-end
//! ones against a real converge): a chain of [`Route`]s, outermost first, ends at a
//! writeOnly string; [`case`] builds the schema, a config holding the secret there, and that
//! config as every API read must show it.

use serde_json::{Map, Value, json};

/// One step from a schema to the subschema below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `properties`.
    Property,
    /// `$ref` to a JSON pointer into the resource's `$defs`.
    RefPointer,
    /// `$ref` to a plain-name fragment: an `$anchor`.
    Anchor,
    /// `$ref` to another resource by its `$id`, a URI relative to the base.
    IdRelative,
    /// `$dynamicRef` to a `$dynamicAnchor`.
    DynamicRef,
    /// One branch of `allOf`.
    AllOf,
    /// The valid branch of `anyOf`.
    AnyOf,
    /// The one valid branch of `oneOf`.
    OneOf,
    /// `items` (every element of an array).
    Items,
    /// The second of `prefixItems`.
    PrefixItems,
    /// `additionalProperties` (a key not in `properties`).
    AdditionalProperties,
    /// `patternProperties` (a key its regex matches).
    PatternProperties,
    /// `then`, the `if` holding.
    Then,
    /// `else`, the `if` failing.
    Else,
}

impl Route {
    /// Every route.
    pub const ALL: [Route; 14] = [
        Route::Property,
        Route::RefPointer,
        Route::Anchor,
        Route::IdRelative,
        Route::DynamicRef,
        Route::AllOf,
        Route::AnyOf,
        Route::OneOf,
        Route::Items,
        Route::PrefixItems,
        Route::AdditionalProperties,
        Route::PatternProperties,
        Route::Then,
        Route::Else,
    ];
}

/// A generated case.
#[derive(Debug, Clone)]
pub struct Case {
    /// The config_schema (an object schema with an `$id`).
    pub schema: Value,
    /// A config holding the secret wherever the routes lead (an object).
    pub config: Value,
    /// `config` as an API read shows it: the secret replaced by `"***"`.
    pub masked: Value,
}

/// The schema reaching a writeOnly string through `routes` (outermost first), with `secret`
/// stored there; with `tight`, the writeOnly string allows at most 4 characters, so a longer
/// secret fails validation (its messages must not quote it).
pub fn case(routes: &[Route], secret: &str, tight: bool) -> Case {
    let mut leaf = json!({"type": "string", "writeOnly": true});
    if tight {
        leaf["maxLength"] = json!(4);
    }
    let mut b = Builder { next: 0 };
    let mut defs = Map::new();
    let (inner, config, masked) = b.build(
        routes,
        leaf,
        Value::String(secret.into()),
        Value::String("***".into()),
        &mut defs,
    );
    // The root is an object holding the chain under "cfg", beside a plain value.
    let schema = json!({
        "$id": "https://example.invalid/root",
        "type": "object",
        "properties": {"cfg": inner, "plain": {"type": "string"}},
        "$defs": defs,
    });
    Case {
        schema,
        config: json!({"cfg": config, "plain": "shown"}),
        masked: json!({"cfg": masked, "plain": "shown"}),
    }
}

struct Builder {
    next: usize,
}

impl Builder {
    fn id(&mut self) -> usize {
        self.next += 1;
        self.next
    }

    /// (schema, config, masked config) of `routes` ending at `leaf` valued `secret` (shown
    /// as `mask`); definitions go to `defs`, the `$defs` of the resource being built.
    fn build(
        &mut self,
        routes: &[Route],
        leaf: Value,
        secret: Value,
        mask: Value,
        defs: &mut Map<String, Value>,
    ) -> (Value, Value, Value) {
        let Some((route, rest)) = routes.split_first() else {
            return (leaf, secret, mask);
        };
        let n = self.id();
        match route {
            Route::Property => {
                let (s, c, m) = self.build(rest, leaf, secret, mask, defs);
                let key = format!("p{n}");
                (
                    json!({"type": "object", "properties": {&key: s, "plain": {}}}),
                    json!({&key: c, "plain": "p"}),
                    json!({&key: m, "plain": "p"}),
                )
            }
            Route::RefPointer | Route::Anchor | Route::DynamicRef => {
                let (mut s, c, m) = self.build(rest, leaf, secret, mask, defs);
                let (name, r) = match route {
                    Route::RefPointer => {
                        let name = format!("r{n}");
                        let r = json!({"$ref": format!("#/$defs/{name}")});
                        (name, r)
                    }
                    Route::Anchor => {
                        s["$anchor"] = json!(format!("a{n}"));
                        (format!("anchored{n}"), json!({"$ref": format!("#a{n}")}))
                    }
                    _ => {
                        s["$dynamicAnchor"] = json!(format!("d{n}"));
                        (
                            format!("dynamic{n}"),
                            json!({"$dynamicRef": format!("#d{n}")}),
                        )
                    }
                };
                defs.insert(name, s);
                (r, c, m)
            }
            Route::IdRelative => {
                // A resource of its own: what it refers to lives in its own `$defs`. An
                // absolute-path reference resolves the same from any depth.
                let mut own = Map::new();
                let (mut s, c, m) = self.build(rest, leaf, secret, mask, &mut own);
                let uri = format!("/parts/{n}");
                s["$id"] = json!(uri);
                if !own.is_empty() {
                    s["$defs"] = Value::Object(own);
                }
                defs.insert(format!("part{n}"), s);
                (json!({"$ref": uri}), c, m)
            }
            Route::AllOf => {
                let (s, c, m) = self.build(rest, leaf, secret, mask, defs);
                (json!({"allOf": [{}, s]}), c, m)
            }
            Route::AnyOf => {
                let (s, c, m) = self.build(rest, leaf, secret, mask, defs);
                (json!({"anyOf": [{"type": "null"}, s]}), c, m)
            }
            Route::OneOf => {
                let (s, c, m) = self.build(rest, leaf, secret, mask, defs);
                (json!({"oneOf": [{"not": {}}, s]}), c, m)
            }
            Route::Items => {
                let (s, c, m) = self.build(rest, leaf, secret, mask, defs);
                (
                    json!({"type": "array", "items": s}),
                    json!([c.clone(), c]),
                    json!([m.clone(), m]),
                )
            }
            Route::PrefixItems => {
                let (s, c, m) = self.build(rest, leaf, secret, mask, defs);
                (
                    json!({"type": "array", "prefixItems": [{"type": "string"}, s]}),
                    json!(["open", c]),
                    json!(["open", m]),
                )
            }
            Route::AdditionalProperties => {
                let (s, c, m) = self.build(rest, leaf, secret, mask, defs);
                let key = format!("extra{n}");
                (
                    json!({"type": "object", "properties": {"plain": {"type": "string"}},
                           "additionalProperties": s}),
                    json!({"plain": "p", &key: c}),
                    json!({"plain": "p", &key: m}),
                )
            }
            Route::PatternProperties => {
                let (s, c, m) = self.build(rest, leaf, secret, mask, defs);
                let key = format!("s_{n}");
                // No key beside it the regex misses: the structural half of the masking
                // takes every pattern to match every key (it has no regex engine), so it
                // would hide that one too.
                (
                    json!({"type": "object", "patternProperties": {"^s_": s}}),
                    json!({ &key: c }),
                    json!({ &key: m }),
                )
            }
            Route::Then => {
                let (s, c, m) = self.build(rest, leaf, secret, mask, defs);
                (json!({"if": {}, "then": s}), c, m)
            }
            Route::Else => {
                let (s, c, m) = self.build(rest, leaf, secret, mask, defs);
                (json!({"if": {"not": {}}, "else": s}), c, m)
            }
        }
    }
}
