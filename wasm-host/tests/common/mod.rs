//! Test fixtures: real `converge:handler` components built offline from WAT.
//!
//! A guest is a core module written in WAT whose exports follow the canonical ABI by hand:
//! `describe` and `reconcile` return a pointer to a result laid out in a data segment. The
//! layout is computed here from the WIT itself (wit-parser's `SizeAlign`) by encoding a JSON
//! description of the value (records as objects keyed by WIT field names, options as
//! `null`/value, results as `{"ok": ..}`/`{"err": ..}`, variants as `{"case": payload}`,
//! enums as strings). The module then gets the world's metadata embedded and is wrapped into
//! a component by `wit-component`, exactly like a toolchain-built guest.

#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value, json};
use wit_parser::{Resolve, SizeAlign, Type, TypeDefKind, WorldId, WorldItem};

/// Where a guest's fixed return values live in its memory.
pub const DATA_BASE: u32 = 1024;
/// Where the guest's bump allocator starts (after the data).
pub const HEAP_BASE: u32 = 256 * 1024;

/// The parsed world plus the canonical-ABI layout of its types.
pub struct World {
    pub resolve: Resolve,
    pub world: WorldId,
    sizes: SizeAlign,
}

impl World {
    pub fn load() -> World {
        Self::load_with(&[], "handler")
    }

    /// The crate's WIT plus extra packages (WIT sources, pushed in order); selects `world`
    /// from the last package pushed.
    pub fn load_with(extra: &[&str], world: &str) -> World {
        let mut resolve = Resolve::default();
        // The world lives in wasm-host/wit; other crates (stdworker) include this module
        // by path from their own manifest directory.
        // At run time first: a target dir shared by two checkouts keeps a test binary built
        // in the first one, and with it that checkout's path in `env!`.
        let manifest = std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
        let manifest = Path::new(&manifest);
        let dir = [manifest.join("wit"), manifest.join("../wasm-host/wit")]
            .into_iter()
            .find(|d| d.is_dir())
            .expect("the converge:handler WIT directory");
        let (mut pkg, _) = resolve.push_dir(&dir).expect("parse wit/");
        for (i, src) in extra.iter().enumerate() {
            pkg = resolve
                .push_str(format!("extra{i}.wit"), src)
                .expect("parse extra wit");
        }
        let world = resolve
            .select_world(&[pkg], Some(world))
            .expect("select world");
        let mut sizes = SizeAlign::default();
        sizes.fill(&resolve);
        World {
            resolve,
            world,
            sizes,
        }
    }

    /// The result type of the world's export `name`.
    pub fn export_result(&self, name: &str) -> Type {
        for (key, item) in &self.resolve.worlds[self.world].exports {
            if self.resolve.name_world_key(key) == name
                && let WorldItem::Function(f) = item
            {
                return f.result.expect("export has a result");
            }
        }
        panic!("no export {name}");
    }

    /// A named type of the `types` interface.
    pub fn named(&self, name: &str) -> Type {
        for (_, iface) in self.resolve.interfaces.iter() {
            if iface.name.as_deref() == Some("types") {
                return Type::Id(iface.types[name]);
            }
        }
        panic!("no type {name}");
    }

    fn size(&self, ty: &Type) -> usize {
        self.sizes.size(ty).size_wasm32()
    }

    fn align(&self, ty: &Type) -> usize {
        self.sizes.align(ty).align_wasm32()
    }

    /// The byte offset of `field` within record type `ty`, and the field's type.
    pub fn field(&self, ty: &Type, field: &str) -> (usize, Type) {
        let Type::Id(id) = ty else {
            panic!("not a record")
        };
        match &self.resolve.types[*id].kind {
            TypeDefKind::Record(r) => {
                let offsets = self.sizes.field_offsets(r.fields.iter().map(|f| &f.ty));
                for (f, (off, t)) in r.fields.iter().zip(offsets) {
                    if f.name == field {
                        return (off.size_wasm32(), *t);
                    }
                }
                panic!("no field {field}")
            }
            TypeDefKind::Type(t) => self.field(t, field),
            _ => panic!("not a record"),
        }
    }

    /// Offset of the payload of an option/result/variant type.
    pub fn payload_offset(&self, ty: &Type) -> usize {
        let Type::Id(id) = ty else {
            panic!("not a variant")
        };
        let off = match &self.resolve.types[*id].kind {
            TypeDefKind::Option(t) => self.sizes.payload_offset(wit_parser::Int::U8, [Some(t)]),
            TypeDefKind::Result(r) => self
                .sizes
                .payload_offset(wit_parser::Int::U8, [r.ok.as_ref(), r.err.as_ref()]),
            TypeDefKind::Variant(v) => self
                .sizes
                .payload_offset(v.tag(), v.cases.iter().map(|c| c.ty.as_ref())),
            TypeDefKind::Type(t) => return self.payload_offset(t),
            _ => panic!("not a variant"),
        };
        off.size_wasm32()
    }

    /// The canonical-ABI bytes of `v` (of type `ty`) placed at address `base`; out-of-line
    /// strings and lists follow it in the same buffer.
    pub fn encode(&self, ty: &Type, v: &Value, base: u32) -> Vec<u8> {
        let mut buf = vec![0u8; self.size(ty)];
        self.write(ty, v, &mut buf, 0, base);
        buf
    }

    fn alloc(buf: &mut Vec<u8>, size: usize, align: usize) -> usize {
        let at = buf.len().next_multiple_of(align.max(1));
        buf.resize(at + size, 0);
        at
    }

    fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
        buf[at..at + bytes.len()].copy_from_slice(bytes);
    }

    fn write(&self, ty: &Type, v: &Value, buf: &mut Vec<u8>, at: usize, base: u32) {
        match ty {
            Type::Bool => buf[at] = u8::from(v.as_bool().unwrap_or(false)),
            Type::U8 | Type::S8 => buf[at] = v.as_i64().unwrap_or(0) as u8,
            Type::U32 | Type::S32 => {
                Self::put(buf, at, &(v.as_i64().unwrap_or(0) as i32).to_le_bytes())
            }
            Type::U64 | Type::S64 => Self::put(buf, at, &v.as_i64().unwrap_or(0).to_le_bytes()),
            Type::String => {
                let s = v.as_str().unwrap_or("");
                let p = Self::alloc(buf, s.len(), 1);
                Self::put(buf, p, s.as_bytes());
                Self::put(buf, at, &(base + p as u32).to_le_bytes());
                Self::put(buf, at + 4, &(s.len() as u32).to_le_bytes());
            }
            Type::Id(id) => match &self.resolve.types[*id].kind {
                TypeDefKind::Type(t) => self.write(t, v, buf, at, base),
                TypeDefKind::Record(r) => {
                    let offsets = self.sizes.field_offsets(r.fields.iter().map(|f| &f.ty));
                    for (f, (off, t)) in r.fields.iter().zip(offsets) {
                        let fv = v.get(&f.name).unwrap_or(&Value::Null);
                        self.write(t, fv, buf, at + off.size_wasm32(), base);
                    }
                }
                TypeDefKind::List(t) => {
                    let items = v.as_array().cloned().unwrap_or_default();
                    let (es, ea) = (self.size(t), self.align(t));
                    let p = Self::alloc(buf, es * items.len(), ea);
                    for (i, item) in items.iter().enumerate() {
                        self.write(t, item, buf, p + i * es, base);
                    }
                    Self::put(buf, at, &(base + p as u32).to_le_bytes());
                    Self::put(buf, at + 4, &(items.len() as u32).to_le_bytes());
                }
                TypeDefKind::Option(t) => {
                    if !v.is_null() {
                        buf[at] = 1;
                        self.write(t, v, buf, at + self.payload_offset(ty), base);
                    }
                }
                TypeDefKind::Result(r) => {
                    let (disc, payload, pty) = if let Some(ok) = v.get("ok") {
                        (0, ok, r.ok)
                    } else {
                        (1, v.get("err").expect("ok or err"), r.err)
                    };
                    buf[at] = disc;
                    if let Some(pty) = pty {
                        self.write(&pty, payload, buf, at + self.payload_offset(ty), base);
                    }
                }
                TypeDefKind::Variant(var) => {
                    let (name, payload) = match v {
                        Value::String(s) => (s.clone(), Value::Null),
                        Value::Object(m) => {
                            let (k, p) = m.iter().next().expect("one case");
                            (k.clone(), p.clone())
                        }
                        _ => panic!("variant as string or object"),
                    };
                    let idx = var
                        .cases
                        .iter()
                        .position(|c| c.name == name)
                        .expect("known case");
                    buf[at] = idx as u8;
                    if let Some(pty) = &var.cases[idx].ty {
                        self.write(pty, &payload, buf, at + self.payload_offset(ty), base);
                    }
                }
                TypeDefKind::Enum(e) => {
                    let name = v.as_str().expect("enum as string");
                    buf[at] = e
                        .cases
                        .iter()
                        .position(|c| c.name == name)
                        .expect("known enum case") as u8;
                }
                TypeDefKind::Tuple(t) => {
                    let offsets = self.sizes.field_offsets(t.types.iter());
                    for (i, (off, t)) in offsets.into_iter().enumerate() {
                        self.write(t, &v[i], buf, at + off.size_wasm32(), base);
                    }
                }
                other => panic!("unsupported type {other:?}"),
            },
            other => panic!("unsupported type {other:?}"),
        }
    }

    /// Wraps a core module (WAT) into a `converge:handler` component.
    pub fn component(&self, core_wat: &str) -> Vec<u8> {
        let mut module = wat::parse_str(core_wat).expect("valid WAT");
        wit_component::embed_component_metadata(
            &mut module,
            &self.resolve,
            self.world,
            wit_component::StringEncoding::UTF8,
        )
        .expect("embed metadata");
        wit_component::ComponentEncoder::default()
            .module(&module)
            .expect("module")
            .validate(true)
            .encode()
            .expect("encode component")
    }
}

/// A WAT data segment string (`"\00\01..."`) for `bytes`.
pub fn wat_bytes(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 3 + 2);
    s.push('"');
    for b in bytes {
        let _ = write!(s, "\\{b:02x}");
    }
    s.push('"');
    s
}

/// How a test guest's `reconcile` behaves.
pub enum Body {
    /// Return the fixed result (`{"ok": outcome}` or `{"err": ..}`).
    Return(Value),
    /// Loop forever.
    Spin,
    /// Grow memory one page at a time until it fails.
    GrowForever,
    /// Execute `unreachable`.
    Unreachable,
    /// Recurse without bound.
    Recurse,
    /// Log `count` messages of `len` bytes each, then return the fixed result.
    LogThenReturn { count: u32, len: u32, result: Value },
    /// Extra core imports (WAT import lines) and a custom body that must leave the result
    /// pointer on the stack; `{RESULT}` in it is replaced by the fixed `{"ok": {}}` result's
    /// address.
    Custom { imports: String, code: String },
    /// Return `{"ok": outcome}` with the outcome's status replaced by the request's
    /// `target.spec` (the guest reads the request the host lowered into its memory).
    EchoSpec(Value),
}

/// A guest component: `describe` returns `info`, `reconcile` does `body`.
pub fn guest(world: &World, info: &Value, body: Body) -> Vec<u8> {
    let info_ty = world.export_result("describe");
    let result_ty = world.export_result("reconcile");
    let info_bytes = world.encode(&info_ty, info, DATA_BASE);
    let result_base = (DATA_BASE as usize + info_bytes.len()).next_multiple_of(8) as u32;
    let fixed = match &body {
        Body::Return(v) | Body::LogThenReturn { result: v, .. } => v.clone(),
        Body::EchoSpec(outcome) => json!({ "ok": outcome }),
        _ => json!({ "ok": {} }),
    };
    let result_bytes = world.encode(&result_ty, &fixed, result_base);
    let msg_base = (result_base as usize + result_bytes.len()).next_multiple_of(8) as u32;
    let (msg_len, msg_bytes) = match &body {
        Body::LogThenReturn { len, .. } => (*len, vec![b'x'; *len as usize]),
        _ => (0, Vec::new()),
    };
    assert!(msg_base as usize + msg_bytes.len() < HEAP_BASE as usize);

    let extra_imports = match &body {
        Body::Custom { imports, .. } => imports.clone(),
        _ => String::new(),
    };
    let reconcile_body = match &body {
        Body::Custom { code, .. } => code.replace("{RESULT}", &result_base.to_string()),
        Body::Return(_) => format!("(i32.const {result_base})"),
        Body::Spin => "(loop $l (br $l)) (unreachable)".to_string(),
        Body::GrowForever => {
            "(loop $l (drop (memory.grow (i32.const 1))) (br $l)) (unreachable)".to_string()
        }
        Body::Unreachable => "(unreachable)".to_string(),
        Body::Recurse => "(call $recurse) (i32.const 0)".to_string(),
        Body::LogThenReturn { count, .. } => format!(
            "(local $i i32)
             (block $done (loop $l
               (br_if $done (i32.ge_u (local.get $i) (i32.const {count})))
               (call $log (i32.const 1) (i32.const {msg_base}) (i32.const {msg_len}))
               (local.set $i (i32.add (local.get $i) (i32.const 1)))
               (br $l)))
             (i32.const {result_base})"
        ),
        Body::EchoSpec(_) => {
            // request.target.spec is a (ptr, len) pair; copy it into the result's
            // ok.status option payload and set the option's discriminant.
            let req_ty = world.named("request");
            let (target_off, target_ty) = world.field(&req_ty, "target");
            let (spec_off, _) = world.field(&target_ty, "spec");
            let src = target_off + spec_off;
            let outcome_off = world.payload_offset(&result_ty);
            let (status_off, status_ty) = world.field(&world.named("outcome"), "status");
            let opt = result_base as usize + outcome_off + status_off;
            let payload = opt + world.payload_offset(&status_ty);
            format!(
                "(i32.store8 (i32.const {opt}) (i32.const 1))
                 (i32.store (i32.const {payload}) (i32.load offset={src} (local.get $req)))
                 (i32.store (i32.const {p4}) (i32.load offset={s4} (local.get $req)))
                 (i32.const {result_base})",
                p4 = payload + 4,
                s4 = src + 4,
            )
        }
    };

    let wat = format!(
        r#"(module
  (import "converge:handler/log@0.1.0" "log" (func $log (param i32 i32 i32)))
  {extra_imports}
  (memory (export "memory") 8)
  (global $heap (mut i32) (i32.const {HEAP_BASE}))
  (data (i32.const {DATA_BASE}) {info})
  (data (i32.const {result_base}) {result})
  (data (i32.const {msg_base}) {msg})
  (func $recurse (call $recurse))
  (func (export "cabi_realloc") (param $old i32) (param $old_size i32) (param $align i32) (param $size i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and
      (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
      (i32.xor (i32.sub (local.get $align) (i32.const 1)) (i32.const -1))))
    (global.set $heap (i32.add (local.get $p) (local.get $size)))
    (block $ok
      (br_if $ok (i32.le_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536))))
      (br_if $ok (i32.ne
        (memory.grow (i32.add (i32.const 1) (i32.shr_u
          (i32.sub (global.get $heap) (i32.mul (memory.size) (i32.const 65536))) (i32.const 16))))
        (i32.const -1)))
      (unreachable))
    (if (local.get $old_size) (then
      (memory.copy (local.get $p) (local.get $old) (local.get $old_size))))
    (local.get $p))
  (func (export "describe") (result i32) (i32.const {DATA_BASE}))
  (func (export "reconcile") (param $req i32) (result i32)
    {reconcile_body}))
"#,
        info = wat_bytes(&info_bytes),
        result = wat_bytes(&result_bytes),
        msg = wat_bytes(&msg_bytes),
    );
    world.component(&wat)
}

/// The `info` every test guest reports.
pub fn test_info() -> Value {
    json!({
        "name": "wat-guest",
        "version": "1.2.3",
        "kinds": [{"kind": "hello", "version": 1}, {"kind": "bye", "version": 2}],
    })
}

/// A small but complete request.
pub fn request(spec: &str) -> converge_wasm_host::wit::Request {
    use converge_wasm_host::wit::*;
    Request {
        reaction: "reconcile".into(),
        stage: Stage::Work,
        trigger: "specChange".into(),
        kind: "hello".into(),
        kind_version: 1,
        target: ResourceRow {
            id: "00000000-0000-0000-0000-000000000001".into(),
            kind: "hello".into(),
            kind_version: 1,
            name: "world".into(),
            owner_id: None,
            root_id: None,
            spec: spec.into(),
            status: None,
            generation: 3,
            synced_gen: 2,
            is_ready: false,
            phase: "Reconciling".into(),
            labels: vec![Label {
                key: "team".into(),
                value: "core".into(),
            }],
            finalizers: vec![],
        },
        status: None,
        generation: 3,
        attempt: 1,
        config: Some("{}".into()),
        observed: vec![],
        descendants: vec![],
        operation: None,
        transition: None,
        dedup_token: String::new(),
    }
}

/// A child spec value for `Body::Return`.
pub fn child(kind: &str, name: &str) -> Value {
    json!({"kind": kind, "kind-version": 1, "name": name, "spec": "{}", "labels": []})
}

/// An edge value for `Body::Return`: `from` depends on `to`.
pub fn edge(from: (&str, &str), to: (&str, &str)) -> Value {
    json!({
        "dependent": {"kind": from.0, "name": from.1},
        "dependency": {"kind": to.0, "name": to.1},
        "values": [{"dependent-field": "/upstream", "source-field": "/address"}],
    })
}
