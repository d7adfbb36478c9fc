//! Pieces shared by the data-driven composers (starlark, cel): a content-addressed cache of
//! compiled programs (each sandbox child keeps one), the stage dispatch rules, the
//! descendant-counting rollup, and the conversions to and from sandbox requests.
//!
//! Both engines return the same `ComposeOutput` (from `converge-compose-output`), whose
//! structs have exactly the fields of the SDK's types; [`into_outcome`] converts it field by
//! field.

use std::{
    collections::HashMap,
    fmt,
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
};

use converge_compose_output::ComposeOutput;
use converge_sdk::{
    ChildSpec, DepEdge, HandlerError, Json, Outcome, ProviderConfigSpec, ReactionRequest, Resource,
    ResourceRef, Stage, ValueFlow,
};
use serde_json::{Map, Value, json, value::RawValue};
use sha2::{Digest, Sha256};

/// A SHA-256 digest naming one compiled input.
pub type ContentHash = [u8; 32];

/// Hashes the parts of a compile input (e.g. bundle bytes plus the load limits).
pub fn content_hash(parts: &[&[u8]]) -> ContentHash {
    let mut h = Sha256::new();
    for p in parts {
        // Length-prefixed so ("ab", "c") and ("a", "bc") differ.
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().into()
}

/// Short hex form of a hash, for logs and messages.
pub fn short_hex(h: &ContentHash) -> String {
    h[..6].iter().map(|b| format!("{b:02x}")).collect()
}

/// How many compiled entries a provider keeps: the default plus a few per-resource
/// overrides. Past this the oldest entry (by insertion) is dropped; tasks holding it keep
/// their `Arc`.
pub const CACHE_ENTRIES: usize = 16;

/// Compiled programs by content hash. A compile failure is cached too: the same bytes give
/// the same error, so it is not recomputed for every task.
pub struct CompileCache<T, E> {
    inner: Mutex<CacheInner<T, E>>,
}

/// One entry: filled once; concurrent askers for the same key wait for the one compile.
type Slot<T, E> = Arc<OnceLock<Result<Arc<T>, E>>>;

struct CacheInner<T, E> {
    entries: HashMap<ContentHash, Slot<T, E>>,
    /// Insertion order, oldest first.
    order: Vec<ContentHash>,
    /// The hash of the kind's current default, pinned against eviction.
    default: Option<ContentHash>,
    compiles: Arc<AtomicU64>,
}

impl<T, E> fmt::Debug for CompileCache<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.inner.lock().expect("cache lock");
        f.debug_struct("CompileCache")
            .field("entries", &g.entries.len())
            .field("compiles", &g.compiles.load(Ordering::Relaxed))
            .finish()
    }
}

impl<T, E> Default for CompileCache<T, E> {
    fn default() -> Self {
        Self {
            inner: Mutex::new(CacheInner {
                entries: HashMap::new(),
                order: Vec::new(),
                default: None,
                compiles: Arc::default(),
            }),
        }
    }
}

impl<T, E: Clone> CompileCache<T, E> {
    /// The cached result for `key`, compiling it with `compile` on a miss.
    ///
    /// Exactly one compile runs per key while the key is cached: it runs outside the cache
    /// lock, and concurrent callers for the same key wait for it (other keys do not).
    pub fn get_or_compile(
        &self,
        key: ContentHash,
        compile: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        let (slot, compiles) = {
            let mut g = self.inner.lock().expect("cache lock");
            let compiles = g.compiles.clone();
            let slot = match g.entries.get(&key) {
                Some(slot) => slot.clone(),
                None => {
                    let slot = Slot::<T, E>::default();
                    g.entries.insert(key, slot.clone());
                    g.order.push(key);
                    g.evict();
                    slot
                }
            };
            (slot, compiles)
        };
        slot.get_or_init(|| {
            compiles.fetch_add(1, Ordering::Relaxed);
            compile().map(Arc::new)
        })
        .clone()
    }

    /// The cached result for `key` if its compile has finished; `None` on a miss or while
    /// the compile is still running. A cheap fast path for callers that would otherwise
    /// move to a blocking thread to call [`get_or_compile`](Self::get_or_compile).
    pub fn get(&self, key: &ContentHash) -> Option<Result<Arc<T>, E>> {
        let slot = self
            .inner
            .lock()
            .expect("cache lock")
            .entries
            .get(key)?
            .clone();
        slot.get().cloned()
    }

    /// Marks `key` as the kind's default (pinned), dropping the previous default's entry:
    /// a config push replaces the compiled default; tasks in flight keep their `Arc`.
    pub fn set_default(&self, key: Option<ContentHash>) {
        let mut g = self.inner.lock().expect("cache lock");
        if let Some(old) = g.default
            && Some(old) != key
        {
            g.entries.remove(&old);
            g.order.retain(|k| *k != old);
        }
        g.default = key;
    }

    /// How many compiles have run (tests and logs).
    pub fn compiles(&self) -> u64 {
        self.inner
            .lock()
            .expect("cache lock")
            .compiles
            .load(Ordering::Relaxed)
    }

    /// How many entries are cached.
    pub fn len(&self) -> usize {
        self.inner.lock().expect("cache lock").entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T, E> CacheInner<T, E> {
    /// Drops the oldest entries past [`CACHE_ENTRIES`], never the pinned default.
    fn evict(&mut self) {
        while self.order.len() > CACHE_ENTRIES {
            let pinned = self.default;
            let Some(pos) = self.order.iter().position(|k| Some(*k) != pinned) else {
                break;
            };
            let old = self.order.remove(pos);
            self.entries.remove(&old);
        }
    }
}

/// Remembers the last default program a provider warmed, so a config push that repeats it
/// (the SDK re-announces every default at each reconnect) does not load it again, and a
/// default that runs away costs one sandbox child, not one per reconnect.
#[derive(Debug, Default)]
pub struct LastWarmed(Mutex<Option<ContentHash>>);

impl LastWarmed {
    /// Records `key`; whether it differs from the one recorded before.
    pub fn is_new(&self, key: ContentHash) -> bool {
        self.0.lock().expect("warm lock").replace(key) != Some(key)
    }
}

/// A resource's spec as JSON text for a sandbox request: the text the broker sent, never
/// decoded here.
pub fn spec_text(spec: &Json) -> Result<Box<RawValue>, HandlerError> {
    RawValue::from_string(spec.to_string())
        .map_err(|e| HandlerError::terminal(format!("the resource's spec is not JSON: {e}")))
}

/// An engine's compose output from a sandbox reply, parsed once into a `ComposeOutput`.
pub fn compose_output(
    engine: &str,
    out: Option<Box<RawValue>>,
) -> Result<ComposeOutput, HandlerError> {
    let raw = out.ok_or_else(|| {
        HandlerError::terminal(format!("the {engine} sandbox returned no compose output"))
    })?;
    serde_json::from_str(raw.get()).map_err(|e| {
        HandlerError::terminal(format!(
            "the {engine} sandbox returned a malformed compose output: {e}"
        ))
    })
}

/// What a composer does for a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageAction {
    /// Run the engine: children, edges, configs, status.
    Compose,
    /// Count the descendants into the status.
    Rollup,
    /// Nothing to do: an empty success (WORK, DELETE, REACT).
    Nothing,
    /// Not something a composer can do (OPERATE): a terminal failure.
    Unsupported,
}

/// The action for `stage`.
pub fn stage_action(stage: Stage) -> StageAction {
    match stage {
        Stage::Compose => StageAction::Compose,
        Stage::Rollup => StageAction::Rollup,
        Stage::Work | Stage::Delete | Stage::React => StageAction::Nothing,
        Stage::Operate | Stage::Unspecified => StageAction::Unsupported,
    }
}

/// The rollup status of a composer's ROLLUP task: [`rollup_status`] over the rows the
/// request carries when the kind asked for the full form, else over the request's summary
/// (the same counts, with no descendant read).
pub fn rollup_status_of(req: &ReactionRequest) -> Value {
    if req.descendants_included {
        return rollup_status(req.status.as_ref(), &req.descendants);
    }
    let s = req.summary.clone().unwrap_or_default();
    with_descendants(
        req.status.as_ref(),
        json!({"total": s.total, "ready": s.ready(), "failed": s.failed_total, "by_kind": s.by_kind}),
    )
}

/// The rollup status: `status` (what compose reported) with a `descendants` key set to
/// `{"total", "ready", "failed", "by_kind": {kind: total}}` over the live subtree. A status
/// that is not an object is replaced.
pub fn rollup_status(status: Option<&Value>, descendants: &[Resource]) -> Value {
    let ready = descendants.iter().filter(|d| d.is_ready).count();
    let failed = descendants.iter().filter(|d| d.phase == "Failed").count();
    let mut by_kind: std::collections::BTreeMap<&str, u64> = Default::default();
    for d in descendants {
        *by_kind.entry(d.kind.as_str()).or_default() += 1;
    }
    with_descendants(
        status,
        json!({"total": descendants.len(), "ready": ready, "failed": failed, "by_kind": by_kind}),
    )
}

fn with_descendants(status: Option<&Value>, counts: Value) -> Value {
    let mut out = match status {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    out.insert("descendants".into(), counts);
    Value::Object(out)
}

/// Converts a compose result (either engine's: both re-export
/// [`converge_compose_output::ComposeOutput`]) into an [`Outcome`], field by field: its
/// structs mirror the SDK types exactly.
pub fn into_outcome(out: ComposeOutput) -> Outcome {
    Outcome {
        status: out.status,
        children: out
            .children
            .into_iter()
            .map(|c| ChildSpec {
                kind: c.kind,
                kind_version: c.kind_version,
                name: c.name,
                spec: c.spec,
                labels: c.labels,
            })
            .collect(),
        edges: out
            .edges
            .into_iter()
            .map(|e| DepEdge {
                from: ResourceRef::new(e.from.kind, e.from.name),
                to: ResourceRef::new(e.to.kind, e.to.name),
                values: e
                    .values
                    .into_iter()
                    .map(|v| ValueFlow::new(v.dependent_field, v.source_field))
                    .collect(),
            })
            .collect(),
        configs: out
            .configs
            .into_iter()
            .map(|c| ProviderConfigSpec {
                name: c.name,
                kind: c.kind,
                kind_version: c.kind_version,
                is_default: c.is_default,
                spec: c.spec,
            })
            .collect(),
        ..Default::default()
    }
}
