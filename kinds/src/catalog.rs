//! The process's one [`KindCatalog`]: every registered (kind, version) as a [`Kind`], parsed
//! and compiled once, held in an immutable [`Snapshot`] that readers load with one atomic
//! pointer read (`arc-swap`, as kube-rs's reflector store hands out its state) and the writer
//! replaces whole.
//!
//! Expected flow: the process builds one catalog, [`KindCatalog::reload`]s it once, hands a
//! clone (a cheap handle) to the broker and the API, and runs one [`CatalogFollower`], the
//! only LISTEN on `kind_manifest_changed` in the process, with a failsafe re-read. A reload
//! reads every manifest's content hash and compiles only the manifests that are new or
//! changed. Readers never wait: the hot paths (a dispatcher pass, a result, an apply) load
//! the snapshot and validate against it with no lock held.
//!
//! Guarantees:
//! - one compiled copy of each (kind, version) per process, shared by every reader, compiled
//!   once per content (`converge_kind_schema_compiles_total` counts every compile);
//! - a miss costs one lookup of the missing pairs together ([`KindCatalog::lookup`]), never a
//!   re-read of every manifest; a pair found unregistered is remembered until the manifests
//!   change (at most [`MAX_UNKNOWN`]), and a refusal can ask for a fresh read instead;
//! - every replacement of the snapshot is serialised (one writer at a time) and bumps its
//!   [`Snapshot::generation`], which [`KindCatalog::subscribe`] reports.
//!
//! Assumptions: manifests change rarely (an admin's apply); a replacement copies the map of
//! `Arc`s, not the kinds.
//!
//! Caveats: between another pod's apply and its NOTIFY reaching this one, the snapshot holds
//! the previous manifest; the API's refusals and the broker's compose checks read a missing
//! kind fresh, so a kind applied a moment ago is never refused for being unknown.

use std::{
    any::Any,
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use arc_swap::{ArcSwap, Guard};
use converge_engine::{db, ids::KindPair, wake};
use converge_proto::manifest::KindManifest;
use serde_json::Value;
use sqlx::PgPool;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::{
    check::{self, ManifestProblems},
    flows::{self, Flow},
    kind::Kind,
    violation::Violation,
};

/// The channel the `kind_manifest` triggers notify on, and the one LISTEN the process makes
/// on it ([`CatalogFollower`]).
pub const MANIFEST_CHANNEL: &str = "kind_manifest_changed";

/// Most (kind, version) pairs remembered as unknown; past it the memory starts afresh, so a
/// client naming random kinds cannot grow it without bound.
pub const MAX_UNKNOWN: usize = 10_000;

/// Every registered (kind, version) at one moment, immutable. Cheap to hold: readers keep an
/// `Arc` of it as long as they like, while the catalog moves on.
#[derive(Default)]
pub struct Snapshot {
    generation: u64,
    /// Kind → its versions, ascending.
    kinds: HashMap<String, Vec<Arc<Kind>>>,
    /// What readers derived from this snapshot ([`Snapshot::derived`]), one value per type.
    derived: Mutex<Vec<Arc<dyn Any + Send + Sync>>>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("generation", &self.generation)
            .field("kinds", &self.len())
            .finish()
    }
}

impl Snapshot {
    /// A snapshot holding `kinds` (generation 0): for tests and tools that check against
    /// kinds they hold, without a database.
    pub fn of(kinds: impl IntoIterator<Item = Kind>) -> Snapshot {
        let mut s = Snapshot::default();
        for k in kinds {
            s.put(Arc::new(k));
        }
        s
    }

    fn put(&mut self, k: Arc<Kind>) {
        let versions = self.kinds.entry(k.pair.kind.clone()).or_default();
        match versions.binary_search_by_key(&k.pair.version, |x| x.pair.version) {
            Ok(i) => versions[i] = k,
            Err(i) => versions.insert(i, k),
        }
    }

    fn take(&mut self, kind: &str, version: i32) {
        if let Some(versions) = self.kinds.get_mut(kind) {
            versions.retain(|x| x.pair.version != version);
            if versions.is_empty() {
                self.kinds.remove(kind);
            }
        }
    }

    /// The `T` derived from this snapshot by `build`, built once per snapshot (by the first
    /// reader that asks) and shared: for what is costly to derive from every kind and read
    /// often (the API's OpenAPI document). A new snapshot starts with nothing derived, so
    /// what is derived is never stale.
    pub fn derived<T: Any + Send + Sync>(&self, build: impl FnOnce(&Snapshot) -> T) -> Arc<T> {
        let mut derived = self.derived.lock().expect("derived values poisoned");
        if let Some(t) = derived.iter().find_map(|d| d.clone().downcast::<T>().ok()) {
            return t;
        }
        let t = Arc::new(build(self));
        derived.push(t.clone());
        t
    }

    /// How many replacements of the catalog came before this snapshot: a reader that derives
    /// something from the kinds (the OpenAPI document) rebuilds it when this moves.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// (kind, version), if registered.
    pub fn get(&self, kind: &str, version: i32) -> Option<&Arc<Kind>> {
        let versions = self.kinds.get(kind)?;
        versions
            .binary_search_by_key(&version, |x| x.pair.version)
            .ok()
            .map(|i| &versions[i])
    }

    /// [`Snapshot::get`] by pair.
    pub fn get_pair(&self, pair: &KindPair) -> Option<&Arc<Kind>> {
        self.get(&pair.kind, pair.version)
    }

    /// Every (kind, version), by kind then version.
    pub fn sorted(&self) -> Vec<&Arc<Kind>> {
        let mut names: Vec<&String> = self.kinds.keys().collect();
        names.sort();
        names.into_iter().flat_map(|k| &self.kinds[k]).collect()
    }

    /// How many (kind, version)s are registered.
    pub fn len(&self) -> usize {
        self.kinds.values().map(Vec::len).sum()
    }

    /// Whether no kind is registered.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// Whether any version of `kind` is registered.
    pub fn has_kind(&self, kind: &str) -> bool {
        self.kinds.contains_key(kind)
    }

    /// Whether some version of `kind` declares only reactor reactions.
    pub fn is_reactor_kind(&self, kind: &str) -> bool {
        self.kinds
            .get(kind)
            .is_some_and(|vs| vs.iter().any(|k| k.is_reactor()))
    }

    /// The manifest of (kind, version), if registered.
    fn manifest(&self, kind: &str, version: i32) -> Option<&KindManifest> {
        self.get(kind, version).map(|k| &k.manifest)
    }

    /// Checks `doc`, a manifest applied for `path_kind`, against every rule an apply makes
    /// ([`check::check_with`]), its edges' flows against the kinds registered here.
    pub fn check_manifest(
        &self,
        doc: Value,
        path_kind: &str,
    ) -> Result<(Kind, Vec<String>), ManifestProblems> {
        check::check_with(doc, path_kind, |k, v| self.manifest(k, v))
    }

    /// `found` checked against the kinds they join ([`flows::check`]): a violation per flow
    /// that can never type-check, located under `prefix`, and a warning per flow joining a
    /// kind not registered.
    pub fn check_flows(&self, found: &[Flow], prefix: &str) -> (Vec<Violation>, Vec<String>) {
        flows::check(found, prefix, |k, v| self.manifest(k, v))
    }

    /// The flows the other registered kinds declare that `new` would break in place of the
    /// manifest registered for its (kind, version) ([`flows::broken_declared_flows`]).
    pub fn flows_broken_by(&self, new: &KindManifest) -> Vec<String> {
        let old = self.manifest(&new.kind, new.kind_version);
        let others = self.kinds.values().flatten().map(|k| &k.manifest);
        flows::broken_declared_flows(new, old, others, |k, v| self.manifest(k, v))
    }
}

/// The process's kinds: a cheap, cloneable handle. See the module documentation.
#[derive(Clone, Default)]
pub struct KindCatalog {
    inner: Arc<Inner>,
}

struct Inner {
    current: ArcSwap<Snapshot>,
    /// Held while a new snapshot is built from the current one and stored: one writer at a
    /// time. Never held across an await or by a reader.
    writing: Mutex<()>,
    /// (kind, version)s a lookup found unregistered, since the manifests last changed.
    unknown: Mutex<HashSet<(String, i32)>>,
    /// The generation of the snapshot in force.
    changed: watch::Sender<u64>,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            current: ArcSwap::from_pointee(Snapshot::default()),
            writing: Mutex::new(()),
            unknown: Mutex::new(HashSet::new()),
            changed: watch::Sender::new(0),
        }
    }
}

impl std::fmt::Debug for KindCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("KindCatalog").field(&*self.load()).finish()
    }
}

/// Parses and compiles a stored manifest, or logs why it cannot be (the kind is then not in
/// the catalog: no door serves it). The one place a `kind_manifest` row becomes a manifest.
fn from_stored(r: db::kinds::StoredManifest) -> Option<Kind> {
    let m = match serde_json::from_value::<KindManifest>(r.manifest) {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(pair = %r.pair, error = %e, "stored manifest does not parse");
            return None;
        }
    };
    match Kind::compile(m, r.manifest_version) {
        Ok(k) => Some(k),
        Err(errors) => {
            tracing::error!(pair = %r.pair, ?errors, "stored manifest does not compile");
            None
        }
    }
}

impl KindCatalog {
    /// An empty catalog; nothing is read until [`KindCatalog::reload`].
    pub fn new() -> Self {
        KindCatalog::default()
    }

    /// The snapshot in force, for a short synchronous read (one atomic load, no reference
    /// count touched in the common case). Do not hold it across an await: use
    /// [`KindCatalog::snapshot`] for that.
    pub fn load(&self) -> Guard<Arc<Snapshot>> {
        self.inner.current.load()
    }

    /// The snapshot in force, to keep.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.inner.current.load_full()
    }

    /// (kind, version), if the snapshot in force holds it.
    pub fn get(&self, kind: &str, version: i32) -> Option<Arc<Kind>> {
        self.load().get(kind, version).cloned()
    }

    /// [`KindCatalog::get`] by pair.
    pub fn get_pair(&self, pair: &KindPair) -> Option<Arc<Kind>> {
        self.get(&pair.kind, pair.version)
    }

    /// The generation of the snapshot in force, changing with every replacement.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    /// Builds the next snapshot from the one in force with `edit` and puts it in force.
    fn replace(&self, edit: impl FnOnce(&Snapshot, &mut Snapshot)) {
        let _one_writer = self.inner.writing.lock().expect("catalog writer poisoned");
        let cur = self.inner.current.load_full();
        let mut next = Snapshot {
            generation: cur.generation + 1,
            kinds: cur.kinds.clone(),
            derived: Mutex::default(),
        };
        edit(&cur, &mut next);
        let generation = next.generation;
        self.inner.current.store(Arc::new(next));
        self.inner.changed.send_replace(generation);
    }

    fn unknown(&self) -> std::sync::MutexGuard<'_, HashSet<(String, i32)>> {
        self.inner
            .unknown
            .lock()
            .expect("catalog unknowns poisoned")
    }

    /// Brings the catalog up to the database: reads every manifest's content hash, reads and
    /// compiles only the manifests that are new or changed, drops deleted ones, and forgets
    /// every remembered unknown. Nothing changed: the snapshot stays (no new generation).
    pub async fn reload(&self, pool: &PgPool) -> Result<(), sqlx::Error> {
        let versions = db::kinds::manifest_versions(pool).await?;
        let (changed, same_set) = {
            let cur = self.load();
            let changed: Vec<(String, i32)> = versions
                .iter()
                .filter(|(p, h)| cur.get_pair(p).is_none_or(|k| k.manifest_version != *h))
                .map(|(p, _)| (p.kind.clone(), p.version))
                .collect();
            (changed, versions.len() == cur.len())
        };
        self.forget_unknown();
        if changed.is_empty() && same_set {
            return Ok(());
        }
        let mut compiled: HashMap<(String, i32), Kind> = db::kinds::manifests_of(pool, &changed)
            .await?
            .into_iter()
            .filter_map(|r| {
                let key = (r.pair.kind.clone(), r.pair.version);
                from_stored(r).map(|k| (key, k))
            })
            .collect();
        self.replace(|cur, next| {
            next.kinds.clear();
            for (p, h) in versions {
                let key = (p.kind, p.version);
                let kind = match compiled.remove(&key) {
                    Some(k) => Some(Arc::new(k)),
                    None => cur
                        .get(&key.0, key.1)
                        .filter(|k| k.manifest_version == h)
                        .cloned(),
                };
                if let Some(k) = kind {
                    next.put(k);
                }
            }
        });
        Ok(())
    }

    /// Makes sure every pair of `pairs` is either in the catalog or remembered as unknown:
    /// the pairs that are neither (or, with `fresh`, every pair not in the catalog: a refusal
    /// must not rest on a memory another pod's apply may have outdated a moment ago) are read
    /// in one statement, compiled when found, remembered as unknown when not.
    pub async fn lookup(
        &self,
        pool: &PgPool,
        pairs: impl IntoIterator<Item = (String, i32)>,
        fresh: bool,
    ) -> Result<(), sqlx::Error> {
        let missing: Vec<(String, i32)> = {
            let cur = self.load();
            let unknown = self.unknown();
            let mut seen = HashSet::new();
            pairs
                .into_iter()
                .filter(|(k, v)| cur.get(k, *v).is_none())
                .filter(|p| fresh || !unknown.contains(p))
                .filter(|p| seen.insert(p.clone()))
                .collect()
        };
        if missing.is_empty() {
            return Ok(());
        }
        let found: Vec<Kind> = db::kinds::manifests_of(pool, &missing)
            .await?
            .into_iter()
            .filter_map(from_stored)
            .collect();
        {
            let mut unknown = self.unknown();
            for key in &missing {
                let registered = found
                    .iter()
                    .any(|k| k.pair.kind == key.0 && k.pair.version == key.1);
                if registered {
                    unknown.remove(key);
                } else {
                    if unknown.len() >= MAX_UNKNOWN {
                        unknown.clear();
                    }
                    unknown.insert(key.clone());
                }
            }
        }
        if !found.is_empty() {
            self.replace(|_, next| {
                for k in found {
                    next.put(Arc::new(k));
                }
            });
        }
        Ok(())
    }

    /// (kind, version) as stored now: one read of its row, compiled only when its content
    /// differs from the catalog's copy (which it then replaces); `None` when not registered.
    /// For a decision that must rest on the stored manifest (an apply's breaking-change
    /// gate).
    pub async fn fetch(
        &self,
        pool: &PgPool,
        kind: &str,
        version: i32,
    ) -> Result<Option<Arc<Kind>>, sqlx::Error> {
        let rows = db::kinds::manifests_of(pool, &[(kind.to_string(), version)]).await?;
        let Some(row) = rows.into_iter().next() else {
            return Ok(None);
        };
        if let Some(k) = self
            .get(kind, version)
            .filter(|k| k.manifest_version == row.manifest_version)
        {
            return Ok(Some(k));
        }
        let Some(k) = from_stored(row).map(Arc::new) else {
            return Ok(None);
        };
        let put = k.clone();
        self.replace(|_, next| next.put(put));
        Ok(Some(k))
    }

    /// Checks `doc`, a manifest applied for `path_kind` ([`Snapshot::check_manifest`]), after
    /// looking up the kinds its edges join that the catalog does not hold (a kind missing
    /// leaves its flows unchecked, a warning, never a refusal, so the remembered unknowns are
    /// trusted).
    pub async fn check_manifest(
        &self,
        pool: &PgPool,
        doc: Value,
        path_kind: &str,
    ) -> Result<Result<(Kind, Vec<String>), ManifestProblems>, sqlx::Error> {
        let own_version = doc.get("kind_version").and_then(Value::as_i64);
        let joined: Vec<(String, i32)> = flows::edge_kinds(&doc)
            .into_iter()
            .filter(|(k, v)| !(k == path_kind && Some(i64::from(*v)) == own_version))
            .collect();
        self.lookup(pool, joined, false).await?;
        Ok(self.snapshot().check_manifest(doc, path_kind))
    }

    /// `found` checked against the kinds they join ([`Snapshot::check_flows`]), after looking
    /// up the ones the catalog does not hold (trusting the remembered unknowns: a missing kind
    /// is a warning, never a refusal).
    pub async fn check_flows(
        &self,
        pool: &PgPool,
        found: &[Flow],
        prefix: &str,
    ) -> Result<(Vec<Violation>, Vec<String>), sqlx::Error> {
        let pairs: Vec<(String, i32)> = found
            .iter()
            .flat_map(|f| [f.upstream_kind.clone(), f.dependent_kind.clone()])
            .flatten()
            .collect();
        self.lookup(pool, pairs, false).await?;
        Ok(self.snapshot().check_flows(found, prefix))
    }

    /// Puts `kind`, just stored with content hash `manifest_version`, in force (this process
    /// sees its own apply at once), and forgets every remembered unknown: a kind just applied
    /// is never refused here.
    pub fn install(&self, mut kind: Kind, manifest_version: i64) {
        kind.manifest_version = manifest_version;
        self.forget_unknown();
        self.replace(|_, next| next.put(Arc::new(kind)));
    }

    /// Drops a deleted kind version (this process sees its own delete at once).
    pub fn remove(&self, kind: &str, version: i32) {
        self.replace(|_, next| next.take(kind, version));
    }

    /// Forgets every remembered unknown (the manifests changed somewhere).
    pub fn forget_unknown(&self) {
        self.unknown().clear();
    }

    /// Whether (kind, version) is remembered as unknown.
    pub fn is_unknown(&self, kind: &str, version: i32) -> bool {
        self.unknown().contains(&(kind.to_string(), version))
    }
}

/// The catalog's one writer that follows the database: the process's only LISTEN on
/// [`MANIFEST_CHANNEL`], and a failsafe re-read. A notification forgets the remembered
/// unknowns at once, then reloads ([`KindCatalog::reload`]: only changed manifests are
/// compiled). A lost LISTEN connection is re-established and followed by a reload (the
/// notifications sent meanwhile are gone).
pub struct CatalogFollower {
    pool: PgPool,
    catalog: KindCatalog,
    failsafe: Duration,
}

impl CatalogFollower {
    /// The follower of `catalog` over `pool`, re-reading every `failsafe` whatever it hears.
    pub fn new(pool: PgPool, catalog: KindCatalog, failsafe: Duration) -> Self {
        CatalogFollower {
            pool,
            catalog,
            failsafe,
        }
    }

    /// Follows the database until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        let notify = Arc::new(Notify::new());
        let listener = wake::spawn_listen_notify(
            self.pool.clone(),
            &[MANIFEST_CHANNEL],
            notify.clone(),
            stop.clone(),
        );
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = notify.notified() => self.catalog.forget_unknown(),
                _ = tokio::time::sleep(self.failsafe) => {}
            }
            if let Err(e) = self.catalog.reload(&self.pool).await {
                tracing::warn!(error = %e, "kind catalog refresh failed");
            }
        }
        let _ = listener.await;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kind(m: Value) -> Kind {
        Kind::compile(serde_json::from_value(m).unwrap(), 1).unwrap()
    }

    fn leaf(name: &str, field: &str, schema: Value) -> Value {
        let mut m = json!({"kind": name, "kind_version": 1,
            "reactions": [{"name": "w", "trigger": "specChange", "emits": ["status"]}]});
        m[field] = schema;
        m
    }

    #[test]
    fn a_change_breaking_a_flow_another_kind_declares_names_it() {
        let db = leaf(
            "db",
            "status_schema",
            json!({"type": "object", "properties": {"endpoint": {"type": "string"}}}),
        );
        let app = leaf(
            "app",
            "spec_schema",
            json!({"type": "object", "properties": {"host": {"type": "string"}}}),
        );
        let mut stack = leaf("stack", "spec_schema", json!({}));
        stack["edges"] = json!([{"from": {"kind": "app"}, "to": {"kind": "db"},
            "values": [{"dependent_field": "/host", "source_field": "/endpoint"}]}]);
        let s = Snapshot::of([kind(db.clone()), kind(app.clone()), kind(stack)]);
        let as_manifest = |v: Value| -> KindManifest { serde_json::from_value(v).unwrap() };

        // Unchanged, or a compatible addition: nothing breaks.
        assert_eq!(
            s.flows_broken_by(&as_manifest(db.clone())),
            Vec::<String>::new()
        );
        let mut more = db.clone();
        more["status_schema"]["properties"]["port"] = json!({"type": "integer"});
        assert_eq!(s.flows_broken_by(&as_manifest(more)), Vec::<String>::new());

        // The upstream retypes what the flow reads, the dependent removes what it fills.
        let mut retyped = db;
        retyped["status_schema"]["properties"]["endpoint"] = json!({"type": "integer"});
        let mut removed = app;
        removed["spec_schema"] = json!({"type": "object", "additionalProperties": false,
            "properties": {"port": {"type": "integer"}}});
        for new in [retyped, removed] {
            let broken = s.flows_broken_by(&as_manifest(new.clone()));
            assert_eq!(broken.len(), 1, "{new}: {broken:?}");
            assert!(
                broken[0].starts_with(
                    "kind stack v1 declares at /edges/0/values/0 the value flow \
                     db.status/endpoint -> app.spec/host"
                ),
                "{broken:?}"
            );
        }
    }
}
