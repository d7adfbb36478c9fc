//! The default provider config cache and its pushes: rule 2 (a stream gets each of its kinds'
//! default config before any task) and, when a default changes, the new one on every stream
//! serving that kind.
//!
//! It sits right above the registry (whose streams it pushes to) and below everything that
//! claims or serves; the LISTEN loop in `caches` calls [`Configs::refresh`].
//!
//! It is also where a config's sealed (writeOnly) values are opened: the one place a
//! plaintext secret is needed is a frame to a worker of the config's kind, so defaults are
//! opened as they are read for a push or a `GetProviderConfig`, and a claimed resource's
//! override config before its task is built ([`Configs::open`]). A value that does not
//! open (its key is not configured, it was altered) is logged by pointer and key id and
//! goes out still sealed: a worker never gets a wrong value, nor the broker a panic.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use converge_engine::{
    db::{self, kinds::DefaultConfig},
    ids::KindPair,
    sealing::{self, Keyring},
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
    /// Opens the sealed values of the configs sent to workers.
    keys: Keyring,
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
    /// An empty cache that pushes to `registry`'s streams, opening sealed values with `keys`.
    pub fn new(pool: PgPool, registry: Arc<Registry>, keys: Keyring) -> Self {
        Configs {
            pool,
            registry,
            by_pair: RwLock::default(),
            lock: AsyncMutex::new(()),
            keys,
        }
    }

    /// The keys sealed values are opened (and a composer's configs sealed) with.
    pub fn keys(&self) -> &Keyring {
        &self.keys
    }

    /// Opens, in place, the sealed values of `config`, a config of `pair` about to go to a
    /// worker serving `pair`. One that does not open is logged (pointer, reason; never a
    /// value) and left sealed.
    pub fn open(&self, pair: &KindPair, config: &mut serde_json::Value) {
        for e in self.keys.open_config(&pair.kind, config) {
            tracing::error!(%pair, pointer = %e.pointer, reason = %e.reason, "a sealed provider config value does not open; it goes to the worker sealed");
        }
    }

    /// The default configs of `pairs`, read from the database with their sealed values
    /// opened.
    async fn load_defaults(&self, pairs: &[KindPair]) -> Result<Vec<(KindPair, DefaultConfig)>> {
        let mut defaults = db::kinds::providerconfig_defaults(&self.pool, pairs)
            .await
            .map_err(Error::db("load default provider configs"))?;
        for (pair, c) in &mut defaults {
            // Most configs hold no secret: parsed only when the text has an envelope's key.
            let tag = format!("\"{}\"", sealing::ENVELOPE_TAG);
            if !c.spec.windows(tag.len()).any(|w| w == tag.as_bytes()) {
                continue;
            }
            let Ok(mut spec) = serde_json::from_slice::<serde_json::Value>(&c.spec) else {
                continue;
            };
            self.open(pair, &mut spec);
            c.spec = serde_json::to_vec(&spec).expect("a JSON value serialises");
        }
        Ok(defaults)
    }

    /// Rule 2: pushes the default config of each of the stream's pairs before the stream can
    /// receive any task, then makes it claimable (the caller wakes the dispatcher). Frames
    /// are queued without waiting (a stream that does not read them is closed by its
    /// queue's stall limit), so the config lock is only ever held across one database read.
    pub async fn prime_stream(&self, stream: StreamId, pairs: &[KindPair]) -> Result<()> {
        let _guard = self.lock.lock().await;
        let defaults = self.load_defaults(pairs).await?;
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
        let pairs = self.registry.served_pairs();
        self.refresh_pairs(&pairs).await
    }

    /// Makes sure every stream serving `pair` holds the default a claim saw (`rev`, the
    /// claim's [`ClaimedTask::default_config_rev`]) before the caller hands out its tasks:
    /// when the cache already pushed that version this is one map lookup; otherwise (the
    /// default was written after the last push and its NOTIFY is not handled yet) the pair is
    /// re-read and the newer default pushed now, ahead of the tasks on every stream.
    ///
    /// [`ClaimedTask::default_config_rev`]: converge_engine::db::queue::ClaimedTask::default_config_rev
    pub async fn ensure_pushed(&self, pair: &KindPair, rev: i64) -> Result<()> {
        if self.pushed_rev(pair) == rev {
            return Ok(());
        }
        self.refresh_pairs(std::slice::from_ref(pair)).await
    }

    /// The version of `pair`'s default last pushed (0: none).
    fn pushed_rev(&self, pair: &KindPair) -> i64 {
        let cache = self.by_pair.read().expect("config cache poisoned");
        cache.get(pair).map_or(0, |c| c.rev)
    }

    /// Re-reads the defaults of `pairs` whose version moved and pushes them. The versions are
    /// read first and the specs and bundles only of the pairs that changed (a bundle can be
    /// megabytes, and most refreshes change one kind). The cache is updated only after the
    /// frames are queued, so [`ensure_pushed`](Self::ensure_pushed) seeing a version means
    /// every stream of the pair has it ahead of anything queued later.
    async fn refresh_pairs(&self, pairs: &[KindPair]) -> Result<()> {
        let _guard = self.lock.lock().await;
        let revs: HashMap<KindPair, i64> =
            db::kinds::providerconfig_default_revs(&self.pool, pairs)
                .await
                .map_err(Error::db("load default provider config versions"))?
                .into_iter()
                .collect();
        let moved: Vec<KindPair> = pairs
            .iter()
            .filter(|p| revs.get(*p).copied().unwrap_or(0) != self.pushed_rev(p))
            .cloned()
            .collect();
        if moved.is_empty() {
            return Ok(());
        }
        let mut fresh: HashMap<KindPair, DefaultConfig> =
            self.load_defaults(&moved).await?.into_iter().collect();
        for pair in moved {
            let new = fresh.remove(&pair).unwrap_or_default();
            tracing::info!(%pair, rev = new.rev, "pushing changed default provider config");
            self.registry
                .push_to_pair(&pair, &update_frame(&pair, &new));
            self.by_pair
                .write()
                .expect("config cache poisoned")
                .insert(pair, new);
        }
        Ok(())
    }

    /// The defaults for a GetProviderConfig call (read fresh from the database).
    pub async fn defaults_for(&self, pairs: &[KindPair]) -> Result<Vec<(KindPair, DefaultConfig)>> {
        self.load_defaults(pairs).await
    }
}
