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
//!
//! Beside the file's principals the index holds the tokens minted through the API
//! ([`MintedToken`], stored hashed in PostgreSQL): whoever follows the database hands the
//! whole current set to [`Authenticator::set_minted`] (on its NOTIFY and a failsafe poll),
//! and a change moves the same generation, so a revoked token's streams close exactly like a
//! removed `AUTH_FILE` line's. An expired token is refused at lookup (the process's clock),
//! and [`Authenticator::prune_expired`] moves the generation once it has expired so its open
//! streams close too. Each lookup of a minted token stamps its last use in memory only;
//! [`Authenticator::take_uses`] hands the stamps to a writer that coalesces them.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{
        Arc, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::{
    principals::{self, Principal, Role},
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
}

/// A token minted through the API, as its store hands it to the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MintedToken {
    /// The store's row id (a name minted again is a new id, and a new principal).
    pub id: i64,
    /// The principal's name.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// A worker's kind globs.
    pub kinds: Vec<String>,
    /// SHA-256 of the token.
    pub token_sha256: [u8; 32],
    /// When it stops authenticating (`None`: never).
    pub expires_at: Option<SystemTime>,
}

struct MintedEntry {
    principal: Arc<Principal>,
    expires_at: Option<SystemTime>,
    /// Unix seconds of the last lookup that found it (0: none since this process loaded it).
    used: AtomicU64,
    /// The `used` value last handed out by `take_uses`.
    reported: AtomicU64,
}

impl MintedEntry {
    fn live(&self, now: SystemTime) -> bool {
        self.expires_at.is_none_or(|e| e > now)
    }
}

/// The minted tokens in force, by hash.
#[derive(Default)]
struct Minted {
    by_token: HashMap<[u8; 32], Arc<MintedEntry>>,
}

/// Resolves credentials to principals; cheap to share (`Arc`).
pub struct Authenticator {
    path: PathBuf,
    index: RwLock<Arc<Index>>,
    minted: RwLock<Arc<Minted>>,
    /// The generation of the principals in force (file and minted tokens together), moved
    /// after each change.
    changed: watch::Sender<u64>,
    /// People signed in through OIDC (set once at boot when OIDC_ISSUER is).
    oidc: std::sync::OnceLock<Arc<crate::oidc::Verifier>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idx = self.current();
        f.debug_struct("Authenticator")
            .field("path", &self.path)
            .field("tokens", &idx.by_token.len())
            .field("spiffe_ids", &idx.by_spiffe.len())
            .field("minted", &self.minted().by_token.len())
            .finish()
    }
}

fn build(text: &str) -> Result<Index, principals::ParseError> {
    let mut idx = Index {
        content_sha: Sha256::digest(text.as_bytes()).into(),
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
        let index = build(&text).map_err(|source| LoadError::Parse {
            path: path.clone(),
            source,
        })?;
        tracing::info!(
            path = %path.display(),
            tokens = index.by_token.len(),
            spiffe_ids = index.by_spiffe.len(),
            "principals loaded"
        );
        let (changed, _) = watch::channel(1);
        Ok(Arc::new(Authenticator {
            path,
            index: RwLock::new(Arc::new(index)),
            minted: RwLock::new(Arc::new(Minted::default())),
            changed,
            oidc: std::sync::OnceLock::new(),
        }))
    }

    fn current(&self) -> Arc<Index> {
        self.index
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn minted(&self) -> Arc<Minted> {
        self.minted
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Moves the generation (after a swap: a subscriber woken by it reads the new index).
    fn bump(&self) {
        self.changed.send_modify(|g| *g += 1);
    }

    /// The principal holding bearer `token`: an `AUTH_FILE` principal, else a minted token
    /// that has not expired (by this process's clock). The lookup is by SHA-256, so its
    /// timing says nothing useful about any stored token. A minted token's use is stamped in
    /// memory (one relaxed store), never written here.
    pub fn by_token(&self, token: &str) -> Option<Arc<Principal>> {
        let digest = token::digest(token);
        if let Some(p) = self.current().by_token.get(&digest) {
            return Some(p.clone());
        }
        let minted = self.minted();
        let entry = minted.by_token.get(&digest)?;
        let now = SystemTime::now();
        if !entry.live(now) {
            return None;
        }
        entry.used.store(unix_secs(now), Ordering::Relaxed);
        Some(entry.principal.clone())
    }

    /// Lets people in through OIDC: a bearer JWT goes to `verifier` ([`Self::by_bearer`]).
    /// Once, at boot; a second call is ignored.
    pub fn set_oidc(&self, verifier: Arc<crate::oidc::Verifier>) {
        let _ = self.oidc.set(verifier);
    }

    /// The OIDC verifier, when OIDC is configured.
    pub fn oidc(&self) -> Option<&Arc<crate::oidc::Verifier>> {
        self.oidc.get()
    }

    /// The principal a bearer credential stands for: with OIDC configured, a token shaped
    /// like a JWT ([`crate::oidc::looks_like_jwt`]) is verified against the issuer's keys;
    /// anything else is looked up as [`Self::by_token`] does.
    pub async fn by_bearer(&self, token: &str) -> Result<Arc<Principal>, crate::oidc::Rejection> {
        if let Some(v) = self.oidc()
            && crate::oidc::looks_like_jwt(token)
        {
            return v.verify(token).await.map(Arc::new);
        }
        self.by_token(token)
            .ok_or_else(|| crate::oidc::Rejection::Invalid("unknown or revoked token".into()))
    }

    /// Whether an `AUTH_FILE` principal is called `name` (a minted token may not take it).
    pub fn file_has_name(&self, name: &str) -> bool {
        let idx = self.current();
        idx.by_token
            .values()
            .chain(idx.by_spiffe.values())
            .any(|p| p.name == name)
    }

    /// Replaces the minted tokens in force with `tokens` (the store's whole current set);
    /// `true`, and the generation moves, when the set changed. Tokens already expired by
    /// this process's clock are left out. An unchanged token keeps its entry (and its
    /// unreported use).
    pub fn set_minted(&self, tokens: Vec<MintedToken>) -> bool {
        let now = SystemTime::now();
        let cur = self.minted();
        let live: Vec<MintedToken> = tokens
            .into_iter()
            .filter(|t| t.expires_at.is_none_or(|e| e > now))
            .collect();
        let unchanged = live.len() == cur.by_token.len()
            && live.iter().all(|t| {
                cur.by_token.get(&t.token_sha256).is_some_and(|e| {
                    e.principal.token_id == Some(t.id) && e.expires_at == t.expires_at
                })
            });
        if unchanged {
            return false;
        }
        let by_token =
            live.into_iter()
                .map(|t| {
                    let kept = cur.by_token.get(&t.token_sha256).filter(|e| {
                        e.principal.token_id == Some(t.id) && e.expires_at == t.expires_at
                    });
                    let entry = match kept {
                        Some(e) => e.clone(),
                        None => Arc::new(MintedEntry {
                            principal: Arc::new(Principal {
                                name: t.name,
                                role: t.role,
                                kinds: t.kinds,
                                token_id: Some(t.id),
                                expires: None,
                            }),
                            expires_at: t.expires_at,
                            used: AtomicU64::new(0),
                            reported: AtomicU64::new(0),
                        }),
                    };
                    (t.token_sha256, entry)
                })
                .collect();
        *self
            .minted
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(Minted { by_token });
        self.bump();
        true
    }

    /// Drops the minted tokens that have expired by this process's clock; `true`, and the
    /// generation moves (so their open streams and watches close), when any was dropped.
    pub fn prune_expired(&self) -> bool {
        let now = SystemTime::now();
        let cur = self.minted();
        if cur.by_token.values().all(|e| e.live(now)) {
            return false;
        }
        let by_token = cur
            .by_token
            .iter()
            .filter(|(_, e)| e.live(now))
            .map(|(h, e)| (*h, e.clone()))
            .collect();
        *self
            .minted
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(Minted { by_token });
        self.bump();
        true
    }

    /// The soonest expiry among the minted tokens in force (when [`Self::prune_expired`]
    /// next has work).
    pub fn next_expiry(&self) -> Option<SystemTime> {
        self.minted()
            .by_token
            .values()
            .filter_map(|e| e.expires_at)
            .min()
    }

    /// The uses of minted tokens seen since the last call: `(token id, last use)`, one per
    /// token at most, so its writer makes one write per token per call whatever the request
    /// rate.
    pub fn take_uses(&self) -> Vec<(i64, SystemTime)> {
        self.minted()
            .by_token
            .values()
            .filter_map(|e| {
                let used = e.used.load(Ordering::Relaxed);
                let before = e.reported.swap(used, Ordering::Relaxed);
                (used > before).then(|| {
                    (
                        e.principal.token_id.unwrap_or_default(),
                        UNIX_EPOCH + Duration::from_secs(used),
                    )
                })
            })
            .collect()
    }

    /// The principal whose client certificate carries `spiffe_id`.
    pub fn by_spiffe(&self, spiffe_id: &str) -> Option<Arc<Principal>> {
        self.current().by_spiffe.get(spiffe_id).cloned()
    }

    /// Bumps on every change of the principals (a reload of the file that changed it, a
    /// changed set of minted tokens, an expiry): streams opened under an older list re-check.
    pub fn generation(&self) -> u64 {
        *self.changed.borrow()
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

    /// Whether `principal` is still listed with the same role and kinds (a minted token's:
    /// the same token, not revoked and not expired; an OIDC principal's: its token has not
    /// expired).
    pub fn still_valid(&self, principal: &Principal) -> bool {
        if let Some(expires) = principal.expires {
            // An OIDC principal is in no list: valid until its token expires.
            return principal.token_id.is_none()
                && self.oidc().is_some()
                && SystemTime::now() < expires;
        }
        if principal.token_id.is_some() {
            let now = SystemTime::now();
            return self
                .minted()
                .by_token
                .values()
                .any(|e| *e.principal == *principal && e.live(now));
        }
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
        let index = build(&text).map_err(|source| LoadError::Parse {
            path: self.path.clone(),
            source,
        })?;
        tracing::info!(
            path = %self.path.display(),
            tokens = index.by_token.len(),
            spiffe_ids = index.by_spiffe.len(),
            "principals reloaded"
        );
        *self
            .index
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(index);
        self.bump();
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

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
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

    fn minted(id: i64, name: &str, tok: &str, expires_at: Option<SystemTime>) -> MintedToken {
        MintedToken {
            id,
            name: name.into(),
            role: Role::Operator,
            kinds: Vec::new(),
            token_sha256: token::digest(tok),
            expires_at,
        }
    }

    #[test]
    fn minted_tokens_authenticate_until_revoked_or_expired() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.yaml");
        std::fs::write(
            &path,
            format!("principals:\n{}", line("ops", "admin", "t0")),
        )
        .unwrap();
        let auth = Authenticator::load(&path).unwrap();
        assert!(auth.file_has_name("ops") && !auth.file_has_name("ci"));
        let mut changes = auth.subscribe();
        assert!(auth.set_minted(vec![minted(1, "ci", "t1", None)]));
        assert!(changes.has_changed().unwrap(), "a new token is a change");
        changes.borrow_and_update();
        assert!(
            !auth.set_minted(vec![minted(1, "ci", "t1", None)]),
            "the same set is no change"
        );
        assert!(!changes.has_changed().unwrap());
        let ci = auth.by_token("t1").unwrap();
        assert_eq!((ci.name.as_str(), ci.token_id), ("ci", Some(1)));
        assert!(auth.still_valid(&ci));
        assert_eq!(
            auth.by_token("t0").unwrap().name,
            "ops",
            "the file still rules"
        );

        // Revoked, then the same name minted again: a new principal, the old one is gone.
        assert!(auth.set_minted(vec![minted(2, "ci", "t2", None)]));
        assert!(changes.has_changed().unwrap());
        assert!(auth.by_token("t1").is_none());
        assert!(
            !auth.still_valid(&ci),
            "a re-minted name is not the old token"
        );
        assert!(auth.still_valid(&auth.by_token("t2").unwrap()));

        // Expired: refused at lookup at once; pruning moves the generation for the streams.
        let past = SystemTime::now() - Duration::from_secs(1);
        let soon = SystemTime::now() + Duration::from_secs(3600);
        assert!(auth.set_minted(vec![
            minted(2, "ci", "t2", Some(soon)),
            minted(3, "old", "t3", Some(past))
        ]));
        assert!(
            auth.by_token("t3").is_none(),
            "already expired: never in force"
        );
        assert_eq!(auth.next_expiry(), Some(soon));
        assert!(!auth.prune_expired(), "nothing expired");
        changes.borrow_and_update();
        let p2 = auth.by_token("t2").unwrap();
        assert!(auth.set_minted(vec![minted(2, "ci", "t2", Some(past))]));
        assert!(!auth.still_valid(&p2));
        assert!(auth.by_token("t2").is_none());
        assert!(changes.has_changed().unwrap());
    }

    #[test]
    fn uses_are_reported_once_per_token_whatever_the_rate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.yaml");
        std::fs::write(
            &path,
            format!("principals:\n{}", line("ops", "admin", "t0")),
        )
        .unwrap();
        let auth = Authenticator::load(&path).unwrap();
        auth.set_minted(vec![
            minted(7, "ci", "t7", None),
            minted(8, "idle", "t8", None),
        ]);
        assert!(auth.take_uses().is_empty(), "no use yet");
        for _ in 0..1000 {
            auth.by_token("t7").unwrap();
        }
        let uses = auth.take_uses();
        assert_eq!(uses.len(), 1, "{uses:?}");
        assert_eq!(uses[0].0, 7);
        assert!(auth.take_uses().is_empty(), "reported once");
        auth.by_token("t0").unwrap();
        assert!(
            auth.take_uses().is_empty(),
            "file principals are not stamped"
        );
    }

    #[tokio::test]
    async fn an_oidc_principal_is_valid_until_its_token_expires_and_only_with_oidc_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.yaml");
        std::fs::write(
            &path,
            format!("principals:\n{}", line("ops", "admin", "t0")),
        )
        .unwrap();
        let auth = Authenticator::load(&path).unwrap();
        let person = |expires: SystemTime| Principal {
            name: "oidc:ann".into(),
            role: Role::Viewer,
            kinds: Vec::new(),
            token_id: None,
            expires: Some(expires),
        };
        let later = SystemTime::now() + Duration::from_secs(300);
        let earlier = SystemTime::now() - Duration::from_secs(1);
        assert!(
            !auth.still_valid(&person(later)),
            "no OIDC configured: nobody of the kind"
        );
        let settings = crate::oidc::Settings {
            issuer: "https://idp.example".into(),
            audiences: vec!["converge".into()],
            roles_claim: crate::oidc::DEFAULT_ROLES_CLAIM.into(),
            role_map: HashMap::new(),
            client_id: None,
            scopes: crate::oidc::DEFAULT_SCOPES.into(),
            insecure_http: false,
            ca_file: None,
            refresh_every: crate::oidc::DEFAULT_REFRESH,
            cooldown: crate::oidc::DEFAULT_COOLDOWN,
        };
        auth.set_oidc(crate::oidc::Verifier::new(settings).unwrap());
        assert!(auth.still_valid(&person(later)));
        assert!(!auth.still_valid(&person(earlier)), "expired");
        // A bearer value that is not a JWT still goes to the token index.
        assert_eq!(auth.by_bearer("t0").await.unwrap().name, "ops");
        assert!(matches!(
            auth.by_bearer("nope").await,
            Err(crate::oidc::Rejection::Invalid(_))
        ));
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
