//! Starlark values to JSON by a direct walk.
//!
//! `Value::to_json_value` goes through `erased_serde` for every node and was two thirds of
//! a 125-child compose. The common shapes (None, bool, small ints, strings, lists, tuples,
//! string-keyed dicts, structs) are converted here; anything else (floats, big ints, other
//! types, non-string keys, nesting deep enough to be a cycle) is handed to starlark's own
//! serializer for that subtree, so results and errors stay exactly starlark's.

use serde_json::Value as Json;
use starlark::values::{Value, dict::DictRef, list::ListRef, structs::StructRef, tuple::TupleRef};

/// Deeper than this, the subtree goes to starlark's serializer, which detects cycles.
const MAX_DIRECT_DEPTH: usize = 64;

/// `value` as JSON, like `value.to_json_value()`.
pub(crate) fn to_json(value: Value<'_>) -> anyhow::Result<Json> {
    walk(value, 0)
}

fn walk(value: Value<'_>, depth: usize) -> anyhow::Result<Json> {
    if depth > MAX_DIRECT_DEPTH {
        return value.to_json_value();
    }
    if value.is_none() {
        return Ok(Json::Null);
    }
    if let Some(b) = value.unpack_bool() {
        return Ok(Json::Bool(b));
    }
    if let Some(i) = value.unpack_i32() {
        return Ok(Json::from(i));
    }
    if let Some(s) = value.unpack_str() {
        return Ok(Json::String(s.to_owned()));
    }
    if let Some(list) = ListRef::from_value(value) {
        return list.iter().map(|v| walk(v, depth + 1)).collect();
    }
    if let Some(tuple) = TupleRef::from_value(value) {
        return tuple.iter().map(|v| walk(v, depth + 1)).collect();
    }
    if let Some(dict) = DictRef::from_value(value) {
        let mut map = serde_json::Map::new();
        for (k, v) in dict.iter() {
            let Some(k) = k.unpack_str() else {
                return value.to_json_value();
            };
            map.insert(k.to_owned(), walk(v, depth + 1)?);
        }
        return Ok(Json::Object(map));
    }
    if let Some(st) = StructRef::from_value(value) {
        let mut map = serde_json::Map::new();
        for (k, v) in st.iter() {
            map.insert(k.as_str().to_owned(), walk(v, depth + 1)?);
        }
        return Ok(Json::Object(map));
    }
    value.to_json_value()
}

/// The length of `value` serialised as JSON, without building the bytes (`usize::MAX`
/// when it cannot be serialised).
pub(crate) fn len(value: &Json) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use starlark::{
        environment::{Globals, GlobalsBuilder, LibraryExtension, Module},
        eval::Evaluator,
        syntax::{AstModule, Dialect},
    };

    use super::*;

    /// Evaluates `expr` and returns (direct walk, starlark's serializer) results.
    fn both(expr: &str) -> (Result<Json, String>, Result<Json, String>) {
        let globals: Globals = GlobalsBuilder::extended_by(&[LibraryExtension::StructType]).build();
        Module::with_temp_heap(|module| {
            let ast = AstModule::parse("t.star", expr.to_owned(), &Dialect::Extended).unwrap();
            let mut eval = Evaluator::new(&module);
            let v = eval.eval_module(ast, &globals).unwrap();
            (
                to_json(v).map_err(|e| e.to_string()),
                v.to_json_value().map_err(|e| e.to_string()),
            )
        })
    }

    #[test]
    fn agrees_with_starlark_serializer() {
        for expr in [
            "None".to_owned(),
            "[True, False, 0, -1, 2147483647, 2147483648, -2147483649, 1000000000000000000000000000000]".to_owned(),
            "{'a': [1, 2.5, 'x', None], 'b': {'c': (1, 'two')}, 'd': {}}".to_owned(),
            "struct(a = 1, b = struct(c = [1.0, -0.0]))".to_owned(),
            "{1: 'int key'}".to_owned(),
            "{'s': 'quote \" and \\\\ and \\n'}".to_owned(),
            format!("{}1{}", "[".repeat(70), "]".repeat(70)),
        ] {
            let (direct, reference) = both(&expr);
            assert_eq!(direct, reference, "{expr}");
        }
    }

    #[test]
    fn cycles_fail_like_starlark() {
        let (direct, reference) = both("a = []\na.append(a)\na");
        assert!(direct.is_err(), "{direct:?}");
        assert_eq!(direct.is_err(), reference.is_err());
    }

    #[test]
    fn non_json_values_convert_like_starlark() {
        // Whatever starlark makes of them (an error, or null for NaN), the walk makes too.
        for expr in [
            "[float('nan')]",
            "{'f': float('inf')}",
            "[len]",
            "[1.5, -0.0]",
        ] {
            let (direct, reference) = both(expr);
            assert_eq!(direct, reference, "{expr}");
        }
        let (direct, _) = both("[len]");
        assert!(direct.is_err(), "a function has no JSON form: {direct:?}");
    }
}
