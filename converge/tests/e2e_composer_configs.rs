//! A composer-emitted provider config through its whole life, with the real `converge` and an
//! in-process SDK worker serving the composer kind (`pstack`) and the configured kind
//! (`pleaf`, whose `config_schema` marks `token` writeOnly).
//!
//! The composer computes its configs from its root's spec: `<root>-cfg` for `pleaf` (a region
//! and a secret token) always, `<root>-extra` while the spec says so. Each step is asserted on
//! the tables, on the API and on what the `pleaf` worker receives as its task's
//! `provider_config` (the SDK's `config_override`):
//!
//! 1. the compose stores both configs owned by the root; the API reads them with the token
//!    masked and refuses to replace or delete them (the composite manages them);
//! 2. a `pleaf` resource naming `<root>-cfg` in `provider_config_ref` gets it with its task,
//!    the secret intact;
//! 3. the next compose changes the config: the next task of that resource carries the new
//!    config, whether it is a resync (no spec change) or a spec change;
//! 4. a compose without `<root>-extra` prunes it; deleting the root deletes `<root>-cfg`.
//!
//! The resource naming the config is applied through the API: a composed child cannot name
//! one (a compose result's children carry no `provider_config_ref`; `ChildSpec` has no such
//! field). What a composer may not write is in `composer_boundary.rs`.

mod common;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{Converge, wait_for};
use converge_sdk::{
    ChildSpec, HandlerError, KindVersion, Outcome, Provider, ProviderConfigSpec, ReactionRequest,
    Registry, WorkerConfig, trigger,
};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(60);

/// The composer: one `pleaf` child, and configs computed from the root's spec
/// (`{"region", "rev", "extra"}`).
struct Composer;

impl Provider for Composer {
    fn kind(&self) -> KindVersion {
        KindVersion::new("pstack", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        let spec: Value = req.spec()?;
        let root = &req.resource.name;
        let region = spec["region"].as_str().unwrap_or("none");
        let config = |name: String, spec: Value| ProviderConfigSpec {
            name,
            kind: "pleaf".into(),
            kind_version: 1,
            is_default: false,
            spec,
        };
        let mut out = Outcome::status(json!({"region": region}))
            .with_child(ChildSpec::new("pleaf", 1, format!("{root}-a"), json!({})))
            .with_config(config(
                format!("{root}-cfg"),
                json!({"region": region, "token": secret(region, &spec["rev"])}),
            ));
        if spec["extra"] == true {
            out = out.with_config(config(format!("{root}-extra"), json!({"region": "x"})));
        }
        Ok(out)
    }
}

/// The secret the composer writes for `region` at spec revision `rev`.
fn secret(region: &str, rev: &Value) -> String {
    format!("secret-{region}-{rev}")
}

/// One `pleaf` task: (resource name, trigger, generation, the task's config override).
type LeafTask = (String, String, i64, Option<Value>);

/// The configured kind's worker: records what each task carried, and is Ready.
struct Leaf {
    seen: Arc<Mutex<Vec<LeafTask>>>,
}

impl Provider for Leaf {
    fn kind(&self) -> KindVersion {
        KindVersion::new("pleaf", 1)
    }

    async fn work(&self, req: ReactionRequest) -> Result<Outcome, HandlerError> {
        self.seen.lock().unwrap().push((
            req.resource.name.clone(),
            req.trigger.clone(),
            req.generation,
            req.config_override.clone(),
        ));
        Ok(Outcome::status(json!({"ok": true})))
    }
}

/// The configs stored for `root`'s compose: (name, is_default, spec), by name.
/// The configs `root` owns, their sealed values opened (issue 46: the database holds no
/// secret in plain text, which this checks first).
async fn owned_configs(c: &Converge, root: &str) -> Vec<(String, bool, Value)> {
    let rows: Vec<(String, String, bool, Value)> = sqlx::query_as(
        "SELECT pc.name, pc.kind, pc.is_default, pc.spec FROM providerconfigs pc
         JOIN resources r ON r.id = pc.owner_id
         WHERE r.kind = 'pstack' AND r.name = $1 ORDER BY pc.name",
    )
    .bind(root)
    .fetch_all(&c.db.pool)
    .await
    .unwrap();
    let keys = common::test_keys();
    rows.into_iter()
        .map(|(name, kind, is_default, mut spec)| {
            assert!(!spec.to_string().contains("secret-"), "{name}: {spec}");
            assert!(keys.open_config(&kind, &mut spec).is_empty(), "{name}");
            (name, is_default, spec)
        })
        .collect()
}

async fn config_rows(c: &Converge) -> Vec<String> {
    sqlx::query_scalar("SELECT name FROM providerconfigs ORDER BY name")
        .fetch_all(&c.db.pool)
        .await
        .unwrap()
}

async fn apply_root(c: &Converge, region: &str, rev: i64, extra: bool) {
    let body = json!({"kind": "pstack", "kind_version": 1, "name": "s1",
                      "spec": {"region": region, "rev": rev, "extra": extra}});
    let (s, _, resp) = c.apply(&body).await;
    assert!(s == 200 || s == 201, "{body}: {s} {resp}");
}

/// The index of the first task of `pleaf/name` at or after `from` satisfying `pred`.
async fn leaf_task(
    seen: &Mutex<Vec<LeafTask>>,
    from: usize,
    name: &str,
    what: &str,
    pred: impl Fn(&LeafTask) -> bool,
) -> usize {
    let pred = &pred;
    wait_for(T, what, || async move {
        let s = seen.lock().unwrap();
        s.iter()
            .enumerate()
            .skip(from)
            .find(|(_, t)| t.0 == name && pred(t))
            .map(|(i, _)| i)
    })
    .await
}

/// converge with the `pleaf` and `pstack` kinds and one SDK worker serving both; the
/// `pleaf` tasks it sees, and what stops the worker.
async fn start() -> (Converge, Arc<Mutex<Vec<LeafTask>>>, CancellationToken) {
    let c = Converge::start(&[("REAPER_EVERY", "1s")]).await;
    // pleaf resyncs every second, so its resources get tasks without a spec change.
    c.apply_manifest(
        &json!({"kind": "pleaf", "kind_version": 1, "resync_interval_secs": 1,
        "config_schema": {"type": "object", "additionalProperties": false,
            "properties": {"region": {"type": "string"},
                           "token": {"type": "string", "writeOnly": true}}},
        "reactions": [{"name": "work", "trigger": "specChange", "emits": ["status"]}]}),
    )
    .await;
    c.apply_manifest(&json!({"kind": "pstack", "kind_version": 1, "reactions": [
        {"name": "compose", "trigger": "specChange",
         "emits": ["children", "configs", "status"]}]}))
        .await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    tokio::spawn(converge_sdk::run_worker(
        WorkerConfig::new(c.broker.clone()),
        Registry::new()
            .with(Composer)
            .with(Leaf { seen: seen.clone() }),
        stop.clone().cancelled_owned(),
    ));
    (c, seen, stop)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_composer_config_is_delivered_updated_read_masked_pruned_and_deleted() {
    let (c, seen, stop) = start().await;

    // 1. Composed: both configs stored, owned by the root, never a default.
    apply_root(&c, "eu", 1, true).await;
    let root = c
        .wait_resource("pstack", "s1", "root Ready", T, |v| v["phase"] == "Ready")
        .await;
    let root_id = root["uid"].as_str().unwrap().to_string();
    assert_eq!(
        owned_configs(&c, "s1").await,
        [
            (
                "s1-cfg".into(),
                false,
                json!({"region": "eu", "token": "secret-eu-1"})
            ),
            ("s1-extra".into(), false, json!({"region": "x"})),
        ]
    );
    // ... read through the API with the secret masked, one and listed.
    let (s, one) = c.call(Method::GET, "providerconfigs/s1-cfg", None).await;
    assert_eq!(s, 200, "{one}");
    assert_eq!(
        one["spec"],
        json!({"region": "eu", "token": "***"}),
        "{one}"
    );
    assert_eq!(
        (one["kind"].clone(), one["kind_version"].clone()),
        (json!("pleaf"), json!(1))
    );
    assert_eq!(one["owner_id"], root_id.as_str(), "{one}");
    assert_eq!(one["is_default"], false, "{one}");
    let (s, list) = c
        .call(Method::GET, "providerconfigs?kind=pleaf", None)
        .await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list["total"], 2, "{list}");
    assert_eq!(list["items"][0]["name"], "s1-cfg", "{list}");
    assert_eq!(list["items"][0]["spec"]["token"], "***", "{list}");
    assert!(!list.to_string().contains("secret-"), "{list}");
    // ... and the API leaves them to the composite.
    let (s, body) = c
        .call(
            Method::POST,
            "providerconfigs",
            Some(json!({"name": "s1-cfg", "kind": "pleaf", "kind_version": 1,
                        "is_default": false, "spec": {"region": "api"}})),
        )
        .await;
    assert_eq!(s, 409, "{body}");
    assert!(
        body.to_string().contains("managed by the composite"),
        "{body}"
    );
    let (s, body) = c.call(Method::DELETE, "providerconfigs/s1-cfg", None).await;
    assert_eq!(s, 409, "{body}");

    // 2. A resource naming it gets it with its task, the secret intact.
    let user = |n: i64| {
        json!({"kind": "pleaf", "kind_version": 1, "name": "user",
               "provider_config_ref": "s1-cfg", "spec": {"n": n}})
    };
    let (s, _, body) = c.apply(&user(1)).await;
    assert_eq!(s, 201, "{body}");
    let eu = json!({"region": "eu", "token": "secret-eu-1"});
    let first = leaf_task(&seen, 0, "user", "user's first task", |t| {
        t.1 == trigger::SPEC_CHANGE
    })
    .await;
    assert_eq!(seen.lock().unwrap()[first].3, Some(eu.clone()));
    c.wait_resource("pleaf", "user", "user Ready", T, |v| v["phase"] == "Ready")
        .await;
    let (_, one) = c.call(Method::GET, "providerconfigs/s1-cfg", None).await;
    assert_eq!(one["used_by"], 1, "{one}");

    // 3. The next compose changes it ...
    apply_root(&c, "us", 2, true).await;
    let us = json!({"region": "us", "token": "secret-us-2"});
    wait_for(T, "the recompose's config stored", || async {
        owned_configs(&c, "s1")
            .await
            .iter()
            .any(|cfg| cfg.0 == "s1-cfg" && cfg.2 == us)
            .then_some(())
    })
    .await;
    let (_, one) = c.call(Method::GET, "providerconfigs/s1-cfg", None).await;
    assert_eq!(
        one["spec"],
        json!({"region": "us", "token": "***"}),
        "{one}"
    );
    // ... and user's next task carries the new config: a resync first (no spec change) ...
    let from = seen.lock().unwrap().len();
    let resync = leaf_task(
        &seen,
        from,
        "user",
        "a resync of user with the new config",
        |t| t.1 == trigger::RESYNC && t.3.as_ref() == Some(&us),
    )
    .await;
    // ... then a spec change.
    let (s, _, body) = c.apply(&user(2)).await;
    assert_eq!(s, 200, "{body}");
    let changed = leaf_task(&seen, resync, "user", "user's generation 2", |t| {
        t.1 == trigger::SPEC_CHANGE && t.2 == 2
    })
    .await;
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen[changed].3, Some(us.clone()), "{:?}", seen[changed]);
        // Once a task carried the new config, none carried the old one again.
        let after: Vec<&LeafTask> = seen[resync..].iter().filter(|t| t.0 == "user").collect();
        assert!(after.iter().all(|t| t.3 == Some(us.clone())), "{after:?}");
    }

    // 4. A compose without the extra config prunes it; the other stays, updated.
    apply_root(&c, "us", 3, false).await;
    wait_for(T, "s1-extra pruned", || async {
        let names: Vec<String> = owned_configs(&c, "s1")
            .await
            .into_iter()
            .map(|x| x.0)
            .collect();
        (names == ["s1-cfg"]).then_some(())
    })
    .await;
    let (s, body) = c.call(Method::GET, "providerconfigs/s1-extra", None).await;
    assert_eq!(s, 404, "{body}");
    assert_eq!(
        owned_configs(&c, "s1").await[0].2,
        json!({"region": "us", "token": "secret-us-3"})
    );
    // Deleting the root deletes the config with it (and its child).
    let (s, body) = c.call(Method::DELETE, "resources/pstack/s1", None).await;
    assert!((200..300).contains(&s), "{s} {body}");
    wait_for(T, "the root, its child and its config gone", || async {
        (c.get("pstack", "s1").await.is_none()
            && c.get("pleaf", "s1-a").await.is_none()
            && config_rows(&c).await.is_empty())
        .then_some(())
    })
    .await;
    let (s, body) = c.call(Method::GET, "providerconfigs/s1-cfg", None).await;
    assert_eq!(s, 404, "{body}");
    stop.cancel();
    c.stop().await;
}

/// The stored row of config `name`: (xmin, spec as stored).
async fn config_row(c: &Converge, name: &str) -> (String, Value) {
    sqlx::query_as("SELECT xmin::text, spec FROM providerconfigs WHERE name = $1")
        .bind(name)
        .fetch_one(&c.db.pool)
        .await
        .unwrap()
}

/// A compose that emits the same secret again leaves its sealed config row as it is (no
/// write, so no config push), although sealing draws a new nonce each time; a changed
/// secret is sealed and written anew.
#[tokio::test(flavor = "multi_thread")]
async fn a_recompose_with_the_same_secret_rewrites_no_config() {
    let (c, _seen, stop) = start().await;
    apply_root(&c, "eu", 1, true).await;
    wait_for(T, "both configs stored", || async {
        (owned_configs(&c, "s1").await.len() == 2).then_some(())
    })
    .await;
    let before = config_row(&c, "s1-cfg").await;

    // A new generation of the root whose s1-cfg is the same: only s1-extra goes.
    apply_root(&c, "eu", 1, false).await;
    wait_for(T, "s1-extra pruned", || async {
        (owned_configs(&c, "s1").await.len() == 1).then_some(())
    })
    .await;
    assert_eq!(config_row(&c, "s1-cfg").await, before, "s1-cfg rewritten");

    // A changed secret is written, sealed.
    apply_root(&c, "eu", 2, false).await;
    wait_for(T, "the new secret stored", || async {
        let cfgs = owned_configs(&c, "s1").await;
        (cfgs[0].2 == json!({"region": "eu", "token": "secret-eu-2"})).then_some(())
    })
    .await;
    assert_ne!(config_row(&c, "s1-cfg").await.0, before.0);
    stop.cancel();
    c.stop().await;
}
