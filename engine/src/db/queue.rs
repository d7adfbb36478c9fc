//! Queue SQL: claim, fenced completion, heartbeat attestation and release. Every function
//! moves a whole batch in one statement (one round trip), which is what lets the broker keep
//! up with thousands of tasks a second.

use std::collections::HashMap;

use sqlx::{FromRow, PgPool};
use uuid::Uuid;

use sqlx::Result;

use crate::{
    ids::{ClaimEpoch, KindPair, LeaseToken, ResourceId, ShardId, ShardRange},
    words::{Phase, TaskTrigger, TaskType, Transition},
};

/// The key of one queue row plus the epoch it was claimed at: enough to fence any write.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseKey {
    /// The resource.
    pub resource_id: ResourceId,
    /// Its shard (the partition key).
    pub shard_id: ShardId,
    /// What the task does ([`TaskType::React`]: a reactor delivery, not a queue row).
    pub task_type: TaskType,
    /// The lease token of the claim.
    pub lease_token: LeaseToken,
    /// The epoch of the claim.
    pub claim_epoch: ClaimEpoch,
}

/// One claimed task with the resource row it acts on.
#[derive(Debug, Clone, FromRow)]
pub struct ClaimedTask {
    /// The resource id.
    pub resource_id: Uuid,
    /// Its shard.
    pub shard_id: i16,
    /// What the task does (a queue row: never [`TaskType::React`]).
    pub task_type: TaskType,
    /// The generation this task reconciles.
    pub generation: i64,
    /// What fired it.
    pub trigger: TaskTrigger,
    /// 1 for the first attempt at this generation.
    pub attempt: i32,
    /// The fresh lease.
    pub lease_token: Uuid,
    /// The bumped epoch.
    pub claim_epoch: i64,
    /// Per-resource provider config override spec: the config the resource names
    /// (`provider_config_ref`) as it is at the claim, for every task type.
    pub provider_config: Option<serde_json::Value>,
    /// Per-resource bundle override, read with `provider_config`.
    pub provider_bundle: Option<Vec<u8>>,
    /// The kind's live task deadline (0 = none).
    pub task_deadline_secs: i32,
    /// Resource name.
    pub name: String,
    /// Composing parent.
    pub owner_id: Option<Uuid>,
    /// Composition root.
    pub root_id: Option<Uuid>,
    /// Spec JSON.
    pub spec: serde_json::Value,
    /// Last applied status JSON.
    pub status: Option<serde_json::Value>,
    /// The resource's current generation.
    pub r_generation: i64,
    /// The resource's synced generation.
    pub synced_gen: i64,
    /// Derived readiness.
    pub is_ready: bool,
    /// Finalizers.
    pub finalizers: Vec<String>,
    /// Deletion requested at, ms since epoch (0 = not deleting).
    pub deletion_requested_at_ms: i64,
    /// Orphan/quarantine freeze, ms since epoch (0 = none, i64::MAX = quarantined).
    pub frozen_until_ms: i64,
    /// Labels object.
    pub labels: serde_json::Value,
    /// Derived phase.
    pub phase: Phase,
    /// The generation the composer last ran for.
    pub composed_gen: i64,
    /// The kind's default provider config as the claim saw it ([`DefaultConfig::rev`]: its
    /// row version, 0 when there is none): the broker pushes a newer default than the one a
    /// stream holds before the task (stream rule 2).
    ///
    /// [`DefaultConfig::rev`]: crate::db::kinds::DefaultConfig::rev
    pub default_config_rev: i64,
}

impl ClaimedTask {
    /// The fencing key of this claim.
    pub fn key(&self) -> LeaseKey {
        LeaseKey {
            resource_id: ResourceId(self.resource_id),
            shard_id: ShardId(self.shard_id),
            task_type: self.task_type,
            lease_token: LeaseToken(self.lease_token),
            claim_epoch: ClaimEpoch(self.claim_epoch),
        }
    }
}

/// Claims up to `limit` unleased tasks of `pair` in `shards` for broker `broker_id`, of
/// which the last `ahead` are beyond the broker's free slots (a capped kind gets none of
/// those). Exclusive: `FOR UPDATE SKIP LOCKED` means two concurrent claims never get the same
/// row.
pub async fn lease_claim(
    pool: &PgPool,
    shards: ShardRange,
    pair: &KindPair,
    limit: i32,
    ahead: i32,
    broker_id: &str,
) -> Result<Vec<ClaimedTask>> {
    sqlx::query_as::<_, ClaimedTask>("SELECT * FROM work_claim($1, $2, $3, $4, $5, $6, $7)")
        .bind(shards.lo)
        .bind(shards.hi)
        .bind(&pair.kind)
        .bind(pair.version)
        .bind(limit)
        .bind(broker_id)
        .bind(ahead)
        .fetch_all(pool)
        .await
}

/// One task result to record.
#[derive(Debug, Clone)]
pub struct Completion {
    /// Which claim it answers.
    pub key: LeaseKey,
    /// Success or failure.
    pub ok: bool,
    /// With a failure: stop retrying until the spec changes.
    pub terminal: bool,
    /// With a failure: the message.
    pub error_message: Option<String>,
    /// Validated status JSON.
    pub status: Option<serde_json::Value>,
    /// Reported conditions as a JSON array.
    pub conditions: Option<serde_json::Value>,
    /// Health derived from the Ready condition.
    pub health_ok: bool,
    /// Whether success advances synced_gen (false: a composite waiting for its children).
    pub advance: bool,
    /// An operate task's validated output JSON.
    pub output: Option<serde_json::Value>,
    /// From a composite's pipeline: once written, the express drainer is woken. (The engine
    /// puts every result of a kind with a rollup in the express lane, migration 0020; this
    /// only spares the wait for the next `outbox_ready`.)
    pub composite: bool,
}

/// What [`record_results`] did with a batch.
#[derive(Debug, Default)]
pub struct Recorded {
    /// The keys that were accepted. A stale result (released, reaped, re-pointed or already
    /// completed) is absent.
    pub accepted: Vec<LeaseKey>,
    /// Something now waits for a drainer: results in the outbox, or a teardown that
    /// stripped a finalizer.
    pub to_drain: bool,
    /// A plain result's owners were armed for the straddle close-out
    /// (`drain_rollup_rechecks`), which the caller runs after this commit.
    pub armed: bool,
    /// Some plain result was applied to its resource here (the cascade may have made work
    /// claimable: retries, dependents, owners).
    pub applied: bool,
}

impl Recorded {
    /// Folds in what a later call on part of the same batch recorded.
    pub fn merge(&mut self, other: Recorded) {
        self.accepted.extend(other.accepted);
        self.to_drain |= other.to_drain;
        self.armed |= other.armed;
        self.applied |= other.applied;
    }
}

/// Records a batch of results, fenced on lease and epoch. Each task type has its own fenced
/// statement: a plain reconcile result (a kind without a rollup) is applied to its resource
/// in the statement that fences it, any other reconcile result goes to the outbox for the
/// drainer (`work_complete`); teardown, operation and reactor results are applied at once
/// (rare and small).
///
/// The rows are locked in resource-id order, the order every scheduler takes them in
/// (`schedule_eligible` and `schedule_rollup` insert `ORDER BY r.id`): in arrival order a
/// batch finishing two composites could lock one's queue row while the drainer's rollup
/// recheck held the other's and wanted the first, a deadlock PostgreSQL breaks only after
/// `deadlock_timeout` (1 s), stalling every result behind it.
pub async fn record_results(pool: &PgPool, batch: &[Completion]) -> Result<Recorded> {
    let mut sorted: Vec<&Completion> = batch.iter().collect();
    sorted.sort_by_key(|c| (c.key.resource_id.0, c.key.task_type.as_str()));
    let (reconcile, rest): (Vec<&Completion>, Vec<&Completion>) = sorted
        .into_iter()
        .partition(|c| c.key.task_type == TaskType::Reconcile);
    let (delete, rest): (Vec<&Completion>, Vec<&Completion>) = rest
        .into_iter()
        .partition(|c| c.key.task_type == TaskType::Delete);
    let (react, operate): (Vec<&Completion>, Vec<&Completion>) = rest
        .into_iter()
        .partition(|c| c.key.task_type == TaskType::React);
    let mut recorded = reconcile_complete(pool, &reconcile).await?;
    let reconciled = recorded.accepted.len();
    recorded
        .accepted
        .extend(teardown_append(pool, &delete).await?);
    recorded
        .accepted
        .extend(operation_append(pool, &operate).await?);
    recorded
        .accepted
        .extend(lifecycle_append(pool, &react).await?);
    // Any other result accepted: a teardown's stripped finalizer wakes the sweep.
    recorded.to_drain |= recorded.accepted.len() > reconciled;
    Ok(recorded)
}

/// The keys of `batch` whose (resource, epoch) the engine returned as accepted.
fn accepted_keys(batch: &[&Completion], rows: Vec<(Uuid, i64)>) -> Vec<LeaseKey> {
    let accepted: HashMap<Uuid, i64> = rows.into_iter().collect();
    batch
        .iter()
        .filter(|c| accepted.get(&c.key.resource_id.0) == Some(&c.key.claim_epoch.0))
        .map(|c| c.key.clone())
        .collect()
}

/// The parallel arrays every fenced result statement binds, taken once from a batch.
struct ResultArrays<'a> {
    ids: Vec<Uuid>,
    shards: Vec<i16>,
    tokens: Vec<Uuid>,
    epochs: Vec<i64>,
    oks: Vec<bool>,
    errs: Vec<Option<&'a str>>,
}

impl<'a> ResultArrays<'a> {
    fn of(batch: &[&'a Completion]) -> Self {
        ResultArrays {
            ids: batch.iter().map(|c| c.key.resource_id.0).collect(),
            shards: batch.iter().map(|c| c.key.shard_id.0).collect(),
            tokens: batch.iter().map(|c| c.key.lease_token.0).collect(),
            epochs: batch.iter().map(|c| c.key.claim_epoch.0).collect(),
            oks: batch.iter().map(|c| c.ok).collect(),
            errs: batch.iter().map(|c| c.error_message.as_deref()).collect(),
        }
    }
}

/// Teardown (STAGE_DELETE) results: a success strips the finalizer, a failure re-arms the
/// delete task with backoff.
async fn teardown_append(pool: &PgPool, batch: &[&Completion]) -> Result<Vec<LeaseKey>> {
    if batch.is_empty() {
        return Ok(Vec::new());
    }
    let a = ResultArrays::of(batch);
    let rows: Vec<(Uuid, i64)> =
        sqlx::query_as("SELECT * FROM teardown_complete($1, $2, $3, $4, $5, $6)")
            .bind(&a.ids)
            .bind(&a.shards)
            .bind(&a.tokens)
            .bind(&a.epochs)
            .bind(&a.oks)
            .bind(&a.errs)
            .fetch_all(pool)
            .await?;
    Ok(accepted_keys(batch, rows))
}

/// Operate (STAGE_OPERATE) results: the running operation succeeds, fails or is retried.
async fn operation_append(pool: &PgPool, batch: &[&Completion]) -> Result<Vec<LeaseKey>> {
    if batch.is_empty() {
        return Ok(Vec::new());
    }
    let a = ResultArrays::of(batch);
    let terms: Vec<bool> = batch.iter().map(|c| c.terminal).collect();
    let outputs: Vec<Option<serde_json::Value>> = batch.iter().map(|c| c.output.clone()).collect();
    let rows: Vec<(Uuid, i64)> =
        sqlx::query_as("SELECT * FROM operation_complete($1, $2, $3, $4, $5, $6, $7, $8)")
            .bind(&a.ids)
            .bind(&a.shards)
            .bind(&a.tokens)
            .bind(&a.epochs)
            .bind(&a.oks)
            .bind(&terms)
            .bind(&a.errs)
            .bind(&outputs)
            .fetch_all(pool)
            .await?;
    Ok(accepted_keys(batch, rows))
}

/// The operation an operate claim runs.
#[derive(Debug, Clone, FromRow)]
pub struct StartedOperation {
    /// Its uid.
    pub uid: Uuid,
    /// The verb.
    pub verb: String,
    /// The input JSON.
    pub input: Option<serde_json::Value>,
    /// Attempts so far, this one included.
    pub attempts: i32,
    /// Who asked for it.
    pub requested_by: String,
}

/// Marks the oldest open operation of a resource running (the caller holds its operate
/// claim); `None` when nothing is left to run.
pub async fn operation_start(pool: &PgPool, resource_id: Uuid) -> Result<Option<StartedOperation>> {
    sqlx::query_as::<_, StartedOperation>("SELECT * FROM operation_start($1)")
        .bind(resource_id)
        .fetch_optional(pool)
        .await
}

/// One `work_complete` answer: accepted ids and epochs (aligned), rows sent to the outbox,
/// whether a plain result had an owner, and the synced kinds and seconds behind.
type CompleteRow = (
    Option<Vec<Uuid>>,
    Option<Vec<i64>>,
    i32,
    bool,
    Option<Vec<String>>,
    Option<Vec<f64>>,
);

/// Reconcile results (`work_complete`): plain ones applied where they are fenced, the rest
/// appended to the outbox. The resources a plain result brought to synced are observed in
/// `converge_reconcile_duration_seconds` here, as the drain does for the outbox's.
async fn reconcile_complete(pool: &PgPool, batch: &[&Completion]) -> Result<Recorded> {
    if batch.is_empty() {
        return Ok(Recorded::default());
    }
    let n = batch.len();
    let mut ids = Vec::with_capacity(n);
    let mut shards = Vec::with_capacity(n);
    let mut types = Vec::with_capacity(n);
    let mut tokens = Vec::with_capacity(n);
    let mut epochs = Vec::with_capacity(n);
    let mut oks = Vec::with_capacity(n);
    let mut terms = Vec::with_capacity(n);
    let mut errs = Vec::with_capacity(n);
    let mut statuses = Vec::with_capacity(n);
    let mut conds = Vec::with_capacity(n);
    let mut health = Vec::with_capacity(n);
    let mut advance = Vec::with_capacity(n);
    for c in batch {
        ids.push(c.key.resource_id.0);
        shards.push(c.key.shard_id.0);
        types.push(c.key.task_type.as_str());
        tokens.push(c.key.lease_token.0);
        epochs.push(c.key.claim_epoch.0);
        oks.push(c.ok);
        terms.push(c.terminal);
        errs.push(c.error_message.as_deref());
        statuses.push(c.status.clone());
        conds.push(c.conditions.clone());
        health.push(c.health_ok);
        advance.push(c.advance);
    }
    let (acc_ids, acc_epochs, outboxed, owned, kinds, secs): CompleteRow = sqlx::query_as(
        "SELECT * FROM work_complete($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(&ids)
    .bind(&shards)
    .bind(&types)
    .bind(&tokens)
    .bind(&epochs)
    .bind(&oks)
    .bind(&terms)
    .bind(&errs)
    .bind(&statuses)
    .bind(&conds)
    .bind(&health)
    .bind(&advance)
    .fetch_one(pool)
    .await?;
    if let (Some(kinds), Some(secs)) = (&kinds, &secs) {
        crate::metrics::metrics().synced(kinds, secs);
    }
    let rows: Vec<(Uuid, i64)> = acc_ids
        .unwrap_or_default()
        .into_iter()
        .zip(acc_epochs.unwrap_or_default())
        .collect();
    let accepted = accepted_keys(batch, rows);
    Ok(Recorded {
        applied: accepted.len() > usize::try_from(outboxed).unwrap_or(0),
        to_drain: outboxed > 0,
        armed: owned,
        accepted,
    })
}

/// One leased queue row: the key its lease is fenced on and the kind it belongs to.
type LeaseRow = (Uuid, i16, TaskType, Uuid, i64, String, i32);

/// (token, epoch) pairs as the two parallel arrays the lease statements unnest.
fn lease_arrays(leases: &[(LeaseToken, ClaimEpoch)]) -> (Vec<Uuid>, Vec<i64>) {
    leases.iter().map(|(t, e)| (t.0, e.0)).unzip()
}

fn lease_row((id, shard, tt, tok, ep, kind, kv): LeaseRow) -> (LeaseKey, KindPair) {
    (
        LeaseKey {
            resource_id: ResourceId(id),
            shard_id: ShardId(shard),
            task_type: tt,
            lease_token: LeaseToken(tok),
            claim_epoch: ClaimEpoch(ep),
        },
        KindPair::new(kind, kv),
    )
}

/// A leased queue row a result came back for, found by [`lease_lookup`] or
/// [`lease_adopt`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundLease {
    /// The key its lease is fenced on.
    pub key: LeaseKey,
    /// The kind it belongs to.
    pub pair: KindPair,
    /// For an operate row, the verb of the operation the result answers: the resource's
    /// oldest running one, the row `operation_complete` records it on.
    pub verb: Option<String>,
}

/// A [`LeaseRow`] and the verb of the resource's running operation.
type FoundRow = (Uuid, i16, TaskType, Uuid, i64, String, i32, Option<String>);

fn found_leases(rows: Vec<FoundRow>) -> Vec<FoundLease> {
    rows.into_iter()
        .map(|(id, shard, tt, tok, ep, kind, kv, verb)| {
            let (key, pair) = lease_row((id, shard, tt, tok, ep, kind, kv));
            FoundLease { key, pair, verb }
        })
        .collect()
}

/// Finds the queue rows still leased under the given (token, epoch) pairs. Used for results
/// this broker did not hand out itself (after a broker restart or a reconnect to another
/// broker); rare, so a scan of the queue is acceptable.
pub async fn lease_lookup(
    pool: &PgPool,
    leases: &[(LeaseToken, ClaimEpoch)],
) -> Result<Vec<FoundLease>> {
    if leases.is_empty() {
        return Ok(Vec::new());
    }
    let (tokens, epochs) = lease_arrays(leases);
    let rows: Vec<FoundRow> = sqlx::query_as(
        "SELECT w.resource_id, w.shard_id, w.task_type, w.lease_token, w.claim_epoch,
                w.kind, w.kind_version,
                (SELECT o.verb FROM resource_operations o
                 WHERE w.task_type = 'operate' AND o.resource_id = w.resource_id
                   AND o.state = 'running'
                 ORDER BY o.created_at, o.uid LIMIT 1)
         FROM work_queue w
         JOIN unnest($1::uuid[], $2::bigint[]) AS x(lease_token, claim_epoch)
           ON w.lease_token = x.lease_token AND w.claim_epoch = x.claim_epoch",
    )
    .bind(&tokens)
    .bind(&epochs)
    .fetch_all(pool)
    .await?;
    Ok(found_leases(rows))
}

/// Why the engine took a running task's lease away (the `lease_revoked` NOTIFY's reason and
/// the CancelTask reason the worker gets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Revoked {
    /// The resource was deleted (hard, or marked for teardown) while its task ran.
    Deleted,
    /// The resource was quarantined while its reconcile ran.
    Quarantined,
    /// The resource's spec generation (or kind version) moved past the task's.
    Superseded,
}

impl Revoked {
    /// The wire word: `deleted`, `quarantined` or `superseded`.
    pub fn as_str(self) -> &'static str {
        match self {
            Revoked::Deleted => "deleted",
            Revoked::Quarantined => "quarantined",
            Revoked::Superseded => "superseded",
        }
    }

    /// The reason a wire word names, if any.
    pub fn parse(s: &str) -> Option<Revoked> {
        match s {
            "deleted" => Some(Revoked::Deleted),
            "quarantined" => Some(Revoked::Quarantined),
            "superseded" => Some(Revoked::Superseded),
            _ => None,
        }
    }

    /// Parses a `lease_revoked` NOTIFY payload, `<reason> <token> <token> ...`
    /// (`notify_lease_revoked`, queue.sql). `None` for anything else (an empty payload after a
    /// LISTEN reconnect, a reason this version does not know); tokens that do not parse are
    /// skipped.
    pub fn parse_notice(payload: &str) -> Option<(Revoked, Vec<LeaseToken>)> {
        let mut words = payload.split_ascii_whitespace();
        let reason = Revoked::parse(words.next()?)?;
        let tokens = words
            .filter_map(|w| Uuid::parse_str(w).ok().map(LeaseToken))
            .collect();
        Some((reason, tokens))
    }
}

/// The leases among `leases` (a broker's in flight: key and the generation its task runs
/// for) that the engine took away, and why: the queue row no longer carries the lease and the
/// resource is gone or being deleted, quarantined (a reconcile), or at a newer generation (a
/// reconcile). A lease gone for another reason (reaped, released) is not listed. The failsafe
/// behind the `lease_revoked` NOTIFY (a broker runs it after a LISTEN reconnect); rare, so
/// the probes need not be cheap.
pub async fn lease_revocations(
    pool: &PgPool,
    leases: &[(LeaseKey, i64)],
) -> Result<Vec<(LeaseToken, Revoked)>> {
    if leases.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = leases.iter().map(|(k, _)| k.resource_id.0).collect();
    let shards: Vec<i16> = leases.iter().map(|(k, _)| k.shard_id.0).collect();
    let types: Vec<&str> = leases.iter().map(|(k, _)| k.task_type.as_str()).collect();
    let tokens: Vec<Uuid> = leases.iter().map(|(k, _)| k.lease_token.0).collect();
    let epochs: Vec<i64> = leases.iter().map(|(k, _)| k.claim_epoch.0).collect();
    let gens: Vec<i64> = leases.iter().map(|(_, g)| *g).collect();
    let rows: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT k.tok,
                CASE WHEN r.id IS NULL OR r.deletion_requested_at IS NOT NULL THEN 'deleted'
                     WHEN r.frozen_until = 'infinity' THEN 'quarantined'
                     ELSE 'superseded' END
         FROM unnest($1::uuid[], $2::smallint[], $3::text[], $4::uuid[], $5::bigint[],
                     $6::bigint[]) AS k(id, shard_id, task_type, tok, epoch, gen)
         LEFT JOIN resources r ON r.id = k.id
         WHERE NOT EXISTS (SELECT 1 FROM work_queue w
                           WHERE w.resource_id = k.id AND w.shard_id = k.shard_id
                             AND w.task_type = k.task_type AND w.claim_epoch = k.epoch
                             AND w.lease_token = k.tok)
           AND (r.id IS NULL OR r.deletion_requested_at IS NOT NULL
                OR (k.task_type = 'reconcile'
                    AND (r.frozen_until = 'infinity' OR r.generation > k.gen)))",
    )
    .bind(&ids)
    .bind(&shards)
    .bind(&types)
    .bind(&tokens)
    .bind(&epochs)
    .bind(&gens)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(t, r)| Some((LeaseToken(t), Revoked::parse(&r)?)))
        .collect())
}

/// Takes over the queue rows still leased under the given (token, epoch) pairs for
/// `broker_id` (a worker resumed them on this broker after its old one went away), so the
/// old broker's death no longer concerns them (see `cluster::release_dead`). Epochs are unchanged: the
/// worker's result stays valid. The resume is the worker's attestation, so `heartbeat_at`
/// is refreshed: a lease resumed after a long outage is not reaped as stale before the
/// worker's next heartbeat.
pub async fn lease_adopt(
    pool: &PgPool,
    leases: &[(LeaseToken, ClaimEpoch)],
    broker_id: &str,
) -> Result<Vec<FoundLease>> {
    if leases.is_empty() {
        return Ok(Vec::new());
    }
    let (tokens, epochs) = lease_arrays(leases);
    let rows: Vec<FoundRow> = sqlx::query_as(
        "UPDATE work_queue w SET broker_id = $3, heartbeat_at = now()
         FROM unnest($1::uuid[], $2::bigint[]) AS x(lease_token, claim_epoch)
         WHERE w.lease_token = x.lease_token AND w.claim_epoch = x.claim_epoch
         RETURNING w.resource_id, w.shard_id, w.task_type, w.lease_token, w.claim_epoch,
                   w.kind, w.kind_version,
                   (SELECT o.verb FROM resource_operations o
                    WHERE w.task_type = 'operate' AND o.resource_id = w.resource_id
                      AND o.state = 'running'
                    ORDER BY o.created_at, o.uid LIMIT 1)",
    )
    .bind(&tokens)
    .bind(&epochs)
    .bind(broker_id)
    .fetch_all(pool)
    .await?;
    Ok(found_leases(rows))
}

/// Calls one of the engine's batch lease functions (`work_heartbeat`, `work_release`) with the
/// keys as parallel arrays; returns the rows it touched.
async fn lease_batch_call(pool: &PgPool, sql: &'static str, keys: &[LeaseKey]) -> Result<u64> {
    if keys.is_empty() {
        return Ok(0);
    }
    let ids: Vec<Uuid> = keys.iter().map(|k| k.resource_id.0).collect();
    let shards: Vec<i16> = keys.iter().map(|k| k.shard_id.0).collect();
    let types: Vec<&str> = keys.iter().map(|k| k.task_type.as_str()).collect();
    let epochs: Vec<i64> = keys.iter().map(|k| k.claim_epoch.0).collect();
    let n: i32 = sqlx::query_scalar(sql)
        .bind(&ids)
        .bind(&shards)
        .bind(&types)
        .bind(&epochs)
        .fetch_one(pool)
        .await?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Calls a lifecycle claim function (`lifecycle_heartbeat`, `lifecycle_release`) with the
/// react keys' tokens and epochs.
async fn lifecycle_batch_call(pool: &PgPool, sql: &'static str, keys: &[&LeaseKey]) -> Result<u64> {
    if keys.is_empty() {
        return Ok(0);
    }
    let tokens: Vec<Uuid> = keys.iter().map(|k| k.lease_token.0).collect();
    let epochs: Vec<i64> = keys.iter().map(|k| k.claim_epoch.0).collect();
    let n: i32 = sqlx::query_scalar(sql)
        .bind(&tokens)
        .bind(&epochs)
        .fetch_one(pool)
        .await?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Splits keys into queue leases and reactor deliveries (claims on the lifecycle outbox).
fn split_react(keys: &[LeaseKey]) -> (Vec<LeaseKey>, Vec<&LeaseKey>) {
    let (react, queue): (Vec<&LeaseKey>, Vec<&LeaseKey>) =
        keys.iter().partition(|k| k.task_type == TaskType::React);
    (queue.into_iter().cloned().collect(), react)
}

/// Refreshes the heartbeat of attested leases, one statement per table for the whole frame.
pub async fn lease_heartbeat(pool: &PgPool, keys: &[LeaseKey]) -> Result<u64> {
    let (queue, react) = split_react(keys);
    let n = lease_batch_call(pool, "SELECT work_heartbeat($1, $2, $3, $4)", &queue).await?;
    let m = lifecycle_batch_call(pool, "SELECT lifecycle_heartbeat($1, $2)", &react).await?;
    Ok(n + m)
}

/// Releases leases at once so another worker can claim the rows (epoch bumped).
pub async fn lease_release(pool: &PgPool, keys: &[LeaseKey]) -> Result<u64> {
    let (queue, react) = split_react(keys);
    let n = lease_batch_call(pool, "SELECT work_release($1, $2, $3, $4)", &queue).await?;
    let m = lifecycle_batch_call(pool, "SELECT lifecycle_release($1, $2)", &react).await?;
    Ok(n + m)
}

/// One claimed reactor delivery.
#[derive(Debug, Clone, FromRow)]
pub struct ClaimedDelivery {
    /// The delivery's row id.
    pub id: i64,
    /// The watched resource's shard.
    pub shard_id: i16,
    /// The watched resource.
    pub resource_id: Uuid,
    /// The transition it delivers.
    pub transition: Transition,
    /// The watched resource's generation at the transition.
    pub generation: i64,
    /// The binding that asked for it.
    pub binding_name: String,
    /// The watched resource as it was at the transition.
    pub resource: serde_json::Value,
    /// The claim token (the lease the worker echoes).
    pub claim_token: Uuid,
    /// The claim epoch.
    pub claim_epoch: i64,
    /// Delivery attempts, this one included.
    pub attempts: i32,
    /// The reactor kind's live task deadline (0 = none).
    pub task_deadline_secs: i32,
}

impl ClaimedDelivery {
    /// The fencing key of this claim.
    pub fn key(&self) -> LeaseKey {
        LeaseKey {
            resource_id: ResourceId(self.resource_id),
            shard_id: ShardId(self.shard_id),
            task_type: TaskType::React,
            lease_token: LeaseToken(self.claim_token),
            claim_epoch: ClaimEpoch(self.claim_epoch),
        }
    }

    /// The stable key an idempotent side effect can use:
    /// `<resource id>:<transition>:<generation>:<binding>` (the same on every retry).
    pub fn dedup_token(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.resource_id, self.transition, self.generation, self.binding_name
        )
    }
}

/// Claims up to `limit` deliveries for reactor `pair` in `shards` (the deliveries are the
/// kind's, whatever its version; the version picks the task deadline returned with them).
pub async fn lifecycle_claim(
    pool: &PgPool,
    shards: ShardRange,
    pair: &KindPair,
    limit: i32,
    broker_id: &str,
) -> Result<Vec<ClaimedDelivery>> {
    sqlx::query_as::<_, ClaimedDelivery>("SELECT * FROM lifecycle_claim($1, $2, $3, $4, $5, $6)")
        .bind(shards.lo)
        .bind(shards.hi)
        .bind(&pair.kind)
        .bind(limit)
        .bind(broker_id)
        .bind(pair.version)
        .fetch_all(pool)
        .await
}

/// Reactor results: a success acks the delivery, a failure re-arms it with backoff.
async fn lifecycle_append(pool: &PgPool, batch: &[&Completion]) -> Result<Vec<LeaseKey>> {
    if batch.is_empty() {
        return Ok(Vec::new());
    }
    let a = ResultArrays::of(batch);
    let rows: Vec<(Uuid, i64)> = sqlx::query_as("SELECT * FROM lifecycle_complete($1, $2, $3, $4)")
        .bind(&a.tokens)
        .bind(&a.epochs)
        .bind(&a.oks)
        .bind(&a.errs)
        .fetch_all(pool)
        .await?;
    let accepted: std::collections::HashSet<(Uuid, i64)> = rows.into_iter().collect();
    Ok(batch
        .iter()
        .filter(|c| accepted.contains(&(c.key.lease_token.0, c.key.claim_epoch.0)))
        .map(|c| c.key.clone())
        .collect())
}
