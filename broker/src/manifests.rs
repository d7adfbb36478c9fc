//! The broker's door onto the process's kind catalog ([`KindCatalog`]): what routing reads of
//! a kind, and the kind's answers turned into the broker's failures.
//!
//! The lowest part of the broker: it holds no copy of any manifest (the catalog does, and
//! the catalog's one follower keeps it fresh), knows nothing of streams, leases or loops, and
//! states no rule: a result's status and output are checked by [`Kind::status_violation`]
//! and [`Kind::output_violation`], and a violation becomes a terminal failure naming the
//! pointer and the rule ([`Manifests::enforce`]); a compose result's kinds are looked up
//! together ([`Manifests::resolve`]) for `compose::validate`, which asks the kinds' rules.

use std::{collections::HashSet, sync::Arc};

use converge_engine::{db::queue::Completion, ids::KindPair, words::TaskType};
use converge_kinds::{Kind, KindCatalog, Snapshot};
use converge_proto::{manifest, pb};
use sqlx::PgPool;

use crate::{
    convert,
    error::{Error, Result},
};

/// The broker's view of the kinds: the process's catalog, and the pool its misses are read
/// through.
pub(crate) struct Manifests {
    pool: PgPool,
    catalog: KindCatalog,
}

impl Manifests {
    /// The broker's door onto `catalog` (read through `pool` on a miss).
    pub fn new(pool: PgPool, catalog: KindCatalog) -> Self {
        Manifests { pool, catalog }
    }

    /// `pair`'s kind, if the catalog holds it.
    pub fn get(&self, pair: &KindPair) -> Option<Arc<Kind>> {
        self.catalog.get_pair(pair)
    }

    /// `pair`'s kind, read from the database when the catalog does not hold it: a kind
    /// registered a moment ago on another pod may not have reached this one's catalog yet,
    /// and a refusal must not rest on that.
    pub async fn get_fresh(&self, pair: &KindPair) -> Result<Option<Arc<Kind>>> {
        if let Some(k) = self.get(pair) {
            return Ok(Some(k));
        }
        self.catalog
            .lookup(&self.pool, [(pair.kind.clone(), pair.version)], true)
            .await
            .map_err(Error::db("read kind manifests"))?;
        Ok(self.get(pair))
    }

    /// The kinds compose result `r` names (its children's, then its configs'), for
    /// `compose::validate`: the catalog's snapshot, after one read of every named kind it
    /// does not hold (it may have been registered a moment ago, its notice not heard yet).
    /// A result naming only known kinds costs no read; one naming any number of unknown
    /// kinds, one.
    pub async fn resolve(&self, r: &pb::ComposeResult) -> Result<Arc<Snapshot>> {
        let named = r
            .desired
            .iter()
            .map(|c| (c.kind.as_str(), c.kind_version))
            .chain(r.configs.iter().map(|c| (c.kind.as_str(), c.kind_version)))
            // What validate refuses on its own needs no lookup.
            .filter(|(k, v)| *v >= 1 && manifest::is_valid_kind_name(k));
        let missing: Vec<(String, i32)> = {
            let snapshot = self.catalog.load();
            let mut seen: HashSet<(&str, i32)> = HashSet::new();
            let mut last = None;
            named
                // Children come grouped by kind: most repeat the one before.
                .filter(|p| last.replace(*p) != Some(*p))
                .filter(|(k, v)| snapshot.get(k, *v).is_none() && seen.insert((k, *v)))
                .map(|(k, v)| (k.to_owned(), v))
                .collect()
        };
        if !missing.is_empty() {
            self.catalog
                .lookup(&self.pool, missing, true)
                .await
                .map_err(Error::db("read kind manifests"))?;
        }
        Ok(self.catalog.snapshot())
    }

    /// `c` (a result for a task of `pair`; `verb` for an operation) as it may be stored;
    /// see [`enforce`]. A kind the catalog misses is read from the database first (its
    /// notice may not have been handled yet). A result that still cannot be checked (the
    /// kind is gone, or the read failed) is never stored as a success: it becomes a
    /// transient failure, so the task runs again and is checked then.
    pub async fn enforce(&self, pair: &KindPair, verb: Option<&str>, c: Completion) -> Completion {
        // Most results carry nothing to check (failures, teardowns): they skip the lookup.
        if checked(&c).is_none() {
            return c;
        }
        let why = match self.get_fresh(pair).await {
            Ok(Some(kind)) => return enforce(&kind, verb, c),
            Ok(None) => "is not registered",
            Err(e) => {
                // The database's words stay in the log; the resource's message says only what
                // its reader can act on.
                tracing::warn!(%pair, error = %e, "could not read a kind to check a result");
                "could not be read"
            }
        };
        tracing::warn!(%pair, resource = %c.key.resource_id.0, "a result was not stored: its kind {why}");
        Completion {
            composite: c.composite,
            ..convert::failure(
                c.key,
                format!(
                    "the result was not checked: kind {} v{} {why}",
                    pair.kind, pair.version
                ),
                false,
            )
        }
    }

    /// Whether a reconcile of `pair` is a single WORK stage (no composer, no rollup).
    pub fn is_plain_leaf(&self, pair: &KindPair) -> bool {
        self.get(pair).is_some_and(|k| k.is_plain_leaf())
    }

    /// The one stage whose result finishes a task of `task_type` for `pair` on its own (a
    /// plain leaf's WORK, a teardown's DELETE, an operation's OPERATE), or `None` when a
    /// result needs the pipeline that sent it: a composite's stage (its compose applied,
    /// its rollup run under the same claim) or a reactor delivery. Only such a result can
    /// be taken for a lease this broker did not hand out (a worker resuming it).
    pub fn final_stage(&self, task_type: TaskType, pair: &KindPair) -> Option<pb::Stage> {
        match task_type {
            TaskType::Delete => Some(pb::Stage::Delete),
            TaskType::Operate => Some(pb::Stage::Operate),
            TaskType::React => None,
            TaskType::Reconcile => self.is_plain_leaf(pair).then_some(pb::Stage::Work),
        }
    }
}

/// `c` as it may be stored: a successful reconcile whose status breaks `kind`'s
/// `status_schema`, or a successful operation (of `verb`) whose output breaks its reaction's
/// `output_schema`, becomes a terminal failure naming the pointer and the rule. A failure
/// stores no status or output, so the resource keeps the status it had.
pub(crate) fn enforce(kind: &Kind, verb: Option<&str>, c: Completion) -> Completion {
    let why = match checked(&c) {
        Some(Checked::Status(doc)) => kind.status_violation(doc),
        Some(Checked::Output(doc)) => verb.and_then(|v| kind.output_violation(v, doc)),
        None => None,
    };
    let Some(why) = why else {
        return c;
    };
    let what = match (c.key.task_type, verb) {
        (TaskType::Operate, Some(v)) => {
            format!("output breaks the output_schema of operation {v:?}")
        }
        _ => "status breaks the status_schema".to_owned(),
    };
    let pair = &kind.pair;
    Completion {
        composite: c.composite,
        ..convert::failure(
            c.key,
            format!("the {what} of {} v{} {why}", pair.kind, pair.version),
            true,
        )
    }
}

/// The document of a result [`enforce`] checks.
enum Checked<'a> {
    /// A successful reconcile's status.
    Status(&'a serde_json::Value),
    /// A successful operation's output.
    Output(&'a serde_json::Value),
}

fn checked(c: &Completion) -> Option<Checked<'_>> {
    if !c.ok {
        return None;
    }
    match c.key.task_type {
        TaskType::Reconcile => c.status.as_ref().map(Checked::Status),
        TaskType::Operate => c.output.as_ref().map(Checked::Output),
        TaskType::Delete | TaskType::React => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use converge_engine::{
        db::queue::LeaseKey,
        ids::{ClaimEpoch, LeaseToken, ResourceId, ShardId},
    };
    use serde_json::json;

    fn key(task_type: &str) -> LeaseKey {
        LeaseKey {
            resource_id: ResourceId(uuid::Uuid::nil()),
            shard_id: ShardId(0),
            task_type: task_type.parse().unwrap(),
            lease_token: LeaseToken(uuid::Uuid::nil()),
            claim_epoch: ClaimEpoch(1),
        }
    }

    /// A leaf whose status needs `message: string` and whose `ping` verb answers `pong: int`.
    fn leaf() -> Kind {
        let obj = |field: &str, ty: &str| {
            json!({"type": "object", "required": [field],
                   "properties": {field: {"type": ty}}})
        };
        let m = json!({"kind": "leaf", "kind_version": 1,
            "status_schema": obj("message", "string"),
            "reactions": [
                {"name": "work", "trigger": "specChange", "emits": ["status"]},
                {"name": "ping", "trigger": "operation", "verb": "ping",
                 "emits": ["operationOutput"], "output_schema": obj("pong", "integer")}]});
        Kind::compile(serde_json::from_value(m).unwrap(), 1).unwrap()
    }

    fn output(task_type: &str, out: serde_json::Value) -> Completion {
        Completion {
            output: Some(out),
            ..convert::success(key(task_type), None, Vec::new(), true)
        }
    }

    #[test]
    fn a_status_or_an_output_that_breaks_its_schema_is_a_terminal_failure() {
        let k = leaf();
        let bad = convert::success(key("reconcile"), Some(json!({"message": 1})), vec![], true);
        let c = enforce(&k, None, bad);
        assert!(!c.ok && c.terminal);
        let why = c.error_message.unwrap();
        assert!(
            why.contains("status_schema of leaf v1 at /message"),
            "{why}"
        );

        let c = enforce(&k, Some("ping"), output("operate", json!({"pong": "x"})));
        assert!(!c.ok && c.terminal, "{c:?}");
        let why = c.error_message.unwrap();
        assert!(
            why.contains("output_schema of operation \"ping\" of leaf v1 at /pong")
                && why.contains("\"type\""),
            "{why}"
        );
    }

    /// A catalog loaded from `pool` and the broker's door onto it.
    async fn door(pool: &sqlx::PgPool) -> (KindCatalog, Manifests) {
        let catalog = KindCatalog::new();
        catalog.reload(pool).await.unwrap();
        (catalog.clone(), Manifests::new(pool.clone(), catalog))
    }

    /// Registers `kind` version 1 without telling the catalog (another pod's apply whose
    /// notice has not been handled yet).
    async fn register_behind_its_back(pool: &sqlx::PgPool, kind: &str) {
        let doc = json!({"kind": kind, "kind_version": 1, "reactions": [
            {"name": "work", "trigger": "specChange", "emits": ["status"]}],
            "spec_schema": {"type": "object"}});
        converge_engine::db::kinds::manifest_put(pool, kind, 1, &doc)
            .await
            .unwrap();
    }

    /// A kind registered after the catalog's last reload (its notice not handled yet) is read
    /// from the database with the others the result names, in one lookup.
    #[tokio::test]
    async fn resolve_reads_the_kinds_the_catalog_missed() {
        let db = converge_engine::testing::TestDb::new().await;
        let (catalog, m) = door(&db.pool).await;
        for k in ["a", "b"] {
            register_behind_its_back(&db.pool, k).await;
        }
        let child = |kind: &str| pb::ChildSpec {
            kind: kind.into(),
            name: format!("{kind}-1"),
            kind_version: 1,
            ..Default::default()
        };
        let result = |kinds: &[&str]| pb::ComposeResult {
            desired: kinds.iter().map(|k| child(k)).collect(),
            ..Default::default()
        };
        let found = m.resolve(&result(&["a", "ghost", "a", "b"])).await.unwrap();
        for k in ["a", "b"] {
            let kind = found.get(k, 1).expect("read from the database");
            assert!(kind.checks_spec(), "{k} compiled");
        }
        assert!(found.get("ghost", 1).is_none());
        assert!(found.get("a", 2).is_none());
        // The catalog holds them now: every door sees the same copy.
        assert!(catalog.get("a", 1).is_some());
    }

    /// A dry run for a kind registered a moment ago (its notice not handled yet) finds the
    /// kind instead of answering that it is not registered; a kind nobody registered is still
    /// none, and asked again it is read again (another pod may have registered it since).
    #[tokio::test]
    async fn get_fresh_reads_a_kind_the_catalog_missed() {
        let db = converge_engine::testing::TestDb::new().await;
        let (_, m) = door(&db.pool).await;
        let pair = KindPair::new("late".to_string(), 1);
        assert!(m.get_fresh(&pair).await.unwrap().is_none());
        register_behind_its_back(&db.pool, "late").await;
        assert!(m.get(&pair).is_none(), "the catalog has not heard of it");
        let kind = m
            .get_fresh(&pair)
            .await
            .unwrap()
            .expect("read from the database");
        assert_eq!(kind.pair, pair);
        assert!(m.get(&pair).is_some(), "and the catalog holds it now");
    }

    /// A result for a kind the catalog has not heard of yet is checked against the kind
    /// read from the database; one for a kind nobody registered is not stored as a success.
    #[tokio::test]
    async fn a_result_for_a_kind_the_catalog_missed_is_still_checked() {
        let db = converge_engine::testing::TestDb::new().await;
        let (_, m) = door(&db.pool).await;
        let doc = json!({"kind": "strict", "kind_version": 1, "reactions": [
            {"name": "work", "trigger": "specChange", "emits": ["status"]}],
            "status_schema": {"type": "object", "required": ["message"],
                              "properties": {"message": {"type": "string"}}}});
        converge_engine::db::kinds::manifest_put(&db.pool, "strict", 1, &doc)
            .await
            .unwrap();
        let strict = KindPair::new("strict".to_string(), 1);
        assert!(m.get(&strict).is_none(), "the catalog has not heard of it");
        let bad = convert::success(key("reconcile"), Some(json!({"message": 1})), vec![], true);
        let c = m.enforce(&strict, None, bad).await;
        assert!(!c.ok && c.terminal, "checked against the kind read: {c:?}");
        assert!(
            c.error_message
                .unwrap()
                .contains("status_schema of strict v1")
        );
        let good = convert::success(
            key("reconcile"),
            Some(json!({"message": "hi"})),
            vec![],
            true,
        );
        assert!(m.enforce(&strict, None, good).await.ok);

        let ghost = KindPair::new("ghost".to_string(), 1);
        let any = convert::success(key("reconcile"), Some(json!({"message": 1})), vec![], true);
        let c = m.enforce(&ghost, None, any).await;
        assert!(
            !c.ok && !c.terminal,
            "not stored as a success, and retried: {c:?}"
        );
        assert!(
            c.error_message
                .unwrap()
                .contains("kind ghost v1 is not registered"),
            "says why"
        );
        // Nothing to check (a failure): passed as it came, whatever its kind.
        let failed = convert::failure(key("reconcile"), "boom", false);
        let c = m.enforce(&ghost, None, failed).await;
        assert_eq!(c.error_message.as_deref(), Some("boom"));
    }

    #[test]
    fn what_conforms_or_is_not_checked_passes_unchanged() {
        let k = leaf();
        let good = output("operate", json!({"pong": 1}));
        assert!(enforce(&k, Some("ping"), good).ok);
        // A verb without an output_schema, an unknown verb (adopted with none running) and a
        // failure pass as they came.
        assert!(enforce(&k, Some("other"), output("operate", json!(1))).ok);
        assert!(enforce(&k, None, output("operate", json!(1))).ok);
        let failed = convert::failure(key("reconcile"), "boom", false);
        let c = enforce(&k, None, failed);
        assert_eq!(c.error_message.as_deref(), Some("boom"));
        // A teardown's status is not the resource's status.
        let teardown = convert::success(key("delete"), Some(json!({"message": 1})), vec![], true);
        assert!(enforce(&k, None, teardown).ok);
    }
}
