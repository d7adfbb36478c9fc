//! The default provider config cache and its pushes: rule 2 (a stream gets each of its kinds'
//! default config before any task) and, when a default changes, the new one on every stream
//! serving that kind.
//!
//! It sits right above the registry (whose streams it pushes to) and below everything that
//! claims or serves; the LISTEN loop in `caches` calls [`Configs::refresh`].

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use converge_engine::{
    db::{self, kinds::DefaultConfig},
    ids::KindPair,
};
use converge_proto::pb;
use sqlx::PgPool;
use tokio::sync::Mutex as AsyncMutex;

use crate::{
    error::{Error, Result},
    registry::{Registry, StreamId},
};

/// The defaults last pushed, by (kind, version).
pub(crate) struct Configs {
    pool: PgPool,
    registry: Arc<Registry>,
    by_pair: RwLock<HashMap<KindPair, DefaultConfig>>,
    /// Serialises config priming and pushes so a stream never sees an older default after a
    /// newer one.
    lock: AsyncMutex<()>,
}

fn update_frame(pair: &KindPair, c: &DefaultConfig) -> pb::work_stream_server_msg::Body {
    pb::work_stream_server_msg::Body::Config(pb::ProviderConfigUpdate {
        kind: pair.kind.clone(),
        kind_version: pair.version,
        config: c.spec.clone(),
        bundle: c.bundle.clone(),
    })
}

impl Configs {
    /// An empty cache that pushes to `registry`'s streams.
    pub fn new(pool: PgPool, registry: Arc<Registry>) -> Self {
        Configs {
            pool,
            registry,
            by_pair: RwLock::default(),
            lock: AsyncMutex::new(()),
        }
    }

    /// Rule 2: pushes the default config of each of the stream's pairs before the stream can
    /// receive any task, then makes it claimable (the caller wakes the dispatcher). Frames
    /// are queued without waiting (a stream that does not read them is closed by its
    /// queue's stall limit), so the config lock is only ever held across one database read.
    pub async fn prime_stream(&self, stream: StreamId, pairs: &[KindPair]) -> Result<()> {
        let _guard = self.lock.lock().await;
        let defaults = db::kinds::providerconfig_defaults(&self.pool, pairs)
            .await
            .map_err(Error::db("load default provider configs"))?;
        for (pair, c) in &defaults {
            self.registry.push(stream, update_frame(pair, c));
        }
        {
            let mut cache = self.by_pair.write().expect("config cache poisoned");
            for (pair, c) in defaults {
                cache.insert(pair, c);
            }
        }
        self.registry.set_claimable(stream);
        Ok(())
    }

    /// Re-reads the defaults of every served pair and pushes the ones that changed (a deleted
    /// default is pushed as an empty update).
    pub async fn refresh(&self) -> Result<()> {
        let _guard = self.lock.lock().await;
        let pairs = self.registry.served_pairs();
        let fresh: HashMap<KindPair, DefaultConfig> =
            db::kinds::providerconfig_defaults(&self.pool, &pairs)
                .await
                .map_err(Error::db("load default provider configs"))?
                .into_iter()
                .collect();
        let mut changed = Vec::new();
        {
            let mut cache = self.by_pair.write().expect("config cache poisoned");
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
            self.registry.push_to_pair(&pair, &update_frame(&pair, &c));
        }
        Ok(())
    }

    /// The defaults for a GetProviderConfig call (read fresh from the database).
    pub async fn defaults_for(&self, pairs: &[KindPair]) -> Result<Vec<(KindPair, DefaultConfig)>> {
        db::kinds::providerconfig_defaults(&self.pool, pairs)
            .await
            .map_err(Error::db("load default provider configs"))
    }
}
