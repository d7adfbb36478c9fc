//! The `Provider` trait a handler implements, and the `Registry` that collects providers for
//! the runtime.

use std::{collections::HashSet, future::Future, pin::Pin, sync::Arc};

use crate::{
    error::{HandlerError, WorkerError},
    types::{KindVersion, Outcome, ProviderConfig, ReactionRequest},
};

/// Handler code for one (kind, kind_version).
///
/// A provider handles every reaction of its kind (switch on [`ReactionRequest::reaction`] or
/// [`ReactionRequest::stage`] when a kind declares several). It has no setup hook: it connects
/// to its own dependencies and reports the result through [`Provider::ready`].
pub trait Provider: Send + Sync + 'static {
    /// The pair this provider serves. Must be pure; the version must be at least 1.
    fn kind(&self) -> KindVersion;

    /// Runs one task. Return [`HandlerError::transient`] to be retried and
    /// [`HandlerError::terminal`] to stop retries until the spec changes. Long handlers
    /// should watch `req.cancel`.
    fn work(
        &self,
        req: ReactionRequest,
    ) -> impl Future<Output = Result<Outcome, HandlerError>> + Send;

    /// Called with the kind's default provider config when it is first loaded and on every
    /// push. Both parts empty means the config was deleted (or never existed).
    fn on_config(&self, _cfg: ProviderConfig) {}

    /// Whether the provider can take tasks now. Polled periodically; a flip tells the broker
    /// to stop (or resume) sending this kind's tasks to this worker.
    fn ready(&self) -> bool {
        true
    }
}

pub(crate) type BoxedWork<'a> =
    Pin<Box<dyn Future<Output = Result<Outcome, HandlerError>> + Send + 'a>>;

/// The object-safe form of [`Provider`] the runtime stores.
pub(crate) trait DynProvider: Send + Sync + 'static {
    fn work(&self, req: ReactionRequest) -> BoxedWork<'_>;
    fn on_config(&self, cfg: ProviderConfig);
    fn ready(&self) -> bool;
}

impl<P: Provider> DynProvider for P {
    fn work(&self, req: ReactionRequest) -> BoxedWork<'_> {
        Box::pin(Provider::work(self, req))
    }

    fn on_config(&self, cfg: ProviderConfig) {
        Provider::on_config(self, cfg);
    }

    fn ready(&self) -> bool {
        Provider::ready(self)
    }
}

/// A registered provider with its pair captured once.
#[derive(Clone)]
pub(crate) struct Registered {
    pub(crate) kv: KindVersion,
    pub(crate) provider: Arc<dyn DynProvider>,
}

/// The providers a worker serves, one per (kind, kind_version).
#[derive(Clone, Default)]
pub struct Registry {
    entries: Vec<Registered>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a provider (builder style).
    pub fn with<P: Provider>(mut self, provider: P) -> Self {
        self.register(provider);
        self
    }

    /// Adds a provider.
    pub fn register<P: Provider>(&mut self, provider: P) {
        let kv = provider.kind();
        self.entries.push(Registered {
            kv,
            provider: Arc::new(provider),
        });
    }

    /// The registered pairs, in registration order.
    pub fn kinds(&self) -> Vec<KindVersion> {
        self.entries.iter().map(|e| e.kv.clone()).collect()
    }

    /// Whether no provider is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn entries(&self) -> &[Registered] {
        &self.entries
    }

    pub(crate) fn find(&self, kind: &str, version: i32) -> Option<&Registered> {
        self.entries
            .iter()
            .find(|e| e.kv.kind == kind && e.kv.version == version)
    }

    /// Checks the registry can be served and applies the `WORKER_KINDS` filter.
    pub(crate) fn validated(mut self, filter: Option<&[String]>) -> Result<Self, WorkerError> {
        let mut seen = HashSet::new();
        for e in &self.entries {
            if e.kv.kind.is_empty() {
                return Err(WorkerError::Registry("a provider has an empty kind".into()));
            }
            if e.kv.version < 1 {
                return Err(WorkerError::Registry(format!(
                    "provider for kind {:?} has version {}; versions start at 1",
                    e.kv.kind, e.kv.version
                )));
            }
            if !seen.insert(e.kv.clone()) {
                return Err(WorkerError::Registry(format!(
                    "{} is registered twice",
                    e.kv
                )));
            }
        }
        if let Some(filter) = filter {
            let unknown: Vec<&str> = filter
                .iter()
                .filter(|k| !self.entries.iter().any(|e| &e.kv.kind == *k))
                .map(String::as_str)
                .collect();
            if !unknown.is_empty() {
                return Err(WorkerError::Registry(format!(
                    "WORKER_KINDS names kinds no provider serves: {}",
                    unknown.join(", ")
                )));
            }
            self.entries.retain(|e| filter.contains(&e.kv.kind));
        }
        if self.entries.is_empty() {
            return Err(WorkerError::Registry("no providers registered".into()));
        }
        Ok(self)
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| e.kv.to_string()))
            .finish()
    }
}
