//! `POST /api/v1/resources:batch`: many applies in one request. Each item is checked exactly
//! as the single apply checks it (the same 422, 404 or 409, per item) and the valid ones are
//! written set-based (SQL `resource_apply_batch`), so loading a large tree costs a few
//! statements per thousand resources instead of one round trip each.
//!
//! The body is a JSON array (`application/json`) or one JSON object per line
//! (`application/x-ndjson`), at most [`MAX_BATCH_ITEMS`] items. The answer holds the counts
//! of every item (`created`, `configured`, `unchanged`, `failed`) and one result per item, in
//! item order: `{"index", "status", ...}` with the single apply's fields on success, or
//! `{"index", "status", "error": <problem+json>}` on failure. An item is never half-applied;
//! a failed item does not stop the others.
//!
//! The answer is bounded whatever the request holds: a failed item's problem is at most
//! [`MAX_ITEM_PROBLEM_BYTES`] (its messages clipped, values quoted by a short prefix, its
//! located errors listed while they fit and counted past that), and the whole reply at most
//! [`MAX_REPLY_BYTES`]: results are listed in item order while they fit, and the ones after
//! are counted in `results_omitted` (the counts still cover them). The request is never
//! parsed into one tree: the body is split into its items' raw JSON (borrowed, not copied),
//! each item is parsed when its turn comes and dropped once checked, and a failure keeps
//! only its bounded problem. The reply is streamed, serialised item by item, never built
//! whole. A 781 KiB request of failing items used to answer 111 MiB built in memory.

use std::{cell::Cell, collections::HashMap, convert::Infallible, fmt};

use axum::{
    body::{Body, Bytes},
    extract::{State, rejection::BytesRejection},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::{
    Deserialize, Deserializer as _,
    de::{self, SeqAccess, Visitor},
};
use serde_json::value::RawValue;

use super::wire::{Applied, ApplyResult, BatchApplied, BatchResult};
use super::{
    AppState, auth,
    input::{body_rejection, nul_in_value},
    problem::{ApiError, ITEM_PROBLEM_LIMITS, MAX_ITEM_PROBLEM_BYTES, clipped},
    resources::{ApplyBody, ApplyLookups, validate_apply},
};
use crate::db::{self, resources::ApplyItem};

/// The most items one batch may hold.
pub const MAX_BATCH_ITEMS: usize = 10_000;

/// The largest reply, in bytes: results past it are counted, not listed.
pub const MAX_REPLY_BYTES: usize = 4 * 1024 * 1024;

/// Items written per statement (and transaction): bounds one statement's size and the time
/// its row locks are held.
const WRITE_CHUNK: usize = 1_000;

/// How long a parse error's message may be.
const MAX_MESSAGE: usize = 512;

/// Bytes of the reply sent per chunk of the stream.
const CHUNK_BYTES: usize = 64 * 1024;

/// Room kept at the end of the reply for its closing fields (`results_omitted`).
const CLOSING_BYTES: usize = 64;

/// The body format, from `Content-Type`.
pub(crate) enum Format {
    Array,
    Lines,
}

pub(crate) fn format_of(headers: &HeaderMap) -> Result<Format, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "application/json" => Ok(Format::Array),
        "application/x-ndjson" | "application/jsonl" => Ok(Format::Lines),
        _ => Err(ApiError::UnsupportedMedia(
            "expected Content-Type: application/json (an array) or application/x-ndjson \
             (one object per line)"
                .into(),
        )),
    }
}

fn too_many(found: impl fmt::Display) -> ApiError {
    ApiError::invalid(
        "",
        format!("a batch holds at most {MAX_BATCH_ITEMS} items; this one has {found} (split it)"),
    )
}

/// The elements of a JSON array as raw JSON borrowed from the body, at most
/// [`MAX_BATCH_ITEMS`] (`too_many` set when there are more: reading stops there).
struct Elements<'f> {
    too_many: &'f Cell<bool>,
}

impl<'de> Visitor<'de> for Elements<'_> {
    type Value = Vec<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON array of resources")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element::<&'de RawValue>()? {
            if out.len() == MAX_BATCH_ITEMS {
                self.too_many.set(true);
                return Err(de::Error::custom("too many items"));
            }
            out.push(item);
        }
        Ok(out)
    }
}

/// The items of the body, each its raw JSON (a slice of the body; a line of NDJSON that is
/// not JSON fails alone, when it is checked).
pub(crate) fn items_of(format: Format, body: &[u8]) -> Result<Vec<&[u8]>, ApiError> {
    match format {
        Format::Array => {
            let too_many_items = Cell::new(false);
            let mut de = serde_json::Deserializer::from_slice(body);
            let parsed = de
                .deserialize_seq(Elements {
                    too_many: &too_many_items,
                })
                .and_then(|items| de.end().map(|()| items));
            match parsed {
                Ok(items) => Ok(items.into_iter().map(|r| r.get().as_bytes()).collect()),
                Err(_) if too_many_items.get() => Err(too_many("more")),
                Err(e) if e.is_data() => {
                    Err(ApiError::invalid("", "expected a JSON array of resources"))
                }
                Err(e) => Err(ApiError::BadRequest(clipped(MAX_MESSAGE, e))),
            }
        }
        Format::Lines => {
            let lines: Vec<&[u8]> = body
                .split(|b| *b == b'\n')
                .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
                .collect();
            if lines.len() > MAX_BATCH_ITEMS {
                return Err(too_many(lines.len()));
            }
            Ok(lines)
        }
    }
}

/// The (kind, version) an item names, read leniently (whatever is malformed is left out: the
/// item's check reports it).
pub(crate) fn kind_of(raw: &[u8]) -> Option<(String, i32)> {
    #[derive(Deserialize)]
    struct KindOf {
        kind: String,
        kind_version: i32,
    }
    serde_json::from_slice::<KindOf>(raw)
        .ok()
        .map(|k| (k.kind, k.kind_version))
}

/// One item's outcome, as kept until the reply is written.
enum Outcome {
    /// Valid, waiting for its write.
    Pending,
    /// Written.
    Applied(BatchApplied),
    /// Refused: the status and the problem (serialised, at most [`MAX_ITEM_PROBLEM_BYTES`]);
    /// no problem when the reply is already full before this item (it will be counted in
    /// `results_omitted`, never listed).
    Failed(u16, Option<Box<RawValue>>),
}

/// What is left of [`MAX_REPLY_BYTES`] for failed items' problems: the problems kept, in item
/// order, never exceed what the reply can list, so a batch of failures holds a few MiB.
struct ProblemRoom(usize);

impl ProblemRoom {
    /// `e` as a failed item's outcome.
    fn failed(&mut self, e: ApiError) -> Outcome {
        let (status, problem) = e.into_problem_within(&ITEM_PROBLEM_LIMITS);
        self.keep(status, &problem)
    }

    fn keep(&mut self, status: StatusCode, problem: &impl serde::Serialize) -> Outcome {
        if self.0 == 0 {
            return Outcome::Failed(status.as_u16(), None);
        }
        let raw = serde_json::value::to_raw_value(problem).ok();
        let size = raw.as_ref().map_or(0, |r| r.get().len());
        debug_assert!(size <= MAX_ITEM_PROBLEM_BYTES, "{size} bytes");
        self.0 = self.0.saturating_sub(size);
        Outcome::Failed(status.as_u16(), raw)
    }
}

/// Apply many resources in one request.
///
/// `POST /api/v1/resources:batch`: up to 10,000 apply bodies in one request (a JSON array or
/// NDJSON), each checked as the single apply checks it and the valid ones written set-based.
/// The answer counts every outcome and lists each item's result (created, configured,
/// unchanged, or its problem) in item order; a failed item never stops the others.
#[utoipa::path(
    post, operation_id = "resource_batch_apply_batch", path = "/resources:batch", tag = "resources",
    request_body(
        description = "At most 10,000 apply bodies: a JSON array, or one JSON object per line.",
        content((Vec<ApplyBody> = "application/json"), (String = "application/x-ndjson")),
    ),
    responses((status = 200, description = "The counts of every item, and one result per item \
        in item order while the reply stays within 4 MiB (`results_omitted` counts the rest); \
        a failed item's problem is at most 2 KiB.", body = BatchResult)),
)]
pub async fn apply_batch(
    State(s): State<AppState>,
    caller: Option<axum::Extension<auth::Caller>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let format = format_of(&headers)?;
    let body = body.map_err(body_rejection)?;
    let items = items_of(format, &body)?;

    let mut lookups = ApplyLookups::default();
    // Every kind the items name, looked up together: an unknown kind costs the request one
    // read, not one per item.
    let named: Vec<(String, i32)> = items.iter().filter_map(|raw| kind_of(raw)).collect();
    lookups.read_kinds(&s, named).await?;

    let mut room = ProblemRoom(MAX_REPLY_BYTES);
    let mut outcomes: Vec<Outcome> = Vec::with_capacity(items.len());
    // Parallel: the item index in the request and the checked item, for the valid ones.
    let mut positions: Vec<usize> = Vec::new();
    let mut valid: Vec<ApplyItem> = Vec::new();
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    for (index, item) in items.into_iter().enumerate() {
        let item = match check_item(&s, item, &mut lookups).await {
            Err(e) => {
                outcomes.push(room.failed(e));
                continue;
            }
            Ok(item) => item,
        };
        match seen.entry((item.kind.clone(), item.name.clone())) {
            std::collections::hash_map::Entry::Occupied(first) => {
                outcomes.push(room.failed(duplicate(&item, *first.get())));
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(index);
                positions.push(index);
                valid.push(item);
                outcomes.push(Outcome::Pending);
            }
        }
    }
    drop(seen);
    drop(body);

    let actor = auth::actor(&caller);
    let mut changed = false;
    for (at, items) in positions.chunks(WRITE_CHUNK).zip(valid.chunks(WRITE_CHUNK)) {
        match db::resources::resource_apply_batch(&s.pool, actor.as_deref(), items).await {
            Ok(applied) => {
                for ((index, item), applied) in at.iter().zip(items).zip(&applied) {
                    changed |= applied.result != ApplyResult::Unchanged;
                    outcomes[*index] = Outcome::Applied(applied_entry(*index, item, applied));
                }
            }
            Err(e) => {
                let (status, problem) =
                    super::resources::apply_failed("apply a batch of resources")(e)
                        .into_problem_within(&ITEM_PROBLEM_LIMITS);
                for index in at {
                    outcomes[*index] = room.keep(status, &problem);
                }
            }
        }
    }
    drop(valid);
    if changed {
        s.work_scheduled();
    }

    let mut counts = Counts::default();
    for o in &outcomes {
        counts.add(o);
    }
    let reply = Reply::new(&counts, outcomes);
    let mut resp = Body::from_stream(futures::stream::iter(reply)).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// An applied item's result: the single apply's answer with the item's index and status.
fn applied_entry(index: usize, item: &ApplyItem, applied: &db::resources::Applied) -> BatchApplied {
    let status = match applied.result {
        ApplyResult::Created => StatusCode::CREATED,
        ApplyResult::Configured | ApplyResult::Unchanged => StatusCode::OK,
    };
    BatchApplied {
        index: index as u64,
        status: status.as_u16(),
        applied: Applied::new(item, applied),
    }
}

/// The counts of every item of a batch.
#[derive(Default)]
struct Counts {
    items: u64,
    created: u64,
    configured: u64,
    unchanged: u64,
    failed: u64,
}

impl Counts {
    fn add(&mut self, o: &Outcome) {
        self.items += 1;
        match o {
            Outcome::Applied(a) => match a.applied.result {
                ApplyResult::Created => self.created += 1,
                ApplyResult::Configured => self.configured += 1,
                ApplyResult::Unchanged => self.unchanged += 1,
            },
            Outcome::Failed(..) | Outcome::Pending => self.failed += 1,
        }
    }
}

/// A failed item's result as listed ([`super::wire::BatchFailed`], its problem serialised
/// already).
#[derive(serde::Serialize)]
struct FailedEntry<'a> {
    index: u64,
    status: u16,
    error: &'a RawValue,
}

/// The reply, as chunks of at most about [`CHUNK_BYTES`]: the counts, then each result
/// serialised in turn while the reply stays within [`MAX_REPLY_BYTES`], then
/// `results_omitted`. Each result is dropped once written.
struct Reply {
    outcomes: std::iter::Enumerate<std::vec::IntoIter<Outcome>>,
    /// The head, before the first chunk is sent.
    head: Option<String>,
    total: usize,
    /// Bytes of the reply produced so far.
    written: usize,
    listed: usize,
    /// No more results are listed (the reply is full).
    full: bool,
    done: bool,
}

impl Reply {
    fn new(c: &Counts, outcomes: Vec<Outcome>) -> Reply {
        let head = format!(
            r#"{{"items":{},"created":{},"configured":{},"unchanged":{},"failed":{},"results":["#,
            c.items, c.created, c.configured, c.unchanged, c.failed
        );
        Reply {
            total: outcomes.len(),
            outcomes: outcomes.into_iter().enumerate(),
            head: Some(head),
            written: 0,
            listed: 0,
            full: false,
            done: false,
        }
    }

    /// One result, serialised; `None` for one that cannot be listed (no problem kept).
    fn entry(index: usize, o: Outcome) -> Option<Vec<u8>> {
        match o {
            Outcome::Applied(a) => serde_json::to_vec(&a).ok(),
            Outcome::Failed(status, Some(problem)) => serde_json::to_vec(&FailedEntry {
                index: index as u64,
                status,
                error: &problem,
            })
            .ok(),
            Outcome::Failed(_, None) | Outcome::Pending => None,
        }
    }
}

impl Iterator for Reply {
    type Item = Result<Bytes, Infallible>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut chunk = self.head.take().map(String::into_bytes).unwrap_or_default();
        while chunk.len() < CHUNK_BYTES && !self.full {
            let Some((index, o)) = self.outcomes.next() else {
                break;
            };
            let entry = Self::entry(index, o);
            let fits = entry.as_ref().is_some_and(|e| {
                self.written + chunk.len() + e.len() + 1 + CLOSING_BYTES <= MAX_REPLY_BYTES
            });
            match entry {
                Some(e) if fits => {
                    if self.listed > 0 {
                        chunk.push(b',');
                    }
                    chunk.extend_from_slice(&e);
                    self.listed += 1;
                }
                // The reply is full: this result and every one after it are counted.
                _ => {
                    self.full = true;
                    self.outcomes = Vec::new().into_iter().enumerate();
                }
            }
        }
        if self.full || self.outcomes.len() == 0 {
            let omitted = self.total - self.listed;
            chunk.extend_from_slice(format!(r#"],"results_omitted":{omitted}}}"#).as_bytes());
            self.done = true;
        }
        self.written += chunk.len();
        Some(Ok(Bytes::from(chunk)))
    }
}

/// The refusal of `item`, which item `first` of the same batch names already.
pub(crate) fn duplicate(item: &ApplyItem, first: usize) -> ApiError {
    ApiError::invalid(
        "/name",
        format!(
            "{} {} is also item {first} of this batch; a batch applies each resource once",
            clipped(253, &item.kind),
            item.name,
        ),
    )
}

/// One item, as the single apply would check its body.
pub(crate) async fn check_item(
    s: &AppState,
    raw: &[u8],
    lookups: &mut ApplyLookups,
) -> Result<ApplyItem, ApiError> {
    let v: serde_json::Value = serde_json::from_slice(raw)
        .map_err(|e| ApiError::invalid("", clipped(MAX_MESSAGE, format_args!("not JSON: {e}"))))?;
    if let Some(e) = nul_in_value(&v) {
        return Err(e);
    }
    let body: ApplyBody =
        serde_json::from_value(v).map_err(|e| ApiError::invalid("", clipped(MAX_MESSAGE, e)))?;
    validate_apply(s, body, lookups).await
}
