//! The reconcile pipeline for composites: one claim runs the kind's stages in order —
//! compose (when this generation was not composed yet), work, then rollup once every
//! descendant has settled — each stage sent as its own StageTask under the same lease.
//! A compose result is applied in one fenced transaction before the next stage; a composite
//! whose children are still progressing finishes without advancing synced_gen and is
//! re-pended by the cascade when they settle. Plain leaves (work only) skip all of this.

use std::{collections::VecDeque, sync::Arc, time::Duration};

use serde_json::{Value, json};

use converge_proto::pb;

use crate::{
    Broker,
    caches::KindInfo,
    complete::{Job, ack},
    compose, convert,
    db::{
        self,
        compose::{ComposeApplied, RelatedRow},
        queue::{ClaimedTask, Completion, LeaseKey},
    },
    ids::KindPair,
    registry::{Inflight, Outgoing, StreamId},
};

/// The state of one claim's pipeline between stages.
pub(crate) struct Pipeline {
    /// The claimed row (resource snapshot at claim time).
    pub task: ClaimedTask,
    /// Its (kind, version).
    pub pair: KindPair,
    /// Its reactions.
    pub info: Arc<KindInfo>,
    /// Stages still to run after the current one.
    pub stages: VecDeque<pb::Stage>,
    /// Index of the current stage (reported as failed_stage context).
    pub index: usize,
    /// Status so far (last writer wins).
    pub status: Option<Value>,
    /// Conditions so far (same type: later wins).
    pub conditions: Vec<Value>,
}

/// The stages a claimed reconcile runs, in order.
pub(crate) fn plan(t: &ClaimedTask, info: &KindInfo) -> VecDeque<pb::Stage> {
    let mut stages = VecDeque::new();
    if t.trigger == "childrenSettled" {
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

fn reaction(info: &KindInfo, stage: pb::Stage) -> &str {
    match stage {
        pb::Stage::Compose => info.compose_reaction.as_deref(),
        pb::Stage::Rollup => info.rollup_reaction.as_deref(),
        _ => info.work_reaction.as_deref(),
    }
    .unwrap_or_default()
}

/// Whether every live descendant read has settled (synced, or failed at its generation): what
/// the gate's first probe (`has_unsettled_descendants`) would find, from the rows already in
/// hand. A read cut at [`db::compose::MAX_RELATED`] proves nothing.
fn all_settled(desc: &[RelatedRow]) -> bool {
    i64::try_from(desc.len()).is_ok_and(|n| n < db::compose::MAX_RELATED)
        && desc
            .iter()
            .all(|d| d.synced_gen >= d.generation || d.phase == "Failed")
}

/// The condition that names failed descendants (the composite shows Degraded, not stuck).
fn children_not_ready(desc: &[RelatedRow]) -> Option<Value> {
    let failed: Vec<&RelatedRow> = desc.iter().filter(|d| d.phase == "Failed").collect();
    if failed.is_empty() {
        return None;
    }
    let named: Vec<String> = failed
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
    let more = if failed.len() > 3 {
        format!(" (and {} more)", failed.len() - 3)
    } else {
        String::new()
    };
    Some(json!({
        "type": "Ready", "status": "False", "reason": "ChildrenNotReady",
        "message": format!("{}{more}", named.join("; ")),
    }))
}

impl Broker {
    // A pipeline's result is a composite's (see `Completion::composite`).
    fn finish(&self, key: LeaseKey, p: Pipeline, reply: Option<StreamId>, advance: bool) {
        self.submit(Job::Known {
            completion: Completion {
                composite: true,
                ..convert::success(key, p.status, p.conditions, advance)
            },
            reply,
        });
    }

    fn fail(&self, key: LeaseKey, message: String, terminal: bool, reply: Option<StreamId>) {
        self.submit(Job::Known {
            completion: Completion {
                composite: true,
                ..convert::failure(key, message, terminal)
            },
            reply,
        });
    }

    /// Runs the next stage of `p` (or finishes it). `reply` is the stream whose stage result
    /// led here; it is acked once that result has been used.
    pub(crate) async fn pipeline_advance(
        &self,
        key: LeaseKey,
        mut p: Pipeline,
        reply: Option<StreamId>,
    ) {
        let pool = &self.inner.pool;
        let Some(stage) = p.stages.pop_front() else {
            self.finish(key, p, reply, true);
            return;
        };
        let (id, root) = (p.task.resource_id, p.task.root_id);
        let related = match stage {
            pb::Stage::Rollup => {
                // Right after this claim composed, the children are new and unsettled: one
                // gate probe says so without reading the subtree. Otherwise the rollup is
                // almost always due, so the subtree is read first and the gate asked only
                // when a row in it is still progressing (the gate's answer then also
                // covers dependents of stuck rows, which the rows alone cannot show).
                let mut desc = None;
                if p.task.composed_gen >= p.task.generation {
                    desc = Some(db::compose::related(pool, id, root, true).await);
                }
                if !matches!(&desc, Some(Ok(d)) if all_settled(d)) {
                    match db::compose::rollup_pending(pool, id, root).await {
                        Ok(true) => {
                            // Children still progressing: record status, stay behind; the
                            // cascade re-pends this composite when they settle.
                            self.finish(key, p, reply, false);
                            return;
                        }
                        Ok(false) => {}
                        Err(e) => {
                            return self.fail(
                                key,
                                format!("rollup gate check failed: {e}"),
                                false,
                                reply,
                            );
                        }
                    }
                }
                let desc = match desc {
                    Some(read) => read,
                    None => db::compose::related(pool, id, root, true).await,
                };
                let desc = match desc {
                    Ok(d) => d,
                    Err(e) => {
                        let m = format!("reading descendants failed: {e}");
                        return self.fail(key, m, false, reply);
                    }
                };
                if let Some(c) = children_not_ready(&desc) {
                    convert::merge_conditions(&mut p.conditions, vec![c]);
                }
                desc
            }
            pb::Stage::Compose => match db::compose::related(pool, id, root, false).await {
                Ok(d) => d,
                Err(e) => {
                    return self.fail(key, format!("reading children failed: {e}"), false, reply);
                }
            },
            _ => Vec::new(),
        };
        p.index += 1;
        let secs = u64::try_from(p.task.task_deadline_secs).unwrap_or(0);
        let request = convert::stage_request(
            &p.task,
            &p.pair,
            stage,
            p.status.as_ref(),
            related.into_iter().map(convert::related_resource).collect(),
        );
        let msg = convert::stage_task(
            &p.task,
            &p.pair,
            stage,
            reaction(&p.info, stage),
            p.info.manifest_version,
            i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX),
            request,
        );
        let pair = p.pair.clone();
        let out = Outgoing {
            key: key.clone(),
            pair,
            stage: stage as i32,
            msg,
            pipeline: Some(Box::new(p)),
        };
        // Ack the previous stage's result before sending the next stage: both share the
        // lease, and a worker still holding an unacked result for it would resend it.
        if let Some(s) = reply {
            ack(self, s, key.lease_token, key.claim_epoch, true);
        }
        let (unplaced, placed) = self.inner.registry.assign(vec![out]);
        if !unplaced.is_empty() {
            // No ready worker right now: back to the queue (the compose is kept; the next
            // claim skips it).
            if let Err(e) = db::queue::lease_release(pool, &unplaced).await {
                tracing::warn!(error = %e, "could not release a pipeline lease; the reaper will");
            }
        } else if secs > 0 && placed.contains(&key.lease_token) {
            self.arm_deadline(key.lease_token, Duration::from_secs(secs));
        }
    }

    /// A stage result of a pipeline task arrived on stream `sid`.
    pub(crate) async fn pipeline_complete(
        &self,
        f: Inflight,
        msg: pb::StageComplete,
        sid: StreamId,
    ) {
        let Some(p) = f.pipeline else { return };
        let mut p = *p;
        let key = f.key;
        if !msg.error_message.is_empty() {
            let m = format!(
                "stage {} failed: {}",
                stage_name(f.stage),
                msg.error_message
            );
            return self.fail(key, m, msg.terminal, Some(sid));
        }
        if msg.stage != f.stage {
            let m = format!(
                "worker answered stage {} for a stage {} task",
                msg.stage, f.stage
            );
            return self.fail(key, m, true, Some(sid));
        }
        let outcome = if f.stage == pb::Stage::Compose as i32 {
            let c = msg.compose.unwrap_or_default();
            let payload = match compose::validate(&c) {
                Ok(x) => x,
                Err(e) => {
                    return self.fail(key, format!("compose result refused: {e}"), true, Some(sid));
                }
            };
            let emits = (p.info.compose_edges, p.info.compose_configs);
            match db::compose::compose_apply(
                &self.inner.pool,
                &key,
                p.task.generation,
                &payload,
                emits.0,
                emits.1,
            )
            .await
            {
                Ok(ComposeApplied::Applied) => self.wake(),
                Ok(ComposeApplied::Stale) => {
                    return ack(self, sid, key.lease_token, key.claim_epoch, false);
                }
                Ok(ComposeApplied::Refused(m)) => {
                    return self.fail(key, format!("compose result refused: {m}"), true, Some(sid));
                }
                Err(e) => {
                    return self.fail(
                        key,
                        format!("applying the compose result failed: {e}"),
                        false,
                        Some(sid),
                    );
                }
            }
            convert::stage_outcome(&c.status, &c.conditions)
        } else {
            convert::stage_outcome(&msg.status, &msg.conditions)
        };
        match outcome {
            Ok(o) => {
                if o.status.is_some() {
                    p.status = o.status;
                }
                convert::merge_conditions(&mut p.conditions, o.conditions);
                self.pipeline_advance(key, p, Some(sid)).await;
            }
            Err(e) => self.fail(key, format!("invalid result: {e}"), true, Some(sid)),
        }
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
            task_type: "reconcile".into(),
            generation,
            trigger: trigger.into(),
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
            phase: "Reconciling".into(),
            composed_gen,
        }
    }

    fn info(compose: bool, work: bool, rollup: bool) -> KindInfo {
        KindInfo {
            work_reaction: work.then(|| "work".into()),
            compose_reaction: compose.then(|| "compose".into()),
            rollup_reaction: rollup.then(|| "rollup".into()),
            compose_edges: true,
            compose_configs: false,
            delete_reaction: None,
            verbs: Default::default(),
            reactor_reaction: None,
            manifest_version: 1,
        }
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
            phase: phase.into(),
            failure_message: None,
        }
    }

    #[test]
    fn a_subtree_is_settled_when_every_row_is_synced_or_failed() {
        let synced = row(2, 2, "Ready");
        let degraded = row(2, 2, "Degraded");
        let failed = row(2, 1, "Failed");
        let progressing = row(2, 1, "Reconciling");
        assert!(all_settled(&[]));
        assert!(all_settled(&[synced.clone(), degraded, failed]));
        assert!(!all_settled(&[synced.clone(), progressing]));
        // A read cut at the cap may have left a progressing row out.
        let cap = usize::try_from(db::compose::MAX_RELATED).unwrap();
        assert!(!all_settled(&vec![synced; cap]));
    }
}
