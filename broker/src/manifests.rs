//! The manifest cache: what routing needs from each kind manifest, by (kind, version).
//!
//! The lowest part of the broker: it reads `kind_manifest` and knows nothing of streams,
//! leases or loops. The LISTEN loop in `caches` calls [`Manifests::reload`] when a manifest
//! changes; everyone else only reads. It also holds each kind's compiled `status_schema` and
//! its operations' `output_schema`s, so a result is checked before it is stored
//! ([`KindInfo::enforce`]).

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, RwLock},
};

use converge_engine::{
    db::{self, queue::Completion},
    ids::KindPair,
};
use converge_proto::{
    manifest::{Descendants, Emit, KindManifest},
    pb,
};
use sqlx::PgPool;

use crate::{
    convert,
    error::{Error, Result},
};

/// What routing needs from one kind manifest.
#[derive(Debug, Clone)]
pub(crate) struct KindInfo {
    /// The reaction run for a spec change without children (the worker), if declared.
    pub work_reaction: Option<String>,
    /// The composer reaction, if declared.
    pub compose_reaction: Option<String>,
    /// The rollup reaction, if declared.
    pub rollup_reaction: Option<String>,
    /// Whether the rollup request carries every descendant (`"descendants": "full"`), not
    /// only the summary.
    pub rollup_full: bool,
    /// Whether the composer's edges are applied (its emits mask has `edges`).
    pub compose_edges: bool,
    /// Whether the composer's configs are applied (its emits mask has `configs`).
    pub compose_configs: bool,
    /// The teardown reaction (deleteRequested), if declared.
    pub delete_reaction: Option<String>,
    /// Verb → the operation reaction that handles it.
    pub verbs: HashMap<String, String>,
    /// A reactor kind's reaction (its tasks come from the lifecycle outbox, not the queue).
    pub reactor_reaction: Option<String>,
    /// Content hash of the manifest.
    pub manifest_version: i64,
    /// The kind's compiled `status_schema`, if it declares one.
    pub status_schema: Option<Schema>,
    /// Verb → the compiled `output_schema` of its operation reaction, for those that declare
    /// one.
    pub outputs: HashMap<String, Schema>,
}

/// A compiled JSON Schema a worker's result must satisfy.
#[derive(Clone)]
pub(crate) struct Schema(Arc<jsonschema::Validator>);

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Schema")
    }
}

impl Schema {
    /// Compiles `schema`; one the control plane let through but this build cannot compile
    /// is logged and not enforced (the apply already checked it with the same crate).
    pub(crate) fn compile(
        pair: &KindPair,
        field: &str,
        schema: Option<&serde_json::Value>,
    ) -> Option<Schema> {
        let schema = schema.filter(|s| !s.is_null())?;
        match jsonschema::validator_for(schema) {
            Ok(v) => Some(Schema(Arc::new(v))),
            Err(e) => {
                tracing::error!(%pair, field, error = %e, "schema does not compile; not enforced");
                None
            }
        }
    }

    /// The first way `doc` breaks the schema (its pointer, the rule and what was found), if
    /// it does. A valid document takes the validator's boolean fast path, which allocates
    /// nothing; only a violation pays for being described.
    pub fn violation(&self, doc: &serde_json::Value) -> Option<String> {
        if self.0.is_valid(doc) {
            return None;
        }
        let e = self.0.validate(doc).err()?;
        let at = e.instance_path().as_str();
        Some(format!(
            "at {}: {e} (rule {:?})",
            if at.is_empty() { "/" } else { at },
            e.kind().keyword()
        ))
    }
}

impl KindInfo {
    /// Whether a reconcile is a single WORK stage (no composer, no rollup): the hot path
    /// that needs no pipeline state.
    pub fn is_plain_leaf(&self) -> bool {
        self.work_reaction.is_some()
            && self.compose_reaction.is_none()
            && self.rollup_reaction.is_none()
    }

    /// `c` as it may be stored: a successful reconcile whose status breaks the kind's
    /// `status_schema`, or a successful operation (of `verb`) whose output breaks its
    /// reaction's `output_schema`, becomes a terminal failure naming the pointer and the
    /// rule. A failure stores no status or output, so the resource keeps the status it had.
    pub fn enforce(&self, pair: &KindPair, verb: Option<&str>, c: Completion) -> Completion {
        let (schema, doc) = match checked(&c) {
            Some(Checked::Status(doc)) => (self.status_schema.as_ref(), doc),
            Some(Checked::Output(doc)) => (verb.and_then(|v| self.outputs.get(v)), doc),
            None => return c,
        };
        let Some(why) = schema.and_then(|s| s.violation(doc)) else {
            return c;
        };
        let what = match (&c.key.task_type[..], verb) {
            ("operate", Some(v)) => format!("output breaks the output_schema of operation {v:?}"),
            _ => "status breaks the status_schema".to_owned(),
        };
        Completion {
            composite: c.composite,
            ..convert::failure(
                c.key,
                format!("the {what} of {} v{} {why}", pair.kind, pair.version),
                true,
            )
        }
    }
}

/// The document of a result [`KindInfo::enforce`] checks.
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
    match c.key.task_type.as_str() {
        "reconcile" => c.status.as_ref().map(Checked::Status),
        "operate" => c.output.as_ref().map(Checked::Output),
        _ => None,
    }
}

/// The broker's view of every stored kind manifest.
pub(crate) struct Manifests {
    pool: PgPool,
    by_pair: RwLock<HashMap<KindPair, Arc<KindInfo>>>,
}

impl Manifests {
    /// An empty cache over `pool`; nothing is read until [`Manifests::reload`].
    pub fn new(pool: PgPool) -> Self {
        Manifests {
            pool,
            by_pair: RwLock::default(),
        }
    }

    /// Re-reads every manifest. A manifest that does not parse is logged and left out (its
    /// kind gets no tasks) rather than failing the whole reload.
    pub async fn reload(&self) -> Result<()> {
        let rows = db::kinds::manifest_list(&self.pool)
            .await
            .map_err(Error::db("load kind manifests"))?;
        let mut map = HashMap::with_capacity(rows.len());
        for r in rows {
            match serde_json::from_value::<KindManifest>(r.manifest) {
                Ok(m) => {
                    let status_schema =
                        Schema::compile(&r.pair, "status_schema", m.status_schema.as_ref());
                    let outputs = m
                        .reactions
                        .iter()
                        .filter_map(|x| {
                            let schema = x.output_schema.as_ref();
                            Some((
                                x.verb.clone()?,
                                Schema::compile(&r.pair, "output_schema", schema)?,
                            ))
                        })
                        .collect();
                    map.insert(
                        r.pair,
                        Arc::new(KindInfo {
                            work_reaction: m.worker_reaction().map(|x| x.name.clone()),
                            compose_reaction: m.composer_reaction().map(|x| x.name.clone()),
                            rollup_reaction: m.rollup_reaction().map(|x| x.name.clone()),
                            rollup_full: m
                                .rollup_reaction()
                                .is_some_and(|x| x.descendants == Some(Descendants::Full)),
                            compose_edges: m
                                .composer_reaction()
                                .is_some_and(|x| x.emits(Emit::Edges)),
                            compose_configs: m
                                .composer_reaction()
                                .is_some_and(|x| x.emits(Emit::Configs)),
                            delete_reaction: m.delete_reaction().map(|x| x.name.clone()),
                            reactor_reaction: m
                                .is_reactor()
                                .then(|| m.reactions.first().map(|x| x.name.clone()))
                                .flatten(),
                            verbs: m
                                .reactions
                                .iter()
                                .filter_map(|x| Some((x.verb.clone()?, x.name.clone())))
                                .collect(),
                            manifest_version: r.manifest_version,
                            status_schema,
                            outputs,
                        }),
                    );
                }
                Err(e) => {
                    tracing::error!(pair = %r.pair, error = %e, "stored manifest does not parse")
                }
            }
        }
        *self.by_pair.write().expect("manifest cache poisoned") = map;
        Ok(())
    }

    /// The routing view of `pair`'s manifest, if one is stored.
    pub fn get(&self, pair: &KindPair) -> Option<Arc<KindInfo>> {
        self.by_pair
            .read()
            .expect("manifest cache poisoned")
            .get(pair)
            .cloned()
    }

    /// `c` (a result for a task of `pair`; `verb` for an operation) as it may be stored;
    /// see [`KindInfo::enforce`].
    pub fn enforce(&self, pair: &KindPair, verb: Option<&str>, c: Completion) -> Completion {
        // Most results carry nothing to check (failures, teardowns): they skip the cache
        // lookup.
        if checked(&c).is_none() {
            return c;
        }
        match self.get(pair) {
            Some(info) => info.enforce(pair, verb, c),
            None => c,
        }
    }

    /// Whether a reconcile of `pair` is a single WORK stage (no composer, no rollup).
    pub fn is_plain_leaf(&self, pair: &KindPair) -> bool {
        self.get(pair).is_some_and(|i| i.is_plain_leaf())
    }

    /// The one stage whose result finishes a task of `task_type` for `pair` on its own (a
    /// plain leaf's WORK, a teardown's DELETE, an operation's OPERATE), or `None` when a
    /// result needs the pipeline that sent it: a composite's stage (its compose applied,
    /// its rollup run under the same claim) or a reactor delivery. Only such a result can
    /// be taken for a lease this broker did not hand out (a worker resuming it).
    pub fn final_stage(&self, task_type: &str, pair: &KindPair) -> Option<pb::Stage> {
        match task_type {
            "delete" => Some(pb::Stage::Delete),
            "operate" => Some(pb::Stage::Operate),
            db::queue::REACT => None,
            _ => self.is_plain_leaf(pair).then_some(pb::Stage::Work),
        }
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
            task_type: task_type.into(),
            lease_token: LeaseToken(uuid::Uuid::nil()),
            claim_epoch: ClaimEpoch(1),
        }
    }

    /// A leaf whose status needs `message: string` and whose `ping` verb answers `pong: int`.
    fn info() -> KindInfo {
        let pair = KindPair::new("leaf", 1);
        let obj = |field: &str, ty: &str| {
            json!({"type": "object", "required": [field],
                   "properties": {field: {"type": ty}}})
        };
        KindInfo {
            work_reaction: Some("work".into()),
            compose_reaction: None,
            rollup_reaction: None,
            rollup_full: false,
            compose_edges: false,
            compose_configs: false,
            delete_reaction: None,
            verbs: HashMap::from([("ping".into(), "ping".into())]),
            reactor_reaction: None,
            manifest_version: 1,
            status_schema: Schema::compile(&pair, "status_schema", Some(&obj("message", "string"))),
            outputs: HashMap::from([(
                "ping".into(),
                Schema::compile(&pair, "output_schema", Some(&obj("pong", "integer"))).unwrap(),
            )]),
        }
    }

    fn output(task_type: &str, out: serde_json::Value) -> Completion {
        Completion {
            output: Some(out),
            ..convert::success(key(task_type), None, Vec::new(), true)
        }
    }

    #[test]
    fn a_status_or_an_output_that_breaks_its_schema_is_a_terminal_failure() {
        let (i, pair) = (info(), KindPair::new("leaf", 1));
        let bad = convert::success(key("reconcile"), Some(json!({"message": 1})), vec![], true);
        let c = i.enforce(&pair, None, bad);
        assert!(!c.ok && c.terminal);
        let why = c.error_message.unwrap();
        assert!(
            why.contains("status_schema of leaf v1 at /message"),
            "{why}"
        );

        let c = i.enforce(&pair, Some("ping"), output("operate", json!({"pong": "x"})));
        assert!(!c.ok && c.terminal, "{c:?}");
        let why = c.error_message.unwrap();
        assert!(
            why.contains("output_schema of operation \"ping\" of leaf v1 at /pong")
                && why.contains("\"type\""),
            "{why}"
        );
    }

    #[test]
    fn what_conforms_or_is_not_checked_passes_unchanged() {
        let (i, pair) = (info(), KindPair::new("leaf", 1));
        let good = output("operate", json!({"pong": 1}));
        assert!(i.enforce(&pair, Some("ping"), good).ok);
        // A verb without an output_schema, an unknown verb (adopted with none running) and a
        // failure pass as they came.
        assert!(
            i.enforce(&pair, Some("other"), output("operate", json!(1)))
                .ok
        );
        assert!(i.enforce(&pair, None, output("operate", json!(1))).ok);
        let failed = convert::failure(key("reconcile"), "boom", false);
        let c = i.enforce(&pair, None, failed);
        assert_eq!(c.error_message.as_deref(), Some("boom"));
        // A teardown's status is not the resource's status.
        let teardown = convert::success(key("delete"), Some(json!({"message": 1})), vec![], true);
        assert!(i.enforce(&pair, None, teardown).ok);
    }
}
