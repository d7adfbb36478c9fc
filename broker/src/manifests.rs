//! The manifest cache: what routing needs from each kind manifest, by (kind, version).
//!
//! The lowest part of the broker: it reads `kind_manifest` and knows nothing of streams,
//! leases or loops. The LISTEN loop in `caches` calls [`Manifests::reload`] when a manifest
//! changes; everyone else only reads.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use converge_engine::{db, ids::KindPair};
use converge_proto::manifest::{Descendants, Emit, KindManifest};
use sqlx::PgPool;

use crate::error::{Error, Result};

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
}

impl KindInfo {
    /// Whether a reconcile is a single WORK stage (no composer, no rollup): the hot path
    /// that needs no pipeline state.
    pub fn is_plain_leaf(&self) -> bool {
        self.work_reaction.is_some()
            && self.compose_reaction.is_none()
            && self.rollup_reaction.is_none()
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

    /// Whether a reconcile of `pair` is a single WORK stage (no composer, no rollup).
    pub fn is_plain_leaf(&self, pair: &KindPair) -> bool {
        self.get(pair).is_some_and(|i| i.is_plain_leaf())
    }
}
