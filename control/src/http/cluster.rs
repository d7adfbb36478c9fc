//! Who is here: `GET /api/v1/cluster` lists the converge processes (`cluster_members`): those
//! stamped within the liveness window (`MEMBER_DEAD_AFTER`) as Ready, with each broker's
//! connected workers as it published them; those silent longer as NotReady (crashed or
//! paused: routing ignores them) until their row is removed (`MEMBER_GC_AFTER`). Per kind
//! version it counts the workers of the Ready brokers that serve it. A worker subscribed for a kind
//! version nobody registered says so in its `unknown_kinds` (a typo in the worker, or a
//! manifest not applied yet: its tasks cannot exist). The same counts feed the kinds list and
//! a resource's `waiting_for`. Each live member shows its shard ranges (dynamic sharding,
//! `cluster_tiling`): its role's share and, for a broker, the range it claims each kind
//! version in.

use std::collections::{BTreeMap, BTreeSet};

use axum::{Json, extract::State};
use chrono::{DateTime, Utc};
use converge_engine::ids::KindPair;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::{AppState, problem::ApiError};
use crate::db::{
    self,
    cluster::{Coverage, MemberRow, ServedKind, Tile, WorkerInfo},
    resources::ResourceRow,
};

use crate::app::reads::ReadFrom;

/// The cluster as the database knows it.
#[derive(Serialize, ToSchema)]
pub struct Cluster {
    /// Every process with a row, oldest first: the live ones Ready, the silent ones NotReady
    /// until their row is removed.
    pub members: Vec<ClusterMember>,
    /// Every registered kind version, and every other one a worker subscribed for, with the
    /// workers that serve it.
    pub kinds: Vec<KindCoverage>,
}

pub use converge_engine::words::MemberRole;

/// Whether a member stamped its row within the liveness window.
#[derive(Serialize, ToSchema, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberStatus {
    /// It stamped within `MEMBER_DEAD_AFTER`.
    Ready,
    /// Silent longer (crashed, paused, cut off): routing ignores it and its leases were
    /// released; listed until `MEMBER_GC_AFTER` after its last stamp.
    NotReady,
}

/// One converge process.
#[derive(Serialize, ToSchema)]
pub struct ClusterMember {
    /// Unique per process start (a broker's id on its claims).
    pub id: String,
    /// What it runs.
    pub role: MemberRole,
    /// Ready (stamped within the liveness window) or NotReady.
    pub status: MemberStatus,
    /// Its build's version.
    pub version: String,
    /// Its host (pod) name.
    pub host: String,
    /// Its process id.
    pub pid: i32,
    /// Its listeners by name: `http` (API), `grpc` (WorkerService), `health` (a broker's
    /// probes).
    pub addresses: BTreeMap<String, String>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat (about every second).
    pub heartbeat_at: DateTime<Utc>,
    /// The workers connected to it (a broker; empty for a control process, and for a
    /// NotReady member: its workers went elsewhere).
    pub workers: Vec<ClusterWorker>,
    /// When the worker list was written (on connect and disconnect, else at most every 5 s:
    /// in-flight counts may lag that much).
    #[schema(required = true)]
    pub workers_at: Option<DateTime<Utc>>,
    /// Its share of the 256 shards (dynamic sharding): a control or `all` member's drainers
    /// and reaper work these; a broker's is its share were every kind served on every
    /// broker. `null` for a NotReady member (the live ones divide its shards).
    #[schema(required = true)]
    pub shards: Option<ShardSpan>,
    /// The shards it claims each kind version's tasks in (a broker or `all` member): the
    /// brokers with a ready worker for a kind version divide its shards, so each claims only
    /// what one of its own workers can run.
    pub claims: Vec<ClaimSpan>,
}

/// A contiguous, inclusive range of shards.
#[derive(Serialize, ToSchema, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpan {
    /// Lowest shard.
    pub lo: i16,
    /// Highest shard (inclusive).
    pub hi: i16,
}

/// The shards a broker claims one kind version's tasks in.
#[derive(Serialize, ToSchema, Debug, Clone, PartialEq, Eq)]
pub struct ClaimSpan {
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Lowest shard.
    pub lo: i16,
    /// Highest shard (inclusive).
    pub hi: i16,
}

/// One worker stream connected to a broker.
#[derive(Serialize, ToSchema)]
pub struct ClusterWorker {
    /// The stream's number within its broker.
    pub stream: u64,
    /// The worker's advisory name.
    pub name: String,
    /// The SDK that built it.
    pub sdk: String,
    /// Its principal, when authentication is on.
    #[schema(required = true)]
    pub principal: Option<String>,
    /// Its address as the broker sees it.
    #[schema(required = true)]
    pub peer: Option<String>,
    /// What it subscribed for, and whether it takes those tasks now.
    pub kinds: Vec<WorkerKind>,
    /// What it subscribed for that no manifest registers: it gets no tasks of them.
    pub unknown_kinds: Vec<KindVersionRef>,
    /// Most tasks it takes at once.
    pub max_inflight: u32,
    /// Tasks it holds.
    pub inflight: u32,
    /// When it subscribed.
    pub connected_at: DateTime<Utc>,
    /// Whether its broker told it to drain (shutting down).
    pub draining: bool,
}

/// A kind version a worker serves.
#[derive(Serialize, ToSchema)]
pub struct WorkerKind {
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Whether it takes tasks of it now.
    pub ready: bool,
}

/// A kind version.
#[derive(Serialize, ToSchema)]
pub struct KindVersionRef {
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
}

/// Who serves one kind version.
#[derive(Serialize, ToSchema)]
pub struct KindCoverage {
    /// Kind.
    pub kind: String,
    /// Kind version.
    pub kind_version: i32,
    /// Whether a manifest registers it.
    pub registered: bool,
    /// Worker streams subscribed for it, over every broker.
    pub workers: i64,
    /// Those of them taking its tasks now.
    pub ready_workers: i64,
}

/// List the cluster's members, their workers and who serves each kind.
///
/// `GET /api/v1/cluster`: the members (Ready and NotReady), each broker's workers, and per
/// kind version how many workers serve it.
#[utoipa::path(
    get, operation_id = "cluster_get", path = "/cluster", tag = "cluster",
    responses((status = 200, description = "The members, Ready or NotReady, and who serves each kind.", body = Cluster)),
)]
pub async fn get(State(s): State<AppState>) -> Result<Json<Cluster>, ApiError> {
    let s = s.reading(ReadFrom::Replica);
    let rows = db::cluster::members(&s.pool, s.runtime.member_liveness)
        .await
        .map_err(ApiError::db("list cluster members"))?;
    let registered: BTreeSet<KindPair> = db::kinds::registered(&s.pool)
        .await
        .map_err(ApiError::db("list registered kinds"))?
        .into_iter()
        .collect();
    let covered = coverage(&s).await?;
    let tiles = db::cluster::tiling(&s.pool, s.runtime.member_liveness)
        .await
        .map_err(ApiError::db("read the shard tiling"))?;
    let members = rows
        .into_iter()
        .map(|m| member(m, &registered, &tiles))
        .collect();
    let mut kinds: BTreeMap<KindPair, KindCoverage> = registered
        .iter()
        .map(|p| (p.clone(), kind_coverage(p, true, None)))
        .collect();
    for c in covered.values() {
        let p = KindPair::new(&c.kind, c.kind_version);
        let registered = registered.contains(&p);
        kinds.insert(p.clone(), kind_coverage(&p, registered, Some(c)));
    }
    Ok(Json(Cluster {
        members,
        kinds: kinds.into_values().collect(),
    }))
}

fn kind_coverage(p: &KindPair, registered: bool, c: Option<&Coverage>) -> KindCoverage {
    KindCoverage {
        kind: p.kind.clone(),
        kind_version: p.version,
        registered,
        workers: c.map_or(0, |c| c.workers),
        ready_workers: c.map_or(0, |c| c.ready),
    }
}

fn member(row: MemberRow, registered: &BTreeSet<KindPair>, tiles: &[Tile]) -> ClusterMember {
    let m = row.member;
    let mine = || tiles.iter().filter(|t| t.member_id == m.id);
    // The role's own duty: a control or `all` member's control range, a broker's share.
    let duty = if m.role == MemberRole::Broker {
        "broker"
    } else {
        "control"
    };
    let shards = mine()
        .find(|t| t.duty == duty)
        .map(|t| ShardSpan { lo: t.lo, hi: t.hi });
    let claims = mine()
        .filter(|t| t.duty == "claim")
        .filter_map(|t| {
            Some(ClaimSpan {
                kind: t.kind.clone()?,
                kind_version: t.kind_version?,
                lo: t.lo,
                hi: t.hi,
            })
        })
        .collect();
    let status = if row.live {
        MemberStatus::Ready
    } else {
        MemberStatus::NotReady
    };
    let workers = if row.live { row.workers.0 } else { Vec::new() };
    let role = m.role;
    let addresses = match m.addresses {
        Value::Object(o) => o
            .into_iter()
            .filter_map(|(k, v)| Some((k, v.as_str()?.to_string())))
            .collect(),
        _ => BTreeMap::new(),
    };
    ClusterMember {
        id: m.id,
        role,
        status,
        version: m.version,
        host: m.host,
        pid: m.pid,
        addresses,
        started_at: m.started_at,
        heartbeat_at: row.heartbeat_at,
        workers: workers.into_iter().map(|w| worker(w, registered)).collect(),
        workers_at: row.workers_at,
        shards,
        claims,
    }
}

fn worker(w: WorkerInfo, registered: &BTreeSet<KindPair>) -> ClusterWorker {
    let unknown_kinds = w
        .kinds
        .iter()
        .filter(|k| !registered.contains(&KindPair::new(&k.kind, k.kind_version)))
        .map(|k| KindVersionRef {
            kind: k.kind.clone(),
            kind_version: k.kind_version,
        })
        .collect();
    ClusterWorker {
        stream: w.stream,
        name: w.name,
        sdk: w.sdk,
        principal: w.principal,
        peer: w.peer,
        kinds: w
            .kinds
            .into_iter()
            .map(
                |ServedKind {
                     kind,
                     kind_version,
                     ready,
                 }| WorkerKind {
                    kind,
                    kind_version,
                    ready,
                },
            )
            .collect(),
        unknown_kinds,
        max_inflight: w.max_inflight,
        inflight: w.inflight,
        connected_at: w.connected_at,
        draining: w.draining,
    }
}

/// Worker counts by kind version over the live brokers (for the kinds list).
pub(crate) async fn coverage(s: &AppState) -> Result<BTreeMap<KindPair, Coverage>, ApiError> {
    Ok(db::cluster::coverage(&s.pool, s.runtime.member_liveness)
        .await
        .map_err(ApiError::db("count the workers of each kind"))?
        .into_iter()
        .map(|c| (KindPair::new(&c.kind, c.kind_version), c))
        .collect())
}

/// What a resource waits for that no one can give it: `no worker serves KIND vN` when it
/// has work to do (a queued or running task, or a spec ahead of what was reconciled and
/// nothing holding it back on purpose) and no live broker has a worker subscribed for its
/// kind version. `None` otherwise.
pub(crate) async fn waiting_for(
    s: &AppState,
    r: &ResourceRow,
    queued: bool,
) -> Result<Option<String>, ApiError> {
    let set_aside = matches!(r.phase.as_str(), "Quarantined" | "Orphaned");
    let stopped = r.failure_terminal && r.failure_gen == r.generation;
    let needs_worker = queued || (r.synced_gen < r.generation && !set_aside && !stopped);
    if !needs_worker {
        return Ok(None);
    }
    let served = db::cluster::served(&s.pool, &r.kind, r.kind_version, s.runtime.member_liveness)
        .await
        .map_err(ApiError::db("look for a worker of the kind"))?;
    Ok((!served).then(|| format!("no worker serves {} v{}", r.kind, r.kind_version)))
}
