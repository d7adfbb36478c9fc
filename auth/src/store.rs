//! The live principal index: built from `AUTH_FILE`, looked up on every request, and rebuilt
//! when the file's content changes. The file's *directory* is watched (inotify, through the
//! `notify` crate: watching the file itself misses an atomic rename and Kubernetes'
//! symlink-swapped Secret volumes), with a failsafe re-read for filesystems that send no
//! events (NFS, some FUSE mounts); see [`crate::watch`].
//!
//! Whoever must act on a change at once (an open worker stream, an SSE watch) subscribes to
//! the index's generation ([`Authenticator::subscribe`]) and re-checks its principal with
//! [`Authenticator::still_valid`] when it moves: revocation is an event, not a poll.
//!
//! A file that stops parsing is logged and ignored: the last good index stays in force, so
//! a typo during an edit never locks every client out (nor lets anyone in).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
    time::Duration,
};

use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::{
    principals::{self, Principal},
    token,
};

/// Why `AUTH_FILE` could not be loaded at start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Unreadable.
    #[error("cannot read AUTH_FILE {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Readable but wrong.
    #[error("AUTH_FILE {path} is invalid")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: principals::ParseError,
    },
}

#[derive(Default)]
struct Index {
    by_token: HashMap<[u8; 32], Arc<Principal>>,
    by_spiffe: HashMap<String, Arc<Principal>>,
    content_sha: [u8; 32],
    generation: u64,
}

/// Resolves credentials to principals; cheap to share (`Arc`).
pub struct Authenticator {
    path: PathBuf,
    index: RwLock<Arc<Index>>,
    /// The generation of the index in force, sent after each reload that changed it.
    changed: watch::Sender<u64>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idx = self.current();
        f.debug_struct("Authenticator")
            .field("path", &self.path)
            .field("tokens", &idx.by_token.len())
            .field("spiffe_ids", &idx.by_spiffe.len())
            .finish()
    }
}

fn build(text: &str, generation: u64) -> Result<Index, principals::ParseError> {
    let mut idx = Index {
        content_sha: Sha256::digest(text.as_bytes()).into(),
        generation,
        ..Index::default()
    };
    for c in principals::parse(text)? {
        let p = Arc::new(c.principal);
        if let Some(h) = c.token_sha256 {
            idx.by_token.insert(h, p.clone());
        }
        if let Some(s) = c.spiffe_id {
            idx.by_spiffe.insert(s, p);
        }
    }
    Ok(idx)
}

impl Authenticator {
    /// Loads `path`; any problem is an error (a server must not start with a broken list).
    pub fn load(path: impl AsRef<Path>) -> Result<Arc<Self>, LoadError> {
        let path = path.as_ref().to_path_buf();
        let text = std::fs::read_to_string(&path).map_err(|source| LoadError::Read {
            path: path.clone(),
            source,
        })?;
        let index = build(&text, 1).map_err(|source| LoadError::Parse {
            path: path.clone(),
            source,
        })?;
        tracing::info!(
            path = %path.display(),
            tokens = index.by_token.len(),
            spiffe_ids = index.by_spiffe.len(),
            "principals loaded"
        );
        let (changed, _) = watch::channel(index.generation);
        Ok(Arc::new(Authenticator {
            path,
            index: RwLock::new(Arc::new(index)),
            changed,
        }))
    }

    fn current(&self) -> Arc<Index> {
        self.index
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The principal holding bearer `token`. The lookup is by SHA-256, so its timing says
    /// nothing useful about any stored token.
    pub fn by_token(&self, token: &str) -> Option<Arc<Principal>> {
        self.current().by_token.get(&token::digest(token)).cloned()
    }

    /// The principal whose client certificate carries `spiffe_id`.
    pub fn by_spiffe(&self, spiffe_id: &str) -> Option<Arc<Principal>> {
        self.current().by_spiffe.get(spiffe_id).cloned()
    }

    /// Bumps on every successful reload (streams opened under an older list re-check).
    pub fn generation(&self) -> u64 {
        self.current().generation
    }

    /// The index's generation as it changes: `changed()` resolves once for every reload that
    /// changed the principals (the value is the new [`Authenticator::generation`]), within
    /// milliseconds of the file's change event. A holder of a long-lived door (a worker
    /// stream, an SSE watch) awaits it and then asks [`Authenticator::still_valid`]; it should
    /// check once right after subscribing, since a reload may have come between its
    /// authentication and the subscription.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Whether `principal` is still listed with the same role and kinds.
    pub fn still_valid(&self, principal: &Principal) -> bool {
        let idx = self.current();
        idx.by_token
            .values()
            .chain(idx.by_spiffe.values())
            .any(|p| **p == *principal)
    }

    /// Re-reads the file now; `Ok(true)` when the list changed.
    pub fn reload(&self) -> Result<bool, LoadError> {
        let text = std::fs::read_to_string(&self.path).map_err(|source| LoadError::Read {
            path: self.path.clone(),
            source,
        })?;
        let cur = self.current();
        let sha: [u8; 32] = Sha256::digest(text.as_bytes()).into();
        if sha == cur.content_sha {
            return Ok(false);
        }
        let index = build(&text, cur.generation + 1).map_err(|source| LoadError::Parse {
            path: self.path.clone(),
            source,
        })?;
        tracing::info!(
            path = %self.path.display(),
            tokens = index.by_token.len(),
            spiffe_ids = index.by_spiffe.len(),
            "principals reloaded"
        );
        let generation = index.generation;
        *self
            .index
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(index);
        // After the swap: a subscriber woken by this reads the new index.
        self.changed.send_replace(generation);
        Ok(true)
    }

    /// Keeps the index fresh until `stop`: reloads when the file's directory reports a
    /// change, and every `failsafe` whatever it reports (see [`crate::watch::watch_reload`]).
    pub async fn keep_fresh(self: Arc<Self>, failsafe: Duration, stop: CancellationToken) {
        let path = self.path.clone();
        crate::watch::watch_reload(
            &path,
            failsafe,
            stop,
            "AUTH_FILE not reloaded; the previous principals stay in force",
            move || self.reload(),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str, role: &str, tok: &str) -> String {
        format!(
            "  - {{name: {name}, role: {role}, token_sha256: \"{}\"}}\n",
            token::digest_hex(tok)
        )
    }

    #[test]
    fn reload_adds_and_removes_and_keeps_the_last_good_list() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.yaml");
        std::fs::write(&path, format!("principals:\n{}", line("a", "viewer", "ta"))).unwrap();
        let auth = Authenticator::load(&path).unwrap();
        assert_eq!(auth.by_token("ta").unwrap().name, "a");
        assert!(auth.by_token("tb").is_none());
        let mut changes = auth.subscribe();
        assert!(!auth.reload().unwrap(), "unchanged content is not a reload");
        assert!(!changes.has_changed().unwrap(), "and wakes nobody");

        std::fs::write(&path, format!("principals:\n{}", line("b", "admin", "tb"))).unwrap();
        assert!(auth.reload().unwrap());
        assert!(
            auth.by_token("ta").is_none(),
            "a removed principal is out at once"
        );
        assert_eq!(auth.by_token("tb").unwrap().name, "b");
        assert_eq!(auth.generation(), 2);
        assert!(
            changes.has_changed().unwrap(),
            "a change wakes the subscribers"
        );
        assert_eq!(*changes.borrow_and_update(), 2);

        std::fs::write(&path, "principals: [{name: b, role: bogus}]").unwrap();
        assert!(auth.reload().is_err());
        assert!(
            !changes.has_changed().unwrap(),
            "a broken file changes nothing"
        );
        assert_eq!(
            auth.by_token("tb").unwrap().name,
            "b",
            "last good list stays"
        );
    }

    #[test]
    fn a_broken_file_is_a_load_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.yaml");
        std::fs::write(&path, "principals: 3").unwrap();
        let e = crate::error_chain(&Authenticator::load(&path).unwrap_err());
        assert!(e.contains("auth.yaml"), "{e}");
        assert!(Authenticator::load(dir.path().join("missing")).is_err());
    }
}
