//! The manifest cache: what routing needs from each kind manifest, by (kind, version).
//!
//! The lowest part of the broker: it reads `kind_manifest` and knows nothing of streams,
//! leases or loops. The LISTEN loop in `caches` calls [`Manifests::reload`] when a manifest
//! changes; everyone else only reads. It also holds each kind's compiled `status_schema`,
//! so a result is checked against it before it is stored ([`KindInfo::enforce`]).

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, RwLock},
};

use converge_engine::{
    db::{self, queue::Completion},
    ids::KindPair,
};
use converge_proto::manifest::{Descendants, Emit, KindManifest};
use sqlx::PgPool;

use crate::{
    convert,
    error::{Error, Result},
};

/// What routing needs from one kind manifest.
#[derive(Debug, Clone)]
pub(crate) struct KindInfo {
    /// The reaction run for a spec change without children (the worker), if declared.
    pub work_reaction: Option<String>,
    /// The composer reaction, if declared.
    pub compose_reaction: Option<String>,
    /// The rollup reaction, if declared.
    pub rollup_reaction: Option<String>,
    /// Whether the rollup request carries every descendant (`"descendants": "full"`), not
    /// only the summary.
    pub rollup_full: bool,
    /// Whether the composer's edges are applied (its emits mask has `edges`).
    pub compose_edges: bool,
    /// Whether the composer's configs are applied (its emits mask has `configs`).
    pub compose_configs: bool,
    /// The teardown reaction (deleteRequested), if declared.
    pub delete_reaction: Option<String>,
    /// Verb → the operation reaction that handles it.
    pub verbs: HashMap<String, String>,
    /// A reactor kind's reaction (its tasks come from the lifecycle outbox, not the queue).
    pub reactor_reaction: Option<String>,
    /// Content hash of the manifest.
    pub manifest_version: i64,
    /// The kind's compiled `status_schema`, if it declares one.
    pub status_schema: Option<Schema>,
}

/// A compiled JSON Schema a worker's result must satisfy.
#[derive(Clone)]
pub(crate) struct Schema(Arc<jsonschema::Validator>);

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Schema")
    }
}

impl Schema {
    /// Compiles `schema`; one the control plane let through but this build cannot compile
    /// is logged and not enforced (the apply already checked it with the same crate).
    fn compile(pair: &KindPair, field: &str, schema: Option<&serde_json::Value>) -> Option<Schema> {
        let schema = schema.filter(|s| !s.is_null())?;
        match jsonschema::validator_for(schema) {
            Ok(v) => Some(Schema(Arc::new(v))),
            Err(e) => {
                tracing::error!(%pair, field, error = %e, "schema does not compile; not enforced");
                None
            }
        }
    }

    /// The first way `doc` breaks the schema (its pointer, the rule and what was found), if
    /// it does. Checking a valid document allocates nothing.
    pub fn violation(&self, doc: &serde_json::Value) -> Option<String> {
        let e = self.0.validate(doc).err()?;
        let at = e.instance_path().as_str();
        Some(format!(
            "at {}: {e} (rule {:?})",
            if at.is_empty() { "/" } else { at },
            e.kind().keyword()
        ))
    }
}

impl KindInfo {
    /// Whether a reconcile is a single WORK stage (no composer, no rollup): the hot path
    /// that needs no pipeline state.
    pub fn is_plain_leaf(&self) -> bool {
        self.work_reaction.is_some()
            && self.compose_reaction.is_none()
            && self.rollup_reaction.is_none()
    }

    /// `c` as it may be stored: a successful reconcile whose status breaks the kind's
    /// `status_schema` becomes a terminal failure naming the pointer and the rule. A failure
    /// stores no status, so the resource keeps the status it had.
    pub fn enforce(&self, pair: &KindPair, c: Completion) -> Completion {
        let (Some(schema), Some(status)) = (&self.status_schema, &c.status) else {
            return c;
        };
        if !c.ok || c.key.task_type != "reconcile" {
            return c;
        }
        match schema.violation(status) {
            None => c,
            Some(why) => Completion {
                composite: c.composite,
                ..convert::failure(
                    c.key,
                    format!(
                        "the status breaks the status_schema of {} v{} {why}",
                        pair.kind, pair.version
                    ),
                    true,
                )
            },
        }
    }
}

/// The broker's view of every stored kind manifest.
pub(crate) struct Manifests {
    pool: PgPool,
    by_pair: RwLock<HashMap<KindPair, Arc<KindInfo>>>,
}

impl Manifests {
    /// An empty cache over `pool`; nothing is read until [`Manifests::reload`].
    pub fn new(pool: PgPool) -> Self {
        Manifests {
            pool,
            by_pair: RwLock::default(),
        }
    }

    /// Re-reads every manifest. A manifest that does not parse is logged and left out (its
    /// kind gets no tasks) rather than failing the whole reload.
    pub async fn reload(&self) -> Result<()> {
        let rows = db::kinds::manifest_list(&self.pool)
            .await
            .map_err(Error::db("load kind manifests"))?;
        let mut map = HashMap::with_capacity(rows.len());
        for r in rows {
            match serde_json::from_value::<KindManifest>(r.manifest) {
                Ok(m) => {
                    let status_schema =
                        Schema::compile(&r.pair, "status_schema", m.status_schema.as_ref());
                    map.insert(
                        r.pair,
                        Arc::new(KindInfo {
                            work_reaction: m.worker_reaction().map(|x| x.name.clone()),
                            compose_reaction: m.composer_reaction().map(|x| x.name.clone()),
                            rollup_reaction: m.rollup_reaction().map(|x| x.name.clone()),
                            rollup_full: m
                                .rollup_reaction()
                                .is_some_and(|x| x.descendants == Some(Descendants::Full)),
                            compose_edges: m
                                .composer_reaction()
                                .is_some_and(|x| x.emits(Emit::Edges)),
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
                            manifest_version: r.manifest_version,
                            status_schema,
                        }),
                    );
                }
                Err(e) => {
                    tracing::error!(pair = %r.pair, error = %e, "stored manifest does not parse")
                }
            }
        }
        *self.by_pair.write().expect("manifest cache poisoned") = map;
        Ok(())
    }

    /// The routing view of `pair`'s manifest, if one is stored.
    pub fn get(&self, pair: &KindPair) -> Option<Arc<KindInfo>> {
        self.by_pair
            .read()
            .expect("manifest cache poisoned")
            .get(pair)
            .cloned()
    }

    /// `c` (a result for a task of `pair`) as it may be stored; see [`KindInfo::enforce`].
    pub fn enforce(&self, pair: &KindPair, c: Completion) -> Completion {
        match self.get(pair) {
            Some(info) => info.enforce(pair, c),
            None => c,
        }
    }

    /// Whether a reconcile of `pair` is a single WORK stage (no composer, no rollup).
    pub fn is_plain_leaf(&self, pair: &KindPair) -> bool {
        self.get(pair).is_some_and(|i| i.is_plain_leaf())
    }
}
