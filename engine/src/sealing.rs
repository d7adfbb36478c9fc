//! Secrets at rest: the keys (`SECRETS_KEY_FILE` or `SECRETS_KEY_COMMAND`, and the old keys
//! of a rotation in `SECRETS_OLD_KEY_FILES`) and the envelope a writeOnly value of a provider
//! config is stored as.
//!
//! A sealed value keeps its place in the stored JSON document, so the document keeps its
//! shape (masking, `"***"` keeping and the `?` key tests of the SQL still work); the value
//! itself becomes an envelope object:
//!
//! ```json
//! {"$enc": "v1", "kid": "3f2a…", "n": "<base64 nonce>", "ct": "<base64 ciphertext>"}
//! ```
//!
//! - the cipher is XChaCha20-Poly1305 (RustCrypto `chacha20poly1305`): its 24-byte nonce is
//!   drawn at random per value, large enough that random nonces never collide in practice
//!   (2^96 values under one key before a collision is even a 2^-96 event), so no counter has
//!   to be kept consistent across processes and restores;
//! - the plaintext is the value's JSON text (a secret may be a string, a number or a whole
//!   object);
//! - the associated data binds the ciphertext to the kind the config configures and the JSON
//!   pointer of the value inside the config: an envelope moved to another field, or into a
//!   config of another kind, no longer opens;
//! - `kid` names the key: the first 8 bytes of the key's SHA-256, hex. It tells which
//!   configured key opens an envelope and which envelopes a rotation still has to re-seal;
//!   it says nothing usable about the key (64 bits of a hash of 256 random bits).
//!
//! No key, plaintext or nonce is ever logged; errors name the setting, the key id, the
//! config and the pointer, never a value.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use base64::Engine as _;
use chacha20poly1305::{
    XChaCha20Poly1305, XNonce,
    aead::{Aead, KeyInit, Payload},
};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::db::signin::{CommandError, SettingCommand};

/// The setting naming the file that holds the current key.
pub const KEY_FILE_VAR: &str = "SECRETS_KEY_FILE";
/// The setting naming a shell command that prints the current key (a KMS, a vault).
pub const KEY_COMMAND_VAR: &str = "SECRETS_KEY_COMMAND";
/// The setting listing (comma-separated) the files of earlier keys, kept to open values
/// not yet re-sealed by `converge secrets rotate`.
pub const OLD_KEY_FILES_VAR: &str = "SECRETS_OLD_KEY_FILES";

/// The envelope's marker key; its value is the envelope format.
pub const ENVELOPE_TAG: &str = "$enc";
/// The one envelope format.
pub const ENVELOPE_V1: &str = "v1";

const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 24;
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Why no key could be loaded. Messages name the setting (and file), never key bytes.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key file could not be read.
    #[error("{setting}: cannot read {}: {source}", path.display())]
    Read {
        /// The setting that names the file.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// What the file or command gave is not a key.
    #[error(
        "{0}: a key is 32 random bytes, raw or in base64 (44 characters); this is neither \
         ({1} bytes). Make one with `head -c 32 /dev/urandom | base64`"
    )]
    Shape(String, usize),
    /// `SECRETS_KEY_COMMAND` failed.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// Both sources of the current key are set.
    #[error("{KEY_FILE_VAR} and {KEY_COMMAND_VAR} are both set: set one")]
    Both,
    /// Old keys without a current one.
    #[error(
        "{OLD_KEY_FILES_VAR} is set without {KEY_FILE_VAR} or {KEY_COMMAND_VAR}: old keys only \
         serve a rotation to a current key"
    )]
    OldWithoutCurrent,
}

/// Where the keys come from (the settings as read at boot).
#[derive(Debug, Clone, Default)]
pub struct KeySettings {
    /// `SECRETS_KEY_FILE`.
    pub key_file: Option<PathBuf>,
    /// `SECRETS_KEY_COMMAND`.
    pub key_command: Option<String>,
    /// `SECRETS_OLD_KEY_FILES`.
    pub old_key_files: Vec<PathBuf>,
}

/// One key: its id and its cipher. Its bytes are never shown (`Debug` prints the id).
#[derive(Clone)]
pub struct Key {
    id: String,
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Key").field(&self.id).finish()
    }
}

impl Key {
    /// The key of these 32 bytes.
    pub fn from_bytes(bytes: &[u8; KEY_LEN]) -> Key {
        let digest = Sha256::digest(bytes);
        Key {
            id: hex::encode(&digest[..8]),
            cipher: XChaCha20Poly1305::new(&(*bytes).into()),
        }
    }

    /// The key `raw` holds: exactly 32 bytes, or their base64 (44 characters, a trailing
    /// newline allowed). Anything else is refused naming `source` (the setting and file).
    pub fn parse(source: &str, raw: &[u8]) -> Result<Key, KeyError> {
        if let Ok(bytes) = <[u8; KEY_LEN]>::try_from(raw) {
            return Ok(Key::from_bytes(&bytes));
        }
        let text = raw.strip_suffix(b"\n").unwrap_or(raw);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.len() == 44
            && let Ok(decoded) = B64.decode(text)
            && let Ok(bytes) = <[u8; KEY_LEN]>::try_from(decoded.as_slice())
        {
            return Ok(Key::from_bytes(&bytes));
        }
        Err(KeyError::Shape(source.to_string(), raw.len()))
    }

    /// The key in the file at `path` (named by `setting`).
    pub fn from_file(setting: &'static str, path: &Path) -> Result<Key, KeyError> {
        let raw = std::fs::read(path).map_err(|source| KeyError::Read {
            setting,
            path: path.to_path_buf(),
            source,
        })?;
        Key::parse(&format!("{setting} ({})", path.display()), &raw)
    }

    /// Its id: the first 8 bytes of its SHA-256, hex.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// A fresh random key's bytes, base64 (what a key file holds; `converge dev` writes one).
pub fn new_key_base64() -> String {
    let mut bytes = [0u8; KEY_LEN];
    rand::fill(&mut bytes);
    B64.encode(bytes)
}

/// Why a value could not be sealed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// There is no current key.
    #[error(
        "a writeOnly value (at {0}) cannot be stored without a secrets key: set {KEY_FILE_VAR} \
         (a file of 32 random bytes, or their base64) or {KEY_COMMAND_VAR} (`converge dev` \
         makes its own key)"
    )]
    NoKey(String),
}

/// Why an envelope did not open. Names the pointer and key id, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the secret at {pointer} does not open: {reason}")]
pub struct OpenError {
    /// Where the envelope is (a JSON pointer into the config).
    pub pointer: String,
    /// Why.
    pub reason: String,
}

/// The keys of this process: the current one (seals, and opens) and the old ones (open
/// only). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Keyring {
    inner: Arc<Ring>,
}

#[derive(Debug, Default)]
struct Ring {
    current: Option<Key>,
    old: Vec<Key>,
}

impl Keyring {
    /// A keyring of `current` (`None`: nothing can be sealed) and `old` keys.
    pub fn new(current: Option<Key>, old: Vec<Key>) -> Keyring {
        Keyring {
            inner: Arc::new(Ring { current, old }),
        }
    }

    /// The keys `settings` name: the key file or the command's output, and the old key
    /// files. Any error is fatal at boot.
    pub async fn load(settings: &KeySettings) -> Result<Keyring, KeyError> {
        let current = match (&settings.key_file, &settings.key_command) {
            (Some(_), Some(_)) => return Err(KeyError::Both),
            (Some(path), None) => Some(Key::from_file(KEY_FILE_VAR, path)?),
            (None, Some(line)) => {
                let out = SettingCommand::new(KEY_COMMAND_VAR, line).output().await?;
                Some(Key::parse(KEY_COMMAND_VAR, &out)?)
            }
            (None, None) => None,
        };
        if current.is_none() && !settings.old_key_files.is_empty() {
            return Err(KeyError::OldWithoutCurrent);
        }
        let old = settings
            .old_key_files
            .iter()
            .map(|p| Key::from_file(OLD_KEY_FILES_VAR, p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Keyring::new(current, old))
    }

    /// The current key's id (`None`: no key, nothing can be sealed).
    pub fn current_id(&self) -> Option<&str> {
        self.inner.current.as_ref().map(Key::id)
    }

    /// The ids of every key configured, the current one first.
    pub fn ids(&self) -> Vec<&str> {
        self.inner
            .current
            .iter()
            .chain(&self.inner.old)
            .map(Key::id)
            .collect()
    }

    fn key(&self, id: &str) -> Option<&Key> {
        self.inner
            .current
            .iter()
            .chain(&self.inner.old)
            .find(|k| k.id == id)
    }

    /// `value` (at `pointer` in a config of `kind`) sealed under the current key.
    pub fn seal(&self, kind: &str, pointer: &str, value: &Value) -> Result<Value, SealError> {
        let key = self
            .inner
            .current
            .as_ref()
            .ok_or_else(|| SealError::NoKey(pointer.to_string()))?;
        let mut nonce = [0u8; NONCE_LEN];
        rand::fill(&mut nonce);
        let plain = serde_json::to_vec(value).expect("a JSON value serialises");
        let aad = associated_data(kind, pointer);
        let ct = key
            .cipher
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: &plain,
                    aad: &aad,
                },
            )
            .expect("XChaCha20-Poly1305 encrypts any message of a config's size");
        let mut env = Map::new();
        env.insert(ENVELOPE_TAG.into(), ENVELOPE_V1.into());
        env.insert("kid".into(), key.id.clone().into());
        env.insert("n".into(), B64.encode(nonce).into());
        env.insert("ct".into(), B64.encode(ct).into());
        Ok(Value::Object(env))
    }

    /// The value `envelope` (found at `pointer` in a config of `kind`) holds. Fails, naming
    /// the pointer, on a malformed envelope, a key id no configured key has, and a
    /// ciphertext that does not authenticate (tampered, or moved from another place).
    pub fn open(&self, kind: &str, pointer: &str, envelope: &Value) -> Result<Value, OpenError> {
        let fail = |reason: String| OpenError {
            pointer: pointer.to_string(),
            reason,
        };
        let field = |name: &str| {
            envelope
                .get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| fail(format!("the envelope has no {name:?} string")))
        };
        let version = field(ENVELOPE_TAG)?;
        if version != ENVELOPE_V1 {
            return Err(fail(format!("unknown envelope format {version:?}")));
        }
        let kid = field("kid")?;
        let key = self.key(kid).ok_or_else(|| {
            fail(format!(
                "it is sealed under key {kid}, which is not configured (configured: {}); add \
                 that key to {OLD_KEY_FILES_VAR}",
                match self.ids() {
                    ids if ids.is_empty() => "none".to_string(),
                    ids => ids.join(", "),
                }
            ))
        })?;
        let nonce: [u8; NONCE_LEN] = B64
            .decode(field("n")?)
            .ok()
            .and_then(|n| n.try_into().ok())
            .ok_or_else(|| fail("its nonce is not 24 bytes of base64".into()))?;
        let ct = B64
            .decode(field("ct")?)
            .map_err(|_| fail("its ciphertext is not base64".into()))?;
        let aad = associated_data(kind, pointer);
        let plain = key
            .cipher
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: &ct,
                    aad: &aad,
                },
            )
            .map_err(|_| {
                fail(format!(
                    "it does not authenticate under key {kid} (altered, or moved from another \
                     field or kind)"
                ))
            })?;
        serde_json::from_slice(&plain).map_err(|_| fail("its plaintext is not JSON".into()))
    }

    /// Seals, in place, every value of `config` (of `kind`) at `pointers` (its writeOnly
    /// locations) that carries something: `null` and `""` stay as they are (nothing to
    /// hide). Returns how many were sealed; without a current key, a value to seal is an
    /// error naming its pointer and the settings.
    pub fn seal_config(
        &self,
        kind: &str,
        config: &mut Value,
        pointers: &[String],
    ) -> Result<usize, SealError> {
        let mut n = 0;
        for ptr in pointers {
            let Some(v) = config.pointer_mut(ptr) else {
                continue;
            };
            if is_blank(v) {
                continue;
            }
            *v = self.seal(kind, ptr, v)?;
            n += 1;
        }
        Ok(n)
    }

    /// Puts back, in `fresh` (a config of `kind` just sealed again), every envelope of
    /// `stored` (the same config as stored) that seals the same value under the current key.
    /// Sealing draws a new nonce each time, so without this a composer that emits the same
    /// secret at every compose would rewrite its config row, and push it to every worker of
    /// the kind, each time. Returns how many were kept.
    pub fn keep_unchanged(&self, kind: &str, fresh: &mut Value, stored: &Value) -> usize {
        let Some(current) = self.current_id() else {
            return 0;
        };
        let mut kept = 0;
        for (ptr, kid) in envelopes(fresh) {
            let Some(old) = stored.pointer(&ptr) else {
                continue;
            };
            let old_kid = old.get("kid").and_then(Value::as_str);
            if kid != current || old_kid != Some(current) {
                continue;
            }
            let Some(new) = fresh.pointer_mut(&ptr) else {
                continue;
            };
            if old == new {
                continue;
            }
            let same = match (self.open(kind, &ptr, old), self.open(kind, &ptr, new)) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
            if same {
                *new = old.clone();
                kept += 1;
            }
        }
        kept
    }

    /// Opens, in place, every envelope found anywhere in `config` (of `kind`). Returns the
    /// ones that did not open (left as they are), in document order.
    pub fn open_config(&self, kind: &str, config: &mut Value) -> Vec<OpenError> {
        let mut failed = Vec::new();
        for (ptr, _) in envelopes(config) {
            let Some(v) = config.pointer_mut(&ptr) else {
                continue;
            };
            match self.open(kind, &ptr, v) {
                Ok(plain) => *v = plain,
                Err(e) => failed.push(e),
            }
        }
        failed
    }
}

/// `value` carries nothing to hide (`null` or the empty string).
pub fn is_blank(value: &Value) -> bool {
    matches!(value, Value::Null) || value.as_str() == Some("")
}

/// Whether `v` is an envelope (an object with the [`ENVELOPE_TAG`] key).
pub fn is_envelope(v: &Value) -> bool {
    v.as_object().is_some_and(|o| o.contains_key(ENVELOPE_TAG))
}

/// Every envelope of `doc` (outermost: an envelope is not searched inside) as (pointer, key
/// id, `""` when it has none), in document order.
pub fn envelopes(doc: &Value) -> Vec<(String, String)> {
    fn walk(v: &Value, ptr: &mut String, out: &mut Vec<(String, String)>) {
        let mut at = |ptr: &mut String, token: &str, child: &Value| {
            let len = ptr.len();
            ptr.push('/');
            ptr.push_str(token);
            walk(child, ptr, out);
            ptr.truncate(len);
        };
        match v {
            Value::Object(o) if o.contains_key(ENVELOPE_TAG) => {
                let kid = o.get("kid").and_then(Value::as_str).unwrap_or_default();
                out.push((ptr.clone(), kid.to_string()));
            }
            Value::Object(o) => {
                for (k, child) in o {
                    at(ptr, &escape(k), child);
                }
            }
            Value::Array(a) => {
                for (i, child) in a.iter().enumerate() {
                    at(ptr, &i.to_string(), child);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(doc, &mut String::new(), &mut out);
    out
}

/// Replaces every envelope of `doc` with `mask`; how many. An API read shows no ciphertext
/// either, wherever it sits (a field no longer writeOnly, a kind whose manifest is gone).
pub fn mask_envelopes(doc: &mut Value, mask: &str) -> usize {
    let found = envelopes(doc);
    for (ptr, _) in &found {
        if let Some(v) = doc.pointer_mut(ptr) {
            *v = Value::String(mask.into());
        }
    }
    found.len()
}

/// A JSON pointer reference token for `key` (RFC 6901: `~` → `~0`, `/` → `~1`).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// What a sealed value is bound to: the format, the kind and the pointer, NUL-separated (a
/// kind name holds no NUL; a pointer is last, so nothing follows it).
fn associated_data(kind: &str, pointer: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(32 + kind.len() + pointer.len());
    aad.extend_from_slice(b"converge secret v1\0");
    aad.extend_from_slice(kind.as_bytes());
    aad.push(0);
    aad.extend_from_slice(pointer.as_bytes());
    aad
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ring(byte: u8) -> Keyring {
        Keyring::new(Some(Key::from_bytes(&[byte; 32])), Vec::new())
    }

    #[test]
    fn a_sealed_value_opens_where_it_was_sealed_and_nowhere_else() {
        let r = ring(1);
        let value = json!("hunter2");
        let env = r.seal("db", "/password", &value).unwrap();
        assert!(is_envelope(&env));
        assert!(!env.to_string().contains("hunter2"), "{env}");
        assert_eq!(env["kid"], r.current_id().unwrap());
        assert_eq!(r.open("db", "/password", &env).unwrap(), value);
        // Two seals of one value differ (a random nonce each).
        assert_ne!(r.seal("db", "/password", &value).unwrap(), env);
        // Moved to another field, or to a config of another kind: refused.
        let moved = r.open("db", "/token", &env).unwrap_err();
        assert_eq!(moved.pointer, "/token");
        assert!(moved.reason.contains("moved"), "{moved}");
        assert!(r.open("cache", "/password", &env).is_err());
        // Any bit of the ciphertext or nonce altered: refused.
        for field in ["ct", "n"] {
            let mut bytes = B64.decode(env[field].as_str().unwrap()).unwrap();
            bytes[3] ^= 1;
            let mut tampered = env.clone();
            tampered[field] = B64.encode(bytes).into();
            let e = r.open("db", "/password", &tampered).unwrap_err();
            assert!(!e.to_string().contains("hunter2"), "{e}");
        }
        // Structured values seal whole.
        let obj = json!({"user": "u", "pass": ["p", 1]});
        let env = r.seal("db", "/creds", &obj).unwrap();
        assert_eq!(r.open("db", "/creds", &env).unwrap(), obj);
    }

    #[test]
    fn a_value_sealed_again_keeps_its_stored_envelope_only_if_unchanged() {
        let r = ring(1);
        let ptrs = ["/a".to_string(), "/b".to_string(), "/c".to_string()];
        let plain = json!({"a": "same", "b": "old", "c": "x", "d": 1});
        let mut stored = plain.clone();
        r.seal_config("k", &mut stored, &ptrs).unwrap();
        let mut fresh = json!({"a": "same", "b": "new", "c": "x", "d": 1});
        r.seal_config("k", &mut fresh, &ptrs).unwrap();
        assert_ne!(fresh["a"], stored["a"], "a fresh nonce");
        assert_eq!(r.keep_unchanged("k", &mut fresh, &stored), 2);
        assert_eq!(fresh["a"], stored["a"]);
        assert_eq!(fresh["c"], stored["c"]);
        assert_ne!(
            fresh["b"], stored["b"],
            "a changed value keeps its new envelope"
        );
        assert_eq!(r.open("k", "/b", &fresh["b"]).unwrap(), json!("new"));
        // Stored under a key that is no longer current: sealed anew (a rotation moves it).
        let (a, b) = (Key::from_bytes(&[1; 32]), Key::from_bytes(&[2; 32]));
        let rotated = Keyring::new(Some(b), vec![a]);
        let mut again = plain.clone();
        rotated.seal_config("k", &mut again, &ptrs).unwrap();
        assert_eq!(rotated.keep_unchanged("k", &mut again, &stored), 0);
        // Another kind's envelope does not open here: not kept.
        let mut other = plain.clone();
        r.seal_config("j", &mut other, &ptrs).unwrap();
        let mut fresh = plain.clone();
        r.seal_config("k", &mut fresh, &ptrs).unwrap();
        assert_eq!(r.keep_unchanged("k", &mut fresh, &other), 0);
    }

    #[test]
    fn keys_are_found_by_id_and_an_unknown_one_is_named() {
        let (a, b) = (Key::from_bytes(&[1; 32]), Key::from_bytes(&[2; 32]));
        assert_ne!(a.id(), b.id());
        assert_eq!(a.id().len(), 16);
        let env = ring(1).seal("k", "/s", &json!("v")).unwrap();
        // B current, A old: opens.
        let rotated = Keyring::new(Some(b.clone()), vec![a.clone()]);
        assert_eq!(rotated.open("k", "/s", &env).unwrap(), json!("v"));
        assert_eq!(rotated.ids(), vec![b.id(), a.id()]);
        // B only: refused, naming the missing key and the setting.
        let e = Keyring::new(Some(b), Vec::new())
            .open("k", "/s", &env)
            .unwrap_err()
            .to_string();
        assert!(e.contains(a.id()) && e.contains(OLD_KEY_FILES_VAR), "{e}");
        // No key at all: nothing seals, naming the settings.
        let none = Keyring::default();
        let e = none.seal("k", "/s", &json!("v")).unwrap_err().to_string();
        assert!(e.contains(KEY_FILE_VAR) && e.contains("/s"), "{e}");
        // Malformed envelopes are errors, not panics.
        for bad in [
            json!({"$enc": "v9"}),
            json!({"$enc": "v1", "kid": a.id()}),
            json!({"$enc": "v1", "kid": a.id(), "n": "AA==", "ct": "AA=="}),
            json!({"$enc": "v1", "kid": a.id(), "n": B64.encode([0; 24]), "ct": "@@"}),
            json!({"$enc": 1}),
        ] {
            assert!(ring(1).open("k", "/s", &bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn configs_seal_at_their_pointers_and_open_everywhere() {
        let r = ring(7);
        let mut c = json!({"host": "h", "password": "p/w", "empty": "", "none": null,
                           "nested": {"a~b": {"k": 5}}, "list": ["x"]});
        let pointers: Vec<String> = ["/password", "/empty", "/none", "/nested/a~0b", "/gone"]
            .map(String::from)
            .into();
        assert_eq!(r.seal_config("cfg", &mut c, &pointers).unwrap(), 2);
        assert_eq!(c["empty"], "");
        assert_eq!(c["none"], Value::Null);
        let found = envelopes(&c);
        let at: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(at, ["/nested/a~0b", "/password"]);
        assert!(found.iter().all(|(_, kid)| kid == r.current_id().unwrap()));
        let mut masked = c.clone();
        assert_eq!(mask_envelopes(&mut masked, "***"), 2);
        assert_eq!(masked["password"], "***");
        let mut opened = c.clone();
        assert!(r.open_config("cfg", &mut opened).is_empty());
        assert_eq!(opened["password"], "p/w");
        assert_eq!(opened["nested"]["a~b"], json!({"k": 5}));
        // Blank values need no key; a value does.
        let none = Keyring::default();
        let mut blank = json!({"password": ""});
        assert_eq!(none.seal_config("cfg", &mut blank, &pointers[..1]), Ok(0));
        let mut full = json!({"password": "x"});
        assert!(none.seal_config("cfg", &mut full, &pointers[..1]).is_err());
        // An envelope that does not open is left in place and reported.
        let mut other = c.clone();
        let failed = ring(8).open_config("cfg", &mut other);
        assert_eq!(failed.len(), 2);
        assert_eq!(other, c);
    }

    #[test]
    fn a_key_is_32_bytes_raw_or_base64() {
        let raw = [9u8; 32];
        let id = Key::from_bytes(&raw).id().to_string();
        assert_eq!(Key::parse("t", &raw).unwrap().id(), id);
        let b64 = B64.encode(raw);
        assert_eq!(Key::parse("t", b64.as_bytes()).unwrap().id(), id);
        assert_eq!(
            Key::parse("t", format!("{b64}\n").as_bytes()).unwrap().id(),
            id
        );
        for bad in [&b"short"[..], &[0u8; 33][..], &[b'A'; 44][..], b""] {
            let e = Key::parse("SECRETS_KEY_FILE (/k)", bad)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("SECRETS_KEY_FILE (/k)") && e.contains("32"),
                "{e}"
            );
        }
        assert_eq!(B64.decode(new_key_base64()).unwrap().len(), 32);
    }

    #[tokio::test]
    async fn keys_load_from_a_file_or_a_command() {
        let dir = std::env::temp_dir().join(format!("converge-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cur, old) = (dir.join("cur"), dir.join("old"));
        std::fs::write(&cur, new_key_base64()).unwrap();
        std::fs::write(&old, [3u8; 32]).unwrap();
        let r = Keyring::load(&KeySettings {
            key_file: Some(cur.clone()),
            key_command: None,
            old_key_files: vec![old.clone()],
        })
        .await
        .unwrap();
        assert_eq!(r.ids().len(), 2);
        let c = Keyring::load(&KeySettings {
            key_command: Some(format!("cat {}", cur.display())),
            ..KeySettings::default()
        })
        .await
        .unwrap();
        assert_eq!(c.current_id(), r.current_id());
        for (settings, want) in [
            (
                KeySettings {
                    key_file: Some(cur.clone()),
                    key_command: Some("true".into()),
                    ..KeySettings::default()
                },
                "both set",
            ),
            (
                KeySettings {
                    old_key_files: vec![old.clone()],
                    ..KeySettings::default()
                },
                OLD_KEY_FILES_VAR,
            ),
            (
                KeySettings {
                    key_file: Some(dir.join("missing")),
                    ..KeySettings::default()
                },
                KEY_FILE_VAR,
            ),
            (
                KeySettings {
                    key_command: Some("exit 4".into()),
                    ..KeySettings::default()
                },
                KEY_COMMAND_VAR,
            ),
            (
                KeySettings {
                    key_command: Some("echo short".into()),
                    ..KeySettings::default()
                },
                KEY_COMMAND_VAR,
            ),
        ] {
            let e = Keyring::load(&settings).await.unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        assert!(
            Keyring::load(&KeySettings::default())
                .await
                .unwrap()
                .current_id()
                .is_none()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
