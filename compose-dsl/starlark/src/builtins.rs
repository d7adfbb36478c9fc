//! The composer's own builtins: pure constructors for the result dicts plus a path getter.
//!
//! They only build values; none of them performs I/O, reads a clock or draws randomness.

use starlark::{
    environment::GlobalsBuilder,
    starlark_module,
    values::{Heap, Value, dict::AllocDict, dict::DictRef, dict::UnpackDictEntries},
};

#[starlark_module]
pub(crate) fn compose_builtins(builder: &mut GlobalsBuilder) {
    /// `child(kind, name, spec={}, version=1, labels={})` builds one child dict:
    /// `{"kind", "kind_version", "name", "spec", "labels"}`.
    fn child<'v>(
        #[starlark(require = pos)] kind: &str,
        #[starlark(require = pos)] name: &str,
        spec: Option<Value<'v>>,
        #[starlark(require = named, default = 1)] version: i32,
        #[starlark(require = named)] labels: Option<Value<'v>>,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let empty = || heap.alloc(AllocDict::EMPTY);
        Ok(heap.alloc(AllocDict([
            ("kind", heap.alloc(kind)),
            ("kind_version", heap.alloc(version)),
            ("name", heap.alloc(name)),
            ("spec", spec.unwrap_or_else(empty)),
            ("labels", labels.unwrap_or_else(empty)),
        ])))
    }

    /// `edge(from_kind, from_name, to_kind, to_name, values={})`: `from` waits for `to`;
    /// each `values` entry `"/dependent/pointer": "/source/pointer"` copies a field of `to`'s
    /// status into `from`'s spec.
    fn edge<'v>(
        #[starlark(require = pos)] from_kind: &str,
        #[starlark(require = pos)] from_name: &str,
        #[starlark(require = pos)] to_kind: &str,
        #[starlark(require = pos)] to_name: &str,
        values: Option<UnpackDictEntries<&'v str, &'v str>>,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let reference =
            |kind: &str, name: &str| heap.alloc(AllocDict([("kind", kind), ("name", name)]));
        let flows: Vec<Value<'v>> = values
            .unwrap_or_default()
            .entries
            .into_iter()
            .map(|(dep, src)| {
                heap.alloc(AllocDict([("dependent_field", dep), ("source_field", src)]))
            })
            .collect();
        Ok(heap.alloc(AllocDict([
            ("from", reference(from_kind, from_name)),
            ("to", reference(to_kind, to_name)),
            ("values", heap.alloc(flows)),
        ])))
    }

    /// `provider_config(name, kind, spec={}, version=1, is_default=False)` builds one provider
    /// config (not `config`: that name is the second parameter of `compose`).
    fn provider_config<'v>(
        #[starlark(require = pos)] name: &str,
        #[starlark(require = pos)] kind: &str,
        spec: Option<Value<'v>>,
        #[starlark(require = named, default = 1)] version: i32,
        #[starlark(require = named, default = false)] is_default: bool,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        Ok(heap.alloc(AllocDict([
            ("name", heap.alloc(name)),
            ("kind", heap.alloc(kind)),
            ("kind_version", heap.alloc(version)),
            ("is_default", heap.alloc(is_default)),
            ("spec", spec.unwrap_or_else(|| heap.alloc(AllocDict::EMPTY))),
        ])))
    }

    /// `get(obj, "a.b.c", default=None)` walks nested dicts; a missing key or a non-dict on
    /// the way gives `default`.
    fn get<'v>(
        #[starlark(require = pos)] obj: Value<'v>,
        #[starlark(require = pos)] path: &str,
        #[starlark(require = pos)] default: Option<Value<'v>>,
    ) -> anyhow::Result<Value<'v>> {
        let mut cur = obj;
        for seg in path.split('.').filter(|s| !s.is_empty()) {
            let next = DictRef::from_value(cur).and_then(|d| d.get_str(seg));
            match next {
                Some(v) => cur = v,
                None => return Ok(default.unwrap_or_else(Value::new_none)),
            }
        }
        Ok(cur)
    }
}
