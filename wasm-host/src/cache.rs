//! The on-disk cache of compiled components.
//!
//! An entry is the serialized native code wasmtime produced for one component on one engine
//! configuration. Its file name is the component's sha256 plus a digest of
//! `Engine::precompile_compatibility_hash` (which covers the wasmtime version and every
//! setting that affects code generation), so a changed component, config or wasmtime
//! version simply misses. Each file starts with a header (magic, format version, payload
//! length, sha256 of the payload): a truncated or corrupt entry is detected before wasmtime
//! sees it, deleted, and the component is recompiled. Entries are written to a temporary
//! file and renamed, so readers never see a half-written file.
//!
//! Deserializing native code is only sound for bytes this host wrote, so the directory is
//! created private to the worker's user (0700) and must not be shared with anything else.

use std::fs;
use std::hash::Hasher;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const MAGIC: &[u8; 8] = b"CVGCWASM";
const FORMAT: u32 = 1;
const HEADER: usize = 8 + 4 + 8 + 32;

/// A sha256 digest.
pub type Digest32 = [u8; 32];

/// sha256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> Digest32 {
    Sha256::digest(bytes).into()
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A `Hasher` feeding sha256, so an `impl Hash` value gets a digest that is stable across
/// processes and Rust versions (unlike `DefaultHasher`).
#[derive(Default)]
pub struct ShaHasher(Sha256);

impl ShaHasher {
    /// The digest of everything written so far.
    pub fn digest(self) -> Digest32 {
        self.0.finalize().into()
    }
}

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        let d: Digest32 = self.0.clone().finalize().into();
        u64::from_le_bytes(d[..8].try_into().expect("8 bytes"))
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// What a cache lookup found.
pub enum Lookup {
    /// A verified entry: the payload wasmtime serialized.
    Hit(Vec<u8>),
    /// No entry.
    Miss,
    /// An entry that failed verification; it has been removed.
    Corrupt(String),
}

/// A directory of compiled components.
#[derive(Debug, Clone)]
pub struct DiskCache {
    dir: PathBuf,
}

impl DiskCache {
    /// Opens (creating, private to this user) the cache directory.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        fs::create_dir_all(dir)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    /// The file an entry lives in.
    pub fn path(&self, component: &Digest32, engine: &Digest32) -> PathBuf {
        self.dir
            .join(format!("{}-{}.cwasm", hex(component), hex(&engine[..8])))
    }

    /// Reads and verifies an entry.
    pub fn get(&self, component: &Digest32, engine: &Digest32) -> Lookup {
        let path = self.path(component, engine);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
            Err(e) => return Lookup::Corrupt(format!("unreadable: {e}")),
        };
        match verify(&bytes) {
            Ok(()) => Lookup::Hit(bytes[HEADER..].to_vec()),
            Err(why) => {
                let _ = fs::remove_file(&path);
                Lookup::Corrupt(why)
            }
        }
    }

    /// Writes an entry atomically (temporary file, then rename).
    pub fn put(
        &self,
        component: &Digest32,
        engine: &Digest32,
        payload: &[u8],
    ) -> std::io::Result<()> {
        let path = self.path(component, engine);
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let mut f = fs::File::create(&tmp)?;
        f.write_all(MAGIC)?;
        f.write_all(&FORMAT.to_le_bytes())?;
        f.write_all(&(payload.len() as u64).to_le_bytes())?;
        f.write_all(&sha256(payload))?;
        f.write_all(payload)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, &path)
    }
}

fn verify(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < HEADER {
        return Err(format!("truncated header ({} bytes)", bytes.len()));
    }
    if &bytes[..8] != MAGIC {
        return Err("bad magic".into());
    }
    let format = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if format != FORMAT {
        return Err(format!("unknown format {format}"));
    }
    let len = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    let payload = &bytes[HEADER..];
    if payload.len() as u64 != len {
        return Err(format!(
            "payload is {} bytes, header says {len}",
            payload.len()
        ));
    }
    if sha256(payload)[..] != bytes[20..52] {
        return Err("checksum mismatch".into());
    }
    Ok(())
}
