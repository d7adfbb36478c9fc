//! Property test of secret masking (issue 41 item 4): config schemas reaching a
//! `"writeOnly": true` value by any chain of the routes the validator follows (`$ref` to a
//! pointer, `$anchor`, an `$id`-relative URI, `$dynamicRef`, the applicators, `items`,
//! `prefixItems`, `additionalProperties`, `patternProperties`, `if`/`then`/`else`) have that
//! value masked, put back from the stored config when written back as `"***"`, and never
//! quoted by a validation message.

use converge_control::testing::write_only::{Route, case};
use converge_kinds::{Kind, MASK};
use proptest::prelude::*;
use serde_json::{Value, json};

fn kind(config_schema: Value) -> Kind {
    let m = json!({
        "kind": "k", "kind_version": 1, "config_schema": config_schema,
        "reactions": [{"name": "w", "trigger": "specChange", "emits": ["status"]}]
    });
    Kind::compile(serde_json::from_value(m).unwrap(), 1)
        .unwrap_or_else(|e| panic!("the generated schema compiles: {e:?}"))
}

fn routes() -> impl Strategy<Value = Vec<Route>> {
    prop::collection::vec(prop::sample::select(Route::ALL.to_vec()), 0..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_write_only_value_is_masked_however_the_schema_reaches_it(
        routes in routes(),
        secret in "[a-z0-9]{12,24}",
    ) {
        let secret = format!("secret-{secret}");
        let c = case(&routes, &secret, false);
        let k = kind(c.schema.clone());
        prop_assert!(k.config_violations(&c.config, "/spec").errors.is_empty());

        // Every read.
        let mut read = c.config.clone();
        k.mask_config(&mut read);
        prop_assert_eq!(&read, &c.masked, "schema {}", c.schema);
        prop_assert!(!read.to_string().contains(&secret));

        // The read written back keeps the stored secret.
        let mut back = read.clone();
        prop_assert!(k.restore_config(&mut back, Some(&c.config), "/spec").is_ok());
        prop_assert_eq!(&back, &c.config);

        // A value breaking its rule is refused without being quoted.
        let tight = case(&routes, &secret, true);
        let k = kind(tight.schema.clone());
        let v = k.config_violations(&tight.config, "/spec");
        prop_assert!(!v.errors.is_empty(), "schema {}", tight.schema);
        for e in &v.errors {
            prop_assert!(!e.message.contains(&secret), "{:?}", e);
            prop_assert!(!e.pointer.contains(&secret), "{:?}", e);
        }
        let mut read = tight.config.clone();
        k.mask_config(&mut read);
        prop_assert_eq!(&read, &tight.masked, "schema {}", tight.schema);
    }
}

#[test]
fn every_route_alone_and_the_mask_constant() {
    assert_eq!(MASK, "***");
    for r in Route::ALL {
        let c = case(&[r], "secret-alone-1234", false);
        let k = kind(c.schema.clone());
        let mut read = c.config.clone();
        k.mask_config(&mut read);
        assert_eq!(read, c.masked, "{r:?}: {}", c.schema);
    }
}
