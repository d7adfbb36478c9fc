//! A rollup's view of the composite's subtree: the [`RollupSummary`] every ROLLUP request
//! carries, and the paged read of the descendants themselves (`ListDescendants`), which a
//! handler makes only if it asks, so a rollup that needs counts costs the same whatever the
//! size of the subtree.
//!
//! A kind whose rollup reaction declares `"descendants": "full"` gets every descendant in
//! the request instead ([`ReactionRequest::descendants`], `descendants_included`); the paged
//! read then hands those over without a call, so a handler written against the paged read
//! works with either form.

use std::{collections::BTreeMap, fmt, sync::Arc, time::Duration};

use converge_proto::pb::{self, worker_service_client::WorkerServiceClient};
use tonic::{Code, metadata::AsciiMetadataValue, transport::Channel};

use crate::{
    convert::resource_from_pb,
    error::HandlerError,
    types::{ReactionRequest, Resource, ResourceRef},
};

/// How long one page may take to arrive.
const PAGE_TIMEOUT: Duration = Duration::from_secs(30);

/// Descendants a page holds when the handler does not say (the broker's default too).
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// The composite's live subtree in numbers, sent with every ROLLUP task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollupSummary {
    /// Live descendants.
    pub total: i64,
    /// Live descendants per phase (`Ready`, `Reconciling`, `Degraded`, `Failed`, ...).
    pub by_phase: BTreeMap<String, i64>,
    /// Live descendants per kind.
    pub by_kind: BTreeMap<String, i64>,
    /// The first failed descendants in (kind, name) order, at most 100.
    pub failed: Vec<ResourceRef>,
    /// The first descendants that are not ready, same order, at most 100.
    pub not_ready: Vec<ResourceRef>,
    /// How many are failed (`failed` may list fewer).
    pub failed_total: i64,
    /// How many are not ready (`not_ready` may list fewer).
    pub not_ready_total: i64,
}

impl RollupSummary {
    /// Live descendants that are ready (`total - not_ready_total`).
    pub fn ready(&self) -> i64 {
        self.total - self.not_ready_total
    }

    pub(crate) fn from_pb(s: pb::RollupSummary) -> Self {
        let refs = |v: Vec<pb::ResourceRef>| {
            v.into_iter()
                .map(|r| ResourceRef::new(r.kind, r.name))
                .collect()
        };
        RollupSummary {
            total: s.total,
            by_phase: s.by_phase.into_iter().collect(),
            by_kind: s.by_kind.into_iter().collect(),
            failed: refs(s.failed),
            not_ready: refs(s.not_ready),
            failed_total: s.failed_total,
            not_ready_total: s.not_ready_total,
        }
    }
}

/// Where a request's descendants are read from: the broker the task came from (a ROLLUP
/// task run by the worker runtime), a fixed list (tests), or nowhere (any other request).
#[derive(Clone, Default)]
pub struct Subtree(Source);

#[derive(Clone, Default)]
enum Source {
    #[default]
    None,
    Fixed(Arc<Vec<Resource>>),
    Remote(Arc<Remote>),
}

/// The task's lease and the connection it arrived on.
struct Remote {
    client: WorkerServiceClient<Channel>,
    bearer: Option<AsciiMetadataValue>,
    resource_id: Vec<u8>,
    lease_token: String,
    claim_epoch: i64,
}

impl fmt::Debug for Subtree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Source::None => f.write_str("Subtree(none)"),
            Source::Fixed(v) => write!(f, "Subtree(fixed, {} descendants)", v.len()),
            Source::Remote(r) => write!(f, "Subtree(broker, lease {})", r.lease_token),
        }
    }
}

impl Subtree {
    /// A subtree served from `descendants` in memory: for testing a rollup handler that
    /// pages, without a broker.
    pub fn fixed(descendants: Vec<Resource>) -> Self {
        Subtree(Source::Fixed(Arc::new(descendants)))
    }
}

/// The connection a session's tasks arrived on, for the paged reads of its ROLLUP tasks.
#[derive(Clone)]
pub(crate) struct Lister {
    /// The session's client (its message limit and compression).
    pub(crate) client: WorkerServiceClient<Channel>,
    pub(crate) bearer: Option<AsciiMetadataValue>,
}

impl Lister {
    /// The subtree of a task that arrived on this connection.
    pub(crate) fn subtree(&self, task: &pb::StageTask) -> Subtree {
        Subtree(Source::Remote(Arc::new(Remote {
            client: self.client.clone(),
            bearer: self.bearer.clone(),
            resource_id: task.resource_id.to_vec(),
            lease_token: task.lease_token.clone(),
            claim_epoch: task.claim_epoch,
        })))
    }
}

/// Reads a rollup's descendants one page at a time (see [`ReactionRequest::descendant_pages`]).
pub struct DescendantPages {
    source: Source,
    /// The full form's rows, handed over as the one page.
    included: Option<Vec<Resource>>,
    page_size: u32,
    /// Where the next page starts (`Fixed`: an index; `Remote`: the broker's token).
    next: Option<Vec<u8>>,
    offset: usize,
    done: bool,
}

impl DescendantPages {
    /// The next page, `None` once every descendant was returned. Every live descendant
    /// comes exactly once over all pages. A failed read is a transient error (the task is
    /// retried), including when the lease is gone because the task ended or was cancelled.
    pub async fn next_page(&mut self) -> Result<Option<Vec<Resource>>, HandlerError> {
        if self.done {
            return Ok(None);
        }
        if let Some(rows) = self.included.take() {
            self.done = true;
            return Ok(Some(rows));
        }
        match &self.source {
            Source::None => Err(HandlerError::terminal(
                "this request has no subtree to page through (not a ROLLUP task; in a test, \
                 set `req.subtree = Subtree::fixed(rows)`)",
            )),
            Source::Fixed(all) => {
                let end = (self.offset + self.page_size as usize).min(all.len());
                let page = all[self.offset..end].to_vec();
                self.offset = end;
                self.done = end >= all.len();
                Ok(Some(page))
            }
            Source::Remote(r) => {
                let r = Arc::clone(r);
                let (rows, next) = remote_page(&r, self.next.take(), self.page_size).await?;
                self.done = next.is_empty();
                self.next = Some(next);
                Ok(Some(rows))
            }
        }
    }
}

async fn remote_page(
    r: &Remote,
    token: Option<Vec<u8>>,
    page_size: u32,
) -> Result<(Vec<Resource>, Vec<u8>), HandlerError> {
    let mut request = tonic::Request::new(pb::ListDescendantsRequest {
        resource_id: r.resource_id.clone(),
        lease_token: r.lease_token.clone(),
        claim_epoch: r.claim_epoch,
        page_token: token.unwrap_or_default(),
        page_size,
    });
    request.set_timeout(PAGE_TIMEOUT);
    if let Some(b) = &r.bearer {
        request.metadata_mut().insert("authorization", b.clone());
    }
    let resp = r
        .client
        .clone()
        .list_descendants(request)
        .await
        .map_err(|s| {
            let why = if s.code() == Code::FailedPrecondition {
                "the task's lease is gone"
            } else {
                "the broker did not answer"
            };
            HandlerError::transient(format!(
                "reading descendants failed ({why}): {}",
                s.message()
            ))
        })?
        .into_inner();
    let rows = resp
        .descendants
        .into_iter()
        .map(|d| resource_from_pb(d, "descendant"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(HandlerError::transient)?;
    Ok((rows, resp.next_page_token.to_vec()))
}

impl ReactionRequest {
    /// Pages through the composite's live subtree, `page_size` descendants a page (0 means
    /// [`DEFAULT_PAGE_SIZE`]; the broker caps it at 2,000). With the full form
    /// (`descendants_included`) the one page is [`ReactionRequest::descendants`] and no
    /// call is made.
    pub fn descendant_pages(&self, page_size: u32) -> DescendantPages {
        DescendantPages {
            source: self.subtree.0.clone(),
            included: self.descendants_included.then(|| self.descendants.clone()),
            page_size: if page_size == 0 {
                DEFAULT_PAGE_SIZE
            } else {
                page_size
            },
            next: None,
            offset: 0,
            done: false,
        }
    }

    /// Every live descendant (all pages; see [`ReactionRequest::descendant_pages`]).
    pub async fn read_descendants(&self) -> Result<Vec<Resource>, HandlerError> {
        if self.descendants_included {
            return Ok(self.descendants.clone());
        }
        let mut pages = self.descendant_pages(0);
        let mut all = Vec::new();
        while let Some(page) = pages.next_page().await? {
            all.extend(page);
        }
        Ok(all)
    }
}
