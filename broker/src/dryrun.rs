//! Dry runs: the compose half of `POST /api/v1/resources:plan` for composers that run on a
//! worker (an SDK, WASM, stdworker). The API writes a request to `plan_requests`
//! (`converge_engine::db::plans`); this component claims the requests of the kinds its
//! dry-run workers serve, sends each to one such worker as a compose task with
//! `StageTask.dry_run` set, checks the worker's answer exactly as the pipeline checks a real
//! compose result (`compose::validate`: names, specs against their kinds' schemas, edges,
//! cycles, configs), and writes the outcome back to the request row. That row is the only
//! thing a dry run writes: its answer never reaches the pipeline, the completion writer or
//! the outbox, so no resource, edge, event or queue row can change because of it.
//!
//! Only a stream whose Subscribe set `dry_runs` is sent one (an older worker would run the
//! task as a real compose and could not tell). Each dry run has its own random lease token
//! and claim epoch, kept here and never in `work_queue`: a StageComplete that names them is
//! taken only from the stream the task went to ([`DryRuns::take`]); another stream's is
//! refused (acked `accepted=false`) and leaves the dry run waiting for its own worker.
//!
//! It is given the pool, the registry (to find and push to a stream), the manifests (the
//! composer's kind and the kinds its answer names) and the config cache (override configs
//! go to the worker opened, as a real task's do), and is woken by the `plan_requested`
//! NOTIFY (the broker's one LISTEN connection, `caches`) with a failsafe poll.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use sqlx::PgPool;
use tokio::{sync::Notify, task::AbortHandle};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use converge_engine::{
    db::{
        self,
        plans::{self, ClaimedPlan, PlanAnswer},
    },
    ids::{ClaimEpoch, KindPair, LeaseToken},
    sealing::Keyring,
};
use converge_kinds::Kind;
use converge_proto::pb;

use crate::{
    compose,
    configs::Configs,
    convert,
    manifests::Manifests,
    registry::{Registry, StreamId},
};

/// How often the loop looks for requests when no NOTIFY came (a LISTEN reconnect loses
/// notices), while a dry-run worker is connected.
const FAILSAFE_POLL: Duration = Duration::from_secs(2);
/// How often abandoned request rows are swept.
const SWEEP_EVERY: Duration = Duration::from_secs(60);
/// Most requests one claim takes.
const CLAIM_BATCH: i64 = 32;
/// Largest compose output one dry run may write back (the API compares it in memory).
pub(crate) const MAX_PLAN_OUTPUT_BYTES: usize = 16 << 20;

/// One dry run handed to a stream, until its answer comes or its time is up.
pub(crate) struct Flight {
    /// The `plan_requests` row it answers.
    request: Uuid,
    /// The stream it went to: the only one whose answer is taken.
    stream: StreamId,
    /// The epoch sent with it (echoed on StageComplete).
    epoch: ClaimEpoch,
    /// The composer's kind, for the checks of its answer.
    kind: Arc<Kind>,
    /// The timer that gives up on it.
    timer: AbortHandle,
}

/// What a StageComplete's lease is, as far as dry runs go.
pub(crate) enum Taken {
    /// A dry run this stream was sent: answer it with [`DryRuns::answer`].
    Here(Flight),
    /// A dry run sent to another stream (or at another epoch): refused, nothing changes.
    Elsewhere,
    /// Not a dry run.
    No,
}

/// The dry runs of one broker; cheap to share (`Arc`).
pub(crate) struct DryRuns {
    pool: PgPool,
    broker_id: String,
    registry: Arc<Registry>,
    manifests: Arc<Manifests>,
    configs: Arc<Configs>,
    keys: Keyring,
    wake: Notify,
    /// Lease token → the dry run it names.
    flights: Mutex<HashMap<Uuid, Flight>>,
}

impl DryRuns {
    /// Dry runs over `registry`'s streams, claimed as broker `broker_id`.
    pub fn new(
        pool: PgPool,
        broker_id: String,
        registry: Arc<Registry>,
        manifests: Arc<Manifests>,
        configs: Arc<Configs>,
    ) -> Self {
        let keys = configs.keys().clone();
        DryRuns {
            pool,
            broker_id,
            registry,
            manifests,
            configs,
            keys,
            wake: Notify::new(),
            flights: Mutex::default(),
        }
    }

    fn flights(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Flight>> {
        self.flights.lock().expect("dry-run flights lock poisoned")
    }

    /// A request may be waiting (`plan_requested`, or a dry-run worker became ready).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Claims and sends requests until `stop`.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut last_sweep = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(FAILSAFE_POLL) => {}
            }
            let pairs = self.registry.dry_run_pairs();
            if pairs.is_empty() {
                continue;
            }
            if last_sweep.elapsed() >= SWEEP_EVERY {
                last_sweep = tokio::time::Instant::now();
                if let Err(e) = plans::sweep(&self.pool).await {
                    tracing::warn!(error = %e, "could not sweep abandoned plan requests");
                }
            }
            loop {
                let claimed =
                    match plans::claim(&self.pool, &self.broker_id, &pairs, CLAIM_BATCH).await {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::warn!(error = %e, "could not claim plan requests");
                            break;
                        }
                    };
                let full = claimed.len() as i64 == CLAIM_BATCH;
                for c in claimed {
                    Arc::clone(&self).send(c).await;
                }
                if !full {
                    break;
                }
            }
        }
    }

    /// Sends claimed request `c` to a dry-run stream of its kind, or answers why not.
    async fn send(self: Arc<Self>, c: ClaimedPlan) {
        let pair = KindPair::new(c.kind.clone(), c.kind_version);
        let kind = match self.manifests.get_fresh(&pair).await {
            Ok(Some(kind)) => kind,
            Ok(None) => {
                return self
                    .fail(c.id, format!("kind {pair} is not registered"))
                    .await;
            }
            Err(e) => {
                return self
                    .fail(c.id, format!("reading the kind {pair} failed: {e}"))
                    .await;
            }
        };
        let Some(reaction) = kind.compose_reaction.clone() else {
            return self
                .fail(c.id, format!("kind {pair} has no compose reaction"))
                .await;
        };
        let observed = match c.resource_id {
            // Direct children only, as the compose stage reads them (a read, nothing retired).
            Some(id) => match db::compose::related(&self.pool, id, None, false).await {
                Ok(rows) => rows.into_iter().map(convert::related_resource).collect(),
                Err(e) => {
                    return self
                        .fail(
                            c.id,
                            format!("reading the composite's children failed: {e}"),
                        )
                        .await;
                }
            },
            None => Vec::new(),
        };
        let Some(stream) = self.registry.dry_run_stream(&pair) else {
            return self
                .fail(
                    c.id,
                    format!(
                        "the worker that answers dry runs of {pair} left before the plan reached it"
                    ),
                )
                .await;
        };
        let token = Uuid::new_v4();
        // Any positive number: the token alone is unguessable, the epoch is echoed as usual.
        let epoch = ClaimEpoch((Uuid::new_v4().as_u64_pair().0 >> 1) as i64 | 1);
        let left = Duration::from_millis(c.left_ms.unsigned_abs());
        let task = self.task(&c, &pair, &kind, reaction, observed, token, epoch);
        let timer = {
            let this = Arc::clone(&self);
            tokio::spawn(async move {
                tokio::time::sleep(left).await;
                this.expire(token);
            })
            .abort_handle()
        };
        self.flights().insert(
            token,
            Flight {
                request: c.id,
                stream,
                epoch,
                kind,
                timer,
            },
        );
        tracing::debug!(request = %c.id, %pair, stream, lease = %token, "dry run sent");
        self.registry
            .push(stream, pb::work_stream_server_msg::Body::Task(task));
    }

    /// The compose task of claimed request `c`: the stored composite's view with the planned
    /// spec and labels, its current children, and the override config as a real task has it.
    #[expect(
        clippy::too_many_arguments,
        reason = "one call site; the parts of one task"
    )]
    fn task(
        &self,
        c: &ClaimedPlan,
        pair: &KindPair,
        kind: &Kind,
        reaction: String,
        observed: Vec<pb::Resource>,
        token: Uuid,
        epoch: ClaimEpoch,
    ) -> pb::StageTask {
        let json = |v: &serde_json::Value| serde_json::to_vec(v).unwrap_or_default();
        let id = c
            .resource_id
            .map(|u| u.as_bytes().to_vec())
            .unwrap_or_default();
        let labels = c
            .labels
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let root = pb::Resource {
            id: id.clone().into(),
            kind: pair.kind.clone(),
            name: c.name.clone(),
            spec: json(&c.spec).into(),
            status: c
                .status
                .as_ref()
                .map(|s| json(s).into())
                .unwrap_or_default(),
            generation: c.generation,
            labels,
            kind_version: pair.version,
            ..Default::default()
        };
        let provider_config = match c.config_spec.clone() {
            Some(mut spec) => {
                self.configs.open(pair, &mut spec);
                json(&spec)
            }
            None => Vec::new(),
        };
        pb::StageTask {
            stage: pb::Stage::Compose as i32,
            kind: pair.kind.clone(),
            kind_version: pair.version,
            resource_id: id,
            generation: c.generation,
            reaction,
            lease_token: token.to_string(),
            claim_epoch: epoch.0,
            manifest_version: kind.manifest_version,
            provider_config,
            provider_bundle: c.config_data.clone().unwrap_or_default(),
            task_deadline_ms: convert::deadline_ms(Some(Duration::from_millis(
                c.left_ms.unsigned_abs(),
            ))),
            request: Some(pb::stage_task::Request::ComposeReq(pb::ComposeRequest {
                root: Some(root),
                observed,
                ..Default::default()
            })),
            trigger: converge_engine::words::TaskTrigger::SpecChange.to_string(),
            attempt: 1,
            dry_run: true,
        }
    }

    /// Whether `token` names a dry run, and if it is `from`'s at `epoch`, takes it out.
    pub fn take(&self, token: LeaseToken, epoch: ClaimEpoch, from: StreamId) -> Taken {
        let mut flights = self.flights();
        match flights.get(&token.0) {
            None => Taken::No,
            Some(f) if f.stream != from || f.epoch != epoch => Taken::Elsewhere,
            Some(_) => {
                let flight = flights.remove(&token.0).expect("present a line above");
                flight.timer.abort();
                Taken::Here(flight)
            }
        }
    }

    /// Checks a dry run's answer as a real compose result is checked and writes the outcome
    /// to its request row (and nowhere else).
    pub async fn answer(&self, flight: Flight, msg: pb::StageComplete) {
        let outcome = self.check(&flight.kind, msg).await;
        if let Err(e) = plans::answer(&self.pool, flight.request, &self.broker_id, &outcome).await {
            tracing::warn!(error = %e, request = %flight.request, "could not write a dry run's answer");
        }
    }

    async fn check(&self, kind: &Kind, msg: pb::StageComplete) -> PlanAnswer {
        if !msg.error_message.is_empty() {
            let mut m: String = msg
                .error_message
                .chars()
                .take(convert::MAX_ERROR_CHARS)
                .collect();
            m.insert_str(0, "the composer failed: ");
            return PlanAnswer::Failed(m);
        }
        if msg.stage != pb::Stage::Compose as i32 {
            return PlanAnswer::Failed(format!(
                "the worker answered stage {} for a dry-run compose",
                msg.stage
            ));
        }
        let c = msg.compose.unwrap_or_default();
        let kinds = match self.manifests.resolve(&c).await {
            Ok(k) => k,
            Err(e) => {
                return PlanAnswer::NotRun(format!(
                    "reading the kinds the compose result names failed: {e}"
                ));
            }
        };
        let payload = match compose::validate(&c, kind, &kinds, &self.keys) {
            Ok(p) => p,
            Err(e) => return PlanAnswer::Failed(format!("compose result refused: {e}")),
        };
        let status = match convert::stage_outcome(&c.status, &c.conditions) {
            Ok(o) => o.status,
            Err(e) => return PlanAnswer::Failed(format!("invalid result: {e}")),
        };
        let size = payload.children.get().len() + payload.edges.get().len();
        if size > MAX_PLAN_OUTPUT_BYTES {
            return PlanAnswer::Failed(format!(
                "the compose output is {size} bytes; a plan takes at most {MAX_PLAN_OUTPUT_BYTES}"
            ));
        }
        let parse = |raw: &serde_json::value::RawValue| {
            serde_json::from_str::<serde_json::Value>(raw.get()).expect("validate wrote JSON")
        };
        let mut out = serde_json::json!({
            "children": parse(&payload.children),
            "edges": parse(&payload.edges),
        });
        if let Some(s) = status {
            out["status"] = s;
        }
        PlanAnswer::Composed(out)
    }

    /// The dry run of `token` got no answer in time: the worker is told to stop, and the row
    /// says why (the API has most likely stopped waiting already).
    fn expire(self: Arc<Self>, token: Uuid) {
        let Some(f) = self.flights().remove(&token) else {
            return;
        };
        self.registry.push(
            f.stream,
            pb::work_stream_server_msg::Body::Cancel(pb::CancelTask {
                lease_token: token.to_string(),
                claim_epoch: f.epoch.0,
                reason: "deadline".into(),
            }),
        );
        tokio::spawn(async move {
            self.fail(
                f.request,
                "timed out: the worker did not answer in time".into(),
            )
            .await;
        });
    }

    /// Stream `sid` ended: its dry runs are answered as failed (its worker cannot answer them
    /// any more, and the plan should say so rather than wait out its deadline).
    pub async fn stream_ended(&self, sid: StreamId) {
        let gone: Vec<Flight> = {
            let mut flights = self.flights();
            let tokens: Vec<Uuid> = flights
                .iter()
                .filter(|(_, f)| f.stream == sid)
                .map(|(t, _)| *t)
                .collect();
            tokens.iter().filter_map(|t| flights.remove(t)).collect()
        };
        for f in gone {
            f.timer.abort();
            self.fail(
                f.request,
                "the worker's stream ended before it answered the dry run".into(),
            )
            .await;
        }
    }

    /// Answers `request` with why no composer ran for it.
    async fn fail(&self, request: Uuid, why: String) {
        tracing::debug!(%request, why, "dry run not answered by a composer");
        if let Err(e) = plans::answer(
            &self.pool,
            request,
            &self.broker_id,
            &PlanAnswer::NotRun(why),
        )
        .await
        {
            tracing::warn!(error = %e, %request, "could not write a dry run's answer");
        }
    }
}
