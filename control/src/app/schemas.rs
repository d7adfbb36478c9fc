//! The validator surface: every kind's manifest with its JSON Schemas compiled once, rebuilt
//! on `kind_manifest_changed` plus a failsafe re-read, so a manifest applied through one pod
//! is enforced by every pod.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
    time::Duration,
};

use converge_proto::manifest::KindManifest;
use serde::Serialize;
use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::db;

/// One failing location in a validated document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// JSON pointer into the request body (e.g. `/spec/greeting`).
    pub location: String,
    /// What is wrong.
    pub message: String,
}

/// A kind's manifest with compiled validators.
pub struct KindSchemas {
    /// The manifest.
    pub manifest: KindManifest,
    spec: Option<jsonschema::Validator>,
    config: Option<jsonschema::Validator>,
}

fn compile(
    field: &str,
    schema: &Option<serde_json::Value>,
) -> Result<Option<jsonschema::Validator>, String> {
    match schema {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(s) => jsonschema::validator_for(s)
            .map(Some)
            .map_err(|e| format!("{field} is not a valid JSON Schema: {e}")),
    }
}

impl KindSchemas {
    /// Validates the manifest and compiles its schemas; every problem is reported.
    pub fn compile(manifest: KindManifest) -> Result<KindSchemas, Vec<String>> {
        let mut errs = manifest.validate().err().unwrap_or_default();
        let spec = compile("spec_schema", &manifest.spec_schema)
            .map_err(|e| errs.push(e))
            .ok()
            .flatten();
        let config = compile("config_schema", &manifest.config_schema)
            .map_err(|e| errs.push(e))
            .ok()
            .flatten();
        if let Err(e) = compile("status_schema", &manifest.status_schema) {
            errs.push(e);
        }
        if errs.is_empty() {
            Ok(KindSchemas {
                manifest,
                spec,
                config,
            })
        } else {
            Err(errs)
        }
    }

    /// Every violation of the kind's spec schema, located under `prefix` (e.g. "/spec").
    pub fn validate_spec(&self, spec: &serde_json::Value, prefix: &str) -> Vec<FieldError> {
        violations(self.spec.as_ref(), spec, prefix)
    }

    /// Every violation of the kind's config schema (provider config specs).
    pub fn validate_config(&self, config: &serde_json::Value, prefix: &str) -> Vec<FieldError> {
        violations(self.config.as_ref(), config, prefix)
    }
}

/// At most 50 violations of `schema` (none when the axis is untyped), located under `prefix`.
fn violations(
    schema: Option<&jsonschema::Validator>,
    doc: &serde_json::Value,
    prefix: &str,
) -> Vec<FieldError> {
    let Some(v) = schema else {
        return Vec::new();
    };
    v.iter_errors(doc)
        .take(50)
        .map(|e| FieldError {
            location: format!("{prefix}{}", e.instance_path()),
            message: e.to_string(),
        })
        .collect()
}

/// The cache, keyed by (kind, version).
#[derive(Default)]
pub struct Schemas {
    map: RwLock<HashMap<(String, i32), Arc<KindSchemas>>>,
}

impl Schemas {
    /// Rebuilds the whole cache from the database.
    pub async fn reload(&self, pool: &PgPool) -> Result<(), sqlx::Error> {
        let rows = db::kinds::manifest_list(pool).await?;
        let mut map = HashMap::with_capacity(rows.len());
        for r in rows {
            let Ok(m) = serde_json::from_value::<KindManifest>(r.manifest) else {
                continue;
            };
            let key = (m.kind.clone(), m.kind_version);
            match KindSchemas::compile(m) {
                Ok(k) => {
                    map.insert(key, Arc::new(k));
                }
                Err(e) => {
                    tracing::error!(kind = %key.0, version = key.1, errors = ?e, "stored manifest does not compile")
                }
            }
        }
        *self.map.write().expect("schema cache poisoned") = map;
        Ok(())
    }

    /// The compiled schemas of (kind, version).
    pub fn get(&self, kind: &str, version: i32) -> Option<Arc<KindSchemas>> {
        self.map
            .read()
            .expect("schema cache poisoned")
            .get(&(kind.to_string(), version))
            .cloned()
    }

    /// Whether any version of `kind` is known.
    pub fn has_kind(&self, kind: &str) -> bool {
        self.map
            .read()
            .expect("schema cache poisoned")
            .keys()
            .any(|(k, _)| k == kind)
    }

    /// Whether some version of `kind` declares only reactor reactions.
    pub fn is_reactor_kind(&self, kind: &str) -> bool {
        self.map
            .read()
            .expect("schema cache poisoned")
            .iter()
            .any(|((k, _), s)| k == kind && s.manifest.is_reactor())
    }

    /// Installs freshly applied schemas (this pod sees its own apply at once).
    pub fn insert(&self, k: KindSchemas) {
        let key = (k.manifest.kind.clone(), k.manifest.kind_version);
        self.map
            .write()
            .expect("schema cache poisoned")
            .insert(key, Arc::new(k));
    }

    /// Keeps the cache fresh until `shutdown`: LISTEN kind_manifest_changed + a failsafe.
    pub async fn keep_fresh(
        self: Arc<Self>,
        pool: PgPool,
        every: Duration,
        shutdown: CancellationToken,
    ) {
        let notify = Arc::new(Notify::new());
        let listener = converge_broker::wake::spawn_listen_notify(
            pool.clone(),
            &["kind_manifest_changed"],
            notify.clone(),
            shutdown.clone(),
        );
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = notify.notified() => {}
                _ = tokio::time::sleep(every) => {}
            }
            if let Err(e) = self.reload(&pool).await {
                tracing::warn!(error = %e, "schema cache refresh failed");
            }
        }
        let _ = listener.await;
    }
}
