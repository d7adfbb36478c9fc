//! The broker's views of kind manifests and default provider configs, kept fresh by
//! LISTEN (`kind_manifest_changed`, `providerconfig_changed`) plus a failsafe re-read, and
//! the push of changed defaults to every stream serving that kind.

use std::{
    collections::HashMap,
    sync::{
        Arc, RwLock,
        atomic::{AtomicBool, Ordering},
    },
};

use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use converge_proto::{
    manifest::{Emit, KindManifest},
    pb,
};

use crate::{
    Broker,
    db::{self, kinds::DefaultConfig},
    error::{Error, Result},
    ids::KindPair,
    registry::StreamId,
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

#[derive(Default)]
pub(crate) struct Manifests {
    by_pair: RwLock<HashMap<KindPair, Arc<KindInfo>>>,
}

impl Manifests {
    pub async fn reload(&self, pool: &PgPool) -> Result<()> {
        let rows = db::kinds::manifest_list(pool)
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

    pub fn get(&self, pair: &KindPair) -> Option<Arc<KindInfo>> {
        self.by_pair
            .read()
            .expect("manifest cache poisoned")
            .get(pair)
            .cloned()
    }
}

#[derive(Default)]
pub(crate) struct Configs {
    by_pair: RwLock<HashMap<KindPair, DefaultConfig>>,
}

fn update_frame(pair: &KindPair, c: &DefaultConfig) -> pb::work_stream_server_msg::Body {
    pb::work_stream_server_msg::Body::Config(pb::ProviderConfigUpdate {
        kind: pair.kind.clone(),
        kind_version: pair.version,
        config: c.spec.clone(),
        bundle: c.bundle.clone(),
    })
}

impl Broker {
    /// Whether a reconcile of `pair` is a single WORK stage (no composer, no rollup).
    pub(crate) fn is_plain_leaf(&self, pair: &KindPair) -> bool {
        self.inner.manifests.get(pair).is_some_and(|i| {
            i.work_reaction.is_some() && i.compose_reaction.is_none() && i.rollup_reaction.is_none()
        })
    }

    /// Rule 2: pushes the default config of each of the stream's pairs before the stream can
    /// receive any task, then makes it claimable. Frames are queued without waiting (a
    /// stream that does not read them is closed by its queue's stall limit), so the config
    /// lock is only ever held across one database read.
    pub(crate) async fn prime_stream(&self, stream: StreamId, pairs: &[KindPair]) -> Result<()> {
        let inner = &self.inner;
        let _guard = inner.config_lock.lock().await;
        let defaults = db::kinds::providerconfig_defaults(&inner.pool, pairs)
            .await
            .map_err(Error::db("load default provider configs"))?;
        for (pair, c) in &defaults {
            inner.registry.push(stream, update_frame(pair, c));
        }
        {
            let mut cache = inner
                .configs
                .by_pair
                .write()
                .expect("config cache poisoned");
            for (pair, c) in defaults {
                cache.insert(pair, c);
            }
        }
        inner.registry.set_claimable(stream);
        self.wake();
        Ok(())
    }

    /// Re-reads the defaults of every served pair and pushes the ones that changed (a deleted
    /// default is pushed as an empty update).
    async fn refresh_configs(&self) -> Result<()> {
        let inner = &self.inner;
        let _guard = inner.config_lock.lock().await;
        let pairs = inner.registry.served_pairs();
        let fresh: HashMap<KindPair, DefaultConfig> =
            db::kinds::providerconfig_defaults(&inner.pool, &pairs)
                .await
                .map_err(Error::db("load default provider configs"))?
                .into_iter()
                .collect();
        let mut changed = Vec::new();
        {
            let mut cache = inner
                .configs
                .by_pair
                .write()
                .expect("config cache poisoned");
            for p in &pairs {
                let new = fresh.get(p).cloned().unwrap_or_default();
                let old = cache.get(p).cloned().unwrap_or_default();
                if new != old {
                    cache.insert(p.clone(), new.clone());
                    changed.push((p.clone(), new));
                }
            }
        }
        for (pair, c) in changed {
            tracing::info!(%pair, "pushing changed default provider config");
            inner.registry.push_to_pair(&pair, &update_frame(&pair, &c));
        }
        Ok(())
    }

    /// The defaults for a GetProviderConfig call (read fresh from the database).
    pub(crate) async fn defaults_for(
        &self,
        pairs: &[KindPair],
    ) -> Result<Vec<(KindPair, DefaultConfig)>> {
        db::kinds::providerconfig_defaults(&self.inner.pool, pairs)
            .await
            .map_err(Error::db("load default provider configs"))
    }
}

/// Runs the LISTEN connection and the cache refresh loop until `stop`.
pub(crate) async fn listen(b: Broker, stop: CancellationToken) {
    let refresh = Arc::new(Notify::new());
    let manifests_dirty = Arc::new(AtomicBool::new(false));
    let configs_dirty = Arc::new(AtomicBool::new(false));
    let listener = {
        let (b, refresh, md, cd, stop) = (
            b.clone(),
            refresh.clone(),
            manifests_dirty.clone(),
            configs_dirty.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let pool = b.inner.pool.clone();
            crate::wake::listen(
                pool,
                &[
                    "work_ready",
                    "lifecycle_ready",
                    "kind_manifest_changed",
                    "providerconfig_changed",
                ],
                move |channel, _payload| match channel {
                    "work_ready" | "lifecycle_ready" => b.wake(),
                    "kind_manifest_changed" => {
                        md.store(true, Ordering::Relaxed);
                        refresh.notify_one();
                    }
                    _ => {
                        cd.store(true, Ordering::Relaxed);
                        refresh.notify_one();
                    }
                },
                stop,
            )
            .await;
        })
    };
    let every = b.inner.cfg.cache_refresh;
    loop {
        let timed_out = tokio::select! {
            _ = stop.cancelled() => break,
            _ = refresh.notified() => false,
            _ = tokio::time::sleep(every) => true,
        };
        if timed_out || manifests_dirty.swap(false, Ordering::Relaxed) {
            if let Err(e) = b.inner.manifests.reload(&b.inner.pool).await {
                tracing::warn!(error = %e, "manifest refresh failed");
            }
            b.wake();
        }
        if (timed_out || configs_dirty.swap(false, Ordering::Relaxed))
            && let Err(e) = b.refresh_configs().await
        {
            tracing::warn!(error = %e, "provider config refresh failed");
        }
    }
    let _ = listener.await;
}
