//! `statussink`: the classic demo's reference reactor. Bound to a transition of another kind
//! (e.g. `classicbom` synced), it writes the watched resource's status as JSON to the
//! destination in its default provider config — a directory (`{"directory": "/path"}`) or a
//! local HTTP endpoint (`{"url": "http://127.0.0.1:8000/sink"}`, one PUT per delivery) — named
//! `<name>-<generation>.json`, so a redelivery of the same transition overwrites rather than
//! duplicates. A directory that does not exist yet is created. It reports unready until it
//! has a destination.

use std::{
    path::PathBuf,
    sync::{Arc, RwLock},
};

use converge_sdk::{
    HandlerError, KindVersion, Outcome, Provider, ProviderConfig, ReactionRequest, Stage,
};
use serde_json::json;

/// Where deliveries go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Files in a directory.
    Directory(PathBuf),
    /// PUT to `<url>/<file>`.
    Url(String),
}

impl Destination {
    /// The destination named by a config spec, if any.
    pub fn from_config(spec: Option<&serde_json::Value>) -> Option<Destination> {
        let spec = spec?;
        if let Some(d) = spec["directory"].as_str().filter(|d| !d.is_empty()) {
            return Some(Destination::Directory(PathBuf::from(d)));
        }
        spec["url"]
            .as_str()
            .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
            .map(|u| Destination::Url(u.trim_end_matches('/').to_string()))
    }
}

/// Serves kind `statussink` version 1.
#[derive(Debug, Default, Clone)]
pub struct StatusSink {
    dest: Arc<RwLock<Option<Destination>>>,
}

impl StatusSink {
    async fn deliver(
        &self,
        dest: Destination,
        file: &str,
        body: Vec<u8>,
    ) -> Result<(), HandlerError> {
        match dest {
            Destination::Directory(dir) => {
                // The directory is made on first use (the example's config names one under
                // /tmp that nothing else creates); an error here is the delivery's error,
                // shown on the binding and the resource's events.
                tokio::fs::create_dir_all(&dir).await.map_err(|e| {
                    HandlerError::transient(format!("creating {}: {e}", dir.display()))
                })?;
                // Write then rename: a reader never sees half a document.
                let tmp = dir.join(format!(".{file}.tmp"));
                tokio::fs::write(&tmp, &body).await.map_err(|e| {
                    HandlerError::transient(format!("writing {}: {e}", tmp.display()))
                })?;
                tokio::fs::rename(&tmp, dir.join(file)).await.map_err(|e| {
                    HandlerError::transient(format!("renaming into {}: {e}", dir.display()))
                })
            }
            Destination::Url(url) => {
                let r = reqwest::Client::new()
                    .put(format!("{url}/{file}"))
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .map_err(|e| HandlerError::transient(format!("PUT {url}/{file}: {e}")))?;
                if r.status().is_success() {
                    Ok(())
                } else {
                    Err(HandlerError::transient(format!(
                        "PUT {url}/{file}: HTTP {}",
                        r.status()
                    )))
                }
            }
        }
    }
}

impl Provider for StatusSink {
    fn kind(&self) -> KindVersion {
        KindVersion::new("statussink", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        if req.stage != Stage::React {
            return Err(HandlerError::terminal(format!(
                "statussink only reacts, not {:?}",
                req.stage
            )));
        }
        let dest = self
            .dest
            .read()
            .expect("destination lock poisoned")
            .clone()
            .ok_or_else(|| HandlerError::transient("no destination configured yet"))?;
        let r = &req.resource;
        let doc = json!({
            "kind": r.kind, "name": r.name, "generation": r.generation, "phase": r.phase,
            "status": r.status, "transition": req.transition.map(|t| format!("{t:?}").to_lowercase()),
            "dedup_token": req.dedup_token,
        });
        let file = format!("{}-{}.json", r.name, r.generation);
        let body = serde_json::to_vec_pretty(&doc).unwrap_or_default();
        self.deliver(dest, &file, body).await?;
        Ok(Outcome::default())
    }

    fn on_config(&self, cfg: ProviderConfig) {
        *self.dest.write().expect("destination lock poisoned") =
            Destination::from_config(cfg.spec.as_ref());
    }

    fn ready(&self) -> bool {
        self.dest
            .read()
            .expect("destination lock poisoned")
            .is_some()
    }
}
