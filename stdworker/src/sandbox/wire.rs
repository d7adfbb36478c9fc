//! What stdworker and a sandbox child say to each other: one length-prefixed JSON frame per
//! request (stdworker → child, on the child's stdin) and one per reply (child → stdworker,
//! on its stdout), strictly alternating.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes of JSON. The length
//! comes first so each side can refuse an oversized frame before allocating for it; the
//! format is a dozen lines on either side (the child is synchronous and has no codec
//! stack), so no framing crate is pulled in for it.
//!
//! Programs (a starlark bundle, a CEL graph) are sent only when the child lacks them: a
//! request names its program by [`ContentHash`], a child that has not compiled that hash
//! answers [`Response::Missing`], and stdworker repeats the request with the program
//! attached. A long-lived child therefore receives each bundle once, not once per task.
//!
//! Specs and compose outputs travel as raw JSON text ([`RawValue`]): stdworker passes a
//! spec on as it arrived from the broker and parses an output once, straight into the
//! engine's `ComposeOutput`, with no `Value` in between.
//!
//! The enums are externally tagged on purpose: `serde_json/arbitrary_precision` (on in
//! this build, through `starlark`) breaks internally tagged and untagged enums holding
//! numbers, because those buffer the input before choosing a variant.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};
use serde_json::{Value, value::RawValue};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::RunawayClass;
use crate::providers::{shared::ContentHash, starlark::LimitsConfig};

/// The largest frame either side accepts: above the largest request (a 10 MiB bundle in
/// base64 plus a 16 MiB spec) and the largest compose output (16 MiB) with JSON escaping.
pub const MAX_FRAME_BYTES: usize = 64 << 20;

/// One evaluation asked of a child.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// CPU seconds this request may use; the child lowers its `RLIMIT_CPU` to that much
    /// above what it has used so far. A backstop: stdworker's wall-clock kill comes first.
    pub cpu_secs: u64,
    /// The content hash naming the program ([`crate::providers::starlark::bundle_key`],
    /// [`crate::providers::cel::graph_key`]).
    pub key: ContentHash,
    /// The program itself, attached only after the child answered [`Response::Missing`].
    #[serde(default)]
    pub program: Option<Program>,
    /// What to do with the program.
    pub job: Job,
}

/// A program's source.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Program {
    /// A starlark bundle (a zip), base64-encoded.
    Starlark(String),
    /// A CEL graph config (`{"resources": [...]}`).
    Cel(Value),
}

/// What a request asks for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Job {
    /// Load a starlark bundle under `limits`, and compose with it when `compose` is set.
    Starlark {
        /// The resolved limits (the bundle's cache key includes them); boxed, as they
        /// are most of the variant's size.
        limits: Box<LimitsConfig>,
        /// The compose inputs; `None` only loads (warms) the bundle.
        compose: Option<StarlarkInput>,
    },
    /// Compile a CEL graph, and compose with it when `compose` is set.
    Cel {
        /// The compose inputs; `None` only compiles (checks) the graph.
        compose: Option<CelInput>,
    },
}

impl Job {
    /// The engine's name, for messages.
    pub fn engine(&self) -> &'static str {
        match self {
            Self::Starlark { .. } => "starlark",
            Self::Cel { .. } => "cel",
        }
    }
}

/// The arguments of `compose(spec, config, root)`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StarlarkInput {
    /// The composite's identity: `{"name", "kind", "kind_version", "labels"}`.
    pub root: Value,
    /// The composite's spec (JSON text).
    pub spec: Box<RawValue>,
    /// The effective config spec without its `limits`.
    pub config: Value,
}

/// The inputs of one CEL graph compose.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CelInput {
    /// `root.name` in expressions.
    pub root_name: String,
    /// `spec` in expressions (JSON text).
    pub spec: Box<RawValue>,
}

/// A child's answer to one request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// The outcome.
    pub response: Response,
    /// The child exits after this reply (it panicked, or its address space grew past half
    /// its bound, which would leave too little for the next tenant's evaluation).
    pub retire: bool,
}

/// The outcome of one request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Response {
    /// Success: the compose output as the engine's `ComposeOutput` JSON text, or `None`
    /// for a load/compile-only job.
    Done(Option<Box<RawValue>>),
    /// The child has not compiled [`Request::key`] and no program came with the request.
    Missing,
    /// The engine refused or failed: a terminal error with its message, and its runaway
    /// class when it hit a cost, memory or deadline limit of its own.
    Failed {
        /// `cost`, `memory` or `deadline` for an engine limit of that class.
        class: Option<RunawayClass>,
        /// The engine's message (`file:line:col`, JSON pointers).
        message: String,
    },
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The stream ended or failed.
    #[error("cannot read a frame")]
    Io(#[source] io::Error),
    /// The announced length is above [`MAX_FRAME_BYTES`].
    #[error("a frame of {0} bytes is above the {MAX_FRAME_BYTES}-byte cap")]
    TooLarge(usize),
}

fn check_len(len: [u8; 4]) -> Result<usize, FrameError> {
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge(len));
    }
    Ok(len)
}

/// Writes one frame (async side: stdworker).
pub async fn write_frame(w: &mut (impl AsyncWrite + Unpin), body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len())
        .ok()
        .filter(|n| *n as usize <= MAX_FRAME_BYTES)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    w.write_all(&len.to_be_bytes()).await?;
    w.write_all(body).await?;
    w.flush().await
}

/// Reads one frame (async side: stdworker).
pub async fn read_frame(r: &mut (impl AsyncRead + Unpin)) -> Result<Vec<u8>, FrameError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await.map_err(FrameError::Io)?;
    let mut body = vec![0u8; check_len(len)?];
    r.read_exact(&mut body).await.map_err(FrameError::Io)?;
    Ok(body)
}

/// Writes one frame (sync side: the child).
pub fn write_frame_sync(w: &mut impl Write, body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len())
        .ok()
        .filter(|n| *n as usize <= MAX_FRAME_BYTES)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    w.write_all(&len.to_be_bytes())?;
    w.write_all(body)?;
    w.flush()
}

/// Reads one frame (sync side: the child); `Ok(None)` at end of input (stdworker closed
/// the pipe: time to exit).
pub fn read_frame_sync(r: &mut impl Read) -> Result<Option<Vec<u8>>, FrameError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(FrameError::Io(e)),
    }
    let mut body = vec![0u8; check_len(len)?];
    r.read_exact(&mut body).map_err(FrameError::Io)?;
    Ok(Some(body))
}
