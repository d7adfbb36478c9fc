//! The manifest cache: what routing needs from each kind manifest, by (kind, version).
//!
//! The lowest part of the broker: it reads `kind_manifest` and knows nothing of streams,
//! leases or loops. The LISTEN loop in `caches` calls [`Manifests::reload`] when a manifest
//! changes; everyone else only reads. It also holds each kind's compiled `status_schema` and
//! its operations' `output_schema`s, so a result is checked before it is stored
//! ([`KindInfo::enforce`]), and its `spec_schema`, `config_schema` and exec flag, the rules a
//! composer's children and configs are checked by before a compose is applied (one method
//! each: [`KindInfo::spec_violation`], [`KindInfo::config_violation`],
//! [`KindInfo::exec_override_violations`], [`KindInfo::declares`]; `compose::validate` applies
//! them).

use std::{
    collections::{HashMap, HashSet},
    fmt,
    sync::{Arc, RwLock},
};

use converge_engine::{
    db::{self, queue::Completion},
    ids::KindPair,
};
use converge_proto::{
    manifest::{self, Descendants, Emit, KindManifest},
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
    /// The kind's compiled `spec_schema`, if it declares one: what a composed child's spec
    /// must satisfy, as an API write's must.
    pub spec_schema: Option<Schema>,
    /// The kind's compiled `config_schema`, if it declares one: what a composer's provider
    /// config for the kind must satisfy.
    pub config_schema: Option<Schema>,
    /// Whether the manifest declares the exec provider: no config a composer writes for the
    /// kind may say what runs.
    pub exec: bool,
    /// The (kind, version)s the manifest's `edges` name: besides the kinds of the children a
    /// result emits, the kinds this kind's composer may write provider configs for.
    pub declared: Vec<KindPair>,
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

    /// The first way `doc` breaks the schema (its pointer, the rule and what was found, a
    /// long value quoted by its head only), if it does. A valid document takes the
    /// validator's boolean fast path, which allocates nothing; only a violation pays for
    /// being described.
    pub fn violation(&self, doc: &serde_json::Value) -> Option<String> {
        self.describe(doc, true)
    }

    /// [`Schema::violation`] without the value found: for a provider config, whose values a
    /// `writeOnly` schema may mark as secrets a failure message must not show.
    pub fn violation_unquoted(&self, doc: &serde_json::Value) -> Option<String> {
        self.describe(doc, false)
    }

    fn describe(&self, doc: &serde_json::Value, quote: bool) -> Option<String> {
        if self.0.is_valid(doc) {
            return None;
        }
        let e = self.0.validate(doc).err()?;
        let at = e.instance_path().as_str();
        let what = if quote {
            e.masked_with(short_quote(e.instance())).to_string()
        } else {
            e.masked().to_string()
        };
        Some(format!(
            "at {}: {what} (rule {:?})",
            if at.is_empty() { "/" } else { at },
            e.kind().keyword()
        ))
    }
}

/// Most bytes of a value a violation quotes: a 5,000-character string that is too long is
/// shown by its head, not echoed whole into the failure message.
const QUOTE_BYTES: usize = 64;

/// `v` as JSON, cut to about [`QUOTE_BYTES`] with an ellipsis.
fn short_quote(v: &serde_json::Value) -> String {
    let text = v.to_string();
    if text.len() <= QUOTE_BYTES {
        return text;
    }
    format!("{}…", &text[..text.floor_char_boundary(QUOTE_BYTES)])
}

impl KindInfo {
    /// What routing and the result checks need from manifest `m` of `pair`, its schemas
    /// compiled once.
    pub fn from_manifest(pair: &KindPair, m: &KindManifest, manifest_version: i64) -> KindInfo {
        KindInfo {
            work_reaction: m.worker_reaction().map(|x| x.name.clone()),
            compose_reaction: m.composer_reaction().map(|x| x.name.clone()),
            rollup_reaction: m.rollup_reaction().map(|x| x.name.clone()),
            rollup_full: m
                .rollup_reaction()
                .is_some_and(|x| x.descendants == Some(Descendants::Full)),
            compose_edges: m.composer_reaction().is_some_and(|x| x.emits(Emit::Edges)),
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
            manifest_version,
            status_schema: Schema::compile(pair, "status_schema", m.status_schema.as_ref()),
            outputs: m
                .reactions
                .iter()
                .filter_map(|x| {
                    let schema = x.output_schema.as_ref();
                    Some((
                        x.verb.clone()?,
                        Schema::compile(pair, "output_schema", schema)?,
                    ))
                })
                .collect(),
            spec_schema: Schema::compile(pair, "spec_schema", m.spec_schema.as_ref()),
            config_schema: Schema::compile(pair, "config_schema", m.config_schema.as_ref()),
            exec: m.is_exec(),
            declared: m
                .edges
                .iter()
                .flat_map(|e| [&e.from, &e.to])
                .map(|end| KindPair::new(end.kind.clone(), end.kind_version))
                .collect(),
        }
    }

    /// Rule: a resource's spec satisfies the kind's `spec_schema`. The first violation
    /// (pointer, rule, the value's head), if any; `None` without a schema. Checks a composed
    /// child as emitted and a composed child's spec at each claim (values may have flowed
    /// into it since).
    pub fn spec_violation(&self, spec: &serde_json::Value) -> Option<String> {
        self.spec_schema.as_ref()?.violation(spec)
    }

    /// Rule: a provider config's spec satisfies the kind's `config_schema`. The first
    /// violation (pointer and rule; never the value, which may be a secret), if any.
    pub fn config_violation(&self, spec: &serde_json::Value) -> Option<String> {
        self.config_schema.as_ref()?.violation_unquoted(spec)
    }

    /// Rule (the API's for an override): the fields of an exec kind's config that say what
    /// runs ([`manifest::EXEC_OVERRIDE_FORBIDDEN`]) which `spec` sets; none for a kind
    /// without the exec provider.
    pub fn exec_override_violations(&self, spec: &serde_json::Value) -> Vec<&'static str> {
        if self.exec {
            manifest::exec_override_fields(spec)
        } else {
            Vec::new()
        }
    }

    /// Rule: whether this (composer) kind's manifest declares (kind, version) in its
    /// `edges`, so its composer may configure that kind without emitting a child of it.
    pub fn declares(&self, kind: &str, version: i32) -> bool {
        self.declared
            .iter()
            .any(|p| p.kind == kind && p.version == version)
    }

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

/// The kinds one compose result names, as the broker knows them
/// ([`Manifests::resolve`]): what its children's specs and its provider configs are checked
/// against. By kind, then version (a result names a few kinds, each of a version or two).
#[derive(Default)]
pub(crate) struct Kinds(HashMap<String, Vec<(i32, Arc<KindInfo>)>>);

impl Kinds {
    /// (kind, version) if it is registered: the map's copy of the kind's name, and its info.
    pub fn get(&self, kind: &str, version: i32) -> Option<(&str, &Arc<KindInfo>)> {
        let (k, versions) = self.0.get_key_value(kind)?;
        let (_, info) = versions.iter().find(|(v, _)| *v == version)?;
        Some((k.as_str(), info))
    }

    /// Adds (kind, version).
    pub fn insert(&mut self, kind: &str, version: i32, info: Arc<KindInfo>) {
        self.0
            .entry(kind.to_owned())
            .or_default()
            .push((version, info));
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
                    let info = KindInfo::from_manifest(&r.pair, &m, r.manifest_version);
                    map.insert(r.pair, Arc::new(info));
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

    /// The kinds compose result `r` names (its children's, then its configs'), for
    /// `compose::validate`. One the cache lacks may have been registered a moment ago (the
    /// reload follows the manifest's notice): it is read from the database by key. The first
    /// that is not registered at all ends the lookup, since the result is refused on it
    /// (naming the first child or config that has it), so a result naming any number of
    /// unknown kinds costs one lookup, and one naming only cached kinds none.
    pub async fn resolve(&self, r: &pb::ComposeResult) -> Result<Kinds> {
        let named = r
            .desired
            .iter()
            .map(|c| (c.kind.as_str(), c.kind_version))
            .chain(r.configs.iter().map(|c| (c.kind.as_str(), c.kind_version)))
            // What validate refuses on its own needs no lookup.
            .filter(|(k, v)| *v >= 1 && manifest::is_valid_kind_name(k));
        let mut kinds = Kinds::default();
        let mut missing: Vec<(&str, i32)> = Vec::new();
        let mut seen_missing: HashSet<(&str, i32)> = HashSet::new();
        {
            let cache = self.by_pair.read().expect("manifest cache poisoned");
            let mut last: Option<(&str, i32)> = None;
            for (kind, version) in named {
                // Children come grouped by kind: most repeat the one before.
                if last == Some((kind, version)) || kinds.get(kind, version).is_some() {
                    continue;
                }
                last = Some((kind, version));
                match cache.get(&KindPair::new(kind, version)) {
                    Some(info) => kinds.insert(kind, version, info.clone()),
                    None => {
                        if seen_missing.insert((kind, version)) {
                            missing.push((kind, version));
                        }
                    }
                }
            }
        }
        for (kind, version) in missing {
            let stored = db::kinds::manifest_get(&self.pool, kind, Some(version))
                .await
                .map_err(Error::db("read a kind manifest"))?;
            let Some(stored) = stored else { break };
            match serde_json::from_value::<KindManifest>(stored.manifest) {
                Ok(m) => {
                    let info = KindInfo::from_manifest(&stored.pair, &m, stored.manifest_version);
                    kinds.insert(kind, version, Arc::new(info));
                }
                Err(e) => {
                    tracing::error!(pair = %stored.pair, error = %e, "stored manifest does not parse");
                    break;
                }
            }
        }
        Ok(kinds)
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
            spec_schema: None,
            config_schema: None,
            exec: false,
            declared: Vec::new(),
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

    /// A kind registered after the cache's last reload (its notice not handled yet) is read
    /// from the database by key; the lookup ends at the first kind not registered at all.
    #[tokio::test]
    async fn resolve_reads_a_kind_the_cache_missed_and_stops_at_an_unregistered_one() {
        let db = converge_engine::testing::TestDb::new().await;
        let m = Manifests::new(db.pool.clone());
        m.reload().await.unwrap();
        for k in ["a", "b"] {
            let doc = json!({"kind": k, "kind_version": 1, "reactions": [
                {"name": "work", "trigger": "specChange", "emits": ["status"]}],
                "spec_schema": {"type": "object"}});
            db::kinds::manifest_put(&db.pool, k, 1, &doc).await.unwrap();
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
        let found = m.resolve(&result(&["a", "a", "b"])).await.unwrap();
        for k in ["a", "b"] {
            let (_, info) = found.get(k, 1).expect("read from the database");
            assert!(info.spec_schema.is_some(), "{k} compiled");
        }
        let found = m.resolve(&result(&["a", "ghost", "b"])).await.unwrap();
        assert!(found.get("a", 1).is_some());
        assert!(found.get("ghost", 1).is_none());
        assert!(found.get("b", 1).is_none(), "the lookup ended at ghost");
        assert!(found.get("a", 2).is_none());
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
