//! The reconcile pipeline for composites: one claim runs the kind's stages in order —
//! compose (when this generation was not composed yet), work, then rollup once every
//! descendant has settled — each stage sent as its own StageTask under the same lease.
//! A compose result is applied in one fenced transaction before the next stage; a composite
//! whose children are still progressing finishes without advancing synced_gen and is
//! re-pended by the cascade when they settle. Plain leaves (work only) skip all of this.
//!
//! This module only decides. Every effect (a read, the compose write, a send, a result, an
//! ack) is a [`Step`] handed back to the caller (`handout`), which performs it and feeds the
//! answer to the matching `on_*` method, so each decision is a plain function of the
//! pipeline's state and an answer, testable without a database or a stream (kube-rs's
//! `reconcile` returning an `Action`).

use std::{collections::VecDeque, sync::Arc, time::Duration};

use tokio::time::Instant;

use serde_json::{Value, json};

use converge_engine::{
    db::{
        self,
        compose::{ComposeApplied, ComposePayload, RelatedRow},
        descendants::Summary,
        queue::{ClaimedTask, Completion, LeaseKey},
    },
    ids::{KindPair, ResourceId},
    sealing::Keyring,
    words::{Phase, TaskTrigger},
};
use converge_proto::pb;

use converge_kinds::{Kind, Snapshot};

use crate::{compose, convert, manifests};

/// The state of one claim's pipeline between stages (kept with its lease in the registry
/// while a stage runs on a worker).
pub(crate) struct Pipeline {
    /// The claim all stages run under.
    key: LeaseKey,
    /// The claimed row (resource snapshot at claim time).
    task: ClaimedTask,
    /// Its (kind, version).
    pair: KindPair,
    /// Its reactions.
    info: Arc<Kind>,
    /// Stages still to run after the current one.
    stages: VecDeque<pb::Stage>,
    /// Status so far (last writer wins).
    status: Option<Value>,
    /// Conditions so far (same type: later wins).
    conditions: Vec<Value>,
    /// What the pipeline waits for between a step and its answer.
    wait: Wait,
    /// When the claim was made: the start of its deadline budget, shared by every stage
    /// (rule 6), and of `converge_rollup_latency_seconds`.
    claimed: Instant,
    /// The keys a compose result's provider configs are sealed with.
    keys: Keyring,
}

/// The answer a pipeline waits for. A step's answer fed to the wrong `on_*` method is a
/// bug in the caller, not a worker's fault; it fails the task transiently and is logged.
enum Wait {
    /// Between stages (or a stage is out on a worker).
    Idle,
    /// The compose stage's children.
    Children,
    /// The rollup's subtree, read before the gate: when this claim did not compose, the
    /// rollup is almost always due, so the rows usually answer on their own.
    SubtreeFirst,
    /// The rollup gate, with the subtree read before it (if one was).
    Gate(Option<Result<Rows, sqlx::Error>>),
    /// The rollup's subtree, read after the gate said the children have settled.
    SubtreeAfterGate,
    /// The compose write, with the composer's own status and conditions to merge after it.
    Applied(Result<convert::StageOutcome, String>),
}

/// What a [`Step::Read`] reads of a composite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadOf {
    /// Its direct children, in full (compose's `observed`): `db::compose::related`.
    Children,
    /// Its whole live subtree, in full (a rollup of the full form): `db::compose::related`.
    Subtree,
    /// The summary of its live subtree (a rollup of the summary form):
    /// `db::descendants::summary`.
    Summary,
}

/// The answer to a [`Step::Read`].
pub(crate) enum Rows {
    /// [`ReadOf::Children`] or [`ReadOf::Subtree`].
    Related(Vec<RelatedRow>),
    /// [`ReadOf::Summary`].
    Summary(Summary),
}

/// What the caller does next for a pipeline.
pub(crate) enum Step {
    /// Read what the coming stage needs (see [`ReadOf`]). Answer: [`Pipeline::on_read`].
    Read {
        /// The composite.
        resource: ResourceId,
        /// Its root (`None`: it is a root).
        root: Option<ResourceId>,
        /// What to read.
        of: ReadOf,
        /// The pipeline waiting for the rows.
        pipeline: Box<Pipeline>,
    },
    /// Ask the rollup gate (`db::compose::rollup_pending`) whether descendants are still
    /// progressing. Answer: [`Pipeline::on_gate`].
    Gate {
        /// The composite.
        resource: ResourceId,
        /// Its root (`None`: it is a root).
        root: Option<ResourceId>,
        /// The pipeline waiting for the answer.
        pipeline: Box<Pipeline>,
    },
    /// Apply a validated compose result in one transaction fenced on `key`
    /// (`db::compose::compose_apply`). Answer: [`Pipeline::on_applied`]; once `Applied`, the
    /// new children are claimable work.
    Apply {
        /// The lease the write is fenced on.
        key: LeaseKey,
        /// The generation composed.
        generation: i64,
        /// The validated result.
        payload: ComposePayload,
        /// The composer's status, stored with the result (`None`: none reported, or one
        /// the kind's status_schema refuses, which the task's final result fails on).
        status: Option<Value>,
        /// Whether the composer's edges are applied.
        edges: bool,
        /// Whether the composer's configs are applied.
        configs: bool,
        /// The pipeline waiting for the write.
        pipeline: Box<Pipeline>,
    },
    /// Ack the previous stage's result as used (both share the lease, and a worker still
    /// holding an unacked result for it would resend it), then hand this stage's task to a
    /// stream. No stream with room: release the lease (a compose stays applied; the next
    /// claim skips it).
    Send(Box<StageSend>),
    /// Record the composite's result; the completion writer acks the stage result after.
    Complete(Completion),
    /// Ack the stage result as refused and stop: the lease is gone (the compose write found
    /// it stale), so nothing of this claim may be recorded.
    Refuse(LeaseKey),
}

/// One stage's task, ready for a stream.
pub(crate) struct StageSend {
    /// The claim.
    pub key: LeaseKey,
    /// Its (kind, version).
    pub pair: KindPair,
    /// The stage being sent.
    pub stage: pb::Stage,
    /// The frame.
    pub msg: pb::StageTask,
    /// The broker-side deadline to arm once placed.
    pub deadline: Option<Duration>,
    /// The pipeline, kept with the lease until the stage's result comes back.
    pub pipeline: Box<Pipeline>,
}

/// The stages a claimed reconcile runs, in order.
pub(crate) fn plan(t: &ClaimedTask, info: &Kind) -> VecDeque<pb::Stage> {
    let mut stages = VecDeque::new();
    if t.trigger == TaskTrigger::ChildrenSettled {
        if info.rollup_reaction.is_some() {
            stages.push_back(pb::Stage::Rollup);
        }
        return stages;
    }
    if info.compose_reaction.is_some() && t.composed_gen < t.generation {
        stages.push_back(pb::Stage::Compose);
    }
    if info.work_reaction.is_some() {
        stages.push_back(pb::Stage::Work);
    }
    if info.rollup_reaction.is_some() {
        stages.push_back(pb::Stage::Rollup);
    }
    stages
}

fn reaction(info: &Kind, stage: pb::Stage) -> &str {
    match stage {
        pb::Stage::Compose => info.compose_reaction.as_deref(),
        pb::Stage::Rollup => info.rollup_reaction.as_deref(),
        _ => info.work_reaction.as_deref(),
    }
    .unwrap_or_default()
}

/// Whether every live descendant read has settled (synced, or failed at its generation): what
/// the gate's first probe (`has_unsettled_descendants`) would find, from the rows (or the
/// summary) already in hand. A read cut at [`db::compose::MAX_RELATED`] proves nothing.
fn all_settled(read: &Rows) -> bool {
    match read {
        Rows::Related(desc) => {
            i64::try_from(desc.len()).is_ok_and(|n| n < db::compose::MAX_RELATED)
                && desc
                    .iter()
                    .all(|d| d.synced_gen >= d.generation || d.phase == Phase::Failed)
        }
        Rows::Summary(s) => s.unsettled == 0,
    }
}

/// The condition that names failed descendants (the composite shows Degraded, not stuck).
fn children_not_ready(s: &Summary) -> Option<Value> {
    if s.failed_total == 0 {
        return None;
    }
    let named: Vec<String> = s
        .failed
        .iter()
        .take(3)
        .map(|d| {
            format!(
                "{}/{} failed: {}",
                d.kind,
                d.name,
                d.failure_message.as_deref().unwrap_or("")
            )
        })
        .collect();
    let more = if s.failed_total > 3 {
        format!(" (and {} more)", s.failed_total - 3)
    } else {
        String::new()
    };
    Some(json!({
        "type": "Ready", "status": "False", "reason": "ChildrenNotReady",
        "message": format!("{}{more}", named.join("; ")),
    }))
}

impl Pipeline {
    /// The keys its compose result's provider configs were sealed with.
    pub fn keys(&self) -> &Keyring {
        &self.keys
    }

    /// A pipeline for claim `task` that will run `stages` (from [`plan`]).
    pub fn new(
        task: ClaimedTask,
        pair: KindPair,
        info: Arc<Kind>,
        stages: VecDeque<pb::Stage>,
        keys: Keyring,
    ) -> Box<Pipeline> {
        Box::new(Pipeline {
            key: task.key(),
            task,
            pair,
            info,
            stages,
            status: None,
            conditions: Vec::new(),
            wait: Wait::Idle,
            claimed: Instant::now(),
            keys,
        })
    }

    /// The composite's kind.
    pub fn kind(&self) -> &str {
        &self.pair.kind
    }

    /// How long ago the claim this pipeline runs under was made.
    pub fn since_claim(&self) -> Duration {
        self.claimed.elapsed()
    }

    /// What is left of the claim's deadline (the kind's `task_deadline_secs`, counted from the
    /// claim): `None` without a deadline, `Some(ZERO)` once it has passed. Every stage gets
    /// the rest, never a fresh deadline: compose, work and rollup together get the kind's one.
    fn budget(&self) -> Option<Duration> {
        convert::kind_deadline(self.task.task_deadline_secs)
            .map(|d| d.saturating_sub(self.claimed.elapsed()))
    }

    /// The first step of a fresh claim.
    pub fn start(self: Box<Self>) -> Step {
        self.advance()
    }

    // A pipeline's result is a composite's (see `Completion::composite`).
    fn finish(self: Box<Self>, advance: bool) -> Step {
        let p = *self;
        let done = Completion {
            composite: true,
            ..convert::success(p.key, p.status, p.conditions, advance)
        };
        Step::Complete(manifests::enforce(&p.info, None, done))
    }

    fn fail(self: Box<Self>, message: String, terminal: bool) -> Step {
        Step::Complete(Completion {
            composite: true,
            ..convert::failure(self.key, message, terminal)
        })
    }

    fn read(mut self: Box<Self>, of: ReadOf, wait: Wait) -> Step {
        self.wait = wait;
        Step::Read {
            resource: ResourceId(self.task.resource_id),
            root: self.task.root_id.map(ResourceId),
            of,
            pipeline: self,
        }
    }

    /// What a rollup reads of the subtree: every row for a kind of the full form, the
    /// summary otherwise.
    fn rollup_read(&self) -> ReadOf {
        if self.info.rollup_full {
            ReadOf::Subtree
        } else {
            ReadOf::Summary
        }
    }

    fn gate(mut self: Box<Self>, read: Option<Result<Rows, sqlx::Error>>) -> Step {
        self.wait = Wait::Gate(read);
        Step::Gate {
            resource: ResourceId(self.task.resource_id),
            root: self.task.root_id.map(ResourceId),
            pipeline: self,
        }
    }

    /// Starts the next stage, or finishes (synced at this generation) when none is left.
    fn advance(self: Box<Self>) -> Step {
        let Some(stage) = self.stages.front().copied() else {
            return self.finish(true);
        };
        match stage {
            // Right after this claim composed, the children are new and unsettled: one gate
            // probe says so without reading the subtree. Otherwise the rollup is almost
            // always due, so the subtree is read first and the gate asked only when a row
            // in it is still progressing (the gate's answer then also covers dependents of
            // stuck rows, which the rows alone cannot show).
            pb::Stage::Rollup if self.task.composed_gen >= self.task.generation => {
                let of = self.rollup_read();
                self.read(of, Wait::SubtreeFirst)
            }
            pb::Stage::Rollup => self.gate(None),
            pb::Stage::Compose => self.read(ReadOf::Children, Wait::Children),
            _ => self.send(Vec::new(), None),
        }
    }

    /// The rows asked for by [`Step::Read`].
    pub fn on_read(mut self: Box<Self>, rows: Result<Rows, sqlx::Error>) -> Step {
        match std::mem::replace(&mut self.wait, Wait::Idle) {
            Wait::Children => match rows {
                Ok(Rows::Related(children)) => self.send(children, None),
                Ok(Rows::Summary(_)) => self.out_of_order("a summary"),
                Err(e) => self.fail(format!("reading children failed: {e}"), false),
            },
            Wait::SubtreeFirst => match rows {
                Ok(desc) if all_settled(&desc) => self.rollup(Ok(desc)),
                read => self.gate(Some(read)),
            },
            Wait::SubtreeAfterGate => self.rollup(rows),
            _ => self.out_of_order("rows"),
        }
    }

    /// The rollup gate's answer asked for by [`Step::Gate`].
    pub fn on_gate(mut self: Box<Self>, pending: Result<bool, sqlx::Error>) -> Step {
        let Wait::Gate(read) = std::mem::replace(&mut self.wait, Wait::Idle) else {
            return self.out_of_order("a gate answer");
        };
        match pending {
            // Children still progressing: record status, stay behind; the cascade re-pends
            // this composite when they settle.
            Ok(true) => self.finish(false),
            Ok(false) => match read {
                Some(read) => self.rollup(read),
                None => {
                    let of = self.rollup_read();
                    self.read(of, Wait::SubtreeAfterGate)
                }
            },
            Err(e) => self.fail(format!("rollup gate check failed: {e}"), false),
        }
    }

    /// Sends the rollup once the gate let it through, with the failed descendants named.
    fn rollup(mut self: Box<Self>, read: Result<Rows, sqlx::Error>) -> Step {
        let (rows, summary) = match read {
            Ok(Rows::Related(rows)) => {
                let s = Summary::of(&rows);
                (rows, s)
            }
            Ok(Rows::Summary(s)) => (Vec::new(), s),
            Err(e) => return self.fail(format!("reading descendants failed: {e}"), false),
        };
        if let Some(c) = children_not_ready(&summary) {
            convert::merge_conditions(&mut self.conditions, vec![c]);
        }
        self.send(rows, Some(summary))
    }

    /// Builds the current stage's task with the rows (and, for a rollup, the summary) it
    /// carries.
    fn send(mut self: Box<Self>, related: Vec<RelatedRow>, summary: Option<Summary>) -> Step {
        let stage = self
            .stages
            .pop_front()
            .expect("send follows advance, which saw a stage");
        let budget = self.budget();
        if budget == Some(Duration::ZERO) {
            // Spent on earlier stages, reads and writes: the claim fails as a stage past its
            // deadline would (transient), without sending a task that is already late.
            let m = format!(
                "task deadline exceeded: {}s spent before stage {} could start",
                self.task.task_deadline_secs,
                stage.as_str_name()
            );
            return self.fail(m, false);
        }
        let request = convert::stage_request(
            &self.task,
            &self.pair,
            stage,
            self.status.as_ref(),
            related.into_iter().map(convert::related_resource).collect(),
            summary
                .as_ref()
                .map(|s| (convert::rollup_summary(s), self.info.rollup_full)),
        );
        let msg = convert::stage_task(
            &self.task,
            &self.pair,
            stage,
            reaction(&self.info, stage),
            self.info.manifest_version,
            convert::deadline_ms(budget),
            request,
        );
        Step::Send(Box::new(StageSend {
            key: self.key.clone(),
            pair: self.pair.clone(),
            stage,
            msg,
            deadline: budget,
            pipeline: self,
        }))
    }

    /// A worker's result for the stage sent as `sent` (the registry's record of it); for a
    /// compose result, `kinds` are the kinds it names (`Manifests::resolve`), which its
    /// children and configs are checked against.
    pub fn on_result(
        mut self: Box<Self>,
        sent: i32,
        msg: pb::StageComplete,
        kinds: &Snapshot,
    ) -> Step {
        if !msg.error_message.is_empty() {
            let m = format!("stage {} failed: {}", stage_name(sent), msg.error_message);
            return self.fail(m, msg.terminal);
        }
        if msg.stage != sent {
            let m = format!(
                "worker answered stage {} for a stage {} task",
                msg.stage, sent
            );
            return self.fail(m, true);
        }
        if sent != pb::Stage::Compose as i32 {
            let outcome = convert::stage_outcome(&msg.status, &msg.conditions);
            return self.merge(outcome);
        }
        let c = msg.compose.unwrap_or_default();
        let payload = match compose::validate(&c, &self.info, kinds, &self.keys) {
            Ok(x) => x,
            Err(e) => return self.fail(format!("compose result refused: {e}"), true),
        };
        let outcome = convert::stage_outcome(&c.status, &c.conditions);
        let status = outcome
            .as_ref()
            .ok()
            .and_then(|o| o.status.clone())
            .filter(|s| self.info.status_fits(s));
        self.wait = Wait::Applied(outcome);
        Step::Apply {
            key: self.key.clone(),
            generation: self.task.generation,
            payload,
            status,
            edges: self.info.compose_edges,
            configs: self.info.compose_configs,
            pipeline: self,
        }
    }

    /// The kinds a compose result names could not be read (`Manifests::resolve` failed):
    /// nobody's fault, so the claim fails transiently and composes again.
    pub fn on_unreadable_kinds(self: Box<Self>, e: String) -> Step {
        self.fail(
            format!("reading the kinds the compose result names failed: {e}"),
            false,
        )
    }

    /// The compose write asked for by [`Step::Apply`].
    pub fn on_applied(mut self: Box<Self>, r: Result<ComposeApplied, sqlx::Error>) -> Step {
        let Wait::Applied(outcome) = std::mem::replace(&mut self.wait, Wait::Idle) else {
            return self.out_of_order("a compose write");
        };
        match r {
            Ok(ComposeApplied::Applied) => self.merge(outcome),
            Ok(ComposeApplied::Stale) => Step::Refuse(self.key),
            Ok(ComposeApplied::Refused(m)) => {
                self.fail(format!("compose result refused: {m}"), true)
            }
            Err(e) => self.fail(format!("applying the compose result failed: {e}"), false),
        }
    }

    /// Folds a stage's validated outcome into the pipeline and moves on.
    fn merge(mut self: Box<Self>, outcome: Result<convert::StageOutcome, String>) -> Step {
        match outcome {
            Ok(o) => {
                if o.status.is_some() {
                    self.status = o.status;
                }
                convert::merge_conditions(&mut self.conditions, o.conditions);
                self.advance()
            }
            Err(e) => self.fail(format!("invalid result: {e}"), true),
        }
    }

    fn out_of_order(self: Box<Self>, what: &str) -> Step {
        tracing::error!(lease = %self.key.lease_token, "pipeline got {what} it did not ask for");
        self.fail(
            format!("internal error: pipeline got {what} it did not ask for"),
            false,
        )
    }
}

fn stage_name(stage: i32) -> &'static str {
    pb::Stage::try_from(stage)
        .map(|s| s.as_str_name())
        .unwrap_or("STAGE_UNSPECIFIED")
}
#[cfg(test)]
mod tests {
    use super::*;

    fn task(trigger: &str, generation: i64, composed_gen: i64) -> ClaimedTask {
        ClaimedTask {
            resource_id: uuid::Uuid::nil(),
            shard_id: 0,
            task_type: converge_engine::words::TaskType::Reconcile,
            generation,
            trigger: trigger.parse().unwrap(),
            attempt: 1,
            lease_token: uuid::Uuid::nil(),
            claim_epoch: 1,
            provider_config: None,
            provider_bundle: None,
            task_deadline_secs: 0,
            name: "r".into(),
            owner_id: None,
            root_id: None,
            spec: serde_json::json!({}),
            status: None,
            r_generation: generation,
            synced_gen: 0,
            is_ready: false,
            finalizers: Vec::new(),
            deletion_requested_at_ms: 0,
            frozen_until_ms: 0,
            labels: serde_json::json!({}),
            phase: Phase::Reconciling,
            composed_gen,
            default_config_rev: 0,
        }
    }

    /// A kind whose manifest declares a composer (emitting children and edges), a worker
    /// and a rollup (of the full form) as asked, plus the manifest fields in `extra`.
    fn info_with(compose: bool, work: bool, rollup: bool, extra: Value) -> Kind {
        let mut reactions = Vec::new();
        if compose {
            reactions.push(json!({"name": "compose", "trigger": "specChange",
                                  "emits": ["children", "edges", "status"]}));
        }
        if work {
            reactions.push(json!({"name": "work", "trigger": "specChange", "emits": ["status"]}));
        }
        if rollup {
            reactions.push(json!({"name": "rollup", "trigger": "childrenSettled",
                                  "emits": ["status"], "descendants": "full"}));
        }
        let mut m = json!({"kind": "k", "kind_version": 1, "reactions": reactions});
        for (k, v) in extra.as_object().into_iter().flatten() {
            m[k] = v.clone();
        }
        Kind::compile(serde_json::from_value(m).unwrap(), 1).unwrap()
    }

    fn info(compose: bool, work: bool, rollup: bool) -> Kind {
        info_with(compose, work, rollup, json!({}))
    }

    /// The kinds [`compose_result`] names: `leaf` v1, with no schema.
    fn leaf_kinds() -> Snapshot {
        let mut leaf = info(false, true, false);
        leaf.pair = KindPair::new("leaf", 1);
        Snapshot::of([leaf])
    }

    #[test]
    fn composes_only_when_this_generation_was_not_composed() {
        let full = info(true, true, true);
        assert_eq!(
            plan(&task("specChange", 2, 1), &full),
            [pb::Stage::Compose, pb::Stage::Work, pb::Stage::Rollup]
        );
        assert_eq!(
            plan(&task("specChange", 2, 2), &full),
            [pb::Stage::Work, pb::Stage::Rollup]
        );
    }

    #[test]
    fn children_settled_runs_only_the_rollup() {
        assert_eq!(
            plan(&task("childrenSettled", 3, 3), &info(true, true, true)),
            [pb::Stage::Rollup]
        );
        assert!(plan(&task("childrenSettled", 3, 3), &info(true, true, false)).is_empty());
    }

    #[test]
    fn a_leaf_is_one_work_stage_and_a_kind_without_reactions_has_none() {
        assert_eq!(
            plan(&task("specChange", 1, 0), &info(false, true, false)),
            [pb::Stage::Work]
        );
        assert!(plan(&task("specChange", 1, 0), &info(false, false, false)).is_empty());
    }

    fn row(generation: i64, synced_gen: i64, phase: &str) -> RelatedRow {
        RelatedRow {
            id: uuid::Uuid::nil(),
            kind: "k".into(),
            kind_version: 1,
            name: "n".into(),
            owner_id: None,
            root_id: None,
            spec: "{}".into(),
            status: None,
            generation,
            synced_gen,
            is_ready: synced_gen >= generation,
            labels: serde_json::json!({}),
            phase: phase.parse().unwrap(),
            failure_message: None,
        }
    }

    #[test]
    fn a_subtree_is_settled_when_every_row_is_synced_or_failed() {
        let synced = row(2, 2, "Ready");
        let degraded = row(2, 2, "Degraded");
        let failed = row(2, 1, "Failed");
        let progressing = row(2, 1, "Reconciling");
        let rows = |v: Vec<RelatedRow>| Rows::Related(v);
        assert!(all_settled(&rows(vec![])));
        let settled = vec![synced.clone(), degraded, failed];
        assert!(all_settled(&rows(settled.clone())));
        assert!(!all_settled(&rows(vec![
            synced.clone(),
            progressing.clone()
        ])));
        // A read cut at the cap may have left a progressing row out.
        let cap = usize::try_from(db::compose::MAX_RELATED).unwrap();
        assert!(!all_settled(&rows(vec![synced.clone(); cap])));
        // The summary form answers from its count, with no cap.
        assert!(all_settled(&Rows::Summary(Summary::of(&settled))));
        let s = Summary::of(&[synced, progressing]);
        assert_eq!((s.total, s.unsettled, s.not_ready_total), (2, 1, 1));
        assert!(!all_settled(&Rows::Summary(s)));
    }

    // The step decisions, driven as `handout` drives them but with the answers made up: no
    // database, no stream.

    fn pipeline(t: ClaimedTask, i: Kind) -> Box<Pipeline> {
        let stages = plan(&t, &i);
        Pipeline::new(
            t,
            KindPair::new("k", 1),
            Arc::new(i),
            stages,
            Keyring::default(),
        )
    }

    fn sent(step: Step) -> StageSend {
        match step {
            Step::Send(s) => *s,
            other => panic!("expected Send, got {}", name(&other)),
        }
    }

    fn completed(step: Step) -> Completion {
        match step {
            Step::Complete(c) => c,
            other => panic!("expected Complete, got {}", name(&other)),
        }
    }

    fn name(step: &Step) -> &'static str {
        match step {
            Step::Read {
                of: ReadOf::Children,
                ..
            } => "Read(children)",
            Step::Read {
                of: ReadOf::Subtree,
                ..
            } => "Read(subtree)",
            Step::Read {
                of: ReadOf::Summary,
                ..
            } => "Read(summary)",
            Step::Gate { .. } => "Gate",
            Step::Apply { .. } => "Apply",
            Step::Send(_) => "Send",
            Step::Complete(_) => "Complete",
            Step::Refuse(_) => "Refuse",
        }
    }

    fn result(stage: pb::Stage, status: &str) -> pb::StageComplete {
        pb::StageComplete {
            stage: stage as i32,
            status: status.as_bytes().to_vec(),
            ..Default::default()
        }
    }

    fn compose_result() -> pb::StageComplete {
        pb::StageComplete {
            stage: pb::Stage::Compose as i32,
            compose: Some(pb::ComposeResult {
                desired: vec![pb::ChildSpec {
                    kind: "leaf".into(),
                    name: "a".into(),
                    kind_version: 1,
                    spec: b"{}".to_vec(),
                    ..Default::default()
                }],
                status: br#"{"composed":true}"#.to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Drives a fresh compose/work/rollup claim up to the compose write.
    fn up_to_apply(t: ClaimedTask) -> Step {
        up_to_apply_with(t, info(true, true, true))
    }

    /// [`up_to_apply`] for a kind described by `i`.
    fn up_to_apply_with(mut t: ClaimedTask, i: Kind) -> Step {
        t.task_deadline_secs = 30;
        let p = pipeline(t, i);
        let Step::Read {
            of: ReadOf::Children,
            pipeline,
            ..
        } = p.start()
        else {
            panic!("a compose stage reads the children first");
        };
        let s = sent(pipeline.on_read(Ok(Rows::Related(vec![row(1, 1, "Ready")]))));
        assert_eq!(s.stage, pb::Stage::Compose);
        assert_eq!(s.msg.stage, pb::Stage::Compose as i32);
        assert_eq!(s.deadline, Some(Duration::from_secs(30)));
        s.pipeline
            .on_result(pb::Stage::Compose as i32, compose_result(), &leaf_kinds())
    }

    #[tokio::test(start_paused = true)]
    async fn a_compose_result_is_written_before_the_next_stage_is_sent() {
        let step = up_to_apply(task("specChange", 2, 1));
        let Step::Apply {
            generation,
            edges,
            configs,
            payload,
            pipeline,
            ..
        } = step
        else {
            panic!("a valid compose result is applied, got {}", name(&step));
        };
        assert_eq!((generation, edges, configs), (2, true, false));
        let children: Vec<Value> = serde_json::from_str(payload.children.get()).unwrap();
        assert_eq!(children.len(), 1);
        let s = sent(pipeline.on_applied(Ok(ComposeApplied::Applied)));
        assert_eq!(s.stage, pb::Stage::Work);
        // The composer's status is carried into the next stage.
        assert_eq!(s.pipeline.status, Some(json!({"composed": true})));
    }

    #[tokio::test(start_paused = true)]
    async fn the_composers_status_is_written_with_its_children_unless_the_schema_refuses_it() {
        let Step::Apply { status, .. } = up_to_apply(task("specChange", 2, 1)) else {
            panic!("a valid compose result is applied");
        };
        assert_eq!(status, Some(json!({"composed": true})));

        let schema = json!({"type": "object", "properties": {"composed": {"type": "string"}}});
        let strict = info_with(true, true, true, json!({"status_schema": schema}));
        let Step::Apply { status, .. } = up_to_apply_with(task("specChange", 2, 1), strict) else {
            panic!("a valid compose result is applied");
        };
        // The task's final result fails on it; the row keeps the status it had until then.
        assert_eq!(status, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_compose_write_that_finds_the_lease_gone_refuses_the_result() {
        let apply = |answer| match up_to_apply(task("specChange", 2, 1)) {
            Step::Apply { pipeline, .. } => pipeline.on_applied(answer),
            other => panic!("expected Apply, got {}", name(&other)),
        };
        assert!(matches!(apply(Ok(ComposeApplied::Stale)), Step::Refuse(_)));
        let refused = completed(apply(Ok(ComposeApplied::Refused("no such kind".into()))));
        assert!(!refused.ok && refused.terminal && refused.composite);
        assert_eq!(
            refused.error_message.as_deref(),
            Some("compose result refused: no such kind")
        );
        // A database error is nobody's fault: transient.
        let failed = completed(apply(Err(sqlx::Error::PoolTimedOut)));
        assert!(!failed.ok && !failed.terminal);
    }

    /// Rule 6 across stages: compose, work and rollup share the kind's one deadline, counted
    /// from the claim; each stage is sent with what is left, and a claim whose budget ran out
    /// between stages fails transiently instead of sending a late stage.
    #[tokio::test(start_paused = true)]
    async fn every_stage_gets_what_is_left_of_the_claims_one_deadline() {
        let Step::Apply { pipeline, .. } = up_to_apply(task("specChange", 2, 1)) else {
            panic!("expected the compose write");
        };
        // The compose ran for 10 s of the 30.
        tokio::time::advance(Duration::from_secs(10)).await;
        let work = sent(pipeline.on_applied(Ok(ComposeApplied::Applied)));
        assert_eq!(work.stage, pb::Stage::Work);
        assert_eq!(work.deadline, Some(Duration::from_secs(20)));
        assert_eq!(work.msg.task_deadline_ms, 20_000);
        // Nearly all the rest goes to the work stage: the rollup gets the last 1.5 ms, which
        // the wire floors at 1 ms and the timer keeps exact.
        tokio::time::advance(Duration::from_micros(19_998_500)).await;
        let p = work.pipeline.on_result(
            pb::Stage::Work as i32,
            result(pb::Stage::Work, "{}"),
            &Snapshot::default(),
        );
        let Step::Gate { pipeline, .. } = p else {
            panic!("a fresh compose gates its rollup, got {}", name(&p));
        };
        let Step::Read { pipeline, .. } = pipeline.on_gate(Ok(false)) else {
            panic!("a passed gate reads the subtree");
        };
        let rows = || Ok(Rows::Related(vec![row(1, 1, "Ready")]));
        let rollup = sent(pipeline.on_read(rows()));
        assert_eq!(rollup.stage, pb::Stage::Rollup);
        assert_eq!(rollup.deadline, Some(Duration::from_micros(1_500)));
        assert_eq!(rollup.msg.task_deadline_ms, 1);
        // A claim whose budget ran out before its next stage could go fails transiently.
        let Step::Apply { pipeline, .. } = up_to_apply(task("specChange", 2, 1)) else {
            panic!("expected the compose write");
        };
        tokio::time::advance(Duration::from_secs(30)).await;
        let late = completed(pipeline.on_applied(Ok(ComposeApplied::Applied)));
        assert!(!late.ok && !late.terminal && late.composite);
        assert!(
            late.error_message
                .as_deref()
                .is_some_and(|m| m.starts_with("task deadline exceeded")),
            "{:?}",
            late.error_message
        );
    }

    /// A compose result is checked against the kinds it names before anything is written: a
    /// child breaking its kind's spec_schema, or of a kind not registered, is a terminal
    /// failure and no Apply step; the kinds unreadable, a transient one.
    #[test]
    fn a_compose_result_breaking_its_kinds_rules_is_refused_before_any_write() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let mut strict = info_with(false, true, false, json!({"spec_schema": schema}));
        strict.pair = KindPair::new("leaf", 1);
        let kinds = Snapshot::of([strict]);
        // A compose claim at its compose stage, waiting for the result.
        let composing = || {
            let p = pipeline(task("specChange", 2, 1), info(true, true, true));
            let Step::Read { pipeline: p, .. } = p.start() else {
                panic!("compose reads first")
            };
            sent(p.on_read(Ok(Rows::Related(Vec::new())))).pipeline
        };
        let with_spec = |spec: &[u8]| {
            let mut r = compose_result();
            if let Some(c) = r.compose.as_mut() {
                c.desired[0].spec = spec.to_vec();
            }
            r
        };
        let compose = pb::Stage::Compose as i32;
        let c = completed(composing().on_result(compose, with_spec(br#"{"n": "x"}"#), &kinds));
        assert!(!c.ok && c.terminal && c.composite);
        let why = c.error_message.unwrap();
        assert!(
            why.starts_with(
                "compose result refused: child leaf/a: spec breaks the spec_schema of leaf v1 at /n"
            ),
            "{why}"
        );
        let ok = composing().on_result(compose, with_spec(br#"{"n": 1}"#), &kinds);
        assert!(matches!(ok, Step::Apply { .. }), "got {}", name(&ok));
        let c = completed(composing().on_result(compose, compose_result(), &Snapshot::default()));
        assert!(c.terminal, "{c:?}");
        assert_eq!(
            c.error_message.as_deref(),
            Some("compose result refused: child leaf/a has unregistered kind leaf version 1")
        );
        let c = completed(composing().on_unreadable_kinds("pool timed out".into()));
        assert!(!c.ok && !c.terminal && c.composite, "{c:?}");
    }

    #[test]
    fn a_bad_stage_result_fails_the_composite() {
        let work = |msg| {
            let s = sent(pipeline(task("specChange", 2, 2), info(true, true, true)).start());
            assert_eq!(s.stage, pb::Stage::Work);
            completed(
                s.pipeline
                    .on_result(pb::Stage::Work as i32, msg, &Snapshot::default()),
            )
        };
        // The worker's own verdict on terminality is kept.
        let c = work(pb::StageComplete {
            stage: pb::Stage::Work as i32,
            error_message: "boom".into(),
            terminal: false,
            ..Default::default()
        });
        assert!(!c.ok && !c.terminal && c.composite);
        assert_eq!(
            c.error_message.as_deref(),
            Some("stage STAGE_WORK failed: boom")
        );
        // An answer for another stage, or a status that is not JSON, is terminal.
        assert!(work(result(pb::Stage::Rollup, "{}")).terminal);
        let c = work(result(pb::Stage::Work, "{not json"));
        assert!(
            c.terminal
                && c.error_message
                    .is_some_and(|m| m.starts_with("invalid result"))
        );
        // So is a compose result that does not validate.
        let mut bad = compose_result();
        if let Some(c) = bad.compose.as_mut() {
            c.desired.push(c.desired[0].clone());
        }
        let p = pipeline(task("specChange", 2, 1), info(true, true, true));
        let Step::Read { pipeline: p, .. } = p.start() else {
            panic!("compose reads first")
        };
        let s = sent(p.on_read(Ok(Rows::Related(Vec::new()))));
        let c = completed(
            s.pipeline
                .on_result(pb::Stage::Compose as i32, bad, &leaf_kinds()),
        );
        assert!(c.terminal);
    }

    #[test]
    fn a_rollup_after_no_compose_reads_the_subtree_and_skips_the_gate_when_settled() {
        let p = pipeline(task("childrenSettled", 3, 3), info(true, true, true));
        let Step::Read {
            of: ReadOf::Subtree,
            pipeline,
            ..
        } = p.start()
        else {
            panic!("the subtree is read first");
        };
        let rows = vec![row(2, 2, "Ready"), row(2, 1, "Failed")];
        let s = sent(pipeline.on_read(Ok(Rows::Related(rows))));
        assert_eq!(s.stage, pb::Stage::Rollup);
        // The failed child is named in the composite's conditions.
        assert!(
            s.pipeline
                .conditions
                .iter()
                .any(|c| c["reason"] == "ChildrenNotReady")
        );
        // Its result finishes the claim: synced at this generation.
        let c = completed(s.pipeline.on_result(
            pb::Stage::Rollup as i32,
            result(pb::Stage::Rollup, r#"{"up":1}"#),
            &Snapshot::default(),
        ));
        assert!(c.ok && c.advance && c.composite);
        assert_eq!(c.status, Some(json!({"up": 1})));
    }

    #[test]
    fn a_rollup_of_the_summary_form_sends_counts_and_no_descendant() {
        let mut i = info(true, true, true);
        i.rollup_full = false;
        let p = pipeline(task("childrenSettled", 3, 3), i);
        let Step::Read {
            of: ReadOf::Summary,
            pipeline,
            ..
        } = p.start()
        else {
            panic!("the summary is read first");
        };
        let mut failed = row(2, 1, "Failed");
        failed.failure_message = Some("quota".into());
        let s = sent(pipeline.on_read(Ok(Rows::Summary(Summary::of(&[
            row(2, 2, "Ready"),
            failed,
        ])))));
        let Some(pb::stage_task::Request::RollupReq(r)) = &s.msg.request else {
            panic!("a rollup request");
        };
        assert!(r.descendants.is_empty() && !r.descendants_included);
        let sum = r.summary.as_ref().expect("a summary");
        assert_eq!(
            (sum.total, sum.failed_total, sum.not_ready_total),
            (2, 1, 1)
        );
        assert_eq!(sum.by_phase.get("Failed"), Some(&1));
        assert_eq!(sum.failed.len(), 1);
        // The failed child is named, with its message, as in the full form.
        let c = s
            .pipeline
            .conditions
            .iter()
            .find(|c| c["reason"] == "ChildrenNotReady");
        assert!(c.is_some_and(|c| c["message"].as_str().is_some_and(|m| m.contains("quota"))));
    }

    #[test]
    fn a_rollup_with_progressing_children_asks_the_gate() {
        let start = || {
            let p = pipeline(task("childrenSettled", 3, 3), info(true, true, true));
            let Step::Read { pipeline, .. } = p.start() else {
                panic!("the subtree is read first");
            };
            match pipeline.on_read(Ok(Rows::Related(vec![row(2, 1, "Reconciling")]))) {
                Step::Gate { pipeline, .. } => pipeline,
                other => panic!("an unsettled subtree asks the gate, got {}", name(&other)),
            }
        };
        // Still progressing: finish without advancing synced_gen (the cascade re-pends it).
        let c = completed(start().on_gate(Ok(true)));
        assert!(c.ok && !c.advance && c.composite);
        // Settled after all (e.g. only a stuck dependent's rows): the rows read are used.
        assert_eq!(sent(start().on_gate(Ok(false))).stage, pb::Stage::Rollup);
        let c = completed(start().on_gate(Err(sqlx::Error::PoolTimedOut)));
        assert!(!c.ok && !c.terminal);
        assert!(
            c.error_message
                .is_some_and(|m| m.starts_with("rollup gate check failed"))
        );
    }

    #[test]
    fn a_rollup_right_after_compose_asks_the_gate_before_reading() {
        // Composed at claim time 1 < generation 2: this claim composes, so at the rollup
        // the children are new and the gate is asked first.
        let p = pipeline(task("specChange", 2, 1), info(false, false, true));
        let Step::Gate { pipeline, .. } = p.start() else {
            panic!("the gate comes first right after a compose");
        };
        let Step::Read {
            of: ReadOf::Subtree,
            pipeline,
            ..
        } = pipeline.on_gate(Ok(false))
        else {
            panic!("a rollup past the gate reads the subtree");
        };
        assert_eq!(
            sent(pipeline.on_read(Ok(Rows::Related(Vec::new())))).stage,
            pb::Stage::Rollup
        );
        // A failed subtree read fails the claim transiently.
        let p = pipeline_after_gate();
        let c = completed(p.on_read(Err(sqlx::Error::PoolTimedOut)));
        assert!(!c.ok && !c.terminal);
    }

    fn pipeline_after_gate() -> Box<Pipeline> {
        let p = pipeline(task("specChange", 2, 1), info(false, false, true));
        let Step::Gate { pipeline, .. } = p.start() else {
            panic!("gate first");
        };
        match pipeline.on_gate(Ok(false)) {
            Step::Read { pipeline, .. } => pipeline,
            other => panic!("expected Read, got {}", name(&other)),
        }
    }

    #[test]
    fn an_answer_the_pipeline_did_not_ask_for_fails_it_transiently() {
        let s = sent(pipeline(task("specChange", 2, 2), info(false, true, true)).start());
        let c = completed(s.pipeline.on_gate(Ok(false)));
        assert!(!c.ok && !c.terminal);
    }
}
